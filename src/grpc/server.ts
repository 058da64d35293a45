import type * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { apiKeyRefusal, type Authenticator } from "../ops/auth.js";
import type { Logger } from "../observe/logger.js";
import type { CounterMetric, HistogramMetric } from "../observe/metrics.js";
import type { GrpcServiceHost } from "./front.js";
import type { BidiCall, ClientStreamCall, ServerStreamCall, UnaryCall } from "./native/call-types.js";
import type { CallMetadata } from "../shared/metadata.js";
import type { CancelSignal } from "../shared/signals.js";
import type { ServiceHandlers } from "./native/server.js";
import { decodeFailureOf, withStrictRequest } from "./strict-decoding.js";

/** What a unary handler gets besides the request. */
export interface UnaryContext {
  /** Inbound metadata (x-api-key already checked). */
  readonly metadata: CallMetadata;
  /** Aborted when the caller cancels or the deadline passes (an AbortController made when first asked for). */
  readonly signal: AbortSignal;
  /** The same, without an AbortController: for work that takes a CancelSignal (invoke). */
  readonly cancellation: CancelSignal;
  /** The caller's deadline as epoch ms, or undefined when none was set. */
  readonly deadline: number | undefined;
}

/**
 * A unary handler: resolve the response or throw (a GatewayError keeps its code; anything else is INTERNAL). The
 * request is `never` here, so any typed handler fits; GrpcImpl gives each method its generated request type.
 */
export type UnaryMethod = (req: never, ctx: UnaryContext) => Promise<unknown>;
/** A server-streaming handler; owns the call once invoked (auth and closing already checked) and ends it. */
export type ServerStreamMethod = (call: ServerStreamCall<never, never>) => void | Promise<void>;
/** A bidi-streaming handler; owns the call once invoked (auth and closing already checked) and ends it. */
export type DuplexMethod = (call: BidiCall<never, never>) => void | Promise<void>;
/** Handlers of one gRPC service by method name. Methods left out answer UNIMPLEMENTED. */
export type ServiceImpl = Record<string, UnaryMethod | ServerStreamMethod | DuplexMethod>;

/**
 * The handlers of one gateway service typed from its generated `*Handlers` interface (src/gen, made by
 * proto-loader-gen-types from proto/ with the loader's options): a unary method takes the request as proto-loader
 * decodes it (`X__Output`) and resolves the response as proto-loader encodes it (`X`), a streaming method gets the
 * typed call. A proto change a handler does not follow fails `npm run typecheck`. Methods left out answer
 * UNIMPLEMENTED.
 */
export type GrpcImpl<H> = {
  // Server-streaming before bidi: a duplex call is also a writable one, so the other order would match both.
  [K in keyof H as string extends K ? never : K]?: H[K] extends grpc.handleServerStreamingCall<infer Req, infer Res>
    ? (call: ServerStreamCall<Req, Res>) => void | Promise<void>
    : H[K] extends grpc.handleBidiStreamingCall<infer Req, infer Res>
      ? (call: BidiCall<Req, Res>) => void | Promise<void>
      : H[K] extends grpc.handleUnaryCall<infer Req, infer Res>
        ? (req: Req, ctx: UnaryContext) => Promise<Res>
        : never;
};

const RAW = Symbol("rawResponses");

/**
 * Mark a server-streaming handler as writing pre-encoded response bytes: the method is bound with an identity
 * serializer, so one encoded event Buffer can be shared by every subscriber.
 */
export function rawResponses(fn: ServerStreamMethod): ServerStreamMethod {
  (fn as unknown as Record<symbol, boolean>)[RAW] = true;
  return fn;
}

/** Shared by every bound service. */
export interface BindDeps {
  auth: Authenticator;
  logger: Logger;
  isClosing(): boolean;
  requests: CounterMetric<"method" | "code">;
  latency: HistogramMetric<"method" | "code">;
  /** In-flight unary calls, so shutdown can wait for them. */
  inflight: { count: number; onIdle?: () => void };
}

/**
 * The status the caller saw for a call that ended before its handler replied: its deadline passed, or it cancelled.
 * What the handler returned afterwards never reached the caller, so it is not counted as OK.
 */
function abortedCode(call: { readonly deadline: number | undefined }): string {
  return call.deadline !== undefined && call.deadline <= Date.now() ? "DEADLINE_EXCEEDED" : "CANCELLED";
}

