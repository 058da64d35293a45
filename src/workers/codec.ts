/**
 * Proto3 canonical JSON <-> protobuf binary for the message types of a compiled schema, on @bufbuild/protobuf
 * (chosen over protobufjs by measurement: bench/codec.ts, docs/conversion.md), with a compiled fast path in front
 * (fast-codec/: the library's exact output for the inputs it is sure of, the library itself for the rest). Runs on
 * the main thread for small payloads and in the workers for large ones; throws GatewayError only.
 */
import {
  fromBinary,
  fromJson,
  toBinary,
  toJson,
  toJsonString,
  type DescMessage,
  type FileRegistry,
  type JsonValue,
} from "@bufbuild/protobuf";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { fastBinaryToJson } from "./fast-codec/decode.js";
import { fastJsonToBinary } from "./fast-codec/encode.js";
import { hasSpecialJson, locateJsonProblem, locateTimestampProblem, reasonOf, type JsonProblem } from "./json-error-locator.js";
import { errorText } from "./schema-registry.js";

function messageType(registry: FileRegistry, typeName: string): DescMessage {
  const desc = registry.getMessage(typeName.startsWith(".") ? typeName.slice(1) : typeName);
  if (desc === undefined) throw new GatewayError(Code.NOT_FOUND, `message type ${typeName} is not in the schema`);
  return desc;
}

/**
 * Parse proto3 JSON text as `typeName` and encode it. Accepts lowerCamelCase and proto field names, 64-bit integers
 * as strings or numbers, enum names or numbers, standard or URL-safe base64 with or without padding, "NaN" and
 * "Infinity", null as unset, and the well-known types' JSON forms (Any resolved through `registry`).
 * @throws GatewayError INVALID_ARGUMENT naming the field path and the problem; NOT_FOUND for an unknown type.
 */
export function jsonToBinary(registry: FileRegistry, typeName: string, json: string): Uint8Array {
  const desc = messageType(registry, typeName);
  let value: JsonValue;
  try {
    value = JSON.parse(json) as JsonValue;
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `malformed JSON for ${desc.typeName}: ${errorText(e)}`);
  }
  return encodeJsonValue(registry, desc, value);
}

/** Like jsonToBinary, for a JSON value that is already parsed (e.g. the REST `requestData` object). */
export function jsonValueToBinary(registry: FileRegistry, typeName: string, value: JsonValue): Uint8Array {
  return encodeJsonValue(registry, messageType(registry, typeName), value);
}

function encodeJsonValue(registry: FileRegistry, desc: DescMessage, value: JsonValue): Uint8Array {
  // The compiled fast path (fast-codec/) writes the same bytes for the inputs it is sure of; for anything else
  // (including every invalid input) it returns undefined and the library below decides, errors included.
  const fast = fastJsonToBinary(desc, value);
  if (fast !== undefined) return fast;
  // Top-level Timestamp, wrappers, Value, ... have their special JSON forms; every other message is an object.
  if (!hasSpecialJson(desc.typeName) && (typeof value !== "object" || value === null || Array.isArray(value))) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `JSON for ${desc.typeName} must be an object, got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`);
  }
  let message;
  try {
    message = fromJson(desc, value, { registry });
  } catch (e) {
    const found = locateJsonProblem(desc, value, registry);
    if (found === undefined) throw new GatewayError(Code.INVALID_ARGUMENT, `invalid ${desc.typeName}: ${reasonOf(e)}`);
    throw problemError(desc, found);
  }
  // The library took every Timestamp its pattern matches; one naming a day that does not exist is refused here.
  if (canHoldTimestamp(desc)) {
    const found = locateTimestampProblem(desc, value, registry, canHoldTimestamp);
    if (found !== undefined) throw problemError(desc, found);
  }
  try {
    return toBinary(desc, message);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `${desc.typeName} cannot be encoded: ${errorText(e)}`);
  }
}

