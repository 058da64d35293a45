/**
 * Compiled JSON -> protobuf binary: walks the parsed JSON value and writes the wire bytes directly, without building
 * a @bufbuild/protobuf message first. One writer per message type, generated on first use (a `switch` on the JSON key,
 * then the field writers in number order) and kept on the descriptor (a WeakMap, so a schema's writers go when its
 * registry does).
 *
 * Output is byte for byte what `toBinary(desc, fromJson(desc, value))` writes: fields in field-number order, implicit
 * fields skipped when zero (-0.0 is written, as the library does), proto3 `optional` and oneof members written when
 * present, packed repeated scalars, map entries with key then value in the object's key order. Anything the library
 * would reject, or accepts through a rule not copied here (numeric strings like "1e2", whitespace in base64, a null
 * oneof member, Any, FieldMask, ...), throws BAIL and codec.ts runs the library instead.
 */
import type { DescEnum, DescField, DescMessage, JsonValue } from "@bufbuild/protobuf";
import { bail, DURATION_SECONDS_MAX, enumSupported, IMPLICIT, MAX_DEPTH, messageKind, S, wireTypeOf, KindWriterCache } from "./common.js";
import { parseRfc3339, TIMESTAMP_MAX_SECONDS, TIMESTAMP_MIN_SECONDS } from "../../shared/rfc3339.js";
import {
  byte,
  bytes2,
  double,
  finishBytes,
  fixed32,
  fixed64 as fixed64Words,
  float,
  fork,
  int32,
  join,
  raw,
  releaseBytes,
  sfixed32,
  startBytes,
  string,
  varint32,
  varint64,
} from "./wire-out.js";

// ---------------------------------------------------------------------------------------------------------------
// Scalars: parse (accept exactly what the library accepts, or bail), zero test, write.
// ---------------------------------------------------------------------------------------------------------------

/** A parsed scalar: number, boolean, string, bigint (64-bit past 2^53) or Uint8Array (bytes). */
type Val = number | boolean | string | bigint | Uint8Array;

interface ScalarCodec {
  parse(json: JsonValue): Val;
  isZero(v: Val): boolean;
  write(v: Val): void;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;
const int32Text = /^(0|-?[1-9][0-9]{0,9})$/;
const uint32Text = /^(0|[1-9][0-9]{0,9})$/;
const int64Text = /^-?[0-9]{1,20}$/;
const uint64Text = /^[0-9]{1,20}$/;

function parseFloat64(json: JsonValue): number {
  if (typeof json === "number") return json;
  if (json === "NaN") return NaN;
  if (json === "Infinity") return Infinity;
  if (json === "-Infinity") return -Infinity;
  return bail(); // numeric strings ("1.5") are accepted by the library through rules not copied here
}

function parseInt32(json: JsonValue, min: number, max: number, text: RegExp): number {
  let n: number;
  if (typeof json === "number") n = json;
  else if (typeof json === "string" && text.test(json)) n = Number(json);
  else return bail();
  if (!Number.isInteger(n) || n < min || n > max) bail();
  return n;
}

function parseInt64(json: JsonValue, unsigned: boolean): number | bigint {
  let big: bigint;
  if (typeof json === "number") {
    if (!Number.isInteger(json)) bail();
    if (Number.isSafeInteger(json)) {
      if (unsigned && json < 0) bail();
      return json;
    }
    big = BigInt(json);
  } else if (typeof json === "string" && (unsigned ? uint64Text : int64Text).test(json)) {
    if (json.length <= 15) return Number(json);
    big = BigInt(json);
  } else {
    return bail();
  }
  if (unsigned ? big < 0n || big > UINT64_MAX : big < INT64_MIN || big > INT64_MAX) bail();
  return big;
}

let lo = 0;
let hi = 0;

/** Split a 64-bit integer (number within 2^53, or bigint) into two's complement words lo/hi. */
function split64(v: number | bigint): void {
  if (typeof v === "number") {
    lo = v >>> 0;
    hi = Math.floor(v / 4294967296) | 0;
  } else {
    lo = Number(BigInt.asUintN(32, v)) | 0;
    hi = Number(BigInt.asIntN(32, v >> 32n));
  }
}

function fixed64(v: number | bigint): void {
  split64(v);
  fixed64Words(lo, hi);
}

const B64 = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) B64["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".charCodeAt(i)] = i;
B64["-".charCodeAt(0)] = 62;
B64["_".charCodeAt(0)] = 63;