/** Check closing and x-api-key; a GatewayError when the call must be refused. */
export function admit(deps: BindDeps, md: CallMetadata): GatewayError | undefined {
  if (deps.isClosing()) return new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down");
  // Every copy, joined as HTTP/2 joins repeats: the same check and message as the REST and WebSocket fronts.
  const keys = md.strings("x-api-key");
  return apiKeyRefusal(deps.auth, keys.length === 0 ? undefined : keys.join(", "));
}

/**
 * Add one service to the server: every method of `definition` gets auth, the shutdown gate, request metrics and
 * error translation around the handler in `impl`.
 */
export function bindService(server: GrpcServiceHost, definition: grpc.ServiceDefinition, impl: ServiceImpl, deps: BindDeps): void {
  const handlers: Record<string, ServiceHandlers[string]> = {};
  // A copy: the package definition is shared with clients in the same process.
  const bound: Record<string, grpc.MethodDefinition<unknown, unknown>> = { ...definition };
  for (const [name, def] of Object.entries(definition)) {
    const method = def.path.slice(1);
    bound[name] = withStrictRequest(def);
    const h = impl[name] ?? impl[def.originalName ?? ""];
    const refuse = (err: GatewayError): void => {
      deps.requests.inc({ method, code: err.codeName });
    };
    // A server-streaming or bidi call: counted, then ended with its refusal (shutdown, key, no handler, a request
    // that did not decode) or handed to the handler.
    const startStream = <C extends { metadata: CallMetadata; end(status?: GatewayError): void }>(
      call: C,
      handler: ServerStreamMethod | DuplexMethod | undefined,
      request?: unknown,
    ): void | Promise<void> => {
      deps.requests.inc({ method, code: "STARTED" });
      const refused =
        admit(deps, call.metadata) ?? (handler ? undefined : new GatewayError(Code.UNIMPLEMENTED, `${method} is not implemented`)) ?? decodeFailureOf(request);
      if (refused) {
        refuse(refused);
        call.end(refused);
        return;
      }
      return handler!(call as never);
    };
    if (def.responseStream && !def.requestStream) {
      const stream = h as ServerStreamMethod | undefined;
      if (stream && (stream as unknown as Record<symbol, boolean>)[RAW]) {
        bound[name] = { ...bound[name]!, responseSerialize: (b: unknown) => b as Buffer };
      }
      handlers[name] = (call: ServerStreamCall<unknown, unknown>) => startStream(call, stream, call.request);
      continue;
    }
    if (def.requestStream && !def.responseStream) {
      // No gateway service has a client-streaming method (the proxy binds backends' own through register()).
      handlers[name] = async (call: ClientStreamCall<unknown>): Promise<never> => {
        deps.requests.inc({ method, code: "STARTED" });
        const refused = admit(deps, call.metadata) ?? new GatewayError(Code.UNIMPLEMENTED, `${method} is not implemented`);
        refuse(refused);
        throw refused;
      };
      continue;
    }
    if (def.requestStream) {
      const duplex = h as DuplexMethod | undefined;
      handlers[name] = (call: BidiCall<unknown, unknown>) => startStream(call, duplex);
      continue;
    }
    const unary = h as UnaryMethod | undefined;
    handlers[name] = async (call: UnaryCall<unknown>): Promise<unknown> => {
      const started = performance.now();
      const finish = (err: GatewayError | null): void => {
        // The call's signal aborts only while the handler runs (a unary call's is not aborted after its reply).
        const code = call.cancellation.aborted ? abortedCode(call) : err ? err.codeName : "OK";
        deps.requests.inc({ method, code });
        deps.latency.observe({ method, code }, (performance.now() - started) / 1000);
      };
      const refused =
        admit(deps, call.metadata) ?? (unary ? undefined : new GatewayError(Code.UNIMPLEMENTED, `${method} is not implemented`)) ?? decodeFailureOf(call.request);
      if (refused) {
        finish(refused);
        throw refused;
      }
      deps.inflight.count++;
      try {
        // The call itself is the handler's context (its signal is made only if the handler asks for it): no object per
        // call whose hidden map a full collection between calls would free (docs/warmup.md, "The collection").
        const res = await unary!(call.request as never, call);
        finish(null);
        return res;
      } catch (e) {
        const err = GatewayError.from(e);
        if (err.code === Code.INTERNAL || err.code === Code.UNKNOWN) deps.logger.error({ err: e, method }, "gRPC handler failed");
        finish(err);
        throw err;
      } finally {
        if (--deps.inflight.count === 0) deps.inflight.onIdle?.();
      }
    };
  }
  server.addService(bound as grpc.ServiceDefinition, handlers);
}
