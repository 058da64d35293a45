import { create } from "@bufbuild/protobuf";
import { anyPack, anyUnpack, BytesValueSchema, StringValueSchema } from "@bufbuild/protobuf/wkt";
import type { Any__Output } from "../../gen/dapr/google/protobuf/Any.js";
import type { Struct } from "../../gen/dapr/google/protobuf/Struct.js";
import type { Value } from "../../gen/dapr/google/protobuf/Value.js";

/**
 * Conversions between JavaScript values and the protobuf well-known types Dapr uses (google.protobuf.Struct/Value
 * in proto-loader's shape, and google.protobuf.Any wrapping a StringValue for job data).
 */

/**
 * A google.protobuf.Value as proto-loader presents it (`kind` names the set member), the generated type. protobufjs
 * serves the well-known types from its built-in definitions, whose field names stay camelCase whatever `keepCase`
 * says, and src/gen/dapr describes exactly that.
 */
export type ProtoValue = Value;

/** A google.protobuf.Struct. */
export type ProtoStruct = Struct;

/** A google.protobuf.Any (proto-loader keeps `type_url` snake_case). */
export type ProtoAny = Any__Output;

/** Struct -> plain object. */
export function structToObject(s: ProtoStruct | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = valueToJs(v);
  return out;
}

/** Value -> plain JSON value. */
export function valueToJs(v: ProtoValue): unknown {
  // Decoded values name their member in `kind`; values built in code (objectToStruct) do not.
  const kind = v.kind ?? (["stringValue", "numberValue", "boolValue", "structValue", "listValue"] as const).find((k) => v[k] !== undefined);
  switch (kind) {
    case "stringValue":
      return v.stringValue;
    case "numberValue":
      return v.numberValue;
    case "boolValue":
      return v.boolValue;
    case "structValue":
      return structToObject(v.structValue);
    case "listValue":
      return (v.listValue?.values ?? []).map(valueToJs);
    default:
      return null;
  }
}

/** Plain object -> Struct (undefined members are left out). */
export function objectToStruct(o: Record<string, unknown>): ProtoStruct {
  const fields: Record<string, ProtoValue> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) fields[k] = jsToValue(v);
  return { fields };
}

/** Plain JSON value -> Value. */
export function jsToValue(v: unknown): ProtoValue {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(jsToValue) } };
  if (typeof v === "object") return { structValue: objectToStruct(v as Record<string, unknown>) };
  return { stringValue: String(v) };
}

/** Wrap text in an Any holding a google.protobuf.StringValue (how Dapr SDKs send string job data). */
export function packString(text: string): ProtoAny {
  const any = anyPack(StringValueSchema, create(StringValueSchema, { value: text }));
  return { type_url: any.typeUrl, value: Buffer.from(any.value) };
}

/**
 * Text of an Any: StringValue / BytesValue are unwrapped (field 1); any other type's bytes are read as UTF-8
 * (daprd hands HTTP-scheduled JSON data over that way). A missing Any, or a StringValue / BytesValue whose bytes do
 * not decode, is "".
 */
export function unpackString(any: ProtoAny | null | undefined): string {
  if (!any || !any.value || any.value.length === 0) return "";
  const packed = { $typeName: "google.protobuf.Any", typeUrl: any.type_url, value: any.value } as const;
  try {
    const text = anyUnpack(packed, StringValueSchema)?.value;
    if (text !== undefined) return text;
    const bytes = anyUnpack(packed, BytesValueSchema)?.value;
    if (bytes !== undefined) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  } catch {
    return "";
  }
  return Buffer.from(any.value).toString("utf8");
}
