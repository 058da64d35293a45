/**
 * The piscina worker entry: converts one task at a time with the codec, caching compiled schemas by id. Imports only
 * files of src/workers, the error type of src/shared (and piscina's `move`), never main-thread code.
 */
import { Piscina, transferableSymbol, valueSymbol } from "piscina";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { binaryToJson, jsonToBinary } from "./codec.js";
import { errorText, SchemaCache } from "./schema-registry.js";
import type { WorkerOptions, WorkerResult, WorkerTask } from "./worker-protocol.js";

// Read lazily: piscina fills its workerData while starting the worker, around the import of this module.
let options: Partial<WorkerOptions> | undefined;
let schemas: SchemaCache | undefined;

function failure(e: unknown): WorkerResult {
  // A class does not survive postMessage: send the plain code and message; the converter rebuilds the GatewayError.
  const f = e instanceof GatewayError ? { code: e.code, message: e.rawMessage } : { code: Code.INTERNAL, message: `conversion failed: ${errorText(e)}` };
  return { kind: "failure", failure: f };
}

/** Handle one task (piscina calls the default export). */
export default function convert(task: WorkerTask): WorkerResult {
  options ??= (Piscina.workerData ?? {}) as Partial<WorkerOptions>;
  schemas ??= new SchemaCache(options.schemaCacheSize ?? 64);
  if (task.kind === "crash") {
    if (options.crashHook !== true) return failure(new GatewayError(Code.INTERNAL, "crash tasks are disabled"));
    if (task.mode === "exit") process.exit(70);
    setImmediate(() => {
      throw new Error("injected worker crash");
    });
    // Never answer: the uncaught exception ends the worker while this task is in flight.
    return new Promise<never>(() => undefined) as never;
  }
  let registry = schemas.get(task.schemaId);
  if (registry === undefined) {
    if (task.files === undefined) return { kind: "missing-schema" };
    try {
      registry = schemas.getOrCompile(task.schemaId, task.files);
    } catch (e) {
      return failure(e);
    }
  }
  try {
    if (task.json !== undefined) {
      const bytes = jsonToBinary(registry, task.typeName, task.json);
      // The writer's output usually owns its whole ArrayBuffer: transfer it instead of copying.
      const owned = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && !(bytes.buffer instanceof SharedArrayBuffer);
      const result: WorkerResult = { kind: "binary", bytes };
      if (!owned) return result;
      // piscina unwraps only a top-level movable value: wrap the whole result with the buffer as its transfer list.
      return Piscina.move({ [transferableSymbol]: bytes.buffer, [valueSymbol]: result } as never) as unknown as WorkerResult;
    }
    if (task.bytes !== undefined) return { kind: "json", json: binaryToJson(registry, task.typeName, task.bytes) };
    return failure(new GatewayError(Code.INTERNAL, "convert task carries neither json nor bytes"));
  } catch (e) {
    return failure(e);
  }
}
