import { attributeMember, type CloudEvent, type CloudEventAttributeValue } from "../../shared/cloudevent.js";
import { cloudEventFromJson, cloudEventToJson } from "../../shared/cloudevent-json.js";

/**
 * What the CloudEvents JSON form cannot say about an in-process event, kept in the member `_gw` (an underscore is
 * never part of an attribute name, so it cannot clash): which data member was set (`k`), whether the `data`
 * discriminator was (`d`), the attributes the JSON form added (`a`: a default datacontenttype, the proto dataschema),
 * and attributes whose proto type JSON does not carry (`t`: bytes, uri-refs, URIs other than dataschema).
 */
interface Hint {
  k?: "text_data" | "proto_data" | "binary_data";
  d?: 1;
  a?: string[];
  t?: Record<string, "ce_bytes" | "ce_uri" | "ce_uri_ref">;
}

/**
 * A stream entry's text: the event in the CloudEvents JSON format (readable by any Redis client), with the data as
 * `data_base64` of its exact bytes, plus the `_gw` hint, so `decodeEvent` gives back an event equal to the one encoded.
 */
export function encodeEvent(event: CloudEvent): string {
  const json = cloudEventToJson(event);
  const hint: Hint = {};
  const kind = event.data ?? (event.binary_data ? "binary_data" : event.text_data !== undefined ? "text_data" : event.proto_data ? "proto_data" : undefined);
  if (event.data) hint.d = 1;
  delete json["data"];
  delete json["data_base64"];
  if (kind === "text_data") json["data_base64"] = Buffer.from(event.text_data ?? "", "utf8").toString("base64");
  else if (kind === "binary_data") json["data_base64"] = Buffer.from(event.binary_data ?? []).toString("base64");
  else if (kind === "proto_data") json["data_base64"] = Buffer.from(event.proto_data?.value ?? []).toString("base64");
  if (kind) hint.k = kind;
  if (kind === "proto_data") json["_gwtype"] = event.proto_data?.type_url ?? "";
  const added = ["datacontenttype", "dataschema"].filter((n) => json[n] !== undefined && event.attributes?.[n] === undefined);
  if (added.length > 0) hint.a = added;
  for (const [name, v] of Object.entries(event.attributes ?? {})) {
    const m = attributeMember(v);
    if (m === "ce_bytes" || m === "ce_uri_ref" || (m === "ce_uri" && name !== "dataschema")) (hint.t ??= {})[name] = m;
  }
  json["_gw"] = hint;
  return JSON.stringify(json);
}

/** The event of a stream entry's text written by `encodeEvent`. Throws on text it did not write. */
export function decodeEvent(text: string): CloudEvent {
  const json = JSON.parse(text) as Record<string, unknown>;
  const hint = (json["_gw"] ?? {}) as Hint;
  const typeUrl = json["_gwtype"];
  delete json["_gw"];
  delete json["_gwtype"];
  const typed: Record<string, unknown> = {};
  for (const name of Object.keys(hint.t ?? {})) {
    typed[name] = json[name];
    delete json[name];
  }
  const event = cloudEventFromJson(json);
  for (const [name, member] of Object.entries(hint.t ?? {})) {
    const raw = String(typed[name] ?? "");
    const value: CloudEventAttributeValue = member === "ce_bytes" ? { ce_bytes: Buffer.from(raw, "base64") } : { [member]: raw };
    event.attributes[name] = value;
  }
  for (const name of hint.a ?? []) delete event.attributes[name];
  const bytes = event.binary_data ?? Buffer.alloc(0);
  delete event.binary_data;
  delete event.data;
  if (hint.k === "text_data") event.text_data = Buffer.from(bytes).toString("utf8");
  else if (hint.k === "proto_data") event.proto_data = { type_url: typeof typeUrl === "string" ? typeUrl : "", value: bytes };
  else if (hint.k === "binary_data") event.binary_data = bytes;
  if (hint.d && hint.k) event.data = hint.k;
  return event;
}
