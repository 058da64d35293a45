import { Code, codeFromName, codeName } from "../shared/code.js";

export { Code } from "../shared/code.js";

/**
 * Every error the client library raises: a gRPC status code (the gateway's code, or the in-band status name mapped
 * to its code), the message the gateway gave, and the cause when one exists.
 */
export class GatewayClientError extends Error {
  override name: string = "GatewayClientError";
  /** The gRPC status code. */
  readonly code: Code;
  /** The message without any prefix, as the gateway reported it. */
  readonly rawMessage: string;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(`${codeName(code)}: ${message}`, options);
    this.code = code;
    this.rawMessage = message;
  }

  /** The code's canonical name, e.g. "INVALID_ARGUMENT". */
  get codeName(): string {
    return codeName(this.code);
  }
}

/**
 * `invoke()` failed: the backend answered with an error (the gateway's in-band `success: false`), or the gateway
 * refused the call. `status` is the gRPC status name the gateway reported, e.g. "NOT_FOUND".
 */
export class GatewayInvocationError extends GatewayClientError {
  override name = "GatewayInvocationError";
  /** The gRPC status code name the gateway reported (`InvokeResponse.status`), e.g. "NOT_FOUND". */
  readonly status: string;
  /** The backend service and method that were called. */
  readonly service: string;
  readonly method: string;

  constructor(service: string, method: string, status: string, message: string, options?: { cause?: unknown }) {
    super(codeFromName(status) ?? Code.UNKNOWN, `${service}/${method} failed: ${message || status}`, options);
    this.status = status;
    this.service = service;
    this.method = method;
  }
}

/** `request()` got no reply within its timeout. Code DEADLINE_EXCEEDED; the message names the correlation id. */
export class RequestTimeoutError extends GatewayClientError {
  override name = "RequestTimeoutError";
  /** The correlation id of the request that timed out. */
  readonly correlationId: string;
  /** The reply topic that was watched. */
  readonly replyTopic: string;

  constructor(correlationId: string, replyTopic: string, timeoutMs: number) {
    super(Code.DEADLINE_EXCEEDED, `no reply with correlationid ${correlationId} on topic ${replyTopic} within ${timeoutMs} ms`);
    this.correlationId = correlationId;
    this.replyTopic = replyTopic;
  }
}

/** True for a grpc-js ServiceError-like object: a numeric `code` 0-16 and string `details`. */
function isServiceError(e: unknown): e is { code: number; details: string; message: string } {
  if (typeof e !== "object" || e === null) return false;
  const r = e as { code?: unknown; details?: unknown };
  return typeof r.code === "number" && r.code >= 0 && r.code <= 16 && typeof r.details === "string";
}

/** Translate anything a call threw (grpc-js ServiceError, AbortError, ...) into a GatewayClientError, once. */
export function toClientError(e: unknown): GatewayClientError {
  if (e instanceof GatewayClientError) return e;
  if (isServiceError(e)) return new GatewayClientError(e.code as Code, e.details, { cause: e });
  if (typeof e === "object" && e !== null && (e as { name?: unknown }).name === "AbortError") {
    return new GatewayClientError(Code.CANCELLED, "the operation was cancelled", { cause: e });
  }
  return new GatewayClientError(Code.UNKNOWN, e instanceof Error ? e.message : String(e), { cause: e });
}

/** A client-side argument check failed: INVALID_ARGUMENT naming the field, raised before anything is sent. */
export function invalidArgument(field: string, problem: string): GatewayClientError {
  return new GatewayClientError(Code.INVALID_ARGUMENT, `${field} ${problem}`);
}
