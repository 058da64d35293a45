/**
 * ISO-8601 durations as Dapr reads them for due_time and ttl: `P[nY][nM][nW][nD][T[nH][nM][nS]]`, e.g. `PT1H30M`,
 * `P1DT12H`, `P2W`. Numbers are non-negative integers, except seconds which may have a fraction. Years, months, weeks
 * and days are calendar units: they are added to a date in UTC, so `P1M` from Jan 31 is Mar 2/3 as in Go's AddDate.
 */
export interface IsoDuration {
  years: number;
  months: number;
  days: number;
  /** The time part (hours, minutes, seconds) in milliseconds. */
  ms: number;
}

const ISO = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

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
