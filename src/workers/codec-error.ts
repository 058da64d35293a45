/**
 * Failures of the codec as plain values. The worker side never imports main-thread code, so it cannot build a
 * GatewayError; it throws a CodecError (or posts its plain `{code, message}` shape) and the converter maps the code
 * name to a GatewayError once, where the result enters the main thread.
 */

/** gRPC code names the codec and the pool use. */
export type CodecCode =
  | "INVALID_ARGUMENT"
  | "NOT_FOUND"
  | "DATA_LOSS"
  | "FAILED_PRECONDITION"
  | "INTERNAL"
  | "RESOURCE_EXHAUSTED"
  | "CANCELLED"
  | "UNAVAILABLE";

/** The structured-clone-safe shape of a codec failure (what crosses the worker boundary). */
export interface CodecFailure {
  readonly code: CodecCode;
  readonly message: string;
}

/** An Error with a gRPC code name. */
export class CodecError extends Error {
  override readonly name = "CodecError";
  /** gRPC code name, e.g. "INVALID_ARGUMENT". */
  readonly code: CodecCode;

  constructor(code: CodecCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** The plain shape, for postMessage. */
  toFailure(): CodecFailure {
    return { code: this.code, message: this.message };
  }
}

/** Whether `v` has the CodecFailure shape (e.g. after crossing the worker boundary). */
export function isCodecFailure(v: unknown): v is CodecFailure {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as { code?: unknown }).code === "string" &&
    typeof (v as { message?: unknown }).message === "string"
  );
}
