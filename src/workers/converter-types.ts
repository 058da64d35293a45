/**
 * The contract between the dispatch facility and the conversion layer (src/workers). Kept apart so both sides can be
 * built against it.
 */
import type { CancelSignal } from "../shared/signals.js";
import type { WorkerSlots } from "./worker-slots.js";

/** One version of a backend's schema: every FileDescriptorProto its services need, encoded, and a stable id. */
export interface SchemaSet {
  /** Changes whenever `files` change (e.g. a hash of them); workers cache compiled registries by it. */
  readonly id: string;
  /** Encoded google.protobuf.FileDescriptorProto, dependencies (well-known types included) before dependents or in any order. */
  readonly files: readonly Uint8Array[];
}

/** Where one conversion ran, filled in when asked for (tracing): inline, or on the pool after waiting `queuedMs` for a worker. */
export interface ConversionReport {
  where: "inline" | "pool";
  queuedMs: number;
}

/**
 * Converts between proto3 canonical JSON and protobuf binary for the message types of a SchemaSet. Small payloads
 * convert inline on the calling thread; payloads of at least the threshold go to the worker pool.
 * Errors are GatewayErrors: INVALID_ARGUMENT naming the field and the problem (unknown field, bad enum, wrong type,
 * malformed JSON), RESOURCE_EXHAUSTED when the pool queue is full, INTERNAL when a worker crashed (the pool recovers).
 */
export interface Converter {
  /** JSON text (a JSON object) to the binary encoding of `typeName` (fully qualified, no leading dot). */
  jsonToBinary(schema: SchemaSet, typeName: string, json: string, signal?: CancelSignal, report?: ConversionReport): Promise<Uint8Array>;
  /** Binary encoding of `typeName` to proto3 canonical JSON text. */
  binaryToJson(schema: SchemaSet, typeName: string, bytes: Uint8Array, signal?: CancelSignal, report?: ConversionReport): Promise<string>;
  /** Let queued conversions finish, then stop the workers. Safe to call twice. */
  close(): Promise<void>;
  /** Stop the workers now. Safe to call twice. */
  destroy(): void;
}

/** Options of createConverter (validated there, defaults filled). */
export interface ConverterOptions {
  /** Payloads (JSON text length or binary size) of at least this many bytes convert in the pool. Default 4096. */
  thresholdBytes?: number;
  /** Most pool workers of this converter. Default: `slots.bound`, or max(1, cores - 1) without `slots`. */
  threads?: number;
  /**
   * The process's worker slots, shared with every other converter of the process (the main thread's and each uWS
   * thread's), so their workers together stay within `slots.bound`. Default: slots of this converter's own.
   */
  slots?: WorkerSlots;
  /** Tasks that may wait for a worker; beyond it conversions fail RESOURCE_EXHAUSTED. Default 256. */
  maxQueue?: number;
}
