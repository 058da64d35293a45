import { attributeFromJson, isTextContentType, SPEC_VERSION, type CloudEvent, type CloudEventAttributeValue } from "../../shared/cloudevent.js";
import type { TopicEventRequest__Output } from "../../gen/dapr/dapr/proto/runtime/v1/TopicEventRequest.js";
import { structToObject, type ProtoStruct } from "./struct.js";

/**
 * `TopicEventRequest` as daprd sends it on a streaming subscription (the generated proto-loader type); `extensions`
 * may also be a Struct built in code, or absent.
 */
export type TopicEventRequest = Omit<TopicEventRequest__Output, "extensions"> & { extensions?: ProtoStruct | null };

const PROTOBUF_TYPES = new Set(["application/protobuf", "application/x-protobuf"]);

/**
 * The in-process CloudEvent of an event daprd delivered: `extensions` become attributes (typed back: booleans,
 * 32-bit integers, `time` as a timestamp, `dataschema` as a URI, the rest strings), `datacontenttype` is kept, and
 * the data bytes become text_data for text/JSON/XML types, proto_data for protobuf with a dataschema, else binary_data.
 */
export function fromTopicEvent(req: TopicEventRequest): CloudEvent {
  const attributes: Record<string, CloudEventAttributeValue> = {};
  for (const [name, value] of Object.entries(structToObject(req.extensions))) {
    if (value === null || value === undefined) continue;
    // Typed as the JSON format types them; anything else (a number past 32 bits, an object, a time that is not
    // RFC 3339) is kept as its text rather than dropped.
    attributes[name] = attributeFromJson(name, value) ?? { ce_string: typeof value === "string" ? value : typeof value === "number" ? String(value) : JSON.stringify(value) };
  }
  const ct = req.data_content_type ?? "";
  if (ct) attributes["datacontenttype"] = { ce_string: ct };
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
