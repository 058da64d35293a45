import { ROOT_CONTEXT, SamplingDecision, SpanKind } from "@opentelemetry/api";
import { TraceState } from "@opentelemetry/core";
import { createOtlpHttpExportDelegate, convertLegacyHttpOptions } from "@opentelemetry/otlp-exporter-base/node-http";
import { AlwaysOffSampler, AlwaysOnSampler, TraceIdRatioBasedSampler, type Sampler } from "@opentelemetry/sdk-trace-base";
import type { Logger } from "./logger.js";
import { OtlpKind, jsonBatches, protobufBatches, type BatchMaker, type SpanBatch, type SpanContextWords, type SpanData, type SpanEvent } from "./otlp-traces.js";
import { TraceId, nonZeroWord, parseTraceparent, randomWord, spanHex } from "./trace-ids.js";
import { TRACING_OFF, type SpanAttributes, type TraceProtocol, type TraceSampler, type TraceHeaders, type TraceIncoming, type TraceSpan, type Tracer } from "./span.js";

/** Options of createTracer. */
export interface TracerOptions {
  /** Full OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces). Absent or empty: tracing off, nothing made. */
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
  /** Most ended spans waiting for export; beyond it spans are dropped and counted. Default 8192. */
  maxQueue?: number;
  /** Most spans per export request (at most maxQueue). Default 2048. */
  exportBatch?: number;
  /** Extra resource attributes (a uWS worker thread names itself). */
  resource?: SpanAttributes;
  /** Where dropped spans and failed exports are reported (at most once a minute each). */
  logger?: Logger;
}

/** The OpenTelemetry limits on one span (their defaults): more is dropped and counted. */
const MAX_ATTRIBUTES = 128;
const MAX_EVENTS = 128;
const EXPORT_TIMEOUT_MS = 10_000;
const REPORT_EVERY_MS = 60_000;

/** gRPC codes a server reports as its own failure (the RPC conventions: the rest are the caller's), one bit each. */
const SERVER_ERRORS = (1 << 2) | (1 << 4) | (1 << 12) | (1 << 13) | (1 << 14) | (1 << 15);
const OTLP_ERROR = 2;
const SAMPLED = 1;
const CHILD_KINDS = { internal: OtlpKind.INTERNAL, client: OtlpKind.CLIENT, producer: OtlpKind.PRODUCER } as const;

/** The context a W3C `traceparent` (and `tracestate`) names; undefined when the traceparent is malformed. */
function remoteParent(traceparent: string, tracestate: string | undefined): SpanContextWords | undefined {
  const p = parseTraceparent(traceparent);
  if (p === undefined) return undefined;
  const state = tracestate ? new TraceState(tracestate).serialize() : "";
  return { trace: p.trace, s0: p.s0, s1: p.s1, flags: p.flags & SAMPLED, traceState: state || undefined };
}

/** The root sampler of a configured OTEL_TRACES_SAMPLER (the SDK's own, so the ratio means what it means there). */
function rootSamplerOf(kind: TraceSampler, ratio: number): Sampler {
  return kind.endsWith("always_off") ? new AlwaysOffSampler() : kind.endsWith("traceidratio") ? new TraceIdRatioBasedSampler(ratio) : new AlwaysOnSampler();
}

function headersOf(p: SpanContextWords): TraceHeaders {
  return { traceparent: p.trace.headerPrefix + spanHex(p.s0, p.s1) + (p.flags === SAMPLED ? "-01" : "-00"), tracestate: p.traceState };
}

/** A sealed batch: its request bytes and span count. */
interface Sealed {
  readonly bytes: Uint8Array;
  readonly count: number;
  readonly batch: SpanBatch;
}

/**
 * The spans of one thread on their way out: each span is encoded into the open batch when it ends; a batch is sealed
 * when it holds `batchSize` spans or `delayMs` after its first span, and sealed batches are exported one at a time.
 * At most `maxQueue` spans wait (open and sealed together); more are dropped and counted.
 */
