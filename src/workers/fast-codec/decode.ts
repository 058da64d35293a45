/**
 * Compiled protobuf binary -> proto3 canonical JSON text: reads the wire bytes and writes the JSON text directly,
 * without building a @bufbuild/protobuf message and a JSON object first. One plan per message type, compiled on
 * first use and kept on the descriptor (a WeakMap).
 *
 * Output is character for character what `toJsonString(desc, fromBinary(desc, bytes))` writes: keys in field-number
 * order, implicit fields left out when zero, 64-bit integers as strings, enum names (unknown numbers as numbers),
 * padded standard base64, map and Struct keys in the order a JS object gives them (integer-like keys first). Bytes the
 * fast path is not sure of throw BAIL and codec.ts runs the library: an unknown field number (the library keeps it,
 * or writes it as an extension), a singular field or oneof given twice (the library merges or lets the last win), a
 * wire type that does not match, invalid UTF-8, a value with no JSON form (a Timestamp out of range, a NaN Value), a
 * truncated message, Any, FieldMask, ...
 */
import type { DescEnum, DescField, DescMessage } from "@bufbuild/protobuf";
import { base64Text, bail, enumSupported, IMPLICIT, int64Text, MAX_DEPTH, messageKind, S, uint64Text, wireTypeOf } from "./common.js";

// ---------------------------------------------------------------------------------------------------------------
// The reader: module state for the one synchronous conversion running on this thread.
// ---------------------------------------------------------------------------------------------------------------

let rb: Uint8Array = new Uint8Array(0);
let rv: DataView = new DataView(rb.buffer);
let rbuf: Buffer = Buffer.alloc(0); // rb as a Buffer, for latin1Slice
let rp = 0;
let vlo = 0;
let vhi = 0;

/** Reads a varint ending before `end` into vlo/vhi (the low and high 32 bits). Ten bytes at most, canonical top. */
function varint(end: number): void {
  if (rp < end) {
    const b0 = rb[rp]!;
    if (b0 < 0x80) {
      // one byte: most tags, lengths and small numbers
      rp++;
      vlo = b0;
      vhi = 0;
      return;
    }
  }
  let lo = 0;
  let hi = 0;
  for (let i = 0; ; i++) {
    if (rp >= end) bail();
    const b = rb[rp++]!;
    if (i < 4) lo |= (b & 0x7f) << (7 * i);
    else if (i === 4) {
      lo |= (b & 0x0f) << 28;
      hi = (b & 0x7f) >> 4;
    } else if (i < 9) hi |= (b & 0x7f) << (7 * i - 32);
    else {
      if (b > 1) bail(); // the tenth byte carries bit 63 only
      hi |= b << 31;
      break;
    }
    if (b < 0x80) break;
  }
  vlo = lo;
  vhi = hi;
}

/** A tag (field number << 3 | wire type), or -1 when it does not fit 32 bits. */
function tag(end: number): number {
  varint(end);
  return vhi === 0 ? vlo >>> 0 : -1;
}

/** Length of a length-delimited record; returns its end. */
function lengthEnd(end: number): number {
  varint(end);
  if (vhi !== 0 || vlo < 0) bail();
  const e = rp + vlo;
  if (e > end) bail();
  return e;
}

