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
  // Field by field, no array per call: the invoke codec's fast path parses every Timestamp through here.
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const d = Number(m[3]);
  const h = Number(m[4]);
  const mi = Number(m[5]);
  const s = Number(m[6]);
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return undefined;
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear does not.
  const t = new Date(Date.UTC(2000, mo - 1, d, h, mi, s));
  t.setUTCFullYear(y);
  // Feb 30 rolls over to March: a date that does not exist comes back as another day.
  if (t.getUTCDate() !== d || t.getUTCMonth() !== mo - 1) return undefined;
  let offsetSeconds = 0;
  if (m[8]) {
    const oh = Number(m[9]);
    const om = Number(m[10]);
    if (oh > 23 || om > 59) return undefined;
    offsetSeconds = (m[8] === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  }
  return { seconds: t.getTime() / 1000 - offsetSeconds, nanos: m[7] ? Number(m[7].slice(0, 9).padEnd(9, "0")) : 0 };
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
