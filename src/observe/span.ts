import { statusOf } from "../shared/status.js";

/**
 * The tracing interface the operations use (src/ops): spans without the OpenTelemetry SDK, so ops stay free of it and
 * a gateway with tracing off pays one boolean check per call (the fronts hand ops no TraceIncoming then).
 * tracing.ts implements it over the SDK.
 */

/** The OTEL_TRACES_SAMPLER values the gateway implements (the SDK's built-in ones). */
export const TRACE_SAMPLERS = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** The OTLP/HTTP encodings traces can be exported in (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL). */
export const TRACE_PROTOCOLS = ["http/protobuf", "http/json"] as const;
export type TraceProtocol = (typeof TRACE_PROTOCOLS)[number];

/** Span attribute values, as OpenTelemetry takes them. */
export type SpanAttributes = Record<string, string | number | boolean>;

/** The server span a front wants for a call: its name and attributes (RPC or HTTP semantic conventions). */
export interface ServerSpanInfo {
  readonly name: string;
  readonly attributes: SpanAttributes;
  /**
   * Default "server". "consumer": the span of an event's delivery (under the context the event carries);
   * "internal": work the gateway starts itself (a trigger firing).
   */
  readonly kind?: "server" | "consumer" | "internal";
}

/** The server span of an HTTP route (HTTP semantic conventions: "METHOD /route"). */
export function httpServerSpan(method: string, route: string): ServerSpanInfo {
  return Object.freeze({ name: `${method} ${route}`, attributes: Object.freeze({ "http.request.method": method, "http.route": route }) });
}

/** The server span of a gRPC method, "pkg.Service/Method" (RPC semantic conventions). */
export function grpcServerSpan(fullMethod: string): ServerSpanInfo {
  const slash = fullMethod.indexOf("/");
  return Object.freeze({
    name: fullMethod,
    attributes: Object.freeze({ "rpc.system": "grpc", "rpc.service": fullMethod.slice(0, slash), "rpc.method": fullMethod.slice(slash + 1) }),
  });
}

const SHARED = new Map<string, Map<string, SpanAttributes>>();
const SHARED_MAX = 4096;
let sharedCount = 0;

/**
 * One frozen attribute set per (`a`, `b`), made by `make` the first time (the tracer encodes a frozen set once and
 * copies it for every span after). For the sets a call builds from a few repeating values (a backend method's client
 * span: its name and the backend's address): bounded, forgotten all at once when full. Two keys rather than one
 * joined string: a string made per call would be hashed per call.
 */
export function sharedAttributes(a: string, b: string, make: () => SpanAttributes): SpanAttributes {
  let inner = SHARED.get(a);
  if (inner === undefined) {
    if (sharedCount >= SHARED_MAX) {
      SHARED.clear();
      sharedCount = 0;
    }
    SHARED.set(a, (inner = new Map()));
  }
  let attrs = inner.get(b);
  if (attrs === undefined) {
    attrs = Object.freeze(make());
    inner.set(b, attrs);
    sharedCount++;
  }
  return attrs;
}

/** A call's W3C trace context as it arrived, and what to open for it. */
export interface TraceIncoming {
  /** The caller's `traceparent`, unvalidated (a malformed one starts a new trace). */
  traceparent: string | undefined;
  /** The caller's `tracestate`, kept only with a valid traceparent. */
  tracestate: string | undefined;
  /**
   * The server span to open. Absent: the call continues a span another thread opened (a gRPC invoke run on a uWS
   * worker thread), so its spans are made directly under `traceparent`.
   */
  server?: ServerSpanInfo;
}

/** W3C trace-context headers to send with an outgoing call. */
export interface TraceHeaders {
  traceparent: string;
  tracestate: string | undefined;
}

/** One span (sampled or not: an unsampled span records nothing but still propagates its context). */
export interface TraceSpan {
  /**
   * A span under this one. "producer": a publish whose context goes into the event. `link`: a W3C `traceparent`
   * the span is linked to (an event's own context, kept as it came); a malformed one is not linked.
   */
  child(name: string, kind: "internal" | "client" | "producer", attributes?: SpanAttributes, link?: string): TraceSpan;
  /** Set an attribute (on a handle of another thread's span: ignored, that thread sets its own). */
  set(key: string, value: string | number | boolean): void;
  /**
   * Replace the attributes the span was started with by `attributes`, a set the code shares (sharedAttributes) picked
   * from what the work found out: encoded once for every span that ends with it, where set() encodes its pair per span.
   */
  setShared(attributes: SpanAttributes): void;
  event(name: string, attributes?: SpanAttributes): void;
  /**
   * End it with a gRPC status code (default OK), recorded as `rpc.grpc.status_code`; the span's status is an error
   * as the RPC conventions say (a client span on any non-OK code, a server span on a server-side failure).
   */
  end(code?: number, message?: string): void;
  /** The headers that make a call sent now a child of this span. */
  headers(): TraceHeaders;
  /** Whether the span is recorded and exported (only a sampled span's ids are worth an exemplar). */
  readonly sampled: boolean;
  /** The trace id, 32 lowercase hex digits. */
  readonly traceId: string;
  /** The span id, 16 lowercase hex digits (of the server span, for a handle on another thread's). */
  readonly spanId: string;
}

/** The process's (or one thread's) tracer. */
export interface Tracer {
  /** Whether spans are made at all; false: fronts extract nothing and ops open nothing. */
  readonly on: boolean;
  /** Open the spans of one incoming call (a server span, or a handle on the remote parent when `server` is absent). */
  start(incoming: TraceIncoming): TraceSpan;
  /**
   * Begin a warm-up of the gateway's own (src/main/own-warmup.ts): spans are made, encoded and batched as ever, but
   * every span ended before the returned function is called is thrown away instead of exported.
   */
  beginWarmup(): () => void;
  /** Flush queued spans (bounded by the exporter's timeout) and stop. Safe to call twice. */
  close(): Promise<void>;
}

/** End `span` with the outcome of `work` (its code on a rejection) and pass the outcome on. */
export function endWith<R>(span: TraceSpan, work: Promise<R>): Promise<R> {
  return work.then(
    (r) => {
      span.end();
      return r;
    },
    (e: unknown) => {
      const s = statusOf(e);
      span.end(s.code, s.message);
      throw e;
    },
  );
}

/** Tracing off: nothing is made, nothing is sent. */
export const TRACING_OFF: Tracer = Object.freeze({
  on: false,
  start(): TraceSpan {
    throw new Error("tracing is off: check Tracer.on before starting spans");
  },
  beginWarmup: () => () => undefined,
  close: () => Promise.resolve(),
});