class Recorder {
  private open: SpanBatch;
  private sealed: Sealed[] = [];
  private waiting = 0;
  private timer: NodeJS.Timeout | undefined;
  private exporting = false;
  private dropped = 0;
  private lastReport = { dropped: 0, failed: 0 };
  private flushWaiters: Array<() => void> = [];
  /** Set during a warm-up (Tracer.beginWarmup): sealed batches are thrown away, not exported. */
  discarding = false;

  constructor(
    private readonly newBatch: BatchMaker,
    private readonly send: (batch: Sealed, done: (ok: boolean, error?: Error) => void) => void,
    private readonly maxQueue: number,
    private readonly batchSize: number,
    private readonly delayMs: number,
    private readonly logger: Logger | undefined,
  ) {
    this.open = newBatch();
  }

  add(span: SpanData): void {
    if (this.waiting >= this.maxQueue) {
      this.dropped++;
      return;
    }
    this.open.add(span);
    this.waiting++;
    if (this.open.count >= this.batchSize) this.exportNow();
    else if (this.timer === undefined) this.timer = setTimeout(() => this.exportNow(), this.delayMs).unref();
  }

  /** Seal the open batch (if it holds any span) and export the oldest sealed one unless an export is in flight. */
  private exportNow(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.open.count > 0) {
      this.sealed.push({ bytes: this.open.request(), count: this.open.count, batch: this.open });
      this.open = this.newBatch();
    }
    if (this.discarding) {
      for (const b of this.sealed.splice(0)) {
        b.batch.release();
        this.waiting -= b.count;
      }
      this.dropped = 0;
      if (!this.exporting) this.settle();
      return;
    }
    if (this.exporting) return;
    const batch = this.sealed.shift();
    if (batch === undefined) return this.settle();
    this.exporting = true;
    this.send(batch, (ok, error) => {
      this.exporting = false;
      // A success means the collector read the whole request; after a failure (a timeout, an early answer) the
      // socket may still hold a view of the bytes, so that memory is not written again.
      if (ok) batch.batch.release();
      this.waiting -= batch.count;
      if (!ok) this.report("failed", `exporting ${batch.count} spans failed: ${error?.message ?? "unknown error"}`);
      if (this.dropped > 0) this.report("dropped", `${this.dropped} spans dropped: ${this.maxQueue} were waiting for export`);
      this.dropped = 0;
      if (this.sealed.length > 0 || (this.open.count > 0 && this.flushWaiters.length > 0)) setImmediate(() => this.exportNow());
      else if (this.open.count > 0) this.timer ??= setTimeout(() => this.exportNow(), this.delayMs).unref();
      else this.settle();
    });
  }

  private report(kind: "dropped" | "failed", msg: string): void {
    const now = Date.now();
    if (now - this.lastReport[kind] < REPORT_EVERY_MS) return;
    this.lastReport[kind] = now;
    this.logger?.warn({ kind }, `tracing: ${msg}`);
  }

  private settle(): void {
    for (const w of this.flushWaiters.splice(0)) w();
  }

  /** End a warm-up: what it left waiting is thrown away (the open batch sealed and dropped), and export resumes. */
  endWarmup(): void {
    this.exportNow();
    this.discarding = false;
  }

  /** Export everything waiting now; resolves when nothing waits (or after the export timeout). */
  flush(): Promise<void> {
    if (this.waiting === 0 && !this.exporting) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, EXPORT_TIMEOUT_MS).unref();
      this.flushWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
      this.exportNow();
    });
  }
}

/**
 * One recorded (sampled) span: its data are filled in while it is open and the span itself is queued for export
 * when it ends.
 */
class RecordedSpan implements TraceSpan, SpanData {
  readonly startTime = performance.now();
  readonly s0 = randomWord();
  readonly s1 = nonZeroWord();
  endTime = 0;
  extra: Array<string | number | boolean> | undefined;
  code = -1;
  dropped = 0;
  events: SpanEvent[] | undefined;
  status = 0;
  statusMessage: string | undefined;
  readonly flags = SAMPLED;
  readonly sampled = true;
  private ended = false;

