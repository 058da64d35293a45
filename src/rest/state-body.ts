import { rfc3339ToTimestamp } from "../shared/rfc3339.js";
import { attributeField, attributeNameProblem, type CloudEvent, type CloudEventAttributeValue } from "../shared/cloudevent.js";
import { cloudEventFromJson as cloudEventFromJsonFormat } from "../shared/cloudevent-json.js";
import { invalidArgument } from "../shared/gateway-error.js";
import type { ChangeInput, SaveStateInput } from "../ops/state-types.js";
import { echo } from "../shared/echo.js";

/*
 * REST bodies to the ops inputs (SaveStateInput, ChangeInput: generated proto-loader types, ops/state-types.ts).
 * Parsed by hand rather than with @bufbuild/protobuf's `fromJson`: that yields @bufbuild's object shape (camelCase
 * fields, oneofs as `{case, value}`, int64 as bigint, bytes as Uint8Array), not the proto-loader shape every op,
 * the broker and grpc-js's codec take, so a second conversion would follow; and its errors do not name the field
 * the way the gateway's do (`change.cloudevent.attributes.x.ce_integer must be ...`). The CloudEvents JSON format
 * (`specversion`, `data_base64`) is not proto3 JSON at all (shared/cloudevent-json.ts).
 */

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function kind(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

/** Field names accepted in a JSON body: the proto's snake_case name and its camelCase form. */
function camel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** Read fields of a JSON object by snake_case name (camelCase accepted), rejecting unknown fields. */
class Fields {
  constructor(
    private readonly obj: Json,
    private readonly where: string,
    allowed: readonly string[],
  ) {
    const known = new Set(allowed.flatMap((n) => [n, camel(n)]));
    for (const k of Object.keys(obj)) {
      if (!known.has(k)) throw invalidArgument(this.name(echo(k)), `is not a known field; expected one of ${allowed.join(", ")}`);
    }
  }
  name(field: string): string {
    return this.where ? `${this.where}.${field}` : field;
  }
  raw(field: string): unknown {
    const v = this.obj[field];
    return v === undefined ? this.obj[camel(field)] : v;
  }
  string(field: string): string | undefined {
    const v = this.raw(field);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string") throw invalidArgument(this.name(field), `must be a string, got ${kind(v)}`);
    return v;
  }
  bool(field: string): boolean | undefined {
    const v = this.raw(field);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "boolean") throw invalidArgument(this.name(field), `must be a boolean, got ${kind(v)}`);
    return v;
  }
  bytes(field: string): Buffer | undefined {
    const s = this.string(field);
    if (s === undefined) return undefined;
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(s)) throw invalidArgument(this.name(field), "must be base64 text");
    return Buffer.from(s, "base64");
  }
}

const ATTR_MEMBERS = ["ce_boolean", "ce_integer", "ce_string", "ce_bytes", "ce_uri", "ce_uri_ref", "ce_timestamp"] as const;

function timestampOf(v: unknown, where: string): { seconds: string; nanos: number } {
  if (typeof v === "string") {
    const ts = rfc3339ToTimestamp(v);
    if (!ts) throw invalidArgument(where, `'${echo(v)}' is not an RFC 3339 timestamp`);
    return ts;
  }
  if (isObject(v)) {
    const f = new Fields(v, where, ["seconds", "nanos"]);
    const seconds = f.raw("seconds") ?? 0;
    const nanos = f.raw("nanos") ?? 0;
    if (!(typeof seconds === "number" && Number.isInteger(seconds)) && !(typeof seconds === "string" && /^-?\d+$/.test(seconds))) {
      throw invalidArgument(`${where}.seconds`, "must be an integer");
    }
    if (typeof nanos !== "number" || !Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999) throw invalidArgument(`${where}.nanos`, "must be an integer 0-999999999");
    return { seconds: String(seconds), nanos };
  }
  throw invalidArgument(where, `must be an RFC 3339 string or {seconds, nanos}, got ${kind(v)}`);
}

/** One attribute value: `{ce_string: "x"}` (or any other member), or a bare string / boolean / integer. */
function attributeOf(v: unknown, where: string): CloudEventAttributeValue {
  if (typeof v === "string") return { ce_string: v, attr: "ce_string" };
  if (typeof v === "boolean") return { ce_boolean: v, attr: "ce_boolean" };
  if (typeof v === "number") {
    if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) throw invalidArgument(where, "must be a 32-bit integer when given as a number");
    return { ce_integer: v, attr: "ce_integer" };
  }
  if (!isObject(v)) throw invalidArgument(where, `must be an attribute value object such as {"ce_string": "..."}, got ${kind(v)}`);
  const f = new Fields(v, where, ATTR_MEMBERS);
  const set = ATTR_MEMBERS.filter((m) => f.raw(m) !== undefined && f.raw(m) !== null);
  if (set.length !== 1) throw invalidArgument(where, `must set exactly one of ${ATTR_MEMBERS.join(", ")}`);
  const m = set[0]!;
  switch (m) {
    case "ce_boolean":
      return { ce_boolean: f.bool(m)!, attr: m };
    case "ce_integer": {
      const n = f.raw(m);
      if (typeof n !== "number" || !Number.isInteger(n) || n < -(2 ** 31) || n >= 2 ** 31) throw invalidArgument(f.name(m), "must be a 32-bit integer");
      return { ce_integer: n, attr: m };
    }
    case "ce_bytes":
      return { ce_bytes: f.bytes(m)!, attr: m };
    case "ce_timestamp":
      return { ce_timestamp: timestampOf(f.raw(m), f.name(m)), attr: m };
    default:
      return { [m]: f.string(m)!, attr: m };
  }
}

