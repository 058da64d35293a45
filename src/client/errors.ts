import { Code, codeFromName } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";

export { Code } from "../shared/code.js";
export { GatewayError } from "../shared/gateway-error.js";

/**
 * Every error the client library raises. An alias of the gateway's one error class, `GatewayError` (`src/shared`), kept
 * under this name so code that imports it and tests `instanceof GatewayClientError` keeps working: `code` (the
 * gateway's gRPC code, or the in-band status name mapped to its code), `codeName`, `message`/`rawMessage` (the text the
 * gateway gave) and the cause when one exists.
 */
export const GatewayClientError = GatewayError;
/** The type of a GatewayClientError: the same as GatewayError. */
export type GatewayClientError = GatewayError;

/**
 * `invoke()` failed: the backend answered with an error (the gateway's in-band `success: false`), or the gateway
 * refused the call. `status` is the gRPC status name the gateway reported, e.g. "NOT_FOUND".
 */
export class GatewayInvocationError extends GatewayError {
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
export class RequestTimeoutError extends GatewayError {
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

/**
 * Translate anything a call threw (grpc-js ServiceError, AbortError, ...) into a GatewayError, once, where it enters:
 * GatewayError.from with UNKNOWN for what carries no gRPC code.
 */
export function toClientError(e: unknown): GatewayError {
  return GatewayError.from(e, Code.UNKNOWN);
}

/**
 * Codes that end a subscription (gRPC `subscribe()` and `subscribeWeb()` alike) instead of reconnecting: retrying
 * cannot fix them (bad key, no permission, a gateway without the service, a request the gateway rejects). Every other
 * code (UNAVAILABLE, RESOURCE_EXHAUSTED, ...) reconnects with backoff until `reconnect.maxAttempts`.
 */
export const FATAL_SUBSCRIBE_CODES: ReadonlySet<Code> = new Set([Code.UNAUTHENTICATED, Code.PERMISSION_DENIED, Code.UNIMPLEMENTED, Code.INVALID_ARGUMENT]);

/** A client-side argument check failed: INVALID_ARGUMENT naming the field, raised before anything is sent. */
export { invalidArgument } from "../shared/gateway-error.js";
