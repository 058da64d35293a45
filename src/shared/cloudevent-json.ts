import { Code } from "./code.js";
import { GatewayError } from "./gateway-error.js";
import {
  attributeField,
  attributeFromJson,
  attributeNameProblem,
  attributeToJson,
  isJsonContentType,
  isTextContentType,
  RESERVED_ATTRIBUTE_NAMES,
  SPEC_VERSION,
  type CloudEvent,
  type CloudEventAttributeValue,
} from "./cloudevent.js";
import { echo } from "./echo.js";
import { decodeUtf8 } from "./utf8.js";


/**
 * CloudEvents JSON event format (CloudEvents spec `formats/json-format.md`) and HTTP binary mode (`bindings/http-protocol-binding.md`)
 * to and from the protobuf shape (`src/shared/cloudevent.ts`). Shared by the REST publish route and usable by clients.
 *
 * Choices where the specs leave room, stated once:
 * - Structured mode: `data` with a JSON `datacontenttype` (or none: the JSON format then implies `application/json`,
 *   which is set explicitly) is stored as its JSON text in `text_data`; with any other content type `data` must be a
 *   string and is stored as is. `data_base64` becomes `binary_data`. Both at once is an error.
 * - Binary mode: the body becomes `text_data` for textual content types (text/*, JSON, XML), `binary_data` otherwise;
 *   an empty body carries no data. `ce-*` values are percent-decoded; extensions from headers are strings.
 * - `time` must be an RFC 3339 timestamp of a time that exists (`./rfc3339.ts`) and becomes `ce_timestamp`;
 *   `dataschema` becomes `ce_uri`.
 * Attribute naming and typing and content-type classes are `./cloudevent.ts`, shared with the Dapr adapter and the
 * client library.
 */

/** The JSON event format's own members (not extensions): never read from, nor written from, the attributes map. */
const CORE: ReadonlySet<string> = RESERVED_ATTRIBUTE_NAMES;
/** Optional attributes with a fixed type. */
const OPTIONAL = new Set(["datacontenttype", "dataschema", "subject", "time"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function bad(field: string, problem: string): GatewayError {
  return new GatewayError(Code.INVALID_ARGUMENT, `${field} ${problem}`);
}

function kind(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" || typeof v === "undefined" ? `an ${typeof v}` : `a ${typeof v}`;
}

/** The proto attribute value for a named optional attribute or extension given as a string. */
function stringAttribute(name: string, v: string, field: string): CloudEventAttributeValue {
  const value = attributeFromJson(name, v);
  if (!value) throw bad(field, `'${echo(v)}' is not an RFC 3339 timestamp`);
  return value;
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
    const nameProblem = attributeNameProblem(name);
    if (nameProblem) throw bad(attributeField(where, name), nameProblem);
    const value = attributeFromJson(name, v);
    if (!value) throw bad(f(name), `must be a string, a boolean or a 32-bit integer, got ${typeof v === "number" ? String(v) : kind(v)}`);
    event.attributes[name] = value;
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
      event.attributes["datacontenttype"] = { ce_string: "application/json" };
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
    throw bad(header, `is not valid percent-encoded UTF-8: ${echo(v)}`);
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
    else {
      const nameProblem = attributeNameProblem(name);
      if (nameProblem) throw bad(attributeField("", k), nameProblem);
      event.attributes[name] = stringAttribute(name, v, k);
    }
  }
  const ct = headers["content-type"];
  if (ct) event.attributes["datacontenttype"] = { ce_string: ct };
  if (body.length > 0) {
    if (!ct || isTextContentType(ct)) {
      const decoded = decodeUtf8(body);
      if ("invalidAt" in decoded) throw bad("body", `is text (content-type ${echo(ct ?? "unset")}) but not valid UTF-8 (at byte offset ${decoded.invalidAt})`);
      event.text_data = decoded.text;
      event.data = "text_data";
    } else {
      event.binary_data = body;
      event.data = "binary_data";
    }
  }
  return event;
}

/**
 * The CloudEvents JSON format (`application/cloudevents+json`) of an in-process CloudEvent, with `datacontenttype`
 * always set (daprd delivers data of an unknown or missing content type as EMPTY bytes):
 * - binary_data: `data_base64`, default type application/octet-stream;
 * - text_data: a JSON value when the type is JSON and the text parses, the string when the type is text
 *   (default text/plain), otherwise `data_base64` of its UTF-8 bytes so nothing is lost;
 * - proto_data: `data_base64` of the message bytes, type application/protobuf, `dataschema` the type URL;
 * - no data: type application/json, no data member.
 * An attribute named as one of the format's own members (`id`, `data`, `data_base64`, ...) is left out: every front
 * refuses such names (attributeNameProblem), and an event that got past them anyway must not fake its own data.
 */
export function cloudEventToJson(event: CloudEvent): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(event.attributes ?? {})) {
    if (CORE.has(name)) continue;
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
