import { echo } from "./echo.js";
import { formatRfc3339, rfc3339ToTimestamp, type FractionStyle, type ProtoTimestamp } from "./rfc3339.js";
import type { _io_cloudevents_v1_CloudEvent_CloudEventAttributeValue as ProtoAttributeValue } from "../gen/gateway/io/cloudevents/v1/CloudEvent.js";

/**
 * The gateway's one CloudEvents 1.0 module, used by the server (REST/WebSocket publish, state notifications,
 * triggers), the Dapr adapter and the client library: the in-process shape, attribute naming, attribute typing
 * between the JSON format and the proto `CloudEventAttributeValue`, and content-type classes. Timestamps are RFC 3339
 * to the nanosecond everywhere (`./rfc3339.ts`). The JSON event format and HTTP binary mode are `./cloudevent-json.ts`.
 *
 * The in-process CloudEvent is the `io.cloudevents.v1.CloudEvent` message as @grpc/proto-loader presents it with the
 * gateway's loader options (keepCase, oneofs, bytes as Buffer). Runtimes, the broker and the front ends all pass this
 * shape, so an event crosses the process without conversions. Values built here carry no `attr` discriminator
 * (proto-loader adds it when decoding); readers find the member with `attributeMember`.
 */
export interface CloudEventAttributeValue {
  ce_boolean?: boolean;
  ce_integer?: number;
  ce_string?: string;
  ce_bytes?: Uint8Array;
  ce_uri?: string;
  ce_uri_ref?: string;
  /** null as proto-loader may present an unset message (the generated `__Output` types say so). */
  ce_timestamp?: ProtoTimestamp | null;
  /** Which member of the `attr` oneof is set (proto-loader `oneofs: true`): a member name of the generated type. */
  attr?: NonNullable<ProtoAttributeValue["attr"]>;
}

/** A google.protobuf.Any. */
export interface AnyMessage {
  type_url: string;
  value: Uint8Array;
}

export interface CloudEvent {
  id: string;
  source: string;
  spec_version: string;
  type: string;
  attributes: Record<string, CloudEventAttributeValue>;
  binary_data?: Uint8Array;
  text_data?: string;
  proto_data?: AnyMessage | null;
  /** Which member of the `data` oneof is set, if any. */
  data?: "binary_data" | "text_data" | "proto_data";
}

/** The CloudEvents spec version the gateway speaks. */
export const SPEC_VERSION = "1.0";

export type { ProtoTimestamp };

/**
 * Longest extension attribute name. CloudEvents 1.0 ("Attribute Naming Convention") makes lower-case a-z and 0-9 a
 * MUST and 20 characters a SHOULD for producers; the gateway relays events from producers it does not control, so it
 * takes longer names (e.g. `knativearrivaltime`-style names past 20) up to this bound, which keeps a name a small key.
 */
export const MAX_ATTRIBUTE_NAME_CHARS = 64;
const ATTRIBUTE_NAME = new RegExp(`^[a-z0-9]{1,${MAX_ATTRIBUTE_NAME_CHARS}}$`);

/**
 * Names an attribute cannot have although they are lower-case letters: the event's own fields (`id`, `source`,
 * `specversion`, `type`) and the JSON format's data members (`data`; `data_base64` fails the character rule anyway).
 * In the attributes map they would shadow or fake those members where the event is written in the JSON format
 * (WebSocket/SSE subscribers, the Dapr envelope, the Redis stream).
 */
export const RESERVED_ATTRIBUTE_NAMES: ReadonlySet<string> = new Set(["id", "source", "specversion", "type", "data", "data_base64"]);

/**
 * What is wrong with an extension attribute name, or undefined when it is one. The one rule for every front (gRPC
 * PublishEvent, REST structured/binary, WebSocket, state change events in either JSON form) and the client library.
 */
