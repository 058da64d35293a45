/**
 * JSON Schemas (OpenAPI 3.1 dialect) of messages in their proto3 JSON form, as the gateway's converter reads and writes
 * them: lowerCamel member names (the proto name in `x-proto-name`), 64-bit integers as strings, bytes as base64,
 * enums by name, maps as objects, and the well-known types in their own JSON forms. Messages become components
 * referenced by `$ref`, so recursive messages are finite.
 */
import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { leadingComment } from "./comments.js";

/** A JSON Schema object (open: OpenAPI 3.1 allows any JSON Schema 2020-12 keyword). */
export type JsonSchema = Record<string, unknown>;

/** The component every error reply uses: google.rpc.Status in its JSON form, as the REST routes answer errors. */
export const ERROR_SCHEMA_NAME = "google.rpc.Status";

export const ERROR_SCHEMA: JsonSchema = {
  type: "object",
  description: "An error: the gRPC status code (number), a message saying what was wrong, and details (google.protobuf.Any values).",
  properties: {
    code: { type: "integer", format: "int32", description: "The gRPC status code, e.g. 5 for NOT_FOUND." },
    message: { type: "string" },
    details: { type: "array", items: { $ref: "#/components/schemas/google.protobuf.Any" } },
  },
  required: ["code", "message"],
};

export const ANY_SCHEMA_NAME = "google.protobuf.Any";

export const ANY_SCHEMA: JsonSchema = {
  type: "object",
  description: "google.protobuf.Any: `@type` names the message, the other members are its JSON form (or `value` for a well-known type).",
  properties: { "@type": { type: "string" } },
  required: ["@type"],
  additionalProperties: true,
};

const INT32: JsonSchema = { type: "integer", format: "int32" };
const UINT32: JsonSchema = { type: "integer", format: "uint32", minimum: 0 };

function scalarSchema(t: ScalarType): JsonSchema {
  switch (t) {
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { ...INT32 };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { ...UINT32 };
    // proto3 JSON writes 64-bit integers as decimal strings (numbers are accepted on input).
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: "string", format: "int64", pattern: "^-?[0-9]+$" };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "string", format: "uint64", pattern: "^[0-9]+$" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte", contentEncoding: "base64" };
  }
}

const WRAPPED: Record<string, ScalarType> = {
  "google.protobuf.DoubleValue": ScalarType.DOUBLE,
  "google.protobuf.FloatValue": ScalarType.FLOAT,
  "google.protobuf.Int64Value": ScalarType.INT64,
  "google.protobuf.UInt64Value": ScalarType.UINT64,
  "google.protobuf.Int32Value": ScalarType.INT32,
  "google.protobuf.UInt32Value": ScalarType.UINT32,
  "google.protobuf.BoolValue": ScalarType.BOOL,
  "google.protobuf.StringValue": ScalarType.STRING,
  "google.protobuf.BytesValue": ScalarType.BYTES,
};

/** The JSON form of a well-known message type, or undefined for any other message. */
export function wellKnownSchema(typeName: string): JsonSchema | undefined {
  switch (typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time", description: "RFC 3339, e.g. 2024-01-02T03:04:05.678Z (google.protobuf.Timestamp)." };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$", description: "Seconds with up to nine fractional digits and an `s`, e.g. 1.5s (google.protobuf.Duration)." };
    case "google.protobuf.FieldMask":
      return { type: "string", description: "Comma-separated lowerCamel field paths, e.g. title,author (google.protobuf.FieldMask)." };
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true, description: "Any JSON object (google.protobuf.Struct)." };
    case "google.protobuf.Value":
      return { description: "Any JSON value (google.protobuf.Value)." };
    case "google.protobuf.ListValue":
      return { type: "array", items: {}, description: "Any JSON array (google.protobuf.ListValue)." };
    case "google.protobuf.Empty":
      return { type: "object", additionalProperties: false, description: "An empty object (google.protobuf.Empty)." };
    case "google.protobuf.Any":
      return { $ref: "#/components/schemas/google.protobuf.Any" };
  }
  const w = WRAPPED[typeName];
  if (w === undefined) return undefined;
  const s = scalarSchema(w);
  return { ...s, type: [s["type"], "null"], description: `${typeName}: the wrapped value itself; null or absent when unset.` };
}

/** Builds component schemas on demand: `message(m)` gives a `$ref` and queues the message (and what it reaches). */
export class SchemaCollector {
  /** Component name -> schema. */
  readonly components = new Map<string, JsonSchema>();
  private readonly pending: DescMessage[] = [];

