/**
 * Messages between the converter (main thread) and the pool workers. Structured-clone safe: plain objects, strings
 * and Uint8Arrays only.
 *
 * Schema distribution: a convert task names its schema by id and carries no descriptors. A worker that has not
 * compiled that id answers `{kind: "missing-schema"}`, and the converter sends the same task once more with `files`
 * attached; the worker compiles and caches them. Descriptors therefore cross to each worker once per schema id (plus
 * after an LRU eviction), never per task.
 */
import type { Code } from "../shared/code.js";

/** A codec failure as it crosses the worker boundary (a GatewayError's code and message; classes do not survive postMessage). */
export interface CodecFailure {
  readonly code: Code;
  readonly message: string;
}

/** Convert JSON text to binary, or binary to JSON text, for one message type of one schema. */
export interface ConvertTask {
  readonly kind: "convert";
  readonly schemaId: string;
  /** Present only when the worker reported that it lacks `schemaId`. */
  readonly files?: readonly Uint8Array[];
  readonly typeName: string;
  /** JSON -> binary when set. */
  readonly json?: string;
  /** binary -> JSON when set. */
  readonly bytes?: Uint8Array;
}

/** Test-only (honoured only when the pool was created with the crash hook): end the worker abruptly. */
export interface CrashTask {
  readonly kind: "crash";
  /** "exit": process.exit() in the worker; "throw": an uncaught exception outside the task. */
  readonly mode: "exit" | "throw";
}

/** What a worker receives. */
export type WorkerTask = ConvertTask | CrashTask;

/** What a worker answers. */
export type WorkerResult =
  | { readonly kind: "binary"; readonly bytes: Uint8Array }
  | { readonly kind: "json"; readonly json: string }
  | { readonly kind: "missing-schema" }
  | { readonly kind: "failure"; readonly failure: CodecFailure };

/** Options a worker reads from piscina's workerData. */
export interface WorkerOptions {
  /** Compiled schemas kept per worker (LRU). */
  readonly schemaCacheSize: number;
  /** Whether CrashTask is honoured. */
  readonly crashHook: boolean;
}
