/**
 * Path and query values of REST transcoding (docs/transcoding.md "Request"): the text of a path variable or query
 * parameter, typed by the field it sets, as proto3 JSON (scalars, enums by name or number, bytes, and the well-known
 * types whose JSON is one string or number, Durations in Go's form too, as grpc-gateway takes them).
 */
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { echo } from "../../shared/echo.js";
import { parseRfc3339 } from "../../shared/rfc3339.js";

/** A field value as it comes from a path or query: text, to proto3 JSON. Throws the problem as a plain message. */
export type Encoder = (text: string) => string;

const INT = /^[-+]?\d+$/;
const UINT = /^\+?\d+$/;
const DURATION = /^-?\d+(\.\d{1,9})?s$/;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

const str: Encoder = (t) => JSON.stringify(t);

function intEncoder(min: number, max: number): Encoder {
  return (t) => {
    if (!INT.test(t)) throw new Error(`must be an integer, got '${echo(t)}'`);
    const n = Number(t);
    if (n < min || n > max) throw new Error(`is out of range (${min} to ${max}), got '${echo(t)}'`);
    return String(n);
  };
}

/** 64-bit integers go as JSON strings (proto3 JSON), checked as digits only: the converter checks the range. */
const int64: Encoder = (t) => {
  if (!INT.test(t)) throw new Error(`must be an integer, got '${echo(t)}'`);
  return JSON.stringify(t);
};
const uint64: Encoder = (t) => {
  if (!UINT.test(t)) throw new Error(`must be an unsigned integer, got '${echo(t)}'`);
  return JSON.stringify(t);
};
const float: Encoder = (t) => {
  if (t === "NaN" || t === "Infinity" || t === "-Infinity") return JSON.stringify(t);
  const n = t.trim() === "" ? NaN : Number(t);
  if (!Number.isFinite(n)) throw new Error(`must be a number, got '${echo(t)}'`);
  return String(n);
};
/** Go's strconv.ParseBool, which grpc-gateway uses. */
const bool: Encoder = (t) => {
  if (t === "1" || t === "t" || t === "T" || t === "true" || t === "TRUE" || t === "True") return "true";
  if (t === "0" || t === "f" || t === "F" || t === "false" || t === "FALSE" || t === "False") return "false";
  throw new Error(`must be true or false, got '${echo(t)}'`);
};
const bytes: Encoder = (t) => {
  if (!BASE64.test(t)) throw new Error(`must be base64 (standard or URL-safe alphabet), got '${echo(t)}'`);
  return JSON.stringify(t);
};

function scalarEncoder(t: ScalarType): Encoder {
  switch (t) {
    case ScalarType.STRING:
      return str;
    case ScalarType.BOOL:
      return bool;
    case ScalarType.BYTES:
      return bytes;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return float;
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return intEncoder(-2147483648, 2147483647);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return intEncoder(0, 4294967295);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return uint64;
    default:
      return int64;
  }
}

