import type { CloudEventAttributeValue } from "./cloudevent.js";

/**
 * The rules every CloudEvent mapping of the gateway shares (REST publish, the Dapr adapter, the client library):
 * content-type classes, RFC 3339 timestamps, and how an attribute value is typed between the CloudEvents JSON format
 * and the proto `CloudEventAttributeValue`. Values built here carry no `attr` discriminator (proto-loader adds it when
 * decoding); readers find the member with `attributeMember`.
 */

/** A protobuf Timestamp as proto-loader presents it (int64 seconds as a string or number). */
export interface ProtoTimestamp {
  seconds: string | number;
  nanos: number;
}

/** True for JSON media types: `*\/json` and `*\/*+json` (parameters ignored, case-insensitive). */
export function isJsonContentType(ct: string): boolean {
  const base = ct.split(";")[0]!.trim().toLowerCase();
  return base.endsWith("/json") || base.endsWith("+json");
}

/** True for media types whose bytes are text: text/*, JSON, XML (`*\/xml`, `*\/*+xml`), and charset-qualified types. */
export function isTextContentType(ct: string): boolean {
  const lower = ct.toLowerCase();
  const base = lower.split(";")[0]!.trim();
  return base.startsWith("text/") || isJsonContentType(base) || base.endsWith("/xml") || base.endsWith("+xml") || /;\s*charset=/.test(lower);
}

/** RFC 3339 date-time: `T`, `t` or a space between date and time (RFC 3339 5.6 note), any number of fraction digits. */
const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

/** A protobuf Timestamp from RFC 3339 text (fraction kept to the nanosecond), or undefined when it is not one. */
export function rfc3339ToTimestamp(text: string): { seconds: string; nanos: number } | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}T${m[2]}${m[4]!.toUpperCase()}`);
  if (Number.isNaN(ms)) return undefined;
  return { seconds: String(Math.floor(ms / 1000)), nanos: m[3] ? Number(m[3].slice(0, 9).padEnd(9, "0")) : 0 };
}

/** RFC 3339 text (UTC) of a protobuf Timestamp, keeping nanoseconds without trailing zeros. */
export function timestampToRfc3339(ts: ProtoTimestamp): string {
  const iso = new Date(Number(ts.seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, "");
  const nanos = ts.nanos ?? 0;
  if (!nanos) return `${iso}Z`;
  return `${iso}.${String(nanos).padStart(9, "0").replace(/0+$/, "")}Z`;
}

/** Which `ce_*` member an attribute value holds: `attr` when proto-loader set it, else the first member present. */
export function attributeMember(v: CloudEventAttributeValue): string | undefined {
  if (v.attr) return v.attr;
  const rec = v as Record<string, unknown>;
  return Object.keys(rec).find((k) => k.startsWith("ce_") && rec[k] !== undefined && rec[k] !== null);
}

function isInt32(v: number): boolean {
  return Number.isInteger(v) && v >= -2147483648 && v <= 2147483647;
}

/**
 * The typed attribute value of a JSON-format attribute (CloudEvents 1.0 type system): a boolean is `ce_boolean`, a
 * 32-bit integer `ce_integer`, a string `ce_string` except `time` (an RFC 3339 `ce_timestamp`) and `dataschema`
 * (`ce_uri`). Undefined for any other value, and for a `time` string that is not RFC 3339: each caller decides
 * whether that is an error or a string.
 */
export function attributeFromJson(name: string, v: unknown): CloudEventAttributeValue | undefined {
  if (typeof v === "boolean") return { ce_boolean: v };
  if (typeof v === "number") return isInt32(v) ? { ce_integer: v } : undefined;
  if (typeof v !== "string") return undefined;
  if (name === "time") {
    const ts = rfc3339ToTimestamp(v);
    return ts ? { ce_timestamp: ts } : undefined;
  }
  if (name === "dataschema") return { ce_uri: v };
  return { ce_string: v };
}

/** The JSON-format value of an attribute: booleans and integers as such, bytes as base64, timestamps as RFC 3339, the rest strings. */
export function attributeToJson(v: CloudEventAttributeValue): unknown {
  switch (attributeMember(v)) {
    case "ce_boolean":
      return v.ce_boolean;
    case "ce_integer":
      return v.ce_integer;
    case "ce_bytes":
      return Buffer.from(v.ce_bytes ?? []).toString("base64");
    case "ce_timestamp":
      return v.ce_timestamp ? timestampToRfc3339(v.ce_timestamp) : undefined;
    case "ce_uri":
      return v.ce_uri;
    case "ce_uri_ref":
      return v.ce_uri_ref;
    default:
      return v.ce_string;
  }
}
