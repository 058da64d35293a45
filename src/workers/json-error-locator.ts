/**
 * Finds where a JSON value fails to convert to a message, as a field path ("items[0].unitPrice.units") and a
 * problem text. @bufbuild/protobuf reports only the failing field's declaration, not where it is in the input, so
 * after a failed conversion the codec walks the JSON alongside the descriptors and probes each part with the
 * library's own reader: the reported problems are exactly the library's, but named by path, plus a Timestamp naming
 * a date that does not exist, which the library rolls over (locateTimestampProblem, run after the library accepted
 * a type that can hold a Timestamp). Only runs off the fast path, so it may be slow.
 */
import { fromJson, type DescField, type DescMessage, type JsonValue, type Registry } from "@bufbuild/protobuf";
import { parseRfc3339 } from "../shared/rfc3339.js";
import { WRAPPER_TYPE_NAMES } from "./fast-codec/common.js";

/** Where a conversion failed and why. `path` is empty for the root message. */
export interface JsonProblem {
  readonly path: string;
  readonly problem: string;
}

// Well-known types with a special JSON form: probed as a whole, never walked field by field.
const specialJson = new Set([
  "google.protobuf.Timestamp",
  "google.protobuf.Duration",
  "google.protobuf.FieldMask",
  "google.protobuf.Struct",
  "google.protobuf.Value",
  "google.protobuf.ListValue",
  ...WRAPPER_TYPE_NAMES,
]);

/** Whether `typeName` is a well-known type whose JSON form is not an object (a string, number, array, ...). */
export function hasSpecialJson(typeName: string): boolean {
  return specialJson.has(typeName);
}

/** The library's reason without its "cannot decode field x.y.Z from JSON:" prefix. */
export function reasonOf(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  const m = /^cannot decode (field|enum|message|oneof) (\S+) from JSON:? ?(.*)$/s.exec(text);
  if (m === null) return text;
  const [, kind, name, raw] = m as unknown as [string, string, string, string];
  // Bare values (the library's formatVal) read better as "got X".
  const rest = /^(".*"|-?[\d.e+-]+|true|false|null|object|Array|array)$/s.test(raw) && kind !== "enum" ? `got ${raw}` : raw;
  const range = /^expected (?:bigint|number) \((\w+)\): (.*) out of range$/s.exec(rest);
  if (range !== null) return `expected ${range[1]}, got ${range[2]}`;
  if (kind === "enum") return `${rest} is not a value of enum ${name}`;
  if (kind === "message" && specialJson.has(name)) return `invalid ${name}: ${rest}`;
  return rest;
}

/**
 * The library takes any date-time its pattern matches and rolls a day that does not exist over (2024-02-30 becomes 1
 * March); the gateway's one RFC 3339 parser refuses it, as everywhere else.
 */
function impossibleTimestamp(desc: DescMessage, json: unknown): string | undefined {
  if (desc.typeName !== "google.protobuf.Timestamp" || typeof json !== "string" || parseRfc3339(json) !== undefined) return undefined;
  return `invalid google.protobuf.Timestamp: ${JSON.stringify(json)} is not a date-time that exists`;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return "an object";
  return `${typeof v} ${JSON.stringify(v)}`;
}

