import { createRequire } from "node:module";
import type { Counter, Gauge, Histogram } from "prom-client";

/**
 * The one place the gateway reads prom-client's private internals. prom-client 15's public `Gauge.get()` is async
 * (it runs collect callbacks), while the OTLP mirror of a gauge's `inc`/`dec` needs the value right after the change,
 * synchronously; so this reads the gauge's private `hashMap` (label hash -> {value, labels}). And a counter's `inc`, a
 * gauge's `inc`/`dec` and a histogram's `observe` on hot paths (a few per invoke, two per WebSocket subscriber) update
 * an existing series in that map directly,
 * skipping prom-client's per-call label validation, cleaning and closure allocation (about 2% of a REST invoke's CPU);
 * a series' first update, and any update when the shape is not the expected one, goes through the public API. The
 * accessors check that shape, and test/unit/prom-client-internals.test.ts exercises them against the real library,
 * failing with the same message as `promClientProblem` when an upgrade changes it. An exemplar of a sampled call is
 * written the same way (`setBucketExemplar`): the public `observe` of a histogram with exemplars validates and copies
 * its label set per call.
 *
 * Written against prom-client 15.1.
 */

/** The installed prom-client version ("unknown" if its package.json cannot be read). */
export const PROM_CLIENT_VERSION: string = (() => {
  try {
    return (createRequire(import.meta.url)("prom-client/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
})();

/** What `gaugeSeries` reads. */
export const GAUGE_HASHMAP_SHAPE = "Gauge's private hashMap (label hash -> {value, labels})";

/** The message for a shape `what` that prom-client no longer has. */
export function promClientProblem(what: string): string {
  return `prom-client ${PROM_CLIENT_VERSION} changed ${what}; the gateway was written against prom-client 15.1 (see src/observe/prom-client-internals.ts)`;
}

/** One labelled series of a gauge and its current value. */
export interface GaugeSeries {
  value: number;
  labels: Record<string, string>;
}

/** Every series of `gauge` with its current value, read synchronously; undefined when prom-client's shape changed. */
export function gaugeSeries(gauge: Gauge): GaugeSeries[] | undefined {
  const map = (gauge as unknown as { hashMap?: unknown }).hashMap;
  if (typeof map !== "object" || map === null) return undefined;
  const out = Object.values(map) as Array<Partial<GaugeSeries> | null>;
  return out.every((e) => e !== null && typeof e === "object" && typeof e.value === "number" && typeof e.labels === "object" && e.labels !== null)
    ? (out as GaugeSeries[])
    : undefined;
}

/**
 * The label sets of every series of `metric` (a counter, gauge or histogram: each keeps `labels` in its series), read
 * synchronously from its private hashMap; [] when it has none or prom-client's shape changed.
 */
export function seriesLabels(metric: Counter | Gauge | Histogram): Array<Record<string, string>> {
  const map = (metric as unknown as { hashMap?: unknown }).hashMap;
  if (typeof map !== "object" || map === null) return [];
  const out: Array<Record<string, string>> = [];
  for (const e of Object.values(map) as Array<{ labels?: unknown } | null>) {
    if (e !== null && typeof e === "object" && typeof e.labels === "object" && e.labels !== null) out.push(e.labels as Record<string, string>);
  }
  return out;
}

/** The values of one series of any kind (a counter's or gauge's `value`; a histogram's buckets, sum and count). */
interface SeriesValues {
  labels?: Record<string, unknown>;
  value?: number;
  sum?: number;
  count?: number;
  bucketValues?: Record<string, number>;
  bucketExemplars?: Record<string, unknown>;
}

/** Give `series` the values of `from`, or zero (no exemplars) without it; the object stays the same object. */
function setSeries(series: SeriesValues, from: SeriesValues | undefined): void {
  if (series.value !== undefined) series.value = from?.value ?? 0;
  if (series.sum !== undefined) series.sum = from?.sum ?? 0;
  if (series.count !== undefined) series.count = from?.count ?? 0;
  for (const k of Object.keys(series.bucketValues ?? {})) series.bucketValues![k] = from?.bucketValues?.[k] ?? 0;
  for (const k of Object.keys(series.bucketExemplars ?? {})) series.bucketExemplars![k] = from?.bucketExemplars?.[k] ?? null;
}

/**
 * Put `metric`'s series map (prom-client's `hashMap`, a plain object keyed by label hash) in V8's dictionary mode, where
 * it stays whatever series come and go. In fast mode each new key gave the object another hidden class, and the code
 * compiled against the classes it had (the warm-up's series: `counterSeries`, `histogramSeries`, the hot paths that
 * inline them) was thrown away at the first call with labels of its own (a real backend's service and method) and
 * compiled again while clients waited. Call it on a metric just made, and after prom-client's `reset()` (a new map).
 */
export function dictionarySeriesMap(metric: Counter | Gauge | Histogram): void {
  const map = (metric as unknown as { hashMap?: unknown }).hashMap as Record<string, unknown> | null | undefined;
  if (typeof map !== "object" || map === null) return;
  // Deleting a key that is not the last one added is what turns an object into a dictionary; no series key starts
  // with NUL (a hash is `name:value,` ...).
  map["\0a"] = null;
  map["\0b"] = null;
  delete map["\0a"];
  delete map["\0b"];
}

/**
 * Undo what `metric` records from now on: the returned function gives each series its values of now, and a series
 * made since zero, except one with a label of value `hidden`, which goes (a gauge's series are left as they are, but
 * for those). The series stay the same objects and the map the same map (in dictionary mode, `dictionarySeriesMap`,
 * a key deleted leaves its shape as it was): code compiled against them meanwhile stays valid for the calls after.
 * Undefined when prom-client's shape changed.
 */
export function seriesSnapshot(metric: Counter | Gauge | Histogram, keepValues: boolean): ((hidden: string) => void) | undefined {
  const holder = metric as unknown as { hashMap?: unknown };
  if (typeof holder.hashMap !== "object" || holder.hashMap === null) return undefined;
  const saved = structuredClone(holder.hashMap) as Record<string, SeriesValues>;
  return (hidden) => {
    const live = holder.hashMap as Record<string, SeriesValues | null>;
    for (const [k, series] of Object.entries(live)) {
      if (series === null || typeof series !== "object") continue;
      if (!(k in saved) && Object.values(series.labels ?? {}).includes(hidden)) delete live[k];
      else if (!keepValues) setSeries(series, saved[k]);
    }
  };
}

/** What the hot-path series updates of counters and histograms read and write (`counterSeries`, `histogramSeries`). */
export const SERIES_HASHMAP_SHAPE = "Counter's and Histogram's private hashMap (label hash `name:value,` in sorted label order -> series)";

/**
 * prom-client's key of one labelled series (util.js `hashObject` with the metric's sorted label names): `name:value,`
 * for each label that has a value, in sorted name order. `sortedNames` must be the metric's label names, sorted.
 */
export function seriesHash(sortedNames: readonly string[], labels: Readonly<Record<string, string | number | undefined>> | undefined): string {
  let hash = "";
  if (labels === undefined) return hash;
  for (let i = 0; i < sortedNames.length; i++) {
    const name = sortedNames[i]!;
    const value = labels[name];
    if (value !== undefined) hash += `${name}:${value},`;
  }
  return hash;
}

/** A counter's series as prom-client keeps it: adding to `value` is what `inc` does once the series exists. */
export interface CounterSeries {
  value: number;
}

/**
 * The series of `counter` (or gauge: its series has the same `value`, changed in place by its inc and dec) under `hash`
 * (seriesHash), or undefined when it has none yet or prom-client's shape changed.
 */
export function counterSeries(counter: Counter | Gauge, hash: string): CounterSeries | undefined {
  const e = ((counter as unknown as { hashMap?: Record<string, unknown> }).hashMap)?.[hash] as Partial<CounterSeries> | undefined;
  return e !== undefined && e !== null && typeof e.value === "number" ? (e as CounterSeries) : undefined;
}

/** A histogram's series as prom-client keeps it: count per upper bound (keyed by the bound), sum and count. */
export interface HistogramSeries {
  bucketValues: Record<string, number>;
  sum: number;
  count: number;
  /** With `enableExemplars`: the latest exemplar per upper bound ("-1" for +Inf), null until one is recorded. */
  bucketExemplars?: Record<string, PromExemplar | null>;
}

/** An exemplar as prom-client's registry prints it (`# {labels} value timestamp`, timestamp in seconds). */
export interface PromExemplar {
  labelSet: Record<string, string>;
  value: number;
  timestamp: number;
}

/**
 * The series of `histogram` under `hash` (seriesHash), or undefined when it has none yet or prom-client's shape
 * changed. `observeSeries` then does what prom-client's `observe` does to it.
 */
export function histogramSeries(histogram: Histogram, hash: string): HistogramSeries | undefined {
  const e = ((histogram as unknown as { hashMap?: Record<string, unknown> }).hashMap)?.[hash] as Partial<HistogramSeries> | undefined;
  return e !== undefined && e !== null && typeof e.sum === "number" && typeof e.count === "number" && typeof e.bucketValues === "object" && e.bucketValues !== null
    ? (e as HistogramSeries)
    : undefined;
}

/**
 * prom-client's own bound list of `histogram` (its private `upperBounds`, the bucket keys `observeSeries` counts in), or
 * undefined when prom-client's shape changed (`observeSeries` then is not used).
 */
export function histogramBounds(histogram: Histogram): readonly number[] | undefined {
  const b = (histogram as unknown as { upperBounds?: unknown }).upperBounds;
  return Array.isArray(b) && b.every((x) => typeof x === "number") ? (b as number[]) : undefined;
}

/** The index of the first bucket whose upper bound is >= `value` (`upperBounds.length`: the +Inf bucket). */
export function bucketIndex(upperBounds: readonly number[], value: number): number {
  let i = 0;
  while (i < upperBounds.length && value > upperBounds[i]!) i++;
  return i;
}

/**
 * Record `value` (finite) in `series` as prom-client's histogram `observe` does: sum, count, the first bucket >= it.
 * `keys`: the bounds as the bucket keys, `upperBounds.map(String)`, made once by the caller (converting a bound to its
 * key on every observation cost as much as the rest of it).
 */
export function observeSeries(series: HistogramSeries, upperBounds: readonly number[], keys: readonly string[], value: number): void {
  series.sum += value;
  series.count += 1;
  const i = bucketIndex(upperBounds, value);
  if (i === upperBounds.length) return;
  const key = keys[i]!;
  if (Object.prototype.hasOwnProperty.call(series.bucketValues, key)) series.bucketValues[key]! += 1;
}

/**
 * Make `labelSet` the exemplar of the bucket `value` falls in, as prom-client's `observeWithExemplar` does after the
 * observation (+Inf under "-1"), observed at `timestampMs` (epoch ms); false when the series keeps no exemplars (a
 * histogram made without them, or prom-client's shape changed). The label set must stay within OpenMetrics' 128
 * characters (the caller's is fixed-size).
 */
export function setBucketExemplar(series: HistogramSeries, upperBounds: readonly number[], value: number, labelSet: Record<string, string>, timestampMs: number): boolean {
  const exemplars = series.bucketExemplars;
  if (typeof exemplars !== "object" || exemplars === null) return false;
  const i = bucketIndex(upperBounds, value);
  exemplars[i < upperBounds.length ? upperBounds[i]! : -1] = { labelSet, value, timestamp: timestampMs / 1000 };
  return true;
}
