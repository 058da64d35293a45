/**
 * Compiled protobuf binary -> proto3 canonical JSON text: reads the wire bytes and writes the JSON text as UTF-8 into
 * a scratch buffer, turned into one string at the end, without building a @bufbuild/protobuf message, a JSON object
 * and per-value strings first. One reader per message type, generated on first use and kept on the descriptor (a
 * WeakMap).
 *
 * Output is character for character what `toJsonString(desc, fromBinary(desc, bytes))` writes: keys in field-number
 * order, implicit fields left out when zero, 64-bit integers as strings, enum names (unknown numbers as numbers),
 * padded standard base64, JSON.stringify's string escapes, map and Struct keys in the order a JS object gives them
 * (integer-like keys first). Bytes the fast path is not sure of throw BAIL and codec.ts runs the library: an unknown
 * field number (the library keeps it, or writes it as an extension), a singular field or oneof given twice (the
 * library merges or lets the last win), a wire type that does not match, invalid UTF-8, a value with no JSON form (a
 * Timestamp out of range, a NaN Value), a truncated message, Any, FieldMask, an "@type" map key, ...
 */
import type { DescEnum, DescField, DescMessage } from "@bufbuild/protobuf";
import { bail, DURATION_SECONDS_MAX, enumSupported, IMPLICIT, int64Text, MAX_DEPTH, messageKind, S, uint64Text, wireTypeOf, KindWriterCache } from "./common.js";
import { TIMESTAMP_MAX_SECONDS, TIMESTAMP_MIN_SECONDS } from "../../shared/rfc3339.js";
import {
  encoded,
  mark,
  notAscii,
  outAscii,
  outBase64,
  outByte,
  outBytes,
  outFloat,
  outInt,
  outKey,
  outputText,
  outQuoted,
  outString as outStringBytes,
  releaseOutput,
  reset,
  startOutput,
} from "./json-out.js";

// ---------------------------------------------------------------------------------------------------------------
// Input: module state for the one synchronous conversion running on this thread.
// ---------------------------------------------------------------------------------------------------------------

const EMPTY = new Uint8Array(0);
let rb: Uint8Array = EMPTY;
let rv: DataView = new DataView(EMPTY.buffer);
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

/**
 * A tag (field number << 3 | wire type), or -1 (matching no field) where the library's reader throws "illegal tag":
 * more than five bytes, or a fifth byte past 0x0f.
 */
