/**
 * The one RFC 3339 parser and formatter of the gateway, to the nanosecond: CloudEvent `time` (REST publish, the Dapr
 * adapter, the client library), protobuf Timestamps in REST bodies, and trigger `due_time`/`ttl`.
 *
 * Strict, as Go's `time.Parse(time.RFC3339Nano, ...)` that Dapr uses: the grammar of RFC 3339 section 5.6 (`T`/`Z` in
 * either case, any number of fraction digits, of which nine are kept), a four-digit year, and a date and time that
 * exist. `2024-02-30T00:00:00Z`, hour 24, second 60 (leap seconds are not representable in a protobuf Timestamp
 * either), an offset past 23:59 and a space instead of `T` (the section 5.6 note allows it as an application choice;
 * the gateway does not take it) are refused rather than rolled over as `Date.parse` does.
 */

/** A point in time as a protobuf Timestamp holds it: whole seconds since the Unix epoch and 0-999,999,999 nanoseconds. */
export interface Instant {
  seconds: number;
  nanos: number;
}

/** A protobuf Timestamp as proto-loader presents it (int64 seconds as a string or number). */
export interface ProtoTimestamp {
  seconds: string | number;
  nanos: number;
}

/** The range of a protobuf Timestamp, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in seconds since the epoch. */
export const TIMESTAMP_MIN_SECONDS = -62_135_596_800;
export const TIMESTAMP_MAX_SECONDS = 253_402_300_799;

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** The instant `text` names, or undefined when it is not an RFC 3339 date-time or names one that does not exist. */
export function parseRfc3339(text: string): Instant | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  // Field by field and in integer arithmetic, no Date: the invoke codec's fast path parses every Timestamp here.
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const d = Number(m[3]);
  const h = Number(m[4]);
  const mi = Number(m[5]);
  const s = Number(m[6]);
  // A day that does not exist (2024-02-30) is refused, not rolled over into the next month.
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || s > 59) return undefined;
  let offsetSeconds = 0;
  if (m[8]) {
    const oh = Number(m[9]);
    const om = Number(m[10]);
    if (oh > 23 || om > 59) return undefined;
    offsetSeconds = (m[8] === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  }
  return { seconds: daysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offsetSeconds, nanos: m[7] ? Number(m[7].slice(0, 9).padEnd(9, "0")) : 0 };
}

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(y: number, mo: number): number {
  return mo === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : MONTH_DAYS[mo - 1]!;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil), years 0-9999 included. */
function daysFromCivil(y: number, mo: number, d: number): number {
  const yy = mo <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/** Epoch milliseconds (sub-millisecond digits cut) of an RFC 3339 date-time, or undefined as parseRfc3339. */
export function parseRfc3339Ms(text: string): number | undefined {
  const i = parseRfc3339(text);
  return i === undefined ? undefined : i.seconds * 1000 + Math.floor(i.nanos / 1_000_000);
}

/** A protobuf Timestamp (seconds as a string, as proto-loader's int64) from RFC 3339 text, or undefined as parseRfc3339. */
export function rfc3339ToTimestamp(text: string): { seconds: string; nanos: number } | undefined {
  const i = parseRfc3339(text);
  return i === undefined ? undefined : { seconds: String(i.seconds), nanos: i.nanos };
}

/**
 * How many fraction digits formatRfc3339 writes: `"trim"` as Go's RFC3339Nano and Dapr (none for a whole second,
 * else the digits up to the last non-zero one); `"millis"` as JavaScript's `toISOString` (always three) extended to
 * six or nine digits when the time has them, so no nanosecond is lost.
 */
export type FractionStyle = "trim" | "millis";

/** RFC 3339 text (UTC, `Z`) of a Timestamp, keeping every nanosecond. */
export function formatRfc3339(ts: ProtoTimestamp, style: FractionStyle = "trim"): string {
  const iso = new Date(Number(ts.seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, "");
  const digits = String(ts.nanos ?? 0).padStart(9, "0");
  if (style === "millis") return `${iso}.${digits.endsWith("000000") ? digits.slice(0, 3) : digits.endsWith("000") ? digits.slice(0, 6) : digits}Z`;
  const trimmed = digits.replace(/0+$/, "");
  return trimmed ? `${iso}.${trimmed}Z` : `${iso}Z`;
}
