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
  if (end - start <= 32) {
    let s = "";
    for (let i = start; i < end; i++) s += String.fromCharCode(rb[i]!);
    return s;
  }
  return Buffer.from(rb.buffer, rb.byteOffset + start, end - start).toString("latin1");
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
// Plans
// ---------------------------------------------------------------------------------------------------------------

/** Reads a message body ending at `end` and returns its JSON text. */
type BodyReader = (end: number, depth: number) => string;

/** A field's value so far: JSON text (singular), null (an implicit zero, left out), texts (list) or a record (map). */
type Slot = string | null | string[] | Record<string, string>;

interface FieldPlan {
  index: number;
  /** `"jsonName":` */
  key: string;
  oneofBit: number;
  kind: "singular" | "list" | "map";
  read: (slots: Slot[], wireType: number, end: number, depth: number) => void;
}

interface MessagePlan {
  byNumber: (FieldPlan | undefined)[];
  fields: FieldPlan[];
}

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
    case "plain": {
      const plan: MessagePlan = { byNumber: [], fields: [] };
      reader = (end, depth) => readMessage(plan, end, depth);
      bodyReaders.set(desc, reader);
      plainReaders.add(reader);
      compilePlan(desc, plan);
      return reader;
    }
  }
  bodyReaders.set(desc, reader);
  return reader;
}

function compilePlan(desc: DescMessage, plan: MessagePlan): void {
  const sorted = desc.fields.concat().sort((a, b) => a.number - b.number);
  const oneofBits = new Map<unknown, number>();
  for (let i = 0; i < sorted.length; i++) {
    const f = sorted[i]!;
    let oneofBit = 0;
    if (f.oneof !== undefined) {
      if (!oneofBits.has(f.oneof)) oneofBits.set(f.oneof, 1 << oneofBits.size);
      oneofBit = oneofBits.get(f.oneof)!;
    }
    const compiled = fieldReader(f, i);
    const fp: FieldPlan = {
      index: i,
      key: `${JSON.stringify(f.jsonName)}:`,
      oneofBit,
      kind: f.fieldKind === "list" ? "list" : f.fieldKind === "map" ? "map" : "singular",
      read: compiled ?? bail,
    };
    plan.fields.push(fp);
    // A field of an unhandled type stays out of the table: its number bails like an unknown one.
    if (compiled !== null) plan.byNumber[f.number] = fp;
  }
}

function readMessage(plan: MessagePlan, end: number, depth: number): string {
  if (depth > MAX_DEPTH) bail();
  const fields = plan.fields;
  return readFields(plan, new Array<Slot>(fields.length), end, depth);
}

function readFields(plan: MessagePlan, slots: Slot[], end: number, depth: number): string {
  const fields = plan.fields;
  let oneofs = 0;
  while (rp < end) {
    const t = tag(end);
    const f = t < 8 ? undefined : plan.byNumber[t >>> 3];
    if (f === undefined) bail();
    if (f.oneofBit !== 0) {
      if ((oneofs & f.oneofBit) !== 0) bail(); // two members (or one twice): the library keeps the last
      oneofs |= f.oneofBit;
    }
    f.read(slots, t & 7, end, depth);
  }
  let out = "";
  for (let i = 0; i < fields.length; i++) {
    const s = slots[i];
    if (s === undefined || s === null) continue;
    const f = fields[i]!;
    let text: string;
    if (f.kind === "singular") text = s as string;
    else if (f.kind === "list") {
      if ((s as string[]).length === 0) continue; // an empty packed record: the library leaves the empty list out
      text = `[${(s as string[]).join(",")}]`;
    }
    else text = objectText(s as Record<string, string>);
    out += out === "" ? `{${f.key}${text}` : `,${f.key}${text}`;
  }
  return out === "" ? "{}" : `${out}}`;
}

/** A record of JSON texts as a JSON object, keys in the order the library's plain JS object has them. */
function objectText(rec: Record<string, string>): string {
  let out = "";
  for (const k of Object.keys(rec)) out += `${out === "" ? "{" : ","}${JSON.stringify(k)}:${rec[k]}`;
  return out === "" ? "{}" : `${out}}`;
}

