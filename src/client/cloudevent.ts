import { randomUUID } from "node:crypto";
import {
  attributeField,
  attributeFromValue,
  attributeNameProblem,
  attributeToValue,
  isJsonContentType,
  SPEC_VERSION,
  type AttributeInput,
  type CloudEvent as ProtoCloudEvent,
  type CloudEventAttributeValue,
} from "../shared/cloudevent.js";
import { invalidArgument } from "./errors.js";

/**
 * The client's two spellings of a CloudEvent over the gateway's one CloudEvents module (`src/shared/cloudevent.ts`):
 * attribute names, attribute typing and RFC 3339 times (to the nanosecond) follow the same rules as the gateway's
 * REST publish, so an event the client accepts is one the gateway accepts. Every attribute name, whether an extension
 * property or a key of an explicit `attributes` map, passes the gateway's one name rule (`attributeNameProblem`:
 * lower-case letters and digits, 1 to 64, not one of the event's own member names such as `id` or `data_base64`)
 * before anything is sent, and is refused naming the field as the gateway does (`attributeField`).
 */

// The shared shapes, part of the client's public API (AttributeInput: what an attribute or extension may be given as).
export type { ProtoCloudEvent, CloudEventAttributeValue, AttributeInput };

/**
 * An event to publish, in either of two spellings (they may be mixed):
 * - the CloudEvents JSON / `cloudevents` SDK form: `{id, source, type, specversion, datacontenttype, data, ...extensions}`
 *   (a `new CloudEvent({...})` from the SDK is accepted as is);
 * - the wire form: `{id, source, spec_version, type, attributes, text_data | binary_data}`.
 * `id` defaults to a random UUID and `specversion` to "1.0". `data` that is a string becomes `text_data`, bytes become
 * `binary_data`, anything else is JSON-encoded into `text_data` (with `datacontenttype` "application/json" unless
 * given). Every other property is an extension attribute.
 */
export interface CloudEventInput {
  id?: string;
  source: string;
  type?: string;
  specversion?: string;
  spec_version?: string;
  datacontenttype?: string;
  dataschema?: string;
  subject?: string;
  time?: string | Date;
  data?: unknown;
  data_base64?: string;
  attributes?: Record<string, AttributeInput>;
  text_data?: string;
  binary_data?: Uint8Array;
  [extension: string]: unknown;
}

/** Properties that are not attributes (or are mapped to the message's own fields). */
const RESERVED = new Set(["id", "source", "type", "specversion", "spec_version", "data", "data_base64", "attributes", "text_data", "binary_data", "proto_data", "data_oneof"]);
/**
 * Encode one attribute value in the wire form; `name` picks URI/timestamp types for the well-known attributes. A
 * `time` string must be RFC 3339 (as the gateway requires); a Date is taken to the millisecond.
 */
export function toAttributeValue(name: string, v: AttributeInput): CloudEventAttributeValue {
  const r = attributeFromValue(name, v);
  if ("problem" in r) throw invalidArgument(`cloudevent.${name}`, r.problem);
  return r;
}

/**
 * Decode one wire attribute value to a plain JS value: bytes as Uint8Array, timestamps as RFC 3339 UTC text in the
 * `toISOString` style (three fraction digits) extended to six or nine digits when the time has them, so nanoseconds
 * survive.
 */
export function fromAttributeValue(v: CloudEventAttributeValue): string | number | boolean | Uint8Array | undefined {
  return attributeToValue(v, "millis");
}

/** The string value of an attribute of a wire event (any member stringified), or undefined when absent. */
export function attributeString(ev: ProtoCloudEvent, name: string): string | undefined {
  const v = ev.attributes?.[name];
  if (!v) return undefined;
  const plain = fromAttributeValue(v);
  if (plain === undefined) return undefined;
  return plain instanceof Uint8Array ? Buffer.from(plain).toString("utf8") : String(plain);
}

