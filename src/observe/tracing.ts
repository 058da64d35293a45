import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, defaultTextMapGetter, defaultTextMapSetter, trace, type Context, type Span, type SpanContext, type Tracer as OtelTracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler } from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter as OtlpProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { OTLPTraceExporter as OtlpJsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { TRACING_OFF, type SpanAttributes, type TraceProtocol, type TraceSampler, type TraceHeaders, type TraceIncoming, type TraceSpan, type Tracer } from "./span.js";

/** Options of createTracer. */
export interface TracerOptions {
  /** Full OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces). Absent or empty: tracing off, no provider. */
  endpoint?: string | undefined;
  /** Default http/protobuf. */
  protocol?: TraceProtocol;
  /** Default parentbased_always_on (the OpenTelemetry default). */
  sampler?: TraceSampler;
  /** The ratio of the *traceidratio samplers, 0..1. Default 1. */
  samplerArg?: number;
  /** `service.name` resource attribute. Default "platform-gateway". */
  serviceName?: string;
  /** Batch export delay, ms (OTEL_BSP_SCHEDULE_DELAY). Default 5000. */
  exportDelayMs?: number;
  /** Most spans queued for export; beyond it spans are dropped (the SDK counts them). Default 2048. */
  maxQueue?: number;
  /** Extra resource attributes (a uWS worker thread names itself). */
  resource?: SpanAttributes;
}

/** gRPC codes a server reports as its own failure (the RPC conventions: the rest are the caller's). */
const SERVER_ERRORS = new Set([2, 4, 12, 13, 14, 15]);

function samplerOf(kind: TraceSampler, ratio: number): Sampler {
  const root = kind.endsWith("always_off") ? new AlwaysOffSampler() : kind.endsWith("traceidratio") ? new TraceIdRatioBasedSampler(ratio) : new AlwaysOnSampler();
  return kind.startsWith("parentbased_") ? new ParentBasedSampler({ root }) : root;
}

const propagator = new W3CTraceContextPropagator();

/** The context a W3C `traceparent` (and `tracestate`) names; undefined when the traceparent is malformed. */
function remoteContext(traceparent: string, tracestate: string | undefined): SpanContext | undefined {
  const carrier: Record<string, string> = { traceparent };
  if (tracestate !== undefined) carrier["tracestate"] = tracestate;
  return trace.getSpanContext(propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter));
}

const KINDS = { server: SpanKind.SERVER, consumer: SpanKind.CONSUMER, internal: SpanKind.INTERNAL } as const;

/**
 * One span over the SDK's. `owned` false: a handle on a remote parent (the thread that opened the server span owns
 * it), which makes children and ends nothing.
 */
class SdkSpan implements TraceSpan {
  private readonly ctx: Context;
  private unrecorded: UnrecordedChild | undefined;
  constructor(
    private readonly tracer: OtelTracer,
    private readonly span: Span,
    parent: Context,
    private readonly kind: SpanKind,
    private readonly owned = true,
  ) {
    this.ctx = trace.setSpan(parent, span);
  }

  child(name: string, kind: "internal" | "client" | "producer", attributes?: SpanAttributes, link?: string): TraceSpan {
    // Not sampled: nothing under it is recorded either (parent-based), so no child span is built at all; the calls it
    // makes carry this span's context, with the sampled flag clear. (The flag, not isRecording(): a handle on another
    // thread's sampled span records nothing here but its children are recorded.)
    if (!this.sampled) return (this.unrecorded ??= new UnrecordedChild(this));
    const k = kind === "client" ? SpanKind.CLIENT : kind === "producer" ? SpanKind.PRODUCER : SpanKind.INTERNAL;
    const linked = link === undefined ? undefined : remoteContext(link, undefined);
    const links = linked ? [{ context: linked }] : undefined;
    return new SdkSpan(this.tracer, this.tracer.startSpan(name, { kind: k, ...(attributes ? { attributes } : {}), ...(links ? { links } : {}) }, this.ctx), this.ctx, k);
  }

  set(key: string, value: string | number | boolean): void {
    this.span.setAttribute(key, value);
  }