function tag(end: number): number {
  const start = rp;
  varint(end);
  const n = rp - start;
  return vhi === 0 && (n < 5 || (n === 5 && rb[rp - 1]! <= 0x0f)) ? vlo >>> 0 : -1;
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

/** A length-delimited string as a JS string (map and Struct keys). Invalid UTF-8 bails. */
function stringValue(end: number): string {
  const e = lengthEnd(end);
  const start = rp;
  rp = e;
  for (let i = start; i < e; i++) if (rb[i]! > 0x7f) return utf8.decode(rb.subarray(start, e));
  if (e - start <= 6) {
    let s = "";
    for (let i = start; i < e; i++) s += String.fromCharCode(rb[i]!);
    return s;
  }
  return rbuf.latin1Slice(start, e);
}

// ---------------------------------------------------------------------------------------------------------------
// Scalars: write one value's JSON (the wire type was checked) and return whether it was the zero value
// (implicit-presence fields leave those out).
// ---------------------------------------------------------------------------------------------------------------

type ValueWriter = (end: number) => boolean;

/** A length-delimited string value as JSON; returns whether it was empty. */
function outString(end: number): boolean {
  const e = lengthEnd(end);
  const start = rp;
  rp = e;
  outStringBytes(rb, start, e);
  return e === start;
}

/** A length-delimited bytes value as base64 JSON; returns whether it was empty. */
function outBytesValue(end: number): boolean {
  const e = lengthEnd(end);
  const start = rp;
  rp = e;
  outBase64(rb, start, e);
  return e === start;
}

function scalarWriter(scalar: number): ValueWriter {
  switch (scalar) {
    case S.DOUBLE:
      return (end) => outFloat(rv.getFloat64(fixedEnd(8, end), true));
    case S.FLOAT:
      return (end) => outFloat(rv.getFloat32(fixedEnd(4, end), true));
    case S.INT32:
      return (end) => {
        varint(end);
        return outInt(vlo | 0);
      };
    case S.UINT32:
      return (end) => {
        varint(end);
        return outInt(vlo >>> 0);
      };
    case S.SINT32:
      return (end) => {
        varint(end);
        return outInt((vlo >>> 1) ^ -(vlo & 1));
      };
    case S.FIXED32:
      return (end) => outInt(rv.getUint32(fixedEnd(4, end), true));
    case S.SFIXED32:
      return (end) => outInt(rv.getInt32(fixedEnd(4, end), true));
    case S.INT64:
      return (end) => {
        varint(end);
        outQuoted(int64Text(vlo, vhi));
        return vlo === 0 && vhi === 0;
      };
    case S.UINT64:
      return (end) => {
        varint(end);
        outQuoted(uint64Text(vlo, vhi));
        return vlo === 0 && vhi === 0;
      };
    case S.SINT64:
      return (end) => {
        varint(end);
        const s = -(vlo & 1);
        const lo = ((vlo >>> 1) | ((vhi & 1) << 31)) ^ s;
        const hi = (vhi >>> 1) ^ s;
        outQuoted(int64Text(lo, hi));
        return lo === 0 && hi === 0;
      };
    case S.FIXED64:
    case S.SFIXED64:
      return (end) => {
        const at = fixedEnd(8, end);
        const lo = rv.getInt32(at, true);
        const hi = rv.getInt32(at + 4, true);
        outQuoted(scalar === S.FIXED64 ? uint64Text(lo, hi) : int64Text(lo, hi));
        return lo === 0 && hi === 0;
      };
    case S.BOOL:
      return (end) => {
        varint(end);
        const zero = vlo === 0 && vhi === 0;
        outAscii(zero ? "false" : "true");
        return zero;
      };
    case S.STRING:
      return outString;
    case S.BYTES:
      return outBytesValue;
    default:
      throw new Error(`unknown scalar type ${scalar}`);
  }
}

function enumWriter(e: DescEnum): ValueWriter {
  const names = new Map<number, Uint8Array>();
  for (const v of e.values) {
    const name = e.value[v.number]?.jsonName; // the library's lookup (the first of aliased values)
    if (name !== undefined) names.set(v.number, encoded(JSON.stringify(name)));
  }
  const ascii = [...names.values()].every((b) => b.every((x) => x < 0x80));
  const first = e.values[0]!.number;
  return (end) => {
    varint(end);
    const n = vlo | 0;
    const name = names.get(n);
    if (name === undefined) outAscii(String(n));
    else {
      outBytes(name);
      if (!ascii) notAscii();
    }
    return n === first;
  };
}

/** How a value of a wire type is skipped in the first pass (validating its extent). */
function skip(wt: number, end: number): void {
  switch (wt) {
    case 0:
      varint(end);
      return;
    case 1:
      fixedEnd(8, end);
      return;
    case 5:
      fixedEnd(4, end);
      return;
    default:
      rp = lengthEnd(end);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Plans: one generated function per message type
// ---------------------------------------------------------------------------------------------------------------

/** Writes the JSON of a message body ending at `end` (rp at its start). */
type BodyWriter = (end: number, depth: number) => void;

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

/** Helpers the generated code calls (each call site always calls the same function: no megamorphic dispatch). */
const helpers = {
  bail,
  more: (end: number): boolean => rp < end,
  pos: (): number => rp,
  setPos: (p: number): void => {
    rp = p;
  },
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
  skip0: (end: number): void => varint(end),
  skip1: (end: number): void => void fixedEnd(8, end),
  skip5: (end: number): void => void fixedEnd(4, end),
  skip2: (end: number): void => {
    rp = lengthEnd(end);
  },
  lengthEnd,
  mark,
  reset,
  outByte,
  outBytes,
};

/**
 * Generate the writer of a plain message. First pass: a loop over the wire records with a `switch` on the tag that
 * notes where each field's records are (a tag the switch does not know, i.e. an unknown field, an unhandled type or a
 * wrong wire type, bails, as does a singular field or a oneof met twice). Second pass: the fields in number order,
 * each value written from where it was noted.
 */
function compileMessage(desc: DescMessage): BodyWriter {
  const sorted = desc.fields.concat().sort((a, b) => a.number - b.number);
  const W: unknown[] = []; // per field: value writer, child body writer or map writer
  const K: Uint8Array[] = []; // per field: `"jsonName":` as UTF-8
  const children: (() => void)[] = [];
  const cases: string[] = [];
  const emit: string[] = [];
  const locals: string[] = [];
  const oneofBits = new Map<unknown, number>();
  let keysAscii = true;
  for (let i = 0; i < sorted.length; i++) {
    const f = sorted[i]!;
    const p = `p${i}`;
    K[i] = encoded(`${JSON.stringify(f.jsonName)}:`);
    if (K[i]!.some((b) => b >= 0x80)) keysAscii = false;
    let oneof = "";
    if (f.oneof !== undefined) {
      if (!oneofBits.has(f.oneof)) oneofBits.set(f.oneof, 1 << oneofBits.size);
      const bit = oneofBits.get(f.oneof)!;
      oneof = `if ((oneofs & ${bit}) !== 0) bail(); oneofs |= ${bit};`;
    }
    const tagOf = (wt: number): number => (f.number * 8 + wt) >>> 0;
    const key = `if (!first) outByte(44); outBytes(K[${i}]);`;
    switch (f.fieldKind) {
      case "scalar":
      case "enum": {
        if (f.fieldKind === "enum" && !enumSupported(f.enum)) continue;
        W[i] = f.fieldKind === "enum" ? enumWriter(f.enum) : scalarWriter(f.scalar);
        const wt = f.fieldKind === "enum" ? 0 : wireTypeOf(f.scalar);
        const implicit = f.presence === IMPLICIT && f.oneof === undefined;
        locals.push(`${p} = -1`);
        cases.push(`case ${tagOf(wt)}: ${oneof} if (${p} !== -1) bail(); ${p} = pos(); skip${wt}(end); break;`);
        emit.push(
          implicit
            ? `if (${p} !== -1) { setPos(${p}); const m = mark(); ${key} if (W[${i}](end)) reset(m); else first = false; }`
            : `if (${p} !== -1) { setPos(${p}); ${key} W[${i}](end); first = false; }`,
        );
        break;
      }
      case "message": {
        if (messageKind(f.message) === "slow") continue;
        children.push(() => (W[i] = bodyWriters.of(f.message)));
        locals.push(`${p} = -1`);
        cases.push(`case ${tagOf(2)}: ${oneof} if (${p} !== -1) bail(); ${p} = pos(); skip2(end); break;`);
        emit.push(`if (${p} !== -1) { setPos(${p}); const e = lengthEnd(end); ${key} W[${i}](e, depth + 1); if (pos() !== e) bail(); first = false; }`);
        break;
      }
      case "list": {
        locals.push(p);
        if (f.listKind === "message") {
          if (messageKind(f.message) === "slow") continue;
          children.push(() => (W[i] = bodyWriters.of(f.message)));
          cases.push(`case ${tagOf(2)}: (${p} ??= []).push(pos()); skip2(end); break;`);
          emit.push(
            `if (${p} !== undefined) { ${key} outByte(91); for (let j = 0; j < ${p}.length; j++) { if (j > 0) outByte(44); setPos(${p}[j]); const e = lengthEnd(end); W[${i}](e, depth + 1); if (pos() !== e) bail(); } outByte(93); first = false; }`,
          );
          break;
        }
        if (f.listKind === "enum" && !enumSupported(f.enum)) continue;
        W[i] = f.listKind === "enum" ? enumWriter(f.enum) : scalarWriter(f.scalar);
        const wt = f.listKind === "enum" ? 0 : wireTypeOf(f.scalar);
        // Packed or not, whatever the field says: the library reads both. Noted as position (unpacked) or ~position.
        if (wt !== 2) cases.push(`case ${tagOf(2)}: (${p} ??= []).push(~pos()); skip2(end); break;`);
        cases.push(`case ${tagOf(wt)}: (${p} ??= []).push(pos()); skip${wt}(end); break;`);
        emit.push(
          `if (${p} !== undefined) { const m = mark(); ${key} outByte(91); let n = 0; for (let j = 0; j < ${p}.length; j++) { const at = ${p}[j]; if (at >= 0) { setPos(at); if (n++ > 0) outByte(44); W[${i}](end); } else { setPos(~at); const e = lengthEnd(end); while (more(e)) { if (n++ > 0) outByte(44); W[${i}](e); } } } if (n === 0) reset(m); else { outByte(93); first = false; } }`,
        );
        break;
      }
      case "map": {
        const writeMap = mapWriter(f);
        if (writeMap === null) continue;
        W[i] = writeMap;
        locals.push(p);
        cases.push(`case ${tagOf(2)}: (${p} ??= []).push(pos()); skip2(end); break;`);
        emit.push(`if (${p} !== undefined) { ${key} W[${i}](${p}, end, depth); first = false; }`);
        break;
      }
    }
  }
  const source = `"use strict";
const { bail, more, pos, setPos, tag, skip0, skip1, skip5, skip2, lengthEnd, mark, reset, outByte, outBytes } = helpers;
return function write(end, depth) {
  if (depth > ${MAX_DEPTH}) bail();
  ${locals.length === 0 ? "" : `let ${locals.join(", ")};`}
  let oneofs = 0;
  while (more(end)) {
    switch (tag(end)) {
      ${cases.join("\n      ")}
      default: bail();
    }
  }
  const after = pos();
  let first = true;
  outByte(123);
  ${emit.join("\n  ")}
  outByte(125);
  setPos(after);
};`;
  const inner = new Function("helpers", "W", "K", source)(helpers, W, K) as BodyWriter;
  const writer: BodyWriter = keysAscii
    ? inner
    : (end, depth) => {
        notAscii();
        inner(end, depth);
      };
  // Registered before the children compile, so recursive types find it.
  bodyWriters.addPlain(desc, writer);
  for (const c of children) c();
  return writer;
}

/**
 * Writes a map field from the positions of its entries: the keys go into a JS object first, so that the order is
 * the one the library's record has (integer-like keys first, then insertion order; a repeated key keeps its first
 * position and takes the last value), then each value is written from its position.
 */
function mapWriter(f: DescField & { fieldKind: "map" }): ((entries: number[], end: number, depth: number) => void) | null {
  const readKey = mapKeyReader(f.mapKey);
  const keyTag = 8 + wireTypeOf(f.mapKey);
  let writeVal: (end: number, depth: number) => void;
  let valTag: number;
  if (f.mapKind === "message") {
    if (messageKind(f.message) === "slow") return null;
    let body: BodyWriter | undefined; // looked up on first use: the value type may be the message being compiled
    valTag = 18;
    writeVal = (end, depth) => {
      const e = lengthEnd(end);
      (body ??= bodyWriters.of(f.message)!)(e, depth + 1);
      if (rp !== e) bail();
    };
  } else {
    if (f.mapKind === "enum" && !enumSupported(f.enum)) return null;
    writeVal = f.mapKind === "enum" ? enumWriter(f.enum) : scalarWriter(f.scalar);
    valTag = 16 + (f.mapKind === "enum" ? 0 : wireTypeOf(f.scalar));
  }
  return (entries, end, depth) => {
    const rec = Object.create(null) as Record<string, number>;
    const at: number[] = []; // value start, entry end
    for (let j = 0; j < entries.length; j++) {
      rp = entries[j]!;
      const e = lengthEnd(end);
      let key: string | undefined;
      let val = -1;
      while (rp < e) {
        const t = tag(e);
        if (t === keyTag && key === undefined) key = readKey(e);
        else if (t === valTag && val === -1) {
          val = rp;
          skip(valTag & 7, e);
        } else bail(); // an entry the library reads by other rules (repeated key or value, unknown field)
      }
      if (key === undefined || val === -1) bail(); // the library fills in defaults
      rec[key] = at.length;
      at.push(val, e);
    }
    writeObject(rec, (k) => {
      rp = at[k]!;
      writeVal(at[k + 1]!, depth);
    });
  };
}

/** Writes `{"key":value,...}` over the keys of `rec` in JS object order; "@type" bails (codec.ts's Any rule). */
function writeObject(rec: Record<string, number>, writeValue: (v: number) => void): void {
  outByte(123);
  let first = true;
  for (const k of Object.keys(rec)) {
    if (k === "@type") bail();
    if (!first) outByte(44);
    first = false;
    outKey(k);
    outByte(58);
    writeValue(rec[k]!);
  }
  outByte(125);
}

/** The map key as the library's record has it (String of the key value). */
function mapKeyReader(scalar: number): (end: number) => string {
  switch (scalar) {
    case S.STRING:
      return stringValue;
    case S.BOOL:
      return (end) => {
        varint(end);
        return vlo === 0 && vhi === 0 ? "false" : "true";
      };
    case S.INT32:
      return (end) => {
        varint(end);
        return String(vlo | 0);
      };
    case S.UINT32:
      return (end) => {
        varint(end);
        return String(vlo >>> 0);
      };
    case S.SINT32:
      return (end) => {
        varint(end);
        return String((vlo >>> 1) ^ -(vlo & 1));
      };
    case S.FIXED32:
      return (end) => String(rv.getUint32(fixedEnd(4, end), true));
    case S.SFIXED32:
      return (end) => String(rv.getInt32(fixedEnd(4, end), true));
    case S.INT64:
      return (end) => {
        varint(end);
        return int64Text(vlo, vhi);
      };
    case S.UINT64:
      return (end) => {
        varint(end);
        return uint64Text(vlo, vhi);
      };
    case S.SINT64:
      return (end) => {
        varint(end);
        const s = -(vlo & 1);
        return int64Text(((vlo >>> 1) | ((vhi & 1) << 31)) ^ s, (vhi >>> 1) ^ s);
      };
    case S.FIXED64:
      return (end) => {
        const at = fixedEnd(8, end);
        return uint64Text(rv.getInt32(at, true), rv.getInt32(at + 4, true));
      };
    case S.SFIXED64:
      return (end) => {
        const at = fixedEnd(8, end);
        return int64Text(rv.getInt32(at, true), rv.getInt32(at + 4, true));
      };
    default:
      return bail;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Well-known types with a JSON form of their own: the library's writers (to-json.js), reading the wire directly.
// ---------------------------------------------------------------------------------------------------------------


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

function writeTimestamp(end: number): void {
  readSecondsNanos(end);
  const seconds = secondsNumber();
  if (seconds < TIMESTAMP_MIN_SECONDS || seconds > TIMESTAMP_MAX_SECONDS || nanos < 0 || nanos > 999999999) bail();
  const ms = seconds * 1000;
  let z = "Z";
  if (nanos > 0) {
    const n = (nanos + 1000000000).toString().substring(1);
    if (n.substring(3) === "000000") z = "." + n.substring(0, 3) + "Z";
    else if (n.substring(6) === "000") z = "." + n.substring(0, 6) + "Z";
    else z = "." + n + "Z";
  }
  outQuoted(new Date(ms).toISOString().replace(".000Z", z));
}

function writeDuration(end: number): void {
  readSecondsNanos(end);
  const seconds = secondsNumber();
  if (seconds > DURATION_SECONDS_MAX || seconds < -DURATION_SECONDS_MAX) bail();
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
  outQuoted(`${text}s`);
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

function wrapperWriter(scalar: number): BodyWriter {
  const write = scalarWriter(scalar);
  const wireTag = 8 + wireTypeOf(scalar);
  const zeroText = wrapperZero[scalar];
  if (zeroText === undefined) return () => bail();
  return (end) => {
    if (rp === end) return outAscii(zeroText);
    if (tag(end) !== wireTag) bail();
    write(end);
    if (rp !== end) bail(); // the value given twice (or more fields): the library keeps the last
  };
}

function writeStruct(end: number, depth: number): void {
  if (depth > MAX_DEPTH) bail();
  const rec = Object.create(null) as Record<string, number>;
  const at: number[] = [];
  while (rp < end) {
    if (tag(end) !== 10) bail(); // fields = 1, map<string, Value> entries
    const e = lengthEnd(end);
    let key: string | undefined;
    let val = -1;
    while (rp < e) {
      const t = tag(e);
      if (t === 10 && key === undefined) key = stringValue(e);
      else if (t === 18 && val === -1) {
        val = rp;
        rp = lengthEnd(e);
      } else bail();
    }
    if (key === undefined || val === -1) bail();
    rec[key] = at.length;
    at.push(val, e);
  }
  const after = rp;
  writeObject(rec, (k) => {
    rp = at[k]!;
    const ve = lengthEnd(at[k + 1]!);
    writeValue(ve, depth + 1);
    if (rp !== ve) bail();
  });
  rp = after;
}

function writeValue(end: number, depth: number): void {
  if (depth > MAX_DEPTH) bail();
  const t = tag(end);
  switch (t) {
    case 8: // null_value
      varint(end);
      outAscii("null");
      break;
    case 17: {
      // number_value: NaN and infinities have no JSON form, the library throws
      const v = rv.getFloat64(fixedEnd(8, end), true);
      if (!Number.isFinite(v)) bail();
      outAscii(String(v));
      break;
    }
    case 26:
      outString(end);
      break;
    case 32:
      varint(end);
      outAscii(vlo === 0 && vhi === 0 ? "false" : "true");
      break;
    case 42: {
      const e = lengthEnd(end);
      writeStruct(e, depth + 1);
      if (rp !== e) bail();
      break;
    }
    case 50: {
      const e = lengthEnd(end);
      writeListValue(e, depth + 1);
      if (rp !== e) bail();
      break;
    }
    default:
      bail(); // no kind (the library throws), or an unknown field
  }
  if (rp !== end) bail(); // two kinds: the library keeps the last
}

function writeListValue(end: number, depth: number): void {
  if (depth > MAX_DEPTH) bail();
  outByte(91);
  let first = true;
  while (rp < end) {
    if (tag(end) !== 10) bail();
    const e = lengthEnd(end);
    if (!first) outByte(44);
    first = false;
    writeValue(e, depth + 1);
    if (rp !== e) bail();
  }
  outByte(93);
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * Decode `bytes` as `desc` and return the JSON text `toJsonString(desc, fromBinary(desc, bytes))` writes, or
 * undefined when the fast path is not sure (the caller then runs the library, which gives the same text or the
 * error). Only for message types whose JSON is an object (not a well-known type with a JSON form of its own).
 */
export function fastBinaryToJson(desc: DescMessage, bytes: Uint8Array): string | undefined {
  // null: a "slow" type, one that cannot be compiled here or a well-known type: the library it is.
  const body = bodyWriters.plainOf(desc);
  if (body === null) return undefined;
  rb = bytes;
  rv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  rbuf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  rp = 0;
  startOutput();
  try {
    body(bytes.length, 1);
    if (rp !== bytes.length) return undefined;
    return outputText();
  } catch {
    // BAIL, or anything unexpected (a stack overflow on absurd nesting): the library decides.
    return undefined;
  } finally {
    rb = EMPTY;
    rv = EMPTY_VIEW;
    rbuf = EMPTY_BUFFER;
    releaseOutput();
  }
}

const EMPTY_VIEW = new DataView(EMPTY.buffer);
const EMPTY_BUFFER = Buffer.alloc(0);
