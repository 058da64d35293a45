// Prometheus text exposition parsing and the few figures the Health page shows.

/** Parse Prometheus text format into samples {name, labels, value}. Comments and malformed lines are skipped. */
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    const value = m[4] === "+Inf" ? Infinity : Number(m[4]);
    if (!Number.isNaN(value)) out.push({ name: m[1], labels, value });
  }
  return out;
}

/** Sum of the samples named `name`, optionally only those whose labels match `where`. */
export function sum(samples, name, where = {}) {
  let s = 0;
  for (const x of samples) if (x.name === name && Object.entries(where).every(([k, v]) => x.labels[k] === v)) s += x.value;
  return s;
}

/**
 * A quantile of a histogram summed over all its label sets, interpolated inside the bucket as Prometheus'
 * histogram_quantile does. `buckets` is [[le, cumulativeCount], ...]; NaN when there are no observations.
 */
export function quantile(q, buckets) {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.length ? sorted[sorted.length - 1][1] : 0;
  if (!total) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of sorted) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      const inBucket = count - prevCount;
      return inBucket === 0 ? le : prevLe + ((le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

/** The cumulative buckets of histogram `name` (all label sets added up per `le`). */
export function buckets(samples, name) {
  const by = new Map();
  for (const x of samples) {
    if (x.name !== `${name}_bucket`) continue;
    const le = x.labels.le === "+Inf" ? Infinity : Number(x.labels.le);
    by.set(le, (by.get(le) ?? 0) + x.value);
  }
  return [...by.entries()];
}

/** Bucket-wise difference (a window between two scrapes). */
export function bucketDelta(now, before) {
  const b = new Map(before);
  return now.map(([le, c]) => [le, c - (b.get(le) ?? 0)]);
}