  constructor(
    private readonly recorder: Recorder,
    readonly trace: TraceId,
    readonly p0: number,
    readonly p1: number,
    readonly traceState: string | undefined,
    readonly name: string,
    readonly kind: OtlpKind,
    public attributes: SpanAttributes | undefined,
    readonly links: SpanContextWords[] | undefined,
  ) {}

  get traceId(): string {
    return this.trace.hex;
  }

  setShared(attributes: SpanAttributes): void {
    if (!this.ended) this.attributes = attributes;
  }

  get spanId(): string {
    return spanHex(this.s0, this.s1);
  }

  child(name: string, kind: "internal" | "client" | "producer", attributes?: SpanAttributes, link?: string): TraceSpan {
    return recordChild(this.recorder, this, name, CHILD_KINDS[kind], attributes, link);
  }

  set(key: string, value: string | number | boolean): void {
    if (this.ended) return;
    const extra = this.extra;
    // Most spans get one or two: an array made for the first pair holds just it (an empty one grows to 17 slots).
    if (extra === undefined) this.extra = [key, value];
    else if (extra.length >= 2 * MAX_ATTRIBUTES) this.dropped++;
    else extra.push(key, value);
  }

  event(name: string, attributes?: SpanAttributes): void {
    if (this.ended) return;
    const events = (this.events ??= []);
    if (events.length < MAX_EVENTS) events.push({ name, time: performance.now(), attributes });
  }

  end(code = 0, message?: string): void {
    if (this.ended) return;
    this.ended = true;
    this.endTime = performance.now();
    if (this.kind !== OtlpKind.INTERNAL && this.kind !== OtlpKind.CONSUMER) this.code = code;
    const error = this.kind === OtlpKind.SERVER ? code >= 0 && code < 32 && ((SERVER_ERRORS >>> code) & 1) === 1 : code !== 0;
    if (error) {
      this.status = OTLP_ERROR;
      this.statusMessage = message;
    }
    this.recorder.add(this);
  }

  headers(): TraceHeaders {
    return headersOf(this);
  }
}

/** A recorded child of a sampled span (parent-based: a sampled parent's children are sampled). */
function recordChild(recorder: Recorder, parent: SpanContextWords, name: string, kind: OtlpKind, attributes: SpanAttributes | undefined, link: string | undefined): TraceSpan {
  const linked = link === undefined ? undefined : remoteParent(link, undefined);
  return new RecordedSpan(recorder, parent.trace, parent.s0, parent.s1, parent.traceState, name, kind, attributes, linked ? [linked] : undefined);
}

/**
 * A span that is not recorded: a call whose trace is not sampled, or a handle on the server span another thread
 * opened. It propagates its context; its children are recorded only when the context is sampled (an
 * unsampled call pays no span building for its schema resolution, conversions or backend call).
 */
class ContextSpan implements TraceSpan {
  constructor(
    private readonly recorder: Recorder,
    private readonly ctx: SpanContextWords,
  ) {}
  child(name: string, kind: "internal" | "client" | "producer", attributes?: SpanAttributes, link?: string): TraceSpan {
    if (this.ctx.flags !== SAMPLED) return this;
    return recordChild(this.recorder, this.ctx, name, CHILD_KINDS[kind], attributes, link);
  }
  set(): void {}
  setShared(): void {}
  event(): void {}
  end(): void {}
  headers(): TraceHeaders {
    return headersOf(this.ctx);
  }
  get sampled(): boolean {
    return this.ctx.flags === SAMPLED;
  }
  get traceId(): string {
    return this.ctx.trace.hex;
  }
  get spanId(): string {
    return spanHex(this.ctx.s0, this.ctx.s1);
  }
}

const KINDS = { server: OtlpKind.SERVER, consumer: OtlpKind.CONSUMER, internal: OtlpKind.INTERNAL } as const;
const SDK_KINDS = { [OtlpKind.SERVER]: SpanKind.SERVER, [OtlpKind.CONSUMER]: SpanKind.CONSUMER, [OtlpKind.INTERNAL]: SpanKind.INTERNAL } as const;