export function attributeNameProblem(name: string): string | undefined {
  if (RESERVED_ATTRIBUTE_NAMES.has(name)) {
    return "is not a valid attribute name (reserved: id, source, specversion and type are the event's own fields, data and data_base64 its data)";
  }
  if (ATTRIBUTE_NAME.test(name)) return undefined;
  if (name === "") return "is not a valid attribute name (it is empty)";
  if (name.length > MAX_ATTRIBUTE_NAME_CHARS) return `is not a valid attribute name (at most ${MAX_ATTRIBUTE_NAME_CHARS} characters, got ${name.length})`;
  return "is not a valid attribute name (lower-case letters and digits only)";
}

/**
 * The field an error about attribute `name` names: `<where>.<name>` (the name cut by echo(); an empty name shows as
 * `""`), or the name alone when `where` is empty.
 */
export function attributeField(where: string, name: string): string {
  const shown = name === "" ? '""' : echo(name);
  return where ? `${where}.${shown}` : shown;
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
 * (`ce_uri`). Undefined for any other value, and for a `time` string that is not an RFC 3339 time that exists: each
 * caller decides whether that is an error or a string.
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

/** A value the client library takes for an attribute; proto attribute values (`{ce_string: ...}`) pass through. */
export type AttributeInput = string | number | boolean | Uint8Array | Date | CloudEventAttributeValue;

function isAttributeValue(v: unknown): v is CloudEventAttributeValue {
  if (typeof v !== "object" || v === null || v instanceof Uint8Array || v instanceof Date) return false;
  return Object.keys(v).some((k) => k.startsWith("ce_"));
}

/**
 * The attribute value of a JS value: as attributeFromJson, plus bytes (`ce_bytes`), a Date (`ce_timestamp`, to the
 * millisecond a Date holds), a number past 32 bits (its text) and a proto value as is. A problem (a `time` string
 * that is not RFC 3339, a Date that is invalid, any other type) comes back as `{problem}` for the caller to throw.
 */
export function attributeFromValue(name: string, v: AttributeInput): CloudEventAttributeValue | { problem: string } {
  if (isAttributeValue(v)) return v;
  if (v instanceof Date) {
    const ms = v.getTime();
    if (Number.isNaN(ms)) return { problem: "is not a valid time" };
    const seconds = Math.floor(ms / 1000);
    return { ce_timestamp: { seconds: String(seconds), nanos: (ms - seconds * 1000) * 1_000_000 } };
  }
  if (v instanceof Uint8Array) return { ce_bytes: v };
  const typed = attributeFromJson(name, v);
  if (typed) return typed;
  if (typeof v === "number") return { ce_string: String(v) };
  if (typeof v === "string") return { problem: `'${echo(v)}' is not an RFC 3339 timestamp` };
  return { problem: `must be a string, number, boolean, bytes or Date (got ${typeof v})` };
}

/**
 * The plain value of an attribute: booleans and integers as such, bytes as bytes, timestamps as RFC 3339 text in
 * `timeStyle` (every nanosecond kept), the rest strings.
 */
export function attributeToValue(v: CloudEventAttributeValue, timeStyle: FractionStyle = "trim"): string | number | boolean | Uint8Array | undefined {
  switch (attributeMember(v)) {
    case "ce_boolean":
      return v.ce_boolean;
    case "ce_integer":
      return v.ce_integer;
    case "ce_string":
      return v.ce_string;
    case "ce_bytes":
      return v.ce_bytes;
    case "ce_timestamp":
      return v.ce_timestamp ? formatRfc3339(v.ce_timestamp, timeStyle) : undefined;
    case "ce_uri":
      return v.ce_uri;
    case "ce_uri_ref":
      return v.ce_uri_ref;
    default:
      return v.ce_string;
  }
}

/** The JSON-format value of an attribute: booleans and integers as such, bytes as base64, timestamps as RFC 3339, the rest strings. */
export function attributeToJson(v: CloudEventAttributeValue): unknown {
  if (attributeMember(v) === "ce_bytes") return Buffer.from(v.ce_bytes ?? []).toString("base64");
  return attributeToValue(v);
}
