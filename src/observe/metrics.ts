import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Meter, MeterProvider as ApiMeterProvider } from "@opentelemetry/api";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { GAUGE_HASHMAP_SHAPE, bucketIndex, dictionarySeriesMap, seriesLabels, seriesSnapshot, counterSeries, gaugeSeries, histogramBounds, histogramSeries, observeSeries, promClientProblem, seriesHash, setBucketExemplar, type HistogramSeries } from "./prom-client-internals.js";

type Labels<L extends string> = Partial<Record<L, string | number>>;

/** A monotonically increasing count. */
export interface CounterMetric<L extends string> {
  inc(labels?: Labels<L>, value?: number): void;
}
/** A value that goes up and down. */
export interface GaugeMetric<L extends string> {
  set(labels: Labels<L>, value: number): void;
  inc(labels?: Labels<L>, value?: number): void;
  dec(labels?: Labels<L>, value?: number): void;
}
/** The ids of a sampled trace span, as an exemplar links an observation to it. */
export interface ExemplarIds {
  readonly traceId: string;
  readonly spanId: string;
}
/** A distribution (seconds for latencies). */
export interface HistogramMetric<L extends string> {
  /**
   * Record `value`. `exemplar`: the sampled span of the call measured, kept as its bucket's exemplar (OpenMetrics
   * `# {trace_id,span_id}`) when the histogram was made with `exemplars`; ignored otherwise.
   */
  observe(labels: Labels<L>, value: number, exemplar?: ExemplarIds): void;
}
/** Options of `Metrics.histogram`. */
export interface HistogramOptions {
  /** Upper bounds in the metric's unit. Default LATENCY_BUCKETS (seconds). */
  buckets?: number[];
  /** Keep the latest exemplar per bucket (only worth it with tracing on: each series then holds one object per bucket). */
  exemplars?: boolean;
}

/**
 * The gateway's metrics, per gateway instance: each is a prom-client metric on `/metrics` and, when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set, the same instrument on an OTLP/HTTP exporter. Every metric needs help text.
 */
export interface Metrics {
  readonly registry: Registry;
  counter<L extends string>(name: string, help: string, labelNames: readonly L[]): CounterMetric<L>;
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[]): GaugeMetric<L>;
  histogram<L extends string>(name: string, help: string, labelNames: readonly L[], options?: HistogramOptions): HistogramMetric<L>;
  /**
   * Begin a warm-up of the gateway's own (src/main/own-warmup.ts): until the returned function is called nothing is
   * recorded for OTLP export. That function forgets what the warm-up recorded: every series of a counter or histogram
   * gets back its values of the start, one made meanwhile is zero, and any series with a label of value `hidden` (the
   * warm-up's own backend) that was made meanwhile goes (prom-client-internals.ts `seriesSnapshot`). Gauges keep their
   * values otherwise: they say what is open now.
   */
  beginWarmup(): (hidden: string) => void;
  /** Whether OTLP export is on. */
  readonly otlp: boolean;
  /** Flush OTLP and stop exporting. Safe to call twice: every call resolves when the one flush ended. */
  close(): Promise<void>;
}

/** Options of createMetrics. */
export interface MetricsOptions {
  /** Collect Node process metrics (CPU, memory, event loop). Default true. */
  processMetrics?: boolean;
  /** OTLP endpoint. Default none: nothing is sent anywhere. (The CLI fills it from $OTEL_EXPORTER_OTLP_ENDPOINT.) */
  otlpEndpoint?: string;
  /** OTLP export period in ms. Default 60000. */
  otlpIntervalMs?: number;
  /** `service.name` resource attribute of exported metrics. Default "platform-gateway". */
  serviceName?: string;
}

const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

function clean<L extends string>(labels: Labels<L> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (labels) for (const [k, v] of Object.entries(labels)) if (v !== undefined) out[k] = String(v);
  return out;
}