/**
 * Standard or URL-safe base64, padded or not: the strict form of what the library's decoder accepts. Whitespace,
 * inner padding and other oddities it tolerates bail.
 */
function parseBase64(s: string): Uint8Array {
  let len = s.length;
  if (len > 0 && len % 4 === 0 && s.charCodeAt(len - 1) === 61) len -= s.charCodeAt(len - 2) === 61 ? 2 : 1;
  if (len % 4 === 1) bail();
  const out = new Uint8Array((len * 3) >> 2);
  let o = 0;
  for (let i = 0; i < len; i += 4) {
    const a = sextet(s, i);
    const b = sextet(s, i + 1);
    out[o++] = (a << 2) | (b >> 4);
    if (i + 2 < len) {
      const c = sextet(s, i + 2);
      out[o++] = ((b & 15) << 4) | (c >> 2);
      if (i + 3 < len) out[o++] = ((c & 3) << 6) | sextet(s, i + 3);
    }
  }
  return out;
}

function sextet(s: string, i: number): number {
  const c = s.charCodeAt(i);
  const v = c < 128 ? B64[c]! : -1;
  if (v < 0) bail();
  return v;
}

const isNumZero = (v: Val): boolean => v === 0;
const isFloatZero = (v: Val): boolean => Object.is(v, 0);

function scalarCodec(scalar: number): ScalarCodec {
  switch (scalar) {
    case S.DOUBLE:
      return {
        parse: parseFloat64,
        isZero: isFloatZero,
        write: (v) => double(v as number),
      };
    case S.FLOAT:
      return {
        parse(json) {
          const v = parseFloat64(json);
          if (!Number.isFinite(Math.fround(v)) && Number.isFinite(v)) bail(); // out of float range: the library says so
          return v;
        },
        isZero: isFloatZero,
        write: (v) => float(v as number),
      };
    case S.INT32:
      return { parse: (j) => parseInt32(j, -0x80000000, 0x7fffffff, int32Text), isZero: isNumZero, write: (v) => int32(v as number) };
    case S.SINT32:
      return {
        parse: (j) => parseInt32(j, -0x80000000, 0x7fffffff, int32Text),
        isZero: isNumZero,
        write: (v) => varint32((((v as number) << 1) ^ ((v as number) >> 31)) >>> 0),
      };
    case S.SFIXED32:
      return {
        parse: (j) => parseInt32(j, -0x80000000, 0x7fffffff, int32Text),
        isZero: isNumZero,
        write: (v) => sfixed32(v as number),
      };
    case S.UINT32:
      return { parse: (j) => parseInt32(j, 0, 0xffffffff, uint32Text), isZero: isNumZero, write: (v) => varint32(v as number) };
    case S.FIXED32:
      return {
        parse: (j) => parseInt32(j, 0, 0xffffffff, uint32Text),
        isZero: isNumZero,
        write: (v) => fixed32(v as number),
      };
    case S.INT64:
    case S.UINT64:
      return {
        parse: (j) => parseInt64(j, scalar === S.UINT64),
        isZero: (v) => v === 0 || v === 0n,
        write(v) {
          split64(v as number | bigint);
          varint64(lo, hi);
        },
      };
    case S.SINT64:
      return {
        parse: (j) => parseInt64(j, false),
        isZero: (v) => v === 0 || v === 0n,
        write(v) {
          split64(v as number | bigint);
          const sign = hi >> 31;
          varint64((lo << 1) ^ sign, ((hi << 1) | (lo >>> 31)) ^ sign);
        },
      };
    case S.FIXED64:
    case S.SFIXED64:
      return {
        parse: (j) => parseInt64(j, scalar === S.FIXED64),
        isZero: (v) => v === 0 || v === 0n,
        write: (v) => fixed64(v as number | bigint),
      };
    case S.BOOL:
      return {
        parse: (j) => (typeof j === "boolean" ? j : bail()),
        isZero: (v) => v === false,
        write: (v) => byte(v ? 1 : 0),
      };
    case S.STRING:
      return { parse: (j) => (typeof j === "string" ? j : bail()), isZero: (v) => v === "", write: (v) => string(v as string) };
    case S.BYTES:
      return {
        parse: (j) => (typeof j === "string" ? parseBase64(j) : bail()),
        isZero: (v) => (v as Uint8Array).length === 0,
        write(v) {
          const b = v as Uint8Array;
          varint32(b.length);
          raw(b);
        },
      };
    default:
      throw new Error(`unknown scalar type ${scalar}`);
  }
}

