import { SPEC_VERSION, type CloudEvent, type CloudEventAttributeValue } from "../../shared/cloudevent.js";
import { structToObject, type ProtoStruct } from "./struct.js";

/** `TopicEventRequest` as daprd sends it on a streaming subscription (proto-loader shape). */
export interface TopicEventRequest {
  id: string;
  source: string;
  type: string;
  spec_version: string;
  data_content_type: string;
  data: Uint8Array;
  topic: string;
  pubsub_name: string;
  path: string;
  extensions?: ProtoStruct | null;
}

/** `*\/json` and `*\/*+json` (CloudEvents JSON format rule for data that travels as a JSON value). */
export function isJsonContentType(ct: string): boolean {
  const base = ct.split(";")[0]!.trim().toLowerCase();
  return base.endsWith("/json") || base.endsWith("+json");
}

/** Content types whose bytes are text: text/*, JSON and XML. */
export function isTextContentType(ct: string): boolean {
  const base = ct.split(";")[0]!.trim().toLowerCase();
  return base.startsWith("text/") || isJsonContentType(base) || base.endsWith("/xml") || base.endsWith("+xml");
}

const PROTOBUF_TYPES = new Set(["application/protobuf", "application/x-protobuf"]);

/** RFC 3339 text of a protobuf Timestamp, keeping nanoseconds. */
export function timestampToRfc3339(ts: { seconds: string | number; nanos: number }): string {
  const seconds = Number(ts.seconds);
  const iso = new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, "");
  const nanos = ts.nanos ?? 0;
  if (!nanos) return `${iso}Z`;
  return `${iso}.${String(nanos).padStart(9, "0").replace(/0+$/, "")}Z`;
}

/** A protobuf Timestamp from RFC 3339 text, or undefined when it is not one. */
export function rfc3339ToTimestamp(text: string): { seconds: string; nanos: number } | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i.exec(text);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(ms)) return undefined;
  return { seconds: String(Math.floor(ms / 1000)), nanos: m[2] ? Number(m[2].padEnd(9, "0")) : 0 };
}

function attributeToJson(v: CloudEventAttributeValue): unknown {
  const which = v.attr ?? Object.keys(v).find((k) => k.startsWith("ce_") && (v as Record<string, unknown>)[k] !== undefined);
  switch (which) {
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

/**
 * The CloudEvents JSON format (`application/cloudevents+json`) of an in-process CloudEvent, with `datacontenttype`
 * always set: daprd delivers data of an unknown or missing content type as EMPTY bytes.
 * - binary_data: `data_base64`, default type application/octet-stream;
 * - text_data: a JSON value when the type is JSON and the text parses, the string when the type is text
 *   (default text/plain), otherwise `data_base64` of its UTF-8 bytes so nothing is lost;
 * - proto_data: `data_base64` of the message bytes, type application/protobuf, `dataschema` the type URL;
 * - no data: type application/json, no data member.
 */
export function toCloudEventJson(event: CloudEvent): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(event.attributes ?? {})) {
    const json = attributeToJson(value);
    if (json !== undefined) out[name] = json;
  }
  out["specversion"] = event.spec_version || SPEC_VERSION;
  out["id"] = event.id;
  out["source"] = event.source;
  out["type"] = event.type;
  const declared = typeof out["datacontenttype"] === "string" && out["datacontenttype"] !== "" ? (out["datacontenttype"] as string) : undefined;
  const which = event.data ?? (event.binary_data ? "binary_data" : event.text_data !== undefined ? "text_data" : event.proto_data ? "proto_data" : undefined);
  if (which === "binary_data") {
    out["datacontenttype"] = declared ?? "application/octet-stream";
    out["data_base64"] = Buffer.from(event.binary_data ?? []).toString("base64");
  } else if (which === "text_data") {
    const text = event.text_data ?? "";
    const ct = (out["datacontenttype"] = declared ?? "text/plain");
    let parsed: { value: unknown } | undefined;
    if (isJsonContentType(ct)) {
      try {
        parsed = { value: JSON.parse(text) };
      } catch {
        parsed = undefined;
      }
    }
    if (parsed) out["data"] = parsed.value;
    else if (isTextContentType(ct) && !isJsonContentType(ct)) out["data"] = text;
    else out["data_base64"] = Buffer.from(text, "utf8").toString("base64");
  } else if (which === "proto_data") {
    out["datacontenttype"] = declared ?? "application/protobuf";
    if (out["dataschema"] === undefined && event.proto_data?.type_url) out["dataschema"] = event.proto_data.type_url;
    out["data_base64"] = Buffer.from(event.proto_data?.value ?? []).toString("base64");
  } else {
    out["datacontenttype"] = declared ?? "application/json";
  }
  return out;
}

function attributeFromJson(name: string, v: unknown): CloudEventAttributeValue {
  if (typeof v === "boolean") return { ce_boolean: v, attr: "ce_boolean" };
  if (typeof v === "number" && Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31) return { ce_integer: v, attr: "ce_integer" };
  if (typeof v === "string") {
    if (name === "time") {
      const ts = rfc3339ToTimestamp(v);
      if (ts) return { ce_timestamp: ts, attr: "ce_timestamp" };
    }
    if (name === "dataschema") return { ce_uri: v, attr: "ce_uri" };
    return { ce_string: v, attr: "ce_string" };
  }
  return { ce_string: typeof v === "number" ? String(v) : JSON.stringify(v), attr: "ce_string" };
}

/**
 * The in-process CloudEvent of an event daprd delivered: `extensions` become attributes (typed back: booleans,
 * 32-bit integers, `time` as a timestamp, `dataschema` as a URI, the rest strings), `datacontenttype` is kept, and
 * the data bytes become text_data for text/JSON/XML types, proto_data for protobuf with a dataschema, else binary_data.
 */
export function fromTopicEvent(req: TopicEventRequest): CloudEvent {
  const attributes: Record<string, CloudEventAttributeValue> = {};
  for (const [name, value] of Object.entries(structToObject(req.extensions))) {
    if (value === null || value === undefined) continue;
    attributes[name] = attributeFromJson(name, value);
  }
  const ct = req.data_content_type ?? "";
  if (ct) attributes["datacontenttype"] = { ce_string: ct, attr: "ce_string" };
  const event: CloudEvent = {
    id: req.id,
    source: req.source,
    spec_version: req.spec_version || SPEC_VERSION,
    type: req.type,
    attributes,
  };
  const data = req.data ? Buffer.from(req.data) : Buffer.alloc(0);
  if (data.length === 0) return event;
  const schema = attributes["dataschema"]?.ce_uri;
  if (isTextContentType(ct)) {
    event.text_data = data.toString("utf8");
    event.data = "text_data";
  } else if (PROTOBUF_TYPES.has(ct.split(";")[0]!.trim().toLowerCase()) && schema) {
    event.proto_data = { type_url: schema, value: data };
    event.data = "proto_data";
  } else {
    event.binary_data = data;
    event.data = "binary_data";
  }
  return event;
}