function fieldReader(f: DescField, index: number): FieldPlan["read"] | null {
  switch (f.fieldKind) {
    case "scalar":
    case "enum": {
      if (f.fieldKind === "enum" && !enumSupported(f.enum)) return null;
      const read = f.fieldKind === "enum" ? enumReader(f.enum) : scalarReader(f.scalar);
      const wt = f.fieldKind === "enum" ? 0 : wireTypeOf(f.scalar);
      const implicit = f.presence === IMPLICIT && f.oneof === undefined;
      return (slots, wireType, end) => {
        if (wireType !== wt || slots[index] !== undefined) bail(); // a second occurrence: the library keeps the last
        const text = read(end);
        slots[index] = implicit && zero ? null : text;
      };
    }
    case "message": {
      const body = bodyReaderOf(f.message);
      if (body === null) return null;
      return (slots, wireType, end, depth) => {
        if (wireType !== 2 || slots[index] !== undefined) bail(); // a second occurrence: the library merges
        const e = lengthEnd(end);
        slots[index] = body(e, depth + 1);
        if (rp !== e) bail();
      };
    }
    case "list": {
      if (f.listKind === "message") {
        const body = bodyReaderOf(f.message);
        if (body === null) return null;
        return (slots, wireType, end, depth) => {
          if (wireType !== 2) bail();
          const e = lengthEnd(end);
          const text = body(e, depth + 1);
          if (rp !== e) bail();
          ((slots[index] ??= []) as string[]).push(text);
        };
      }
      if (f.listKind === "enum" && !enumSupported(f.enum)) return null;
      const read = f.listKind === "enum" ? enumReader(f.enum) : scalarReader(f.scalar);
      const wt = f.listKind === "enum" ? 0 : wireTypeOf(f.scalar);
      const packable = wt !== 2;
      return (slots, wireType, end) => {
        const items = (slots[index] ??= []) as string[];
        if (wireType === 2 && packable) {
          const e = lengthEnd(end);
          while (rp < e) items.push(read(e));
        } else if (wireType === wt) {
          items.push(read(end));
        } else {
          bail();
        }
      };
    }
    case "map": {
      const readKey = mapKeyReader(f.mapKey);
      const keyWt = wireTypeOf(f.mapKey);
      let readVal: (end: number, depth: number) => string;
      let valWt: number;
      if (f.mapKind === "message") {
        const body = bodyReaderOf(f.message);
        if (body === null) return null;
        valWt = 2;
        readVal = (end, depth) => {
          const e = lengthEnd(end);
          const text = body(e, depth + 1);
          if (rp !== e) bail();
          return text;
        };
      } else {
        if (f.mapKind === "enum" && !enumSupported(f.enum)) return null;
        const read = f.mapKind === "enum" ? enumReader(f.enum) : scalarReader(f.scalar);
        valWt = f.mapKind === "enum" ? 0 : wireTypeOf(f.scalar);
        readVal = read;
      }
      return (slots, wireType, end, depth) => {
        if (wireType !== 2) bail();
        const e = lengthEnd(end);
        let key: string | undefined;
        let val: string | undefined;
        while (rp < e) {
          const t = tag(e);
          if (t === 8 + keyWt && key === undefined) key = readKey(e);
          else if (t === 16 + valWt && val === undefined) val = readVal(e, depth);
          else bail(); // an entry the library reads by other rules (repeated key or value, unknown field)
        }
        if (key === undefined || val === undefined) bail(); // the library fills in defaults
        // Same semantics as the library's record: a repeated key keeps its first position and takes the last value.
        ((slots[index] ??= Object.create(null) as Record<string, string>) as Record<string, string>)[key] = val;
      };
    }
  }
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
  }
}

const EMPTY = new Uint8Array(0);
const EMPTY_VIEW = new DataView(EMPTY.buffer);