  /** `prefix` is prepended to every component name (the combined document uses it when two backends disagree). */
  constructor(private readonly prefix = "") {}

  /** The component name of a message or enum. */
  nameOf(typeName: string): string {
    return this.prefix + typeName;
  }

  /** A `$ref` to a message's schema (a well-known type's JSON form inline). */
  message(m: DescMessage): JsonSchema {
    const wkt = wellKnownSchema(m.typeName);
    if (wkt) {
      if (m.typeName === ANY_SCHEMA_NAME) this.components.set(ANY_SCHEMA_NAME, ANY_SCHEMA);
      return wkt;
    }
    const name = this.nameOf(m.typeName);
    if (!this.components.has(name)) {
      this.components.set(name, {}); // reserved now: a recursive reference ends here
      this.pending.push(m);
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** A `$ref` to an enum's schema (NullValue is JSON null). */
  enumRef(e: DescEnum): JsonSchema {
    if (e.typeName === "google.protobuf.NullValue") return { type: "null" };
    const name = this.nameOf(e.typeName);
    if (!this.components.has(name)) {
      const values = e.values.map((v) => v.name);
      const lines = e.values.map((v) => {
        const c = leadingComment(v);
        return c ? `- ${v.name} (${v.number}): ${c}` : `- ${v.name} (${v.number})`;
      });
      const doc = leadingComment(e);
      this.components.set(name, {
        type: "string",
        enum: values,
        description: `${doc ? doc + "\n\n" : ""}${e.typeName}, by name (the number is accepted on input too):\n${lines.join("\n")}`,
      });
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** The schema of one value of a field (the element of a list, the value of a map). */
  private single(f: DescField): JsonSchema {
    switch (f.fieldKind) {
      case "scalar":
        return scalarSchema(f.scalar);
      case "enum":
        return this.enumRef(f.enum);
      case "message":
        return this.message(f.message);
      case "list":
        if (f.listKind === "scalar") return scalarSchema(f.scalar);
        if (f.listKind === "enum") return this.enumRef(f.enum);
        return this.message(f.message);
      case "map":
        if (f.mapKind === "scalar") return scalarSchema(f.scalar);
        if (f.mapKind === "enum") return this.enumRef(f.enum);
        return this.message(f.message);
    }
  }

  /** A field's schema with its comment and proto name. */
  field(f: DescField): JsonSchema {
    let s: JsonSchema;
    if (f.fieldKind === "list") s = { type: "array", items: this.single(f) };
    else if (f.fieldKind === "map") {
      s = { type: "object", additionalProperties: this.single(f), "x-proto-map-key": ScalarType[f.mapKey].toLowerCase() };
    } else s = { ...this.single(f) };
    const parts: string[] = [];
    const c = leadingComment(f);
    if (c) parts.push(c);
    if (f.oneof) parts.push(`Part of oneof ${f.oneof.name}: set at most one of ${f.oneof.fields.map((x) => x.jsonName).join(", ")}.`);
    if (typeof s["description"] === "string") parts.push(s["description"]);
    if (parts.length > 0) s["description"] = parts.join("\n\n");
    s["x-proto-name"] = f.name;
    if (f.deprecated) s["deprecated"] = true;
    return s;
  }

  /** The object schema of a message's fields, minus the top-level fields named in `omit` (proto names). */
  objectOf(m: DescMessage, omit: ReadonlySet<string> = new Set()): JsonSchema {
    const properties: Record<string, JsonSchema> = {};
    for (const f of m.fields) if (!omit.has(f.name)) properties[f.jsonName] = this.field(f);
    const s: JsonSchema = { type: "object", properties };
    const doc = leadingComment(m);
    s["description"] = doc ? `${doc}\n\n(${m.typeName})` : m.typeName;
    if (m.oneofs.length > 0) s["x-proto-oneofs"] = Object.fromEntries(m.oneofs.map((o) => [o.name, o.fields.map((x) => x.jsonName)]));
    return s;
  }

  /** Queue `messages` and their nested messages, reached or not. */
  fileMessages(messages: readonly DescMessage[]): void {
    for (const m of messages) {
      this.message(m);
      this.fileMessages(m.nestedMessages);
    }
  }

  /** Fill in every queued message. Bounded by the number of messages in the registry. */
  drain(): void {
    for (let m = this.pending.shift(); m; m = this.pending.shift()) this.components.set(this.nameOf(m.typeName), this.objectOf(m));
  }
}