/**
 * The tracer of one thread: with an endpoint, spans recorded as flat records and exported over OTLP/HTTP (protobuf
 * or JSON) by the OpenTelemetry exporter's HTTP transport (its headers, compression, timeout and retry settings, the
 * OTEL_EXPORTER_OTLP_* variables) in bounded batches; sampling by the SDK's samplers, parent-based when configured so;
 * without an endpoint, TRACING_OFF (nothing made, nothing allocated per call). No global provider or context manager
 * is registered: contexts are passed explicitly, so nothing else in the process is traced by accident.
 *
 * Spans are not the SDK's Span objects: measured on this machine, an SDK span costs about 3 us to make and end and
 * 2 us to serialize, which put 100%-sampled invoke calls (five spans each) 30-65% above untraced ones.
 */
export function createTracer(opts: TracerOptions): Tracer {
  if (!opts.endpoint) return TRACING_OFF;
  const json = opts.protocol === "http/json";
  // The SDK's OTLP/HTTP transport with a "serializer" that hands over the bytes the batch already holds.
  const delegate = createOtlpHttpExportDelegate<Sealed, unknown>(
    convertLegacyHttpOptions({ url: opts.endpoint, timeoutMillis: EXPORT_TIMEOUT_MS }, "TRACES", "v1/traces", { "Content-Type": json ? "application/json" : "application/x-protobuf" }),
    { serializeRequest: (b) => b.bytes, deserializeResponse: () => ({}) },
    "otlp_http_span_exporter",
    { name: "span", countItems: (b) => b.count },
    undefined,
  );
  const resource: SpanAttributes = { "service.name": opts.serviceName ?? "platform-gateway", "telemetry.sdk.language": "nodejs", ...opts.resource };
  const recorder = new Recorder(
    (json ? jsonBatches : protobufBatches)(resource, "platform-gateway"),
    (batch, done) => delegate.export(batch, (r) => done(r.code === 0, r.error)),
    opts.maxQueue ?? 8192,
    Math.min(opts.exportBatch ?? 2048, opts.maxQueue ?? 8192),
    opts.exportDelayMs ?? 5000,
    opts.logger,
  );
  const parentBased = (opts.sampler ?? "parentbased_always_on").startsWith("parentbased_");
  const root = rootSamplerOf(opts.sampler ?? "parentbased_always_on", opts.samplerArg ?? 1);
  // The default: every root is sampled, so no sampler call (and no hex trace id) per call for it.
  const alwaysOn = root instanceof AlwaysOnSampler;
  let closing: Promise<void> | undefined;
  return {
    on: true,
    start(incoming: TraceIncoming): TraceSpan {
      const parent = incoming.traceparent === undefined ? undefined : remoteParent(incoming.traceparent, incoming.tracestate);
      const server = incoming.server;
      if (server === undefined) {
        // Continue the span another thread opened; a missing or malformed parent still gets a (root) span to hang on.
        if (parent) return new ContextSpan(recorder, parent);
        return new RecordedSpan(recorder, TraceId.random(), 0, 0, undefined, "invoke", OtlpKind.INTERNAL, undefined, undefined);
      }
      const kind = KINDS[server.kind ?? "server"];
      const trace = parent?.trace ?? TraceId.random();
      const sampled =
        parent && parentBased
          ? parent.flags === SAMPLED
          : alwaysOn || root.shouldSample(ROOT_CONTEXT, trace.hex, server.name, SDK_KINDS[kind], server.attributes, []).decision === SamplingDecision.RECORD_AND_SAMPLED;
      if (!sampled) return new ContextSpan(recorder, { trace, s0: randomWord(), s1: nonZeroWord(), flags: 0, traceState: parent?.traceState });
      return new RecordedSpan(recorder, trace, parent?.s0 ?? 0, parent?.s1 ?? 0, parent?.traceState, server.name, kind, server.attributes, undefined);
    },
    beginWarmup() {
      recorder.discarding = true;
      return () => recorder.endWarmup();
    },
    close() {
      return (closing ??= (async () => {
        await recorder.flush();
        await delegate.shutdown().catch(() => undefined);
      })());
    },
  };
}
