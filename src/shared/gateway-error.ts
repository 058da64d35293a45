import { Code, codeName } from "./code.js";
import { echo, MAX_ERROR_MESSAGE_CHARS } from "./echo.js";

/** What a GatewayError carries besides its code and message. */
export interface GatewayErrorOptions {
  /** The error this one translates (a grpc-js ServiceError, a runtime failure, ...). */
  cause?: unknown;
  /** The input field the message names, e.g. "topic" or "cloudevent.source" (set by `invalidArgument`). */
  field?: string;
  /**
   * Plain values a caller may branch on beside the code, e.g. `{kind: "upstream", topic}` for a broker subscribe
   * failure. Structured-clone safe, so a worker's failure crosses the thread boundary unchanged.
   */
  details?: Readonly<Record<string, string | number | boolean>>;
}

/**
 * The one error type of the gateway, server and client alike (the client exports it as `GatewayClientError` too): a
 * gRPC status code, a message that names the input and what was wrong with it, and an optional cause, field and
 * details. Foreign errors (grpc-js, uWS, workers, sidecar) are translated into it where they enter; the broker and
 * the codec throw it directly (`src/shared` is the one module both may import).
 */
export class GatewayError extends Error {
  override name = "GatewayError";
  /** The gRPC status code. */
  readonly code: Code;
  /** Message without the code prefix; at most MAX_ERROR_MESSAGE_CHARS (plus the note of what was cut). */
  readonly rawMessage: string;
  /** The input field the message names, when one does. */
  readonly field: string | undefined;
  /** Plain values beside the message (see GatewayErrorOptions.details). */
  readonly details: Readonly<Record<string, string | number | boolean>> | undefined;

  constructor(code: Code, message: string, options?: GatewayErrorOptions) {
    // The backstop of echo(): whatever a message quotes, it cannot grow with the input.
    message = echo(message, MAX_ERROR_MESSAGE_CHARS);
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.rawMessage = message;
    this.field = options?.field;
    this.details = options?.details;
  }

  /** The code's canonical name, e.g. "INVALID_ARGUMENT". */
  get codeName(): string {
    return codeName(this.code);
  }

  /**
   * Convert anything thrown into a GatewayError. A GatewayError is returned as is; an object with a numeric gRPC
   * `code` and `details` (a grpc-js ServiceError, the one translation of it for server and client) keeps its code; an
   * AbortError becomes CANCELLED; a stack overflow (input nested too deeply) becomes INVALID_ARGUMENT; anything else
   * becomes `fallback` (INTERNAL unless given).
   */
  static from(reason: unknown, fallback: Code = Code.INTERNAL): GatewayError {
    if (reason instanceof GatewayError) return reason;
    // Only input can drive the gateway's recursive walks (JSON bodies, CloudEvent data) that deep.
    if (reason instanceof RangeError && /call stack size/i.test(reason.message)) {
      return new GatewayError(Code.INVALID_ARGUMENT, "the input nests too deeply to process (maximum call stack size exceeded)", { cause: reason });
    }
    if (typeof reason === "object" && reason !== null) {
      const r = reason as { code?: unknown; details?: unknown; message?: unknown; name?: unknown };
      if (r.name === "AbortError") return new GatewayError(Code.CANCELLED, "the operation was cancelled", { cause: reason });
      if (isServiceError(reason)) return new GatewayError(reason.code as Code, reason.details, { cause: reason });
      if (typeof r.message === "string") return new GatewayError(fallback, r.message, { cause: reason });
    }
    return new GatewayError(fallback, String(reason), { cause: reason });
  }
}

/** True for a grpc-js ServiceError-like object: a numeric `code` 0-16 and string `details`. */
export function isServiceError(e: unknown): e is { code: number; details: string; message: string } {
  if (typeof e !== "object" || e === null) return false;
  const r = e as { code?: unknown; details?: unknown };
  return typeof r.code === "number" && r.code >= 0 && r.code <= 16 && typeof r.details === "string";
}

/**
 * Shorthand for an INVALID_ARGUMENT error naming a field: `invalidArgument("topic", "must not be empty")`. Quote input
 * in `problem` through echo().
 */
export function invalidArgument(field: string, problem: string): GatewayError {
  return new GatewayError(Code.INVALID_ARGUMENT, `${field} ${problem}`, { field });
}
