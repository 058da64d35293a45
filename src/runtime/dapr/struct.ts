/**
 * Conversions between JavaScript values and the protobuf well-known types Dapr uses (google.protobuf.Struct/Value
 * in proto-loader's shape, and google.protobuf.Any wrapping a StringValue for job data).
 */

/**
 * A google.protobuf.Value as proto-loader presents it (`kind` names the set member). protobufjs serves the
 * well-known types from its built-in definitions, whose field names stay camelCase whatever `keepCase` says.
 */
export interface ProtoValue {
  nullValue?: string | number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: ProtoStruct;
  listValue?: { values?: ProtoValue[] };
  kind?: string;
}

/** A google.protobuf.Struct. */
export interface ProtoStruct {
  fields?: Record<string, ProtoValue>;
}

/** A google.protobuf.Any. */
export interface ProtoAny {
  type_url: string;
  value: Uint8Array;
}

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

const STRING_VALUE = "type.googleapis.com/google.protobuf.StringValue";
const BYTES_VALUE = "type.googleapis.com/google.protobuf.BytesValue";

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** Wrap text in an Any holding a google.protobuf.StringValue (how Dapr SDKs send string job data). */
export function packString(text: string): ProtoAny {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length === 0) return { type_url: STRING_VALUE, value: Buffer.alloc(0) };
  return { type_url: STRING_VALUE, value: Buffer.concat([Buffer.from([0x0a, ...varint(bytes.length)]), bytes]) };
}

/**
 * Text of an Any: StringValue / BytesValue are unwrapped (field 1); any other type's bytes are read as UTF-8
 * (daprd hands HTTP-scheduled JSON data over that way). A missing Any is "".
 */
export function unpackString(any: ProtoAny | null | undefined): string {
  if (!any || !any.value || any.value.length === 0) return "";
  const buf = Buffer.from(any.value);
  if (any.type_url === STRING_VALUE || any.type_url === BYTES_VALUE) {
    if (buf[0] !== 0x0a) return "";
    let len = 0;
    let shift = 0;
    let i = 1;
    for (; i < buf.length; i++) {
      const b = buf[i]!;
      len += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if ((b & 0x80) === 0) {
        i++;
        break;
      }
    }
    return buf.subarray(i, i + len).toString("utf8");
  }
  return buf.toString("utf8");
}