  event(name: string, attributes?: SpanAttributes): void {
    this.span.addEvent(name, attributes);
  }

  end(code = 0, message?: string): void {
    if (!this.owned) return;
    if (this.kind !== SpanKind.INTERNAL && this.kind !== SpanKind.CONSUMER) this.span.setAttribute("rpc.grpc.status_code", code);
    const error = this.kind === SpanKind.SERVER ? SERVER_ERRORS.has(code) : code !== 0;
    if (error) this.span.setStatus({ code: SpanStatusCode.ERROR, ...(message !== undefined ? { message } : {}) });
    this.span.end();
  }

  get sampled(): boolean {
    return (this.span.spanContext().traceFlags & TraceFlags.SAMPLED) !== 0;
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  get spanId(): string {
    return this.span.spanContext().spanId;
  }

  headers(): TraceHeaders {
    const carrier: Record<string, string> = {};
    propagator.inject(this.ctx, carrier, defaultTextMapSetter);
    return { traceparent: carrier["traceparent"]!, tracestate: carrier["tracestate"] };
  }
}

/**
 * Every child of a span that is not recorded: one object that records nothing and propagates its parent's context
 * (an unsampled call pays no span building for its schema resolution, conversions or backend call).
 */
class UnrecordedChild implements TraceSpan {
  constructor(private readonly parent: TraceSpan) {}
  child(): TraceSpan {
    return this;
  }
  set(): void {}
  event(): void {}
  end(): void {}
  headers(): TraceHeaders {
    return this.parent.headers();
  }
  get sampled(): boolean {
    return false;
  }
  get traceId(): string {
    return this.parent.traceId;
  }
  get spanId(): string {
    return this.parent.spanId;
  }
}

/**
 * The tracer of one thread: with an endpoint, an SDK tracer provider exporting over OTLP/HTTP (protobuf or JSON)
 * through a bounded batch processor, parent-based ratio sampling as configured; without one, TRACING_OFF (no
 * provider, nothing allocated per call). No global provider or context manager is registered: contexts are passed
 * explicitly, so nothing else in the process is traced by accident.
 */
export function createTracer(opts: TracerOptions): Tracer {
  if (!opts.endpoint) return TRACING_OFF;
  const exporter = opts.protocol === "http/json" ? new OtlpJsonExporter({ url: opts.endpoint }) : new OtlpProtoExporter({ url: opts.endpoint });
  const processor = new BatchSpanProcessor(exporter, {
    maxQueueSize: opts.maxQueue ?? 2048,
    maxExportBatchSize: Math.min(512, opts.maxQueue ?? 2048),
    scheduledDelayMillis: opts.exportDelayMs ?? 5000,
    exportTimeoutMillis: 10_000,
  });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": opts.serviceName ?? "platform-gateway", ...opts.resource }),
    sampler: samplerOf(opts.sampler ?? "parentbased_always_on", opts.samplerArg ?? 1),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer("platform-gateway");
  let closing: Promise<void> | undefined;
  return {
    on: true,
    start(incoming: TraceIncoming): TraceSpan {
      const carrier: Record<string, string> = {};
      if (incoming.traceparent !== undefined) carrier["traceparent"] = incoming.traceparent;
      if (incoming.tracestate !== undefined) carrier["tracestate"] = incoming.tracestate;
      const parent = incoming.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
      const server = incoming.server;
      if (server === undefined) {
        // Continue the span another thread opened; a missing or malformed parent still gets a (root) span to hang on.
        const remote = trace.getSpan(parent);
        if (remote) return new SdkSpan(tracer, remote, ROOT_CONTEXT, SpanKind.SERVER, false);
        return new SdkSpan(tracer, tracer.startSpan("invoke", { kind: SpanKind.INTERNAL }, ROOT_CONTEXT), ROOT_CONTEXT, SpanKind.INTERNAL);
      }
      const kind = KINDS[server.kind ?? "server"];
      return new SdkSpan(tracer, tracer.startSpan(server.name, { kind, attributes: server.attributes }, parent), parent, kind);
    },
    close() {
      return (closing ??= (async () => {
        await provider.forceFlush().catch(() => undefined);
        await provider.shutdown().catch(() => undefined);
      })());
    },
  };
}