function enumCodec(e: DescEnum): ScalarCodec {
  // The library's lookup: JSON names first, then proto names (a proto name wins a clash).
  const numbers = new Map<string, number>();
  for (const v of e.values) numbers.set(v.jsonName, v.number);
  for (const v of e.values) numbers.set(v.name, v.number);
  const zero = e.values[0]!.number;
  return {
    parse(json) {
      if (typeof json === "string") {
        const n = numbers.get(json);
        return n === undefined ? bail() : n;
      }
      if (typeof json === "number" && Number.isInteger(json) && json >= -0x80000000 && json <= 0x7fffffff) return json;
      return bail();
    },
    isZero: (v) => v === zero,
    write: (v) => int32(v as number),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------------------------------

/** Writes a message body (no tag, no length) for a JSON value; bails on anything it is not sure of. */
type BodyWriter = (json: JsonValue, depth: number) => void;

/** This direction's body writers: per well-known kind (function declarations below, hoisted), and compiled ones. */
const bodyWriters = new KindWriterCache<BodyWriter>({
  timestamp: writeTimestamp,
  duration: writeDuration,
  struct: writeStruct,
  value: writeValue,
  listValue: writeListValue,
  wrapper: wrapperWriter,
  plain: compileMessage,
});

/** Whether fieldWriter() handles a field (decided from the descriptors alone, before any writer compiles). */
function supported(f: DescField): boolean {
  if (f.message !== undefined) return messageKind(f.message) !== "slow";
  if (f.enum !== undefined) return enumSupported(f.enum);
  return true;
}

/**
 * Generate the body writer of a plain message: a loop over the object's keys with a `switch` on the key (the
 * library's key table: proto name and JSON name per field), one local per field, the oneof checks, then each present
 * field's writer in field-number order (each call site always calls the same writer).
 */
function compileMessage(desc: DescMessage): BodyWriter {
  const sorted = desc.fields.concat().sort((a, b) => a.number - b.number);
  // The library's key table: proto name then JSON name per field, in declaration order (a later entry wins a clash).
  const byKey = new Map<string, DescField>();
  for (const f of desc.fields) byKey.set(f.name, f).set(f.jsonName, f);
  const keysOf = new Map<DescField, string[]>();
  for (const [k, f] of byKey) keysOf.set(f, [...(keysOf.get(f) ?? []), k]);
  const cases: string[] = [];
  const writes: string[] = [];
  const oneofs = new Map<unknown, number[]>();
  for (let i = 0; i < sorted.length; i++) {
    const f = sorted[i]!;
    const keys = keysOf.get(f);
    if (keys === undefined) continue; // every key of this field is taken by another field: the library's table too
    const labels = keys.map((k) => `case ${JSON.stringify(k)}:`).join(" ");
    if (!supported(f)) {
      cases.push(`${labels} bail();`); // Any, FieldMask, ...: present means the library's path
      continue;
    }
    cases.push(`${labels} if (v${i} !== undefined || (v${i} = json[key]) === undefined) bail(); break;`);
    writes.push(`if (v${i} !== undefined) W[${i}](v${i}, depth);`);
    if (f.oneof !== undefined) oneofs.set(f.oneof, [...(oneofs.get(f.oneof) ?? []), i]);
  }
  // At most one member per oneof; a null member (other than a Value's null) still counts as setting the oneof in the
  // library, without a value: leave those rules to it.
  const oneofChecks = [...oneofs.values()].map((members) => {
    const parts = members.map((i) => {
      const f = sorted[i]!;
      const nullIsValue = f.fieldKind === "message" && f.message.typeName === "google.protobuf.Value";
      return `if (v${i} !== undefined) { ${nullIsValue ? "" : `if (v${i} === null) bail(); `}n++; }`;
    });
    return `{ let n = 0; ${parts.join(" ")} if (n > 1) bail(); }`;
  });
  const locals = sorted.map((_, i) => `v${i}`).join(", ");
  const source = `"use strict";
return function write(json, depth) {
  if (depth > ${MAX_DEPTH} || typeof json !== "object" || json === null || Array.isArray(json)) bail();
  const keys = Object.keys(json);
  if (keys.length === 0) return;
  ${locals === "" ? "" : `let ${locals};`}
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    switch (key) {
      ${cases.join("\n      ")}
      default: bail();
    }
  }
  ${oneofChecks.join("\n  ")}
  ${writes.join("\n  ")}
};`;
  const W: ((json: JsonValue, depth: number) => void)[] = [];
  const writer = new Function("bail", "W", source)(bail, W) as BodyWriter;
  // Registered before the field writers compile, so recursive types find it.
  bodyWriters.addPlain(desc, writer);
  for (let i = 0; i < sorted.length; i++) {
    const f = sorted[i]!;
    if (supported(f)) W[i] = fieldWriter(f) ?? bail;
  }
  return writer;
}

/** The writer of one field (tag included), or null when the field's type is not handled. */
function fieldWriter(f: DescField): ((json: JsonValue, depth: number) => void) | null {
  switch (f.fieldKind) {
    case "scalar":
    case "enum": {
      if (f.fieldKind === "enum" && !enumSupported(f.enum)) return null;
      const c = f.fieldKind === "enum" ? enumCodec(f.enum) : scalarCodec(f.scalar);
      const tag = f.number * 8 + (f.fieldKind === "enum" ? 0 : wireTypeOf(f.scalar));
      // Implicit presence: null and zero are not written. Explicit presence (optional, oneof): written when not null.
      const implicit = f.presence === IMPLICIT && f.oneof === undefined;
      return (json) => {
        if (json === null) return;
        const v = c.parse(json);
        if (implicit && c.isZero(v)) return;
        varint32(tag);
        c.write(v);
      };
    }
    case "message": {
      const body = bodyWriters.of(f.message);
      if (body === null) return null;
      const tag = f.number * 8 + 2;
      const isValue = f.message.typeName === "google.protobuf.Value";
      return (json, depth) => {
        if (json === null && !isValue) return; // null unsets a message field (a Value field takes null as its value)
        varint32(tag);
        fork();
        body(json, depth + 1);
        join();
      };
    }
    case "list": {
      if (f.listKind === "message") {
        const body = bodyWriters.of(f.message);
        if (body === null) return null;
        const tag = f.number * 8 + 2;
        const nullOk = f.message.typeName === "google.protobuf.Value";
        return (json, depth) => {
          if (json === null) return;
          if (!Array.isArray(json)) bail();
          for (let i = 0; i < json.length; i++) {
            const item = json[i]!;
            if (item === null && !nullOk) bail();
            varint32(tag);
            fork();
            body(item, depth + 1);
            join();
          }
        };
      }
      if (f.listKind === "enum" && !enumSupported(f.enum)) return null;
      const c = f.listKind === "enum" ? enumCodec(f.enum) : scalarCodec(f.scalar);
      if (f.packed) {
        const tag = f.number * 8 + 2;
        return (json) => {
          if (json === null) return;
          if (!Array.isArray(json)) bail();
          if (json.length === 0) return;
          varint32(tag);
          fork();
          for (let i = 0; i < json.length; i++) {
            const item = json[i]!;
            if (item === null) bail();
            c.write(c.parse(item));
          }
          join();
        };
      }
      const tag = f.number * 8 + (f.listKind === "enum" ? 0 : wireTypeOf(f.scalar));
      return (json) => {
        if (json === null) return;
        if (!Array.isArray(json)) bail();
        for (let i = 0; i < json.length; i++) {
          const item = json[i]!;
          if (item === null) bail();
          const v = c.parse(item);
          varint32(tag);
          c.write(v);
        }
      };
    }
    case "map": {
      const parseKey = mapKeyParser(f.mapKey);
      const key = scalarCodec(f.mapKey);
      const keyTag = 8 + wireTypeOf(f.mapKey);
      const tag = f.number * 8 + 2;
      let writeEntryValue: (json: JsonValue, depth: number) => void;
      let nullOk = false;
      if (f.mapKind === "message") {
        const body = bodyWriters.of(f.message);
        if (body === null) return null;
        nullOk = f.message.typeName === "google.protobuf.Value";
        writeEntryValue = (json, depth) => {
          varint32(18);
          fork();
          body(json, depth + 1);
          join();
        };
      } else {
        if (f.mapKind === "enum" && !enumSupported(f.enum)) return null;
        const c = f.mapKind === "enum" ? enumCodec(f.enum) : scalarCodec(f.scalar);
        const valueTag = 16 + (f.mapKind === "enum" ? 0 : wireTypeOf(f.scalar));
        writeEntryValue = (json) => {
          const v = c.parse(json);
          varint32(valueTag);
          c.write(v);
        };
      }
      return (json, depth) => {
        if (json === null) return;
        if (typeof json !== "object" || Array.isArray(json)) bail();
        const keys = Object.keys(json);
        for (let i = 0; i < keys.length; i++) {
          const k = keys[i]!;
          const v = json[k];
          if (v === undefined || (v === null && !nullOk)) bail();
          varint32(tag);
          fork();
          varint32(keyTag);
          key.write(parseKey(k));
          writeEntryValue(v, depth);
          join();
        }
      };
    }
  }
}

/**
 * Map keys: only the canonical text of each key type ("1", not "01" or "1.0"; "true"), so the library's record has
 * the same keys, in the same order, as the JSON object.
 */
function mapKeyParser(scalar: number): (k: string) => Val {
  switch (scalar) {
    case S.STRING:
      return (k) => k;
    case S.BOOL:
      return (k) => (k === "true" ? true : k === "false" ? false : bail());
    case S.INT32:
    case S.SINT32:
    case S.SFIXED32:
      return (k) => parseInt32(k, -0x80000000, 0x7fffffff, int32Text);
    case S.UINT32:
    case S.FIXED32:
      return (k) => parseInt32(k, 0, 0xffffffff, uint32Text);
    case S.INT64:
    case S.SINT64:
    case S.SFIXED64:
      return (k) => (/^(0|-?[1-9][0-9]*)$/.test(k) ? parseInt64(k, false) : bail());
    case S.UINT64:
    case S.FIXED64:
      return (k) => (/^(0|[1-9][0-9]*)$/.test(k) ? parseInt64(k, true) : bail());
    default:
      return bail;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Well-known types with a JSON form of their own
// ---------------------------------------------------------------------------------------------------------------

// The library's grammar and range checks (from-json.js), with the fast path's stricter Duration form.
const rfc3339 = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9][0-9]:[0-9][0-9])$/;
const durationText = /^(-?[0-9]+)(?:\.([0-9]{1,9}))?s$/;

function writeSecondsNanos(seconds: number, nanos: number): void {
  if (seconds !== 0) {
    varint32(8);
    split64(seconds);
    varint64(lo, hi);
  }
  if (nanos !== 0) {
    varint32(16);
    int32(nanos);
  }
}

function writeTimestamp(json: JsonValue): void {
  // Text in the library's grammar naming a date-time that exists (the library would roll 2024-02-30 over to 1 March
  // where parseRfc3339 refuses it: codec.ts then reports it after the library's conversion).
  if (typeof json !== "string" || !rfc3339.test(json)) bail();
  const t = parseRfc3339(json);
  if (t === undefined || t.seconds < TIMESTAMP_MIN_SECONDS || t.seconds > TIMESTAMP_MAX_SECONDS) bail();
  writeSecondsNanos(t.seconds, t.nanos);
}

function writeDuration(json: JsonValue): void {
  if (typeof json !== "string") bail();
  const m = durationText.exec(json);
  if (m === null) bail();
  const seconds = Number(m[1]);
  if (seconds > DURATION_SECONDS_MAX || seconds < -DURATION_SECONDS_MAX) bail();
  let nanos = 0;
  if (m[2] !== undefined) {
    nanos = parseInt(m[2] + "0".repeat(9 - m[2].length));
    if (seconds < 0 || Object.is(seconds, -0)) nanos = -nanos;
  }
  writeSecondsNanos(seconds, nanos);
}

function wrapperWriter(scalar: number): BodyWriter {
  const c = scalarCodec(scalar);
  const tag = 8 + wireTypeOf(scalar);
  return (json) => {
    const v = c.parse(json);
    if (c.isZero(v)) return;
    varint32(tag);
    c.write(v);
  };
}

function writeStruct(json: JsonValue, depth: number): void {
  if (depth > MAX_DEPTH || typeof json !== "object" || json === null || Array.isArray(json)) bail();
  const keys = Object.keys(json);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const v = json[k];
    if (v === undefined) bail();
    varint32(10); // fields: map<string, Value> = 1
    fork();
    varint32(10);
    string(k);
    varint32(18);
    fork();
    writeValue(v, depth + 1);
    join();
    join();
  }
}

function writeValue(json: JsonValue, depth: number): void {
  if (depth > MAX_DEPTH) bail();
  switch (typeof json) {
    case "number": // number_value = 2
      varint32(17);
      double(json);
      return;
    case "string": // string_value = 3
      varint32(26);
      string(json);
      return;
    case "boolean": // bool_value = 4
      bytes2(32, json ? 1 : 0);
      return;
    case "object":
      if (json === null) {
        bytes2(8, 0); // null_value = 1 (NULL_VALUE)
      } else if (Array.isArray(json)) {
        varint32(50); // list_value = 6
        fork();
        writeListValue(json, depth + 1);
        join();
      } else {
        varint32(42); // struct_value = 5
        fork();
        writeStruct(json, depth + 1);
        join();
      }
      return;
    default:
      bail();
  }
}

function writeListValue(json: JsonValue, depth: number): void {
  if (depth > MAX_DEPTH || !Array.isArray(json)) bail();
  for (let i = 0; i < json.length; i++) {
    varint32(10); // values: repeated Value = 1
    fork();
    writeValue(json[i]!, depth + 1);
    join();
  }
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * Encode a parsed JSON object as `desc` the way `toBinary(desc, fromJson(desc, value))` does, or return undefined
 * when the fast path is not sure (the caller then runs the library, which gives the same bytes or the error).
 * Only for message types whose top-level JSON is an object (not a well-known type with a JSON form of its own).
 */
export function fastJsonToBinary(desc: DescMessage, value: JsonValue): Uint8Array | undefined {
  // null: a "slow" type, one that cannot be compiled here or a well-known type: the library it is.
  const body = bodyWriters.plainOf(desc);
  if (body === null) return undefined;
  startBytes();
  try {
    body(value, 1);
    return finishBytes();
  } catch {
    // BAIL, or anything unexpected (a stack overflow on absurd nesting): the library decides, and reports errors.
    return undefined;
  } finally {
    releaseBytes();
  }
}