function canHoldTimestamp(desc: DescMessage): boolean {
  return reaches(desc, "google.protobuf.Timestamp") || reaches(desc, "google.protobuf.Any");
}

function problemError(desc: DescMessage, found: JsonProblem): GatewayError {
  if (found.path === "") {
    const text = found.problem.startsWith("invalid ") ? found.problem : `invalid ${desc.typeName}: ${found.problem}`;
    return new GatewayError(Code.INVALID_ARGUMENT, text);
  }
  const sep = found.problem.startsWith("is ") || found.problem.startsWith("names ") ? " " : ": ";
  return new GatewayError(Code.INVALID_ARGUMENT, `field "${found.path}"${sep}${found.problem}`);
}

/**
 * Decode `bytes` as `typeName` and write proto3 canonical JSON: lowerCamelCase (or json_name) keys, 64-bit integers
 * as strings, enum names, standard base64, fields with implicit presence omitted when default.
 * @throws GatewayError DATA_LOSS when the bytes are not a valid message; NOT_FOUND for an unknown type; INTERNAL when
 *   the message has no JSON form (e.g. an Any whose type is not in the schema).
 */
export function binaryToJson(registry: FileRegistry, typeName: string, bytes: Uint8Array): string {
  const desc = messageType(registry, typeName);
  // The compiled fast path writes the same text; it gives up (undefined) on anything it is not sure of, including
  // an Any or an "@type" key (the reordering below).
  const fast = fastBinaryToJson(desc, bytes);
  if (fast !== undefined) return fast;
  let message;
  try {
    message = fromBinary(desc, bytes);
  } catch (e) {
    throw new GatewayError(Code.DATA_LOSS, `binary data is not a valid ${desc.typeName}: ${errorText(e)}`);
  }
  try {
    const json = toJsonString(desc, message, { registry });
    // Only an object with an "@type" key (a set Any, or a map key "@type") needs the reordering pass; an escaped
    // string value cannot contain the quoted token.
    if (!reaches(desc, "google.protobuf.Any") || !json.includes('"@type"')) return json;
    return JSON.stringify(typeFirst(toJson(desc, message, { registry })));
  } catch (e) {
    throw new GatewayError(Code.INTERNAL, `${desc.typeName} cannot be written as JSON: ${errorText(e)}`);
  }
}

// Whether a message type can contain a message of a given type (Any, Timestamp), cached per descriptor.
const reach = new Map<string, WeakMap<DescMessage, boolean>>();

function reaches(desc: DescMessage, typeName: string): boolean {
  let known = reach.get(typeName);
  if (known === undefined) reach.set(typeName, (known = new WeakMap()));
  const hit = known.get(desc);
  if (hit !== undefined) return hit;
  // A walk over every type `desc` reaches (a cycle's types are visited once), answered for `desc` alone: an answer
  // cached for a type met inside a cycle could miss what the rest of the cycle reaches.
  const seen = new Set<DescMessage>();
  const todo = [desc];
  let found = false;
  while (!found && todo.length > 0) {
    const d = todo.pop()!;
    if (seen.has(d)) continue;
    seen.add(d);
    found = d.typeName === typeName;
    for (const f of d.fields) {
      const child = f.fieldKind === "message" ? f.message : f.fieldKind === "list" || f.fieldKind === "map" ? f.message : undefined;
      if (child !== undefined) todo.push(child);
    }
  }
  known.set(desc, found);
  return found;
}

/**
 * The library writes an Any's "@type" after its fields; every other implementation (and the proto3 JSON mapping's examples) puts
 * it first, which is also where a reader looks for it. Rebuild objects holding "@type" with it first.
 */
function typeFirst(v: JsonValue): JsonValue {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = typeFirst(v[i]!);
    return v;
  }
  if (typeof v !== "object" || v === null) return v;
  const type = v["@type"];
  const out: { [k: string]: JsonValue } = type === undefined ? v : { "@type": type };
  for (const [k, child] of Object.entries(v)) if (k !== "@type" || type === undefined) out[k] = typeFirst(child);
  return out;
}
