/**
 * ISO-8601 durations as Dapr reads them for due_time and ttl (dapr/kit `time.ParseISO8601Duration`):
 * `P[nY][nM][nW][nD][T[nH][nM][nS]]`, e.g. `PT1H30M`, `P1DT12H`, `P2W`. Every number is a whole number, seconds
 * included (kit reads each with strconv.Atoi, so the Scheduler refuses `PT1.5S`). Years, months, weeks and days are
 * calendar units: they are added to a date in UTC, so `P1M` from Jan 31 is Mar 2/3 as in Go's AddDate. The time part
 * is a Go time.Duration in kit, so at most 2562047h47m16.854775807s (see time-spec.ts). Stricter than kit, on every
 * runtime: the designators in this order, each once, nothing else (kit skips letters it does not know, so `P5` or
 * `PT1H ` are zero or one hour there), no signs, no `R<n>/` repetitions, no empty `P`/`PT` and no `T` at the end.
 */
export interface IsoDuration {
  years: number;
  months: number;
  days: number;
  /** The time part (hours, minutes, seconds) in milliseconds. */
  ms: number;
}

const ISO = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;

/** The parsed duration, or undefined when `text` is not an ISO-8601 duration. */
export function parseIsoDuration(text: string): IsoDuration | undefined {
  const m = ISO.exec(text);
  if (!m || text === "P" || text.endsWith("T")) return undefined;
  const n = (i: number): number => (m[i] === undefined ? 0 : Number(m[i]));
  return {
    years: n(1),
    months: n(2),
    days: n(3) * 7 + n(4),
    ms: n(5) * 3_600_000 + n(6) * 60_000 + n(7) * 1000,
  };
}

/** `base` (epoch ms) plus the duration: calendar part in UTC first, then the time part. */
export function addIsoDuration(base: number, d: IsoDuration): number {
  const date = new Date(base);
  if (d.years || d.months || d.days) {
    date.setUTCFullYear(date.getUTCFullYear() + d.years, date.getUTCMonth() + d.months, date.getUTCDate() + d.days);
  }
  return date.getTime() + d.ms;
}