function child(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function probe(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (e) {
    return reasonOf(e);
  }
}

function isObject(v: unknown): v is Record<string, JsonValue> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Locate the first problem converting `json` to `desc`, or undefined when the library accepts it.
 * @param path the path of `json` in the whole input ("" for the root).
 */
export function locateJsonProblem(desc: DescMessage, json: unknown, registry: Registry, path = ""): JsonProblem | undefined {
  const opts = { registry };
  if (specialJson.has(desc.typeName)) {
    const problem = probe(() => fromJson(desc, json as JsonValue, opts)) ?? impossibleTimestamp(desc, json);
    return problem === undefined ? undefined : { path, problem };
  }
  if (!isObject(json)) {
    return { path, problem: `must be a JSON object (${desc.typeName}), got ${describe(json)}` };
  }
  if (desc.typeName === "google.protobuf.Any") return locateAny(json, registry, path);
  const byName = new Map<string, DescField>();
  for (const f of desc.fields) {
    byName.set(f.jsonName, f);
    byName.set(f.name, f);
  }
  const seen = new Map<DescField, string>();
  const oneofs = new Map<string, string>();
  for (const [key, value] of Object.entries(json)) {
    const field = byName.get(key);
    const at = child(path, key);
    if (field === undefined) return { path: at, problem: `is not a field of ${desc.typeName}` };
    const twice = seen.get(field);
    if (twice !== undefined) return { path: at, problem: `is set twice (as "${twice}" and "${key}")` };
    seen.set(field, key);
    if (value === null) continue;
    if (field.oneof !== undefined) {
      const other = oneofs.get(field.oneof.name);
      if (other !== undefined) return { path: at, problem: `cannot be set with "${other}": both belong to oneof ${field.oneof.name}` };
      oneofs.set(field.oneof.name, key);
    }
    const found = locateField(desc, field, key, value, registry, at);
    if (found !== undefined) return found;
  }
  // Every field converts on its own: the problem is between fields (a oneof or a field set twice).
  const problem = probe(() => fromJson(desc, json, opts));
  return problem === undefined ? undefined : { path, problem };
}

function locateField(
  desc: DescMessage,
  field: DescField,
  key: string,
  value: JsonValue,
  registry: Registry,
  at: string,
): JsonProblem | undefined {
  const opts = { registry };
  const probeField = (v: JsonValue): string | undefined => probe(() => fromJson(desc, { [key]: v }, opts));
  switch (field.fieldKind) {
    case "message":
      return locateJsonProblem(field.message, value, registry, at);
    case "list":
      if (!Array.isArray(value)) return { path: at, problem: `must be a JSON array, got ${describe(value)}` };
      for (let i = 0; i < value.length; i++) {
        const item = value[i]!;
        const itemAt = `${at}[${i}]`;
        if (item === null) return { path: itemAt, problem: "list item must not be null" };
        const found =
          field.listKind === "message"
            ? locateJsonProblem(field.message, item, registry, itemAt)
            : problemAt(itemAt, probeField([item]));
        if (found !== undefined) return found;
      }
      return undefined;
    case "map":
      if (!isObject(value)) return { path: at, problem: `must be a JSON object (map), got ${describe(value)}` };
      for (const [k, v] of Object.entries(value)) {
        const entryAt = `${at}[${JSON.stringify(k)}]`;
        const keyProblem = probeField({ [k]: field.mapKind === "message" ? {} : zeroOf(field) });
        if (keyProblem !== undefined) return { path: entryAt, problem: keyProblem };
        if (v === null) return { path: entryAt, problem: "map value must not be null" };
        const found =
          field.mapKind === "message"
            ? locateJsonProblem(field.message, v, registry, entryAt)
            : problemAt(entryAt, probeField({ [k]: v }));
        if (found !== undefined) return found;
      }
      return undefined;
    default:
      return problemAt(at, probeField(value));
  }
}

// A value of the map's value type that always converts, to test a map key on its own.
function zeroOf(field: DescField & { fieldKind: "map" }): JsonValue {
  if (field.mapKind === "enum") return 0;
  switch (field.scalar) {
    case 8: // bool
      return false;
    case 9: // string
    case 12: // bytes
      return "";
    default:
      return 0;
  }
}

function problemAt(path: string, problem: string | undefined): JsonProblem | undefined {
  return problem === undefined ? undefined : { path, problem: problem.replace(/^(list item #\d+|map entry "[^"]*"): /, "") };
}

function locateAny(json: Record<string, JsonValue>, registry: Registry, path: string): JsonProblem | undefined {
  const typeUrl = json["@type"];
  if (typeof typeUrl !== "string" || typeUrl === "") {
    return { path: child(path, "@type"), problem: "is required in a google.protobuf.Any and must be a type URL string" };
  }
  const name = typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
  const inner = registry.getMessage(name);
  if (inner === undefined) return { path: child(path, "@type"), problem: `names ${name}, which is not in the schema` };
  if (specialJson.has(inner.typeName) || inner.typeName === "google.protobuf.Any") {
    for (const k of Object.keys(json)) {
      if (k !== "@type" && k !== "value") return { path: child(path, k), problem: `is not a field of ${inner.typeName} in an Any (use "value")` };
    }
    return locateJsonProblem(inner, json["value"] ?? null, registry, child(path, "value"));
  }
  const rest: Record<string, JsonValue> = {};
  for (const [k, v] of Object.entries(json)) if (k !== "@type") rest[k] = v;
  return locateJsonProblem(inner, rest, registry, path);
}

/**
 * The first Timestamp in `json` (which the library accepted as `desc`, so every shape is right) that names a date-time
 * that does not exist, or undefined. `canHold(type)` says whether a message type can contain a Timestamp (directly or
 * through an Any): the walk enters only those fields.
 */
export function locateTimestampProblem(
  desc: DescMessage,
  json: unknown,
  registry: Registry,
  canHold: (type: DescMessage) => boolean,
  path = "",
): JsonProblem | undefined {
  if (desc.typeName === "google.protobuf.Timestamp") return problemAt(path, impossibleTimestamp(desc, json));
  if (!isObject(json) || !canHold(desc)) return undefined; // null, or a well-known type's own JSON form: no Timestamp inside
  if (desc.typeName === "google.protobuf.Any") {
    const typeUrl = String(json["@type"]);
    const inner = registry.getMessage(typeUrl.slice(typeUrl.lastIndexOf("/") + 1));
    if (inner === undefined) return undefined;
    if (specialJson.has(inner.typeName) || inner.typeName === "google.protobuf.Any") return locateTimestampProblem(inner, json["value"], registry, canHold, child(path, "value"));
    return locateTimestampProblem(inner, json, registry, canHold, path);
  }
  const byName = fieldsByName(desc);
  for (const [key, value] of Object.entries(json)) {
    const field = byName.get(key);
    // No field: an Any's "@type". A field whose type cannot hold a Timestamp is not entered.
    if (field === undefined || value === null || field.message === undefined || !canHold(field.message)) continue;
    const at = child(path, key);
    let found: JsonProblem | undefined;
    if (field.fieldKind === "message") found = locateTimestampProblem(field.message, value, registry, canHold, at);
    else if (field.fieldKind === "list" && Array.isArray(value)) {
      for (let i = 0; i < value.length && found === undefined; i++) found = locateTimestampProblem(field.message, value[i], registry, canHold, `${at}[${i}]`);
    } else if (field.fieldKind === "map" && isObject(value)) {
      for (const [k, v] of Object.entries(value)) {
        found = locateTimestampProblem(field.message, v, registry, canHold, `${at}[${JSON.stringify(k)}]`);
        if (found !== undefined) break;
      }
    }
    if (found !== undefined) return found;
  }
  return undefined;
}

// A message's fields by JSON and proto name, per descriptor.
const fieldMaps = new WeakMap<DescMessage, Map<string, DescField>>();

function fieldsByName(desc: DescMessage): Map<string, DescField> {
  let byName = fieldMaps.get(desc);
  if (byName === undefined) {
    byName = new Map();
    for (const f of desc.fields) byName.set(f.jsonName, f).set(f.name, f);
    fieldMaps.set(desc, byName);
  }
  return byName;
}