/** Nanoseconds per unit of Go's time.ParseDuration (µ as U+00B5 and U+03BC both, as Go takes them). */
const GO_UNITS: Record<string, bigint> = { ns: 1n, us: 1_000n, "\u00b5s": 1_000n, "\u03bcs": 1_000n, ms: 1_000_000n, s: 1_000_000_000n, m: 60_000_000_000n, h: 3_600_000_000_000n };
const GO_DURATION = /^[-+]?(?:\d*(?:\.\d*)?(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$/;
const GO_PART = /(\d*)(?:\.(\d*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/g;
/** Go's limit: a time.Duration is an int64 of nanoseconds. */
const GO_MAX_NANOS = 2n ** 63n - 1n;

/**
 * A duration in Go's form (time.ParseDuration, which grpc-gateway reads query and path Durations with: `13h`,
 * `1h30m`, `1.5s`, `300ms`, `-5m`, `0`) as proto3 JSON's (`46800s`, `0.300s`), or undefined when it is not one.
 * Computed in whole nanoseconds, a fraction below that cut off as Go cuts it.
 */
function goDuration(t: string): string | undefined {
  if (t === "0" || t === "+0" || t === "-0") return "0s";
  if (!GO_DURATION.test(t)) return undefined;
  let nanos = 0n;
  for (const [, whole, frac, unit] of t.matchAll(GO_PART)) {
    // Each part needs a digit before or after its point ("." alone or "s" alone is no number).
    if (whole === "" && (frac === undefined || frac === "")) return undefined;
    const per = GO_UNITS[unit!]!;
    nanos += BigInt(whole || "0") * per;
    if (frac) nanos += (BigInt(frac) * per) / 10n ** BigInt(frac.length);
    if (nanos > GO_MAX_NANOS) return undefined;
  }
  const sign = t.startsWith("-") && nanos > 0n ? "-" : "";
  const seconds = nanos / 1_000_000_000n;
  const rest = nanos % 1_000_000_000n;
  if (rest === 0n) return `${sign}${seconds}s`;
  // proto3 JSON writes 3, 6 or 9 fractional digits.
  const digits = rest % 1_000_000n === 0n ? 3 : rest % 1_000n === 0n ? 6 : 9;
  return `${sign}${seconds}.${rest.toString().padStart(9, "0").slice(0, digits)}s`;
}

/** google.protobuf.FieldMask paths as grpc-gateway takes them (comma-separated proto names) to its JSON (lowerCamel). */
export const fieldMask: Encoder = (t) =>
  JSON.stringify(
    t
      .split(",")
      .map((p) => p.trim().replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()))
      .join(","),
  );

const WKT_ENCODERS: Record<string, Encoder> = {
  "google.protobuf.Timestamp": (t) => {
    if (parseRfc3339(t) === undefined) throw new Error(`must be an RFC 3339 timestamp, got '${echo(t)}'`);
    return JSON.stringify(t);
  },
  "google.protobuf.Duration": (t) => {
    if (DURATION.test(t)) return JSON.stringify(t);
    const json = goDuration(t);
    if (json === undefined) throw new Error(`must be a duration (1.5s as proto3 JSON writes it, or Go's form such as 1h30m or 300ms), got '${echo(t)}'`);
    return JSON.stringify(json);
  },
  "google.protobuf.FieldMask": fieldMask,
  "google.protobuf.DoubleValue": float,
  "google.protobuf.FloatValue": float,
  "google.protobuf.Int64Value": int64,
  "google.protobuf.UInt64Value": uint64,
  "google.protobuf.Int32Value": scalarEncoder(ScalarType.INT32),
  "google.protobuf.UInt32Value": scalarEncoder(ScalarType.UINT32),
  "google.protobuf.BoolValue": bool,
  "google.protobuf.StringValue": str,
  "google.protobuf.BytesValue": bytes,
};

/** How a path or query text sets `f` (a scalar, enum or text-valued well-known type), or undefined when it cannot. */
export function encoderOf(f: DescField): Encoder | undefined {
  const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind;
  if (kind === "scalar") return scalarEncoder(f.scalar!);
  if (kind === "enum") {
    const e = f.enum!;
    return (t) => {
      if (e.values.some((v) => v.name === t)) return JSON.stringify(t);
      // A number only when the enum has it (grpc-gateway's parseField: "%q is not a valid value").
      if (INT.test(t) && e.values.some((v) => v.number === Number(t))) return String(Number(t));
      throw new Error(`must be a value of ${e.typeName} (${e.values.map((v) => v.name).join(", ")}) or its number, got '${echo(t)}'`);
    };
  }
  if (kind === "message") return WKT_ENCODERS[f.message!.typeName];
  return undefined;
}

/** A message field by proto name, else by JSON name. */
export function fieldNamed(m: DescMessage, name: string): DescField | undefined {
  return m.fields.find((f) => f.name === name) ?? m.fields.find((f) => f.jsonName === name);
}