/** Create the metrics of one gateway instance. */
export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const endpoint = opts.otlpEndpoint;
  let provider: MeterProvider | undefined;
  let meter: Meter | undefined;
  if (endpoint) {
    const base = endpoint.replace(/\/+$/, "");
    const exporter = new OTLPMetricExporter({ url: base.endsWith("/v1/metrics") ? base : `${base}/v1/metrics` });
    const interval = opts.otlpIntervalMs ?? 60_000;
    provider = new MeterProvider({
      resource: resourceFromAttributes({ "service.name": opts.serviceName ?? "platform-gateway" }),
      readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: interval, exportTimeoutMillis: Math.min(interval, 30_000) })],
    });
    meter = (provider as unknown as ApiMeterProvider).getMeter("platform-gateway");
  }
  let closing: Promise<void> | undefined;
  /** Every metric made here, with what forgets a warm-up's recording of it (beginWarmup). */
  const made: Array<{ metric: Counter | Histogram; cleared?: () => void } | { metric: Gauge }> = [];
  /** Set during a warm-up: nothing is recorded for OTLP export. */
  let quiet = false;
  return {
    registry,
    otlp: meter !== undefined,
    beginWarmup() {
      quiet = true;
      // A gauge says what is open now: only its series naming the hidden backend go.
      const undo = made.map((m) => seriesSnapshot(m.metric, m.metric instanceof Gauge));
      const before = made.length;
      return (hidden) => {
        made.forEach((m, i) => {
          if (i < before) undo[i]?.(hidden);
          // Made during the warm-up: what a counter or histogram holds is the warm-up's; a gauge's is what is open.
          else if (!(m.metric instanceof Gauge)) {
            m.metric.reset();
            dictionarySeriesMap(m.metric);
          }
          else for (const labels of seriesLabels(m.metric)) if (Object.values(labels).includes(hidden)) m.metric.remove(labels);
          if ("cleared" in m) m.cleared?.();
        });
        quiet = false;
      };
    },
    counter(name, help, labelNames) {
      const c = new Counter({ name, help, labelNames: [...labelNames], registers: [registry] });
      dictionarySeriesMap(c);
      made.push({ metric: c });
      const o = meter?.createCounter(name, { description: help });
      const sorted = [...labelNames].sort();
      return {
        inc(labels, value = 1) {
          // Hot path: a series that exists takes the increment directly (prom-client-internals.ts says why); its first
          // increment, a value inc would refuse, and OTLP export (which needs the cleaned labels) go the public way.
          if (o === undefined && value >= 0 && Number.isFinite(value)) {
            const s = counterSeries(c, seriesHash(sorted, labels));
            if (s !== undefined) {
              s.value += value;
              return;
            }
          }
          const l = clean(labels);
          c.inc(l as never, value);
          if (!quiet) o?.add(value, l);
        },
      };
    },
    gauge(name, help, labelNames) {
      const g = new Gauge({ name, help, labelNames: [...labelNames], registers: [registry] });
      dictionarySeriesMap(g);
      made.push({ metric: g });
      const o = meter?.createGauge(name, { description: help });
      // Checked once here, so an upgraded prom-client fails loudly at startup rather than mirroring wrong values.
      if (o && !gaugeSeries(g)) throw new Error(`OTLP export of ${name}: ${promClientProblem(GAUGE_HASHMAP_SHAPE)}`);
      const mirror = (l: Record<string, string>): void => {
        if (!o || quiet) return;
        // prom-client holds the current value; the OTel gauge records it.
        for (const entry of gaugeSeries(g) ?? []) {
          if (Object.entries(l).every(([k, v]) => entry.labels[k] === v)) o.record(entry.value, entry.labels);
        }
      };
      const sorted = [...labelNames].sort();
      /**
       * Hot path as for counters (a WebSocket's open and close each move the subscriber gauge): an existing series takes
       * the change directly, as prom-client's own inc/dec would once its labels are validated and hashed.
       */
      const addToSeries = (labels: Labels<string> | undefined, delta: number): boolean => {
        if (!Number.isFinite(delta)) return false;
        const s = counterSeries(g, seriesHash(sorted, labels));
        if (s === undefined) return false;
        s.value += delta;
        return true;
      };
      return {
        set(labels, value) {
          const l = clean(labels);
          g.set(l as never, value);
          if (!quiet) o?.record(value, l);
        },
        inc(labels, value = 1) {
          if (o === undefined && addToSeries(labels, value)) return;
          const l = clean(labels);
          g.inc(l as never, value);
          mirror(l);
        },
        dec(labels, value = 1) {
          if (o === undefined && addToSeries(labels, -value)) return;
          const l = clean(labels);
          g.dec(l as never, value);
          mirror(l);
        },
      };
    },
    histogram(name, help, labelNames, { buckets = LATENCY_BUCKETS, exemplars = false } = {}) {
      // prom-client refuses exemplars on a registry in Prometheus text mode, which this one stays in for the plain
      // format; the OpenMetrics text is printed by openmetrics.ts from the same values. So it is registered afterwards.
      /**
       * Exemplars observed since the histogram was last read, per series: the latest value and ids per bucket (the
       * last slot: +Inf). They become prom-client's exemplars when it is read (its `collect`), so an observation keeps
       * a reference and two numbers instead of making a label set, an exemplar and the span id's hex each time.
       */
      const pending = new Map<HistogramSeries, { ids: Array<ExemplarIds | undefined>; values: Float64Array; times: Float64Array }>();
      let bounds: readonly number[] | undefined;
      const collect = (): void => {
        for (const [series, p] of pending) {
          for (let i = 0; i < p.ids.length; i++) {
            const ids = p.ids[i];
            if (ids !== undefined) setBucketExemplar(series, bounds!, p.values[i]!, { trace_id: ids.traceId, span_id: ids.spanId }, p.times[i]!);
          }
        }
        pending.clear();
      };
      const h = new Histogram({ name, help, labelNames: [...labelNames], buckets, registers: [], enableExemplars: exemplars, ...(exemplars ? { collect } : {}) });
      dictionarySeriesMap(h);
      registry.registerMetric(h);
      made.push({ metric: h, cleared: () => pending.clear() });
      const o = meter?.createHistogram(name, { description: help, advice: { explicitBucketBoundaries: buckets } });
      const sorted = [...labelNames].sort();
      bounds = histogramBounds(h);
      const keys = bounds?.map(String) ?? [];
      return {
        observe(labels, value, exemplar) {
          // Hot path as for counters: an existing series is updated directly, anything else the public way.
          const s = o === undefined && bounds !== undefined && Number.isFinite(value) ? histogramSeries(h, seriesHash(sorted, labels)) : undefined;
          if (s !== undefined) observeSeries(s, bounds!, keys, value);
          else {
            const l = clean(labels);
            // prom-client's histogram with exemplars takes one object (and records no exemplar without labels).
            if (exemplars) h.observe({ labels: l, value } as never);
            else h.observe(l as never, value);
            if (!quiet) o?.record(value, l);
          }
          if (exemplars && exemplar !== undefined && Number.isFinite(value)) {
            const series = s ?? (bounds !== undefined ? histogramSeries(h, seriesHash(sorted, labels)) : undefined);
            if (series === undefined) return;
            let p = pending.get(series);
            if (p === undefined) {
              const n = bounds!.length + 1;
              pending.set(series, (p = { ids: new Array<ExemplarIds | undefined>(n).fill(undefined), values: new Float64Array(n), times: new Float64Array(n) }));
            }
            const i = bucketIndex(bounds!, value);
            p.ids[i] = exemplar;
            p.values[i] = value;
            p.times[i] = Date.now();
          }
        },
      };
    },
    close() {
      // Every caller waits for the same flush (a second call used to return before the first one's export ended).
      const p = provider;
      if (!p) return Promise.resolve();
      return (closing ??= (async () => {
        await p.forceFlush().catch(() => undefined);
        await p.shutdown().catch(() => undefined);
      })());
    },
  };
}