const EVENT_FIELDS = ["id", "source", "spec_version", "type", "attributes", "binary_data", "text_data", "proto_data"] as const;

/**
 * A CloudEvent from its protobuf-JSON form: `{id, source, spec_version, type, attributes: {name: value},
 * text_data | binary_data (base64) | proto_data {type_url, value (base64)}}`; camelCase names accepted.
 */
export function cloudEventFromJson(v: unknown, where: string): CloudEvent {
  if (!isObject(v)) throw invalidArgument(where, `must be an object, got ${kind(v)}`);
  const f = new Fields(v, where, EVENT_FIELDS);
  const event: CloudEvent = {
    id: f.string("id") ?? "",
    source: f.string("source") ?? "",
    spec_version: f.string("spec_version") ?? "",
    type: f.string("type") ?? "",
    attributes: {},
  };
  const attrs = f.raw("attributes");
  if (attrs !== undefined && attrs !== null) {
    if (!isObject(attrs)) throw invalidArgument(f.name("attributes"), `must be an object map, got ${kind(attrs)}`);
    for (const [k, a] of Object.entries(attrs)) {
      // Before the assignment: a `__proto__` key (an own member of parsed JSON) would otherwise vanish into the
      // object's prototype, and `data` would fake the event's data where it is written in the JSON format.
      const field = attributeField(f.name("attributes"), k);
      const nameProblem = attributeNameProblem(k);
      if (nameProblem) throw invalidArgument(field, nameProblem);
      event.attributes[k] = attributeOf(a, field);
    }
  }
  const data = (["text_data", "binary_data", "proto_data"] as const).filter((m) => f.raw(m) !== undefined && f.raw(m) !== null);
  if (data.length > 1) throw invalidArgument(where, `must set at most one of text_data, binary_data, proto_data (got ${data.join(", ")})`);
  if (data[0] === "text_data") event.text_data = f.string("text_data")!;
  if (data[0] === "binary_data") event.binary_data = f.bytes("binary_data")!;
  if (data[0] === "proto_data") {
    const p = f.raw("proto_data");
    if (!isObject(p)) throw invalidArgument(f.name("proto_data"), `must be an object {type_url, value}, got ${kind(p)}`);
    const pf = new Fields(p, f.name("proto_data"), ["type_url", "value"]);
    event.proto_data = { type_url: pf.string("type_url") ?? "", value: pf.bytes("value") ?? Buffer.alloc(0) };
  }
  if (data[0]) event.data = data[0];
  return event;
}

/**
 * A ChangeNotification from JSON `{topic?, cloudevent?}`. The cloudevent is either in the CloudEvents JSON format
 * (as `POST /v1/pubsub/{topic}` takes it; recognised by its required `specversion` member) or in the protobuf JSON
 * form of `io.cloudevents.v1.CloudEvent` (`spec_version`, `attributes`, `text_data`, ...).
 */
export function changeFromJson(v: unknown, where = "change"): ChangeInput | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw invalidArgument(where, `must be an object {topic, cloudevent}, got ${kind(v)}`);
  const f = new Fields(v, where, ["topic", "cloudevent"]);
  const ce = f.raw("cloudevent");
  return {
    topic: f.string("topic") ?? "",
    cloudevent:
      ce === undefined || ce === null
        ? null
        : isObject(ce) && "specversion" in ce
          ? cloudEventFromJsonFormat(ce, f.name("cloudevent"))
          : cloudEventFromJson(ce, f.name("cloudevent")),
  };
}

/** The body of `POST /v1/state/save-state`: SaveStateRequest fields in snake_case (camelCase accepted). */
export function saveStateFromJson(body: Json): SaveStateInput {
  const f = new Fields(body, "", ["service", "key", "value", "etag", "publish_change", "include_value", "change"]);
  const change = changeFromJson(f.raw("change"));
  return {
    service: f.string("service") ?? "",
    key: f.string("key") ?? "",
    value: f.string("value") ?? "",
    etag: f.string("etag") ?? "",
    publish_change: f.bool("publish_change") ?? false,
    include_value: f.bool("include_value") ?? false,
    ...(change ? { change } : {}),
  };
}

/** Optional JSON body of the DELETE routes: `{change?}` (other fields come from the query string). */
export function deleteBodyFromJson(body: Json): { change?: ChangeInput } {
  const f = new Fields(body, "", ["change"]);
  const change = changeFromJson(f.raw("change"));
  return change ? { change } : {};
}
