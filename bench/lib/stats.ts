/** Summary of a sample set (same unit as the samples). */
export interface Summary {
  n: number;
  mean: number;
  min: number;
  max: number;
  p50: number;
  p99: number;
}

/** The p-th percentile (0..100) of ascending-sorted samples, nearest-rank; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** The q-quantile (0..1) of ascending-sorted samples: the element at floor(q * n), as the fan-out suites report; NaN when empty. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Summarise samples (they are copied and sorted, the input is left alone). */
export function summarize(samples: ArrayLike<number>): Summary {
  const s = Float64Array.from(samples).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    mean: s.length ? sum / s.length : NaN,
    min: s.length ? s[0]! : NaN,
    max: s.length ? s[s.length - 1]! : NaN,
    p50: percentile(s, 50),
    p99: percentile(s, 99),
  };
}
