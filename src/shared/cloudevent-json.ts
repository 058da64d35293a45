import { Code } from "./code.js";
import { GatewayError } from "./gateway-error.js";
import type { CloudEvent, CloudEventAttributeValue } from "./cloudevent.js";

/**
 * CloudEvents JSON event format (spec `formats/json-format.md`) and HTTP binary mode (`bindings/http-protocol-binding.md`)
 * to and from the protobuf shape (`src/shared/cloudevent.ts`). Shared by the REST publish route and usable by clients.
 *
 * Choices where the specs leave room, stated once:
 * - Structured mode: `data` with a JSON `datacontenttype` (or none: the JSON format then implies `application/json`,
 *   which is set explicitly) is stored as its JSON text in `text_data`; with any other content type `data` must be a
 *   string and is stored as is. `data_base64` becomes `binary_data`. Both at once is an error.
 * - Binary mode: the body becomes `text_data` for textual content types (text/*, JSON, XML), `binary_data` otherwise;
 *   an empty body carries no data. `ce-*` values are percent-decoded; extensions from headers are strings.
 * - `time` must be an RFC 3339 timestamp and becomes `ce_timestamp`; `dataschema` becomes `ce_uri`.
 */

/** The JSON event format's own attributes (not extensions). */
const CORE = new Set(["id", "source", "specversion", "type", "data", "data_base64"]);
/** Optional attributes with a fixed type. */
const OPTIONAL = new Set(["datacontenttype", "dataschema", "subject", "time"]);
/** Extension attribute names: lower-case letters and digits (CloudEvents 1.0 "Attribute Naming Convention"). */
const ATTRIBUTE_NAME = /^[a-z0-9]+$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function bad(field: string, problem: string): GatewayError {
  return new GatewayError(Code.INVALID_ARGUMENT, `${field} ${problem}`);
}

function kind(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "an array" : `a ${typeof v}`;
}

/** True for JSON media types: `application/json`, `text/json`, `*\/*+json` (parameters ignored). */
export function isJsonContentType(ct: string): boolean {
  const t = ct.split(";")[0]!.trim().toLowerCase();
  return t === "application/json" || t === "text/json" || t.endsWith("+json");
}

/** True for media types whose bytes are text: text/*, JSON, XML, and charset-qualified types. */
export function isTextContentType(ct: string): boolean {
  const lower = ct.toLowerCase();
  const t = lower.split(";")[0]!.trim();
  return t.startsWith("text/") || isJsonContentType(t) || t === "application/xml" || t.endsWith("+xml") || /;\s*charset=/.test(lower);
}

/** A `ce_timestamp` from an RFC 3339 string; INVALID_ARGUMENT naming `field` otherwise. */
export function timestampOf(field: string, v: string): CloudEventAttributeValue {
  const ms = RFC3339.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms)) throw bad(field, `'${v}' is not an RFC 3339 timestamp`);
  const frac = /\.(\d+)/.exec(v)?.[1] ?? "";
  const nanos = frac ? Number(frac.slice(0, 9).padEnd(9, "0")) : 0;
  return { ce_timestamp: { seconds: String(Math.floor(ms / 1000)), nanos }, attr: "ce_timestamp" };
}

/** The proto attribute value for a named optional attribute or extension given as a string. */
function stringAttribute(name: string, v: string, field: string): CloudEventAttributeValue {
  if (name === "time") return timestampOf(field, v);
  if (name === "dataschema") return { ce_uri: v, attr: "ce_uri" };
  return { ce_string: v, attr: "ce_string" };
}

/**
 * A CloudEvent from its JSON event format (structured mode body, already parsed). INVALID_ARGUMENT naming the member
 * when a member has the wrong type. Missing `id`/`specversion` are left empty (publish fills them).
 */
export function cloudEventFromJson(obj: Record<string, unknown>, where = ""): CloudEvent {
  const f = (name: string): string => (where ? `${where}.${name}` : name);
  const str = (name: string): string => {
    const v = obj[name];
    if (v === undefined || v === null) return "";
    if (typeof v !== "string") throw bad(f(name), `must be a string, got ${kind(v)}`);
    return v;
  };
  const event: CloudEvent = { id: str("id"), source: str("source"), spec_version: str("specversion"), type: str("type"), attributes: {} };
  for (const [name, v] of Object.entries(obj)) {
    if (CORE.has(name) || v === null || v === undefined) continue;
    if (OPTIONAL.has(name)) {
      if (typeof v !== "string") throw bad(f(name), `must be a string, got ${kind(v)}`);
      event.attributes[name] = stringAttribute(name, v, f(name));
      continue;
    }
    if (!ATTRIBUTE_NAME.test(name)) throw bad(f(name), "is not a valid extension attribute name (lower-case letters and digits only)");
    if (typeof v === "string") event.attributes[name] = { ce_string: v, attr: "ce_string" };
    else if (typeof v === "boolean") event.attributes[name] = { ce_boolean: v, attr: "ce_boolean" };
    else if (typeof v === "number" && Number.isInteger(v) && v >= -2147483648 && v <= 2147483647) event.attributes[name] = { ce_integer: v, attr: "ce_integer" };
    else throw bad(f(name), `must be a string, a boolean or a 32-bit integer, got ${typeof v === "number" ? String(v) : kind(v)}`);
  }
  const hasData = obj["data"] !== undefined;
  const b64 = obj["data_base64"];
  if (hasData && b64 !== undefined && b64 !== null) throw bad(f("data"), "and data_base64 must not both be set");
  if (b64 !== undefined && b64 !== null) {
    if (typeof b64 !== "string" || !BASE64.test(b64.replace(/\s+/g, ""))) throw bad(f("data_base64"), "must be a base64 string");
    event.binary_data = Buffer.from(b64, "base64");
    event.data = "binary_data";
  } else if (hasData) {
    const ct = obj["datacontenttype"];
    const data = obj["data"];
    if (typeof ct !== "string") {
      event.attributes["datacontenttype"] = { ce_string: "application/json", attr: "ce_string" };
      event.text_data = JSON.stringify(data);
    } else if (isJsonContentType(ct)) {
      event.text_data = JSON.stringify(data);
    } else {
      if (typeof data !== "string") throw bad(f("data"), `must be a string when datacontenttype is ${ct} (send bytes as data_base64), got ${kind(data)}`);
      event.text_data = data;
    }
    event.data = "text_data";
  }
  return event;
}