/** Convert a plain object or an SDK CloudEvent to the wire form. Throws INVALID_ARGUMENT for an unusable shape. */
export function toProtoCloudEvent(input: CloudEventInput): ProtoCloudEvent {
  if (typeof input !== "object" || input === null) throw invalidArgument("cloudevent", "must be an object");
  const e = { ...input } as Record<string, unknown>;
  const attributes: Record<string, CloudEventAttributeValue> = {};
  const given = e["attributes"];
  if (given !== undefined) {
    if (typeof given !== "object" || given === null) throw invalidArgument("cloudevent.attributes", "must be an object");
    for (const [k, v] of Object.entries(given as Record<string, AttributeInput>)) {
      // Before the assignment: an own `__proto__` key (JSON.parse makes one) would otherwise set the map's prototype.
      const nameProblem = attributeNameProblem(k);
      if (nameProblem) throw invalidArgument(attributeField("cloudevent.attributes", k), nameProblem);
      attributes[k] = toAttributeValue(k, v);
    }
  }
  for (const [k, v] of Object.entries(e)) {
    if (RESERVED.has(k) || v === undefined || v === null || typeof v === "function") continue;
    const nameProblem = attributeNameProblem(k);
    if (nameProblem) throw invalidArgument(attributeField("cloudevent", k), nameProblem);
    attributes[k] = toAttributeValue(k, v as AttributeInput);
  }
  const str = (field: string, dflt: string): string => {
    const v = e[field];
    if (v === undefined || v === null) return dflt;
    if (typeof v !== "string") throw invalidArgument(`cloudevent.${field}`, `must be a string (got ${typeof v})`);
    return v;
  };
  const out: ProtoCloudEvent = {
    id: str("id", "") || randomUUID(),
    // The gateway validates source (required, absolute URI); the client passes it through so errors read as the gateway reports them.
    source: str("source", ""),
    spec_version: str("spec_version", "") || str("specversion", "") || SPEC_VERSION,
    type: str("type", ""),
    attributes,
  };
  const data = e["data"];
  if (e["binary_data"] !== undefined) {
    if (!(e["binary_data"] instanceof Uint8Array)) throw invalidArgument("cloudevent.binary_data", "must be bytes");
    out.binary_data = e["binary_data"];
  } else if (e["text_data"] !== undefined) {
    out.text_data = str("text_data", "");
  } else if (typeof e["data_base64"] === "string") {
    const b64 = e["data_base64"];
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(b64)) throw invalidArgument("cloudevent.data_base64", "must be base64 text");
    out.binary_data = Buffer.from(b64, "base64");
  } else if (data instanceof Uint8Array) {
    out.binary_data = data;
  } else if (typeof data === "string") {
    out.text_data = data;
  } else if (data !== undefined && data !== null) {
    try {
      out.text_data = JSON.stringify(data);
    } catch (err) {
      throw invalidArgument("cloudevent.data", `cannot be serialized as JSON: ${(err as Error).message}`);
    }
    attributes["datacontenttype"] ??= { ce_string: "application/json" };
  }
  return out;
}

/** A received event in the CloudEvents JSON form (the shape `new CloudEvent(...)` of the SDK accepts). */
export interface CloudEventJson {
  id: string;
  source: string;
  type: string;
  specversion: string;
  datacontenttype?: string;
  /** JSON-decoded when the content type is JSON, the text otherwise; bytes for binary data. */
  data?: unknown;
  /** Every other attribute and extension, decoded. */
  [attribute: string]: unknown;
}

/** Convert a received wire event to the CloudEvents JSON form: attributes flattened, JSON data decoded. */
export function fromProtoCloudEvent(ev: ProtoCloudEvent): CloudEventJson {
  const out: CloudEventJson = { id: ev.id, source: ev.source, type: ev.type, specversion: ev.spec_version || SPEC_VERSION };
  for (const [k, v] of Object.entries(ev.attributes ?? {})) {
    const plain = fromAttributeValue(v);
    if (plain !== undefined) out[k] = plain;
  }
  const data = eventData(ev);
  if (data !== undefined) out.data = data;
  return out;
}

/**
 * The payload of a received wire event: JSON-decoded text when the content type is JSON (or absent and the text
 * parses), the text otherwise, bytes for binary data, undefined when the event has none.
 */
export function eventData(ev: ProtoCloudEvent): unknown {
  if (ev.binary_data && (ev.data === "binary_data" || ev.data === undefined) && ev.binary_data.length > 0) return ev.binary_data;
  const text = ev.text_data;
  if (text === undefined || text === null || (ev.data !== undefined && ev.data !== "text_data")) return undefined;
  const ct = attributeString(ev, "datacontenttype");
  if (ct === undefined || isJsonContentType(ct)) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      if (ct !== undefined) return text;
    }
  }
  return text;
}