function fixedEnd(n: number, end: number): number {
  const at = rp;
  rp += n;
  if (rp > end) bail();
  return at;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A length-delimited string as JSON text. Invalid UTF-8 bails (the library rejects it). */
function stringText(end: number): string {
  const e = lengthEnd(end);
  const start = rp;
  rp = e;
  for (let i = start; i < e; i++) {
    const b = rb[i]!;
    // Printable ASCII other than " and \ is its own JSON text; anything else goes through the decoder and
    // JSON.stringify (the library's escaping).
    if (b < 0x20 || b > 0x7e || b === 0x22 || b === 0x5c) return JSON.stringify(utf8.decode(rb.subarray(start, e)));
  }
  return `"${latin1(start, e)}"`;
}

/** Bytes known to be ASCII as a string. */
function latin1(start: number, end: number): string {
  // Measured: concatenating char codes wins up to about 6 characters, the native slice (a flat ~60 ns) past that.
  if (end - start <= 6) {
    let s = "";
    for (let i = start; i < end; i++) s += String.fromCharCode(rb[i]!);
    return s;
  }
  return rbuf.latin1Slice(start, end);
}

// Buffer's native latin1 slice (what `toString("latin1", start, end)` calls after checking its arguments, at a third
// of the cost for short strings); untyped in @types/node.
declare module "node:buffer" {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Scalars: read one value (the wire type was checked) and return its JSON text; `zero` tells whether it was the
// zero value (implicit-presence fields leave those out).
// ---------------------------------------------------------------------------------------------------------------

let zero = false;

function floatText(v: number): string {
  zero = Object.is(v, 0);
  if (Number.isNaN(v)) return '"NaN"';
  if (v === Infinity) return '"Infinity"';
  if (v === -Infinity) return '"-Infinity"';
  return String(v);
}

function numText(v: number): string {
  zero = v === 0;
  return String(v);
}

type TextReader = (end: number) => string;

function scalarReader(scalar: number): TextReader {
  switch (scalar) {
    case S.DOUBLE:
      return (end) => floatText(rv.getFloat64(fixedEnd(8, end), true));
    case S.FLOAT:
      return (end) => floatText(rv.getFloat32(fixedEnd(4, end), true));
    case S.INT32:
      return (end) => {
        varint(end);
        return numText(vlo | 0);
      };
    case S.UINT32:
      return (end) => {
        varint(end);
        return numText(vlo >>> 0);
      };
    case S.SINT32:
      return (end) => {
        varint(end);
        return numText((vlo >>> 1) ^ -(vlo & 1));
      };
    case S.FIXED32:
      return (end) => numText(rv.getUint32(fixedEnd(4, end), true));
    case S.SFIXED32:
      return (end) => numText(rv.getInt32(fixedEnd(4, end), true));
    case S.INT64:
      return (end) => {
        varint(end);
        zero = vlo === 0 && vhi === 0;
        return `"${int64Text(vlo, vhi)}"`;
      };
    case S.UINT64:
      return (end) => {
        varint(end);
        zero = vlo === 0 && vhi === 0;
        return `"${uint64Text(vlo, vhi)}"`;
      };
    case S.SINT64:
      return (end) => {
        varint(end);
        const s = -(vlo & 1);
        const lo = ((vlo >>> 1) | ((vhi & 1) << 31)) ^ s;
        const hi = (vhi >>> 1) ^ s;
        zero = lo === 0 && hi === 0;
        return `"${int64Text(lo, hi)}"`;
      };
    case S.FIXED64:
    case S.SFIXED64:
      return (end) => {
        const at = fixedEnd(8, end);
        const lo = rv.getInt32(at, true);
        const hi = rv.getInt32(at + 4, true);
        zero = lo === 0 && hi === 0;
        return `"${scalar === S.FIXED64 ? uint64Text(lo, hi) : int64Text(lo, hi)}"`;
      };
    case S.BOOL:
      return (end) => {
        varint(end);
        zero = vlo === 0 && vhi === 0;
        return zero ? "false" : "true";
      };
    case S.STRING:
      return (end) => {
        const text = stringText(end);
        zero = text.length === 2;
        return text;
      };
    case S.BYTES:
      return (end) => {
        const e = lengthEnd(end);
        zero = e === rp;
        const text = `"${base64Text(rb, rp, e)}"`;
        rp = e;
        return text;
      };
    default:
      throw new Error(`unknown scalar type ${scalar}`);
  }
}

function enumReader(e: DescEnum): TextReader {
  const names = new Map<number, string>();
  for (const v of e.values) {
    const name = e.value[v.number]?.jsonName; // the library's lookup (the first of aliased values)
    if (name !== undefined) names.set(v.number, JSON.stringify(name));
  }
  const first = e.values[0]!.number;
  return (end) => {
    varint(end);
    const n = vlo | 0;
    zero = n === first;
    return names.get(n) ?? String(n);
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Plans: one generated function per message type
// ---------------------------------------------------------------------------------------------------------------

/** Reads a message body ending at `end` and returns its JSON text. */
type BodyReader = (end: number, depth: number) => string;

/** Reads one map entry (the record after its tag) into `rec`. */
type EntryReader = (end: number, depth: number, rec: Record<string, string>) => Record<string, string>;

const bodyReaders = new WeakMap<DescMessage, BodyReader | null>();
const plainReaders = new WeakSet<BodyReader>();

function bodyReaderOf(desc: DescMessage): BodyReader | null {
  const known = bodyReaders.get(desc);
  if (known !== undefined) return known;
  let reader: BodyReader | null;
  switch (messageKind(desc)) {
    case "slow":
      reader = null;
      break;
    case "timestamp":
      reader = readTimestamp;
      break;
    case "duration":
      reader = readDuration;
      break;
    case "wrapper":
      reader = wrapperReader(desc.fields[0]!.scalar!);
      break;
    case "struct":
      reader = readStruct;
      break;
    case "value":
      reader = readValue;
      break;
    case "listValue":
      reader = readListValue;
      break;
    case "plain":
      return compileMessage(desc);
  }
  bodyReaders.set(desc, reader);
  return reader;
}

/** Helpers the generated readers call (each call site always calls the same function: no megamorphic dispatch). */
const helpers = {
  bail,
  more: (end: number): boolean => rp < end,
  pos: (): number => rp,
  tag: (end: number): number => {
    if (rp < end) {
      const b = rb[rp]!;
      if (b < 0x80) {
        rp++;
        return b;
      }
    }
    return tag(end);
  },
  lengthEnd,
  isZero: (): boolean => zero,
  objectText,
  newRecord: (): Record<string, string> => Object.create(null) as Record<string, string>,
};

/**
 * Generate the reader of a plain message: a loop over the wire records with a `switch` on the tag, one local per
 * field, then the JSON text in field-number order. A tag the switch does not know (unknown field, unhandled type,
 * wrong wire type) bails, as does a singular field or a oneof met twice.
 */
function compileMessage(desc: DescMessage): BodyReader {
  const sorted = desc.fields.concat().sort((a, b) => a.number - b.number);
  const readers: unknown[] = []; // per field: scalar reader, enum names, child body reader or map entry reader
  const children: (() => void)[] = [];
  const cases: string[] = [];
  const emit: string[] = [];
  const oneofBits = new Map<unknown, number>();
  for (let i = 0; i < sorted.length; i++) {
    const f = sorted[i]!;
    const v = `s${i}`;
    const key = JSON.stringify(`${JSON.stringify(f.jsonName)}:`);
    let oneof = "";
    if (f.oneof !== undefined) {
      if (!oneofBits.has(f.oneof)) oneofBits.set(f.oneof, 1 << oneofBits.size);
      const bit = oneofBits.get(f.oneof)!;
      oneof = `if ((oneofs & ${bit}) !== 0) bail(); oneofs |= ${bit};`;
    }
    const tagOf = (wt: number): number => (f.number * 8 + wt) >>> 0;
    const R = `R[${i}]`;
    switch (f.fieldKind) {
      case "scalar":
      case "enum": {
        if (f.fieldKind === "enum" && !enumSupported(f.enum)) continue;
        readers[i] = f.fieldKind === "enum" ? enumReader(f.enum) : scalarReader(f.scalar);
        const implicit = f.presence === IMPLICIT && f.oneof === undefined;
        cases.push(`case ${tagOf(f.fieldKind === "enum" ? 0 : wireTypeOf(f.scalar))}: ${oneof} if (${v} !== undefined) bail(); ${v} = ${R}(end);${implicit ? ` if (isZero()) ${v} = null;` : ""} break;`);
        emit.push(`if (${v} != null) out += (out === "" ? "{" : ",") + ${key} + ${v};`);
        break;
      }
      case "message": {
        children.push(() => (readers[i] = bodyReaderOf(f.message)));
        if (messageKind(f.message) === "slow") continue;
        cases.push(`case ${tagOf(2)}: { ${oneof} if (${v} !== undefined) bail(); const e = lengthEnd(end); ${v} = ${R}(e, depth + 1); if (pos() !== e) bail(); break; }`);
        emit.push(`if (${v} !== undefined) out += (out === "" ? "{" : ",") + ${key} + ${v};`);
        break;
      }
      case "list": {
        if (f.listKind === "message") {
          children.push(() => (readers[i] = bodyReaderOf(f.message)));
          if (messageKind(f.message) === "slow") continue;
          cases.push(`case ${tagOf(2)}: { const e = lengthEnd(end); const x = ${R}(e, depth + 1); if (pos() !== e) bail(); (${v} ??= []).push(x); break; }`);
        } else {
          if (f.listKind === "enum" && !enumSupported(f.enum)) continue;
          readers[i] = f.listKind === "enum" ? enumReader(f.enum) : scalarReader(f.scalar);
          const wt = f.listKind === "enum" ? 0 : wireTypeOf(f.scalar);
          // Packed or not, whatever the field says: the library reads both.
          if (wt !== 2) cases.push(`case ${tagOf(2)}: { const e = lengthEnd(end); ${v} ??= []; while (more(e)) ${v}.push(${R}(e)); break; }`);
          cases.push(`case ${tagOf(wt)}: (${v} ??= []).push(${R}(end)); break;`);
        }
        emit.push(`if (${v} !== undefined && ${v}.length > 0) out += (out === "" ? "{" : ",") + ${key} + "[" + ${v}.join(",") + "]";`);
        break;
      }
      case "map": {
        const entry = mapEntryReader(f);
        if (entry === null) continue;
        readers[i] = entry;
        cases.push(`case ${tagOf(2)}: ${v} = ${R}(lengthEnd(end), depth, ${v} ?? newRecord()); break;`);
        emit.push(`if (${v} !== undefined) out += (out === "" ? "{" : ",") + ${key} + objectText(${v});`);
        break;
      }
    }
  }
  const locals = sorted.map((_, i) => `s${i}`).join(", ");
  const source = `"use strict";
const { bail, more, pos, tag, lengthEnd, isZero, objectText, newRecord } = helpers;
return function read(end, depth) {
  if (depth > ${MAX_DEPTH}) bail();
  ${locals === "" ? "" : `let ${locals};`}
  let oneofs = 0;
  while (more(end)) {
    switch (tag(end)) {
      ${cases.join("\n      ")}
      default: bail();
    }
  }
  let out = "";
  ${emit.join("\n  ")}
  return out === "" ? "{}" : out + "}";
};`;
  const reader = new Function("helpers", "R", source)(helpers, readers) as BodyReader;
  // Registered before the children compile, so recursive types find it.
  bodyReaders.set(desc, reader);
  plainReaders.add(reader);
  for (const c of children) c();
  return reader;
}

/**
 * A record of JSON texts as a JSON object, keys in the order the library's plain JS object has them. A key "@type"
 * bails: codec.ts moves such keys first (its Any rule), and the fast path leaves that to the library's path.
 */
function objectText(rec: Record<string, string>): string {
  let out = "";
  for (const k of Object.keys(rec)) {
    if (k === "@type") bail();
    out += `${out === "" ? "{" : ","}${JSON.stringify(k)}:${rec[k]}`;
  }
  return out === "" ? "{}" : `${out}}`;
}

function mapEntryReader(f: DescField & { fieldKind: "map" }): EntryReader | null {
  const readKey = mapKeyReader(f.mapKey);
  const keyTag = 8 + wireTypeOf(f.mapKey);
  let readVal: (end: number, depth: number) => string;
  let valTag: number;
  if (f.mapKind === "message") {
    if (messageKind(f.message) === "slow") return null;
    let body: BodyReader | undefined; // looked up on first use: the value type may be the message being compiled
    valTag = 18;
    readVal = (end, depth) => {
      const e = lengthEnd(end);
      const text = (body ??= bodyReaderOf(f.message)!)(e, depth + 1);
      if (rp !== e) bail();
      return text;
    };
  } else {
    if (f.mapKind === "enum" && !enumSupported(f.enum)) return null;
    readVal = f.mapKind === "enum" ? enumReader(f.enum) : scalarReader(f.scalar);
    valTag = 16 + (f.mapKind === "enum" ? 0 : wireTypeOf(f.scalar));
  }
  return (e, depth, rec) => {
    let key: string | undefined;
    let val: string | undefined;
    while (rp < e) {
      const t = tag(e);
      if (t === keyTag && key === undefined) key = readKey(e);
      else if (t === valTag && val === undefined) val = readVal(e, depth);
      else bail(); // an entry the library reads by other rules (repeated key or value, unknown field)
    }
    if (key === undefined || val === undefined) bail(); // the library fills in defaults
    // Same semantics as the library's record: a repeated key keeps its first position and takes the last value.
    rec[key] = val;
    return rec;
  };
}

/** The map key as the library's record has it (String of the key value). */
function mapKeyReader(scalar: number): (end: number) => string {
  if (scalar === S.STRING) {
    return (end) => {
      const e = lengthEnd(end);
      const start = rp;
      rp = e;
      for (let i = start; i < e; i++) if (rb[i]! > 0x7f) return utf8.decode(rb.subarray(start, e));
      return latin1(start, e);
    };
  }
  const read = scalarReader(scalar);
  const is64 = scalar === S.INT64 || scalar === S.UINT64 || scalar === S.SINT64 || scalar === S.FIXED64 || scalar === S.SFIXED64;
  // 64-bit ints: the decimal text without its quotes; bool and 32-bit ints: their JSON text is the key.
  return is64 ? (end) => read(end).slice(1, -1) : read;
}

// ---------------------------------------------------------------------------------------------------------------
// Well-known types with a JSON form of their own: the library's writers (to-json.js), reading the wire directly.
// ---------------------------------------------------------------------------------------------------------------

const timestampMsMin = Date.parse("0001-01-01T00:00:00Z");
const timestampMsMax = Date.parse("9999-12-31T23:59:59Z");
const durationSecondsMax = 315576000000;

let secLo = 0;
let secHi = 0;
let nanos = 0;

/** Reads seconds = 1 (int64) and nanos = 2 (int32), each at most once. */
function readSecondsNanos(end: number): void {
  secLo = 0;
  secHi = 0;
  nanos = 0;
  let seen = 0;
  while (rp < end) {
    const t = tag(end);
    if (t === 8 && (seen & 1) === 0) {
      seen |= 1;
      varint(end);
      secLo = vlo;
      secHi = vhi;
    } else if (t === 16 && (seen & 2) === 0) {
      seen |= 2;
      varint(end);
      nanos = vlo | 0;
    } else {
      bail();
    }
  }
}

function secondsNumber(): number {
  return Number(int64Text(secLo, secHi));
}

function readTimestamp(end: number): string {
  readSecondsNanos(end);
  const ms = secondsNumber() * 1000;
  if (ms < timestampMsMin || ms > timestampMsMax || nanos < 0 || nanos > 999999999) bail();
  let z = "Z";
  if (nanos > 0) {
    const n = (nanos + 1000000000).toString().substring(1);
    if (n.substring(3) === "000000") z = "." + n.substring(0, 3) + "Z";
    else if (n.substring(6) === "000") z = "." + n.substring(0, 6) + "Z";
    else z = "." + n + "Z";
  }
  return `"${new Date(ms).toISOString().replace(".000Z", z)}"`;
}

function readDuration(end: number): string {
  readSecondsNanos(end);
  const seconds = secondsNumber();
  if (seconds > durationSecondsMax || seconds < -durationSecondsMax) bail();
  if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) bail();
  let text = int64Text(secLo, secHi);
  if (nanos !== 0) {
    let n = Math.abs(nanos).toString();
    n = "0".repeat(9 - n.length) + n;
    if (n.substring(3) === "000000") n = n.substring(0, 3);
    else if (n.substring(6) === "000") n = n.substring(0, 6);
    text += "." + n;
    if (nanos < 0 && seconds === 0) text = "-" + text;
  }
  return `"${text}s"`;
}

const wrapperZero: Record<number, string> = {
  [S.DOUBLE]: "0",
  [S.FLOAT]: "0",
  [S.INT64]: '"0"',
  [S.UINT64]: '"0"',
  [S.INT32]: "0",
  [S.UINT32]: "0",
  [S.BOOL]: "false",
  [S.STRING]: '""',
  [S.BYTES]: '""',
};

function wrapperReader(scalar: number): BodyReader {
  const read = scalarReader(scalar);
  const wireTag = 8 + wireTypeOf(scalar);
  const zeroText = wrapperZero[scalar];
  if (zeroText === undefined) return () => bail();
  return (end) => {
    let text = zeroText;
    let seen = false;
    while (rp < end) {
      if (tag(end) !== wireTag || seen) bail();
      seen = true;
      text = read(end);
    }
    return text;
  };
}

function readStruct(end: number, depth: number): string {
  if (depth > MAX_DEPTH) bail();
  const rec = Object.create(null) as Record<string, string>;
  while (rp < end) {
    if (tag(end) !== 10) bail(); // fields = 1, map<string, Value> entries
    const e = lengthEnd(end);
    let key: string | undefined;
    let val: string | undefined;
    while (rp < e) {
      const t = tag(e);
      if (t === 10 && key === undefined) key = structKey(e);
      else if (t === 18 && val === undefined) {
        const ve = lengthEnd(e);
        val = readValue(ve, depth + 1);
        if (rp !== ve) bail();
      } else bail();
    }
    if (key === undefined || val === undefined) bail();
    rec[key] = val;
  }
  return objectText(rec);
}

function structKey(end: number): string {
  const e = lengthEnd(end);
  const start = rp;
  rp = e;
  for (let i = start; i < e; i++) if (rb[i]! > 0x7f) return utf8.decode(rb.subarray(start, e));
  return latin1(start, e);
}

function readValue(end: number, depth: number): string {
  if (depth > MAX_DEPTH) bail();
  let text: string | undefined;
  while (rp < end) {
    if (text !== undefined) bail(); // two kinds: the library keeps the last
    switch (tag(end)) {
      case 8: // null_value
        varint(end);
        text = "null";
        break;
      case 17: {
        // number_value: NaN and infinities have no JSON form, the library throws
        const v = rv.getFloat64(fixedEnd(8, end), true);
        if (!Number.isFinite(v)) bail();
        text = String(v);
        break;
      }
      case 26:
        text = stringText(end);
        break;
      case 32:
        varint(end);
        text = vlo === 0 && vhi === 0 ? "false" : "true";
        break;
      case 42: {
        const e = lengthEnd(end);
        text = readStruct(e, depth + 1);
        if (rp !== e) bail();
        break;
      }
      case 50: {
        const e = lengthEnd(end);
        text = readListValue(e, depth + 1);
        if (rp !== e) bail();
        break;
      }
      default:
        bail();
    }
  }
  if (text === undefined) bail(); // a Value with no kind: the library throws
  return text;
}

function readListValue(end: number, depth: number): string {
  if (depth > MAX_DEPTH) bail();
  let out = "";
  while (rp < end) {
    if (tag(end) !== 10) bail();
    const e = lengthEnd(end);
    const text = readValue(e, depth + 1);
    if (rp !== e) bail();
    out += out === "" ? `[${text}` : `,${text}`;
  }
  return out === "" ? "[]" : `${out}]`;
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * Decode `bytes` as `desc` and write the JSON text `toJsonString(desc, fromBinary(desc, bytes))` writes, or return
 * undefined when the fast path is not sure (the caller then runs the library, which gives the same text or the
 * error). Only for message types whose JSON is an object (not a well-known type with a JSON form of its own).
 */
export function fastBinaryToJson(desc: DescMessage, bytes: Uint8Array): string | undefined {
  const body = bodyReaderOf(desc);
  if (body === null || !plainReaders.has(body)) return undefined;
  rb = bytes;
  rv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  rbuf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  rp = 0;
  try {
    const text = body(bytes.length, 1);
    return rp === bytes.length ? text : undefined;
  } catch {
    // BAIL, or anything unexpected (invalid UTF-8 from the decoder, a stack overflow): the library decides.
    return undefined;
  } finally {
    rb = EMPTY;
    rv = EMPTY_VIEW;
    rbuf = EMPTY_BUFFER;
  }
}

const EMPTY = new Uint8Array(0);
const EMPTY_VIEW = new DataView(EMPTY.buffer);
const EMPTY_BUFFER = Buffer.alloc(0);
