import type { MetricObjectWithValues, MetricValue } from "prom-client";
import type { PromExemplar } from "./prom-client-internals.js";

/**
 * The OpenMetrics 1.0 text exposition of the gateway's metrics, with the exemplars of the histograms that keep them.
 *
 * Written here rather than by prom-client's registry in OpenMetrics mode for two reasons: that mode renames every
 * counter of the registry in place (it strips `_total` from the metric object's name for good, so the plain format
 * served afterwards by the same registry would lose the suffix), and the exemplars must survive the merge of the uWS
 * threads' registries, whose aggregator (prom-client's `AggregatorRegistry.aggregate`) keeps only values and labels.
 * Both formats are printed from the same `getMetricsAsJSON` values, so they carry the same series.
 */

/** The content type of the OpenMetrics exposition. */
export const OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/** One metric family as `Registry.getMetricsAsJSON` returns it (values may carry `metricName` and `exemplar`). */
export type MetricFamily = MetricObjectWithValues<MetricValue<string>>;
type Sample = MetricValue<string> & { metricName?: string; exemplar?: PromExemplar | null };

/**
 * Whether an Accept header asks for OpenMetrics: it lists `application/openmetrics-text` with a non-zero q (what
 * Prometheus sends when it scrapes). Anything else, or no header, gets the Prometheus text format.
 */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  for (const range of accept.split(",")) {
    const [type, ...params] = range.split(";").map((p) => p.trim().toLowerCase());
    if (type !== "application/openmetrics-text") continue;
    const q = params.find((p) => p.startsWith("q="));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

function number(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

/** A label value or help text as OpenMetrics' escaped-string: backslash, double quote and newline escaped. */
function escape(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelText(labels: Readonly<Record<string, string | number | undefined>>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(labels)) if (v !== undefined) parts.push(`${k}="${escape(typeof v === "number" ? number(v) : v)}"`);
  return parts.length > 0 ? `{${parts.join(",")}}` : "";
}

const TYPES = new Set(["counter", "gauge", "histogram", "summary"]);

/**
 * The OpenMetrics text of `families`: a counter's family is its name without `_total` and its sample `<family>_total`
 * (the sample name Prometheus stores is the same in both formats), histogram buckets carry their exemplar as
 * ` # {trace_id="…",span_id="…"} value timestamp`, and the text ends with `# EOF`.
 */
export function openMetricsText(families: readonly MetricFamily[]): string {
  const lines: string[] = [];
  for (const f of families) {
    const type = TYPES.has(String(f.type)) ? String(f.type) : "unknown";
    const family = type === "counter" ? f.name.replace(/_total$/, "") : f.name;
    lines.push(`# TYPE ${family} ${type}`, `# HELP ${family} ${escape(f.help)}`);
    for (const v of f.values as Sample[]) {
      const name = type === "counter" ? `${family}_total` : (v.metricName ?? f.name);
      let line = `${name}${labelText(v.labels)} ${number(v.value)}`;
      const ex = v.exemplar;
      if (ex && name.endsWith("_bucket")) line += ` # ${labelText(ex.labelSet) || "{}"} ${number(ex.value)} ${ex.timestamp.toFixed(3)}`;
      lines.push(line);
    }
  }
  lines.push("# EOF");
  return lines.join("\n") + "\n";
}

/** The key of one sample: its name and labels in name order. */
function sampleKey(name: string, v: Sample): string {
  const labels = Object.entries(v.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${v.metricName ?? name}|${JSON.stringify(labels)}`;
}

/**
 * Put back the exemplars `AggregatorRegistry.aggregate` drops: each aggregated bucket sample gets the newest exemplar
 * any of `inputs` (the main thread's and every uWS thread's `getMetricsAsJSON`) holds for the same sample, so a slow
 * call on any thread links to its trace. Modifies `aggregated` in place.
 */
export function restoreExemplars(aggregated: readonly MetricFamily[], inputs: ReadonlyArray<readonly MetricFamily[]>): void {
  const newest = new Map<string, PromExemplar>();
  for (const families of inputs) {
    for (const f of families) {
      if (String(f.type) !== "histogram") continue;
      for (const v of f.values as Sample[]) {
        const ex = v.exemplar;
        if (!ex) continue;
        const key = sampleKey(f.name, v);
        const seen = newest.get(key);
        if (seen === undefined || ex.timestamp > seen.timestamp) newest.set(key, ex);
      }
    }
  }
  if (newest.size === 0) return;
  for (const f of aggregated) {
    if (String(f.type) !== "histogram") continue;
    for (const v of f.values as Sample[]) {
      const ex = newest.get(sampleKey(f.name, v));
      if (ex !== undefined) v.exemplar = ex;
    }
  }
}
