import { Code, codeName } from "./code.js";
import { echo, MAX_ERROR_MESSAGE_CHARS } from "./echo.js";

/**
 * The one error type of the gateway: a gRPC status code, a message that names the input and what was wrong with it,
 * and an optional cause. Foreign errors (grpc-js, uWS, workers, sidecar) are translated into it where they enter.
 */
export class GatewayError extends Error {
  override readonly name = "GatewayError";
  /** The gRPC status code. */
  readonly code: Code;
  /** Message without the code prefix; at most MAX_ERROR_MESSAGE_CHARS (plus the note of what was cut). */
  readonly rawMessage: string;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    // The backstop of echo(): whatever a message quotes, it cannot grow with the input.
    message = echo(message, MAX_ERROR_MESSAGE_CHARS);
    super(message, options);
    this.code = code;
    this.rawMessage = message;
  }

  /** The code's canonical name, e.g. "INVALID_ARGUMENT". */
  get codeName(): string {
    return codeName(this.code);
  }

  /**
   * Convert anything thrown into a GatewayError. A GatewayError is returned as is; an object with a numeric gRPC
   * `code` and `details` (a grpc-js ServiceError) keeps its code; an AbortError becomes CANCELLED; a stack overflow
   * (input nested too deeply) becomes INVALID_ARGUMENT; anything else becomes `fallback` (INTERNAL unless given).
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
      if (typeof r.code === "number" && r.code >= 0 && r.code <= 16 && typeof r.details === "string") {
        return new GatewayError(r.code as Code, r.details, { cause: reason });
      }
      if (typeof r.message === "string") return new GatewayError(fallback, r.message, { cause: reason });
    }
    return new GatewayError(fallback, String(reason), { cause: reason });
  }
}

/**
 * Shorthand for an INVALID_ARGUMENT error naming a field: `invalidArgument("topic", "must not be empty")`. Quote input
 * in `problem` through echo().
 */
export function invalidArgument(field: string, problem: string): GatewayError {
  return new GatewayError(Code.INVALID_ARGUMENT, `${field} ${problem}`);
}