/** Decode a `ce-*` header value (percent-encoded per the HTTP binding, section 3.1.3.2). */
function headerValue(header: string, v: string): string {
  if (!v.includes("%")) return v;
  try {
    return decodeURIComponent(v);
  } catch {
    throw bad(header, `is not valid percent-encoded UTF-8: ${v}`);
  }
}

/** Whether these (lower-case) headers carry a binary-mode CloudEvent. */
export function isBinaryMode(headers: Record<string, string>): boolean {
  for (const k of Object.keys(headers)) if (k.startsWith("ce-")) return true;
  return false;
}

/** A CloudEvent from HTTP binary mode: `ce-*` headers (lower-case names) and the body as data. */
export function cloudEventFromBinary(headers: Record<string, string>, body: Uint8Array): CloudEvent {
  const event: CloudEvent = { id: "", source: "", spec_version: "", type: "", attributes: {} };
  for (const [k, raw] of Object.entries(headers)) {
    if (!k.startsWith("ce-")) continue;
    const name = k.slice(3);
    const v = headerValue(k, raw);
    if (name === "id") event.id = v;
    else if (name === "source") event.source = v;
    else if (name === "specversion") event.spec_version = v;
    else if (name === "type") event.type = v;
    else if (name === "datacontenttype") throw bad(k, "must not be used: binary mode carries the content type in content-type");
    else if (!ATTRIBUTE_NAME.test(name)) throw bad(k, "does not name a valid attribute (lower-case letters and digits only)");
    else event.attributes[name] = stringAttribute(name, v, k);
  }
  const ct = headers["content-type"];
  if (ct) event.attributes["datacontenttype"] = { ce_string: ct, attr: "ce_string" };
  if (body.length > 0) {
    if (!ct || isTextContentType(ct)) {
      event.text_data = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");
      event.data = "text_data";
    } else {
      event.binary_data = body;
      event.data = "binary_data";
    }
  }
  return event;
}

function attributeJson(v: CloudEventAttributeValue): unknown {
  if (v.ce_boolean !== undefined && (v.attr === "ce_boolean" || v.attr === undefined)) return v.ce_boolean;
  if (v.ce_integer !== undefined && (v.attr === "ce_integer" || v.attr === undefined)) return v.ce_integer;
  if (v.ce_bytes !== undefined && (v.attr === "ce_bytes" || v.attr === undefined)) return Buffer.from(v.ce_bytes).toString("base64");
  if (v.ce_timestamp && (v.attr === "ce_timestamp" || v.attr === undefined)) {
    const ms = Number(v.ce_timestamp.seconds) * 1000;
    const iso = new Date(ms).toISOString();
    return v.ce_timestamp.nanos ? iso.replace(/\.\d{3}Z$/, `.${String(v.ce_timestamp.nanos).padStart(9, "0")}Z`) : iso.replace(".000Z", "Z");
  }
  return v.ce_string ?? v.ce_uri ?? v.ce_uri_ref ?? null;
}

/** The JSON event format of a CloudEvent (the inverse of cloudEventFromJson). `proto_data` becomes `data_base64` of the Any's bytes. */
export function cloudEventToJson(ce: CloudEvent): Record<string, unknown> {
  const out: Record<string, unknown> = { specversion: ce.spec_version, id: ce.id, source: ce.source, type: ce.type };
  for (const [name, v] of Object.entries(ce.attributes ?? {})) out[name] = attributeJson(v);
  const which = ce.data ?? (ce.text_data !== undefined ? "text_data" : ce.binary_data !== undefined ? "binary_data" : ce.proto_data ? "proto_data" : undefined);
  if (which === "text_data" && ce.text_data !== undefined) {
    const ct = typeof out["datacontenttype"] === "string" ? (out["datacontenttype"] as string) : "";
    if (isJsonContentType(ct)) {
      try {
        out["data"] = JSON.parse(ce.text_data);
      } catch {
        out["data"] = ce.text_data;
      }
    } else out["data"] = ce.text_data;
  } else if (which === "binary_data" && ce.binary_data) out["data_base64"] = Buffer.from(ce.binary_data).toString("base64");
  else if (which === "proto_data" && ce.proto_data) out["data_base64"] = Buffer.from(ce.proto_data.value).toString("base64");
  return out;
}
