/**
 * createConverter: the main-thread face of the conversion layer. Payloads below `thresholdBytes` convert inline
 * (handing a small message to a worker costs more than converting it); larger ones go to the worker pool. Codec and
 * pool failures (GatewayErrors, or their plain `{code, message}` shape after crossing the worker boundary) become
 * GatewayErrors again here, once, where they enter main-thread code.
 */
import { availableParallelism } from "node:os";
import type { FileRegistry } from "@bufbuild/protobuf";
import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { abortable, type CancelSignal } from "../shared/signals.js";
import { binaryToJson, jsonToBinary } from "./codec.js";
import type { ConversionReport, Converter, ConverterOptions, SchemaSet } from "./converter-types.js";
import { SchemaCache } from "./schema-registry.js";
import { ConversionPool, type ConvertResult } from "./worker-pool.js";
import type { ConvertTask } from "./worker-protocol.js";

/** What a conversion of each result kind resolves to. */
type ResultValue<K extends "binary" | "json"> = K extends "binary" ? Uint8Array : string;

export type { Converter, ConverterOptions, SchemaSet } from "./converter-types.js";

/**
 * Default thresholdBytes: the payload size from which the pool beats inline conversion on the benchmark machine
 * (bench/codec.ts, docs/conversion.md).
 */
export const DEFAULT_THRESHOLD_BYTES = 4096;

/** ConverterOptions with every default filled. */
export interface ResolvedConverterOptions {
  readonly thresholdBytes: number;
  readonly threads: number;
  readonly maxQueue: number;
}

/** Internal knobs for tests and benchmarks; not part of the gateway's options. */
export interface ConverterInternals {
  /** Compiled schemas kept on the main thread and per worker. Default 64. */
  readonly schemaCacheSize?: number;
  /** Let crashWorker() kill a worker (tests of crash recovery). Default false. */
  readonly crashHook?: boolean;
}

/** A Converter with introspection and the test-only crash hook. */
export interface PooledConverter extends Converter {
  /** The resolved options. */
  readonly options: ResolvedConverterOptions;
  /** Tasks waiting for a worker now. */
  readonly queued: number;
  /** Tasks on a worker now. */
  readonly active: number;
  /** Pool workers of this converter alive or starting. */
  readonly workers: number;
  /** Test-only (needs `crashHook`): make one pool worker die while running this task; rejects INTERNAL. */
  crashWorker(mode: "exit" | "throw"): Promise<void>;
}

function intOption(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw invalidArgument(`converter option ${name}`, `must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

/** Validate ConverterOptions and fill defaults; a bad field throws INVALID_ARGUMENT naming it and its value. */
export function validateConverterOptions(opts: ConverterOptions = {}): ResolvedConverterOptions {
  return Object.freeze({
    thresholdBytes: intOption("thresholdBytes", opts.thresholdBytes, DEFAULT_THRESHOLD_BYTES, 0),
    threads: intOption("threads", opts.threads, opts.slots?.bound ?? Math.max(1, availableParallelism() - 1), 1),
    maxQueue: intOption("maxQueue", opts.maxQueue, 256, 0),
  });
}

const cancelled = (): GatewayError => new GatewayError(Code.CANCELLED, "the conversion was cancelled");

/** Create a converter (see the module comment). Call close() or destroy() to stop its workers. */
export function createConverter(opts: ConverterOptions = {}, internals: ConverterInternals = {}): PooledConverter {
  const options = validateConverterOptions(opts);
  const schemas = new SchemaCache(internals.schemaCacheSize ?? 64);
  const pool = new ConversionPool({
    threads: options.threads,
    ...(opts.slots ? { slots: opts.slots } : {}),
    maxQueue: options.maxQueue,
    ...(internals.schemaCacheSize !== undefined ? { schemaCacheSize: internals.schemaCacheSize } : {}),
    crashHook: internals.crashHook === true,
  });
  let closed = false;

  const checkOpen = (signal: CancelSignal | undefined): void => {
    if (closed) throw new GatewayError(Code.UNAVAILABLE, "the converter is closed");
    if (signal?.aborted === true) throw cancelled();
  };

  // The pool keeps a running task going when its caller aborts (see worker-pool.ts); the caller is answered now.
  const viaPool = (run: Promise<ConvertResult>, signal: CancelSignal | undefined): Promise<ConvertResult> => abortable(run, signal, cancelled);

  const unwrap = (r: ConvertResult): ConvertResult => {
    if (r.kind === "failure") throw new GatewayError(r.failure.code, r.failure.message);
    return r;
  };

  /** Inline below the threshold, else on the pool; `expect` is the result kind the task must answer. */
  async function convert<K extends "binary" | "json">(
    schema: SchemaSet,
    size: number,
    inline: (registry: FileRegistry) => ResultValue<K>,
    task: ConvertTask,
    expect: K,
    signal: CancelSignal | undefined,
    report: ConversionReport | undefined,
  ): Promise<ResultValue<K>> {
    checkOpen(signal);
    try {
      if (size < options.thresholdBytes) return inline(schemas.getOrCompile(schema.id, schema.files));
      if (report) report.where = "pool";
      const r = unwrap(await viaPool(pool.run(task, schema.files, signal, report), signal));
      if (r.kind !== expect) throw new GatewayError(Code.INTERNAL, `the conversion worker answered ${r.kind} to a ${expect === "binary" ? "JSON" : "binary"} task`);
      return (r.kind === "binary" ? r.bytes : r.kind === "json" ? r.json : undefined) as ResultValue<K>;
    } catch (e) {
      throw GatewayError.from(e);
    }
  }

  return {
    options,
    get queued() {
      return pool.queued;
    },
    get active() {
      return pool.active;
    },
    get workers() {
      return pool.workers;
    },

    jsonToBinary(schema: SchemaSet, typeName: string, json: string, signal?: CancelSignal, report?: ConversionReport): Promise<Uint8Array> {
      return convert(schema, json.length, (registry) => jsonToBinary(registry, typeName, json), { kind: "convert", schemaId: schema.id, typeName, json }, "binary", signal, report);
    },

    binaryToJson(schema: SchemaSet, typeName: string, bytes: Uint8Array, signal?: CancelSignal, report?: ConversionReport): Promise<string> {
      // Input bytes are copied to the worker, not moved: they belong to the caller (grpc-js buffers may be slices
      // of a shared slab, and moving would detach the whole slab).
      return convert(schema, bytes.byteLength, (registry) => binaryToJson(registry, typeName, bytes), { kind: "convert", schemaId: schema.id, typeName, bytes }, "json", signal, report);
    },

    async crashWorker(mode: "exit" | "throw"): Promise<void> {
      checkOpen(undefined);
      try {
        unwrap(await pool.run({ kind: "crash", mode }, []));
      } catch (e) {
        throw GatewayError.from(e);
      }
    },

    close(): Promise<void> {
      closed = true;
      return pool.close();
    },

    destroy(): void {
      closed = true;
      pool.destroy();
    },
  };
}
