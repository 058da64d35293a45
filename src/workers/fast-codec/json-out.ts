/**
 * The fast decoder's output (decode.ts): the JSON text as UTF-8 bytes in a scratch buffer per thread, made into one
 * string at the end (latin1-sliced when it is all ASCII). Writes exactly what JSON.stringify would for the same
 * values: its string escapes, its number forms, standard padded base64 for bytes (the library's base64Encode).
 */
import { bail } from "./common.js";

// Buffer's native slices (what `toString(encoding, start, end)` calls after checking its arguments, at a third of
// the cost for short strings); untyped in @types/node.
declare module "node:buffer" {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
    utf8Slice(start: number, end: number): string;
  }
}


const OUT_INITIAL = 16384;
const OUT_KEEP = 1 << 20; // a buffer grown past this by one large message is dropped afterwards

let ob = new Uint8Array(OUT_INITIAL);
let obuf = Buffer.from(ob.buffer);
let op = 0;
/** No byte >= 0x80 written: the text is latin1-sliced instead of UTF-8-decoded. */
let oascii = true;

function grow(n: number): void {
  let len = ob.length * 2;
  while (len < op + n) len *= 2;
  const next = new Uint8Array(len);
  next.set(ob.subarray(0, op));
  ob = next;
  obuf = Buffer.from(next.buffer);
}

function ensure(n: number): void {
  if (op + n > ob.length) grow(n);
}

export function outByte(b: number): void {
  if (op >= ob.length) grow(1);
  ob[op++] = b;
}

/** A string known to be ASCII (numbers, names, dates). */
export function outAscii(s: string): void {
  const n = s.length;
  ensure(n);
  for (let i = 0; i < n; i++) ob[op++] = s.charCodeAt(i);
}

/** Pre-encoded UTF-8 (keys, enum names). */
export function outBytes(b: Uint8Array): void {
  const n = b.length;
  ensure(n);
  if (n > 32) {
    ob.set(b, op);
    op += n;
    return;
  }
  for (let i = 0; i < n; i++) ob[op++] = b[i]!; // short keys: a loop beats set()'s call overhead
}

const textEncoder = new TextEncoder();

/** Any well-formed JS string, as UTF-8. */
export function outText(s: string): void {
  const n = s.length;
  ensure(n * 3);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) {
      oascii = false;
      op += textEncoder.encodeInto(s.substring(i), ob.subarray(op)).written;
      return;
    }
    ob[op++] = c;
  }
}

/** UTF-8 of JSON text (key and colon, an enum name in quotes). */
export function encoded(text: string): Uint8Array {
  return textEncoder.encode(text);
}

const HEX = "0123456789abcdef";

/**
 * A string value's UTF-8 bytes, as JSON: validated as UTF-8 exactly as the library's strict TextDecoder does, and
 * escaped exactly as JSON.stringify does (\" \\ \b \f \n \r \t, other control characters as \u00xx).
 */
export function outString(buf: Uint8Array, start: number, e: number): void {
  ensure((e - start) * 6 + 2);
  let p = op;
  const o = ob;
  o[p++] = 34;
  let i = start;
  while (i < e) {
    const b = buf[i]!;
    if (b >= 0x20 && b < 0x80) {
      if (b === 0x22 || b === 0x5c) {
        o[p++] = 0x5c;
      }
      o[p++] = b;
      i++;
    } else if (b < 0x20) {
      o[p++] = 0x5c;
      switch (b) {
        case 8:
          o[p++] = 98; // b
          break;
        case 9:
          o[p++] = 116; // t
          break;
        case 10:
          o[p++] = 110; // n
          break;
        case 12:
          o[p++] = 102; // f
          break;
        case 13:
          o[p++] = 114; // r
          break;
        default:
          o[p++] = 117; // u00xx
          o[p++] = 48;
          o[p++] = 48;
          o[p++] = HEX.charCodeAt(b >> 4);
          o[p++] = HEX.charCodeAt(b & 15);
      }
      i++;
    } else {
      // A multi-byte sequence: the WHATWG decoder's rules (no overlong forms, no surrogates, at most U+10FFFF).
      let n: number;
      let lo = 0x80;
      let hi = 0xbf;
      if (b >= 0xc2 && b <= 0xdf) n = 1;
      else if (b >= 0xe0 && b <= 0xef) {
        n = 2;
        if (b === 0xe0) lo = 0xa0;
        else if (b === 0xed) hi = 0x9f;
      } else if (b >= 0xf0 && b <= 0xf4) {
        n = 3;
        if (b === 0xf0) lo = 0x90;
        else if (b === 0xf4) hi = 0x8f;
      } else return bail();
      if (i + n >= e) bail(); // truncated sequence
      const c1 = buf[i + 1]!;
      if (c1 < lo || c1 > hi) bail();
      for (let k = 2; k <= n; k++) {
        const c = buf[i + k]!;
        if (c < 0x80 || c > 0xbf) bail();
      }
      for (let k = 0; k <= n; k++) o[p++] = buf[i + k]!;
      i += n + 1;
      oascii = false;
    }
  }
  o[p++] = 34;
  op = p;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64C = Uint8Array.from(B64, (c) => c.charCodeAt(0));

/** Bytes as standard base64 with padding, in quotes (the library's base64Encode). */
export function outBase64(buf: Uint8Array, start: number, e: number): void {
  const len = e - start;
  ensure(((len + 2) / 3) * 4 + 2);
  const o = ob;
  let p = op;
  o[p++] = 34;
  let i = start;
  for (; i + 2 < e; i += 3) {
    const v = (buf[i]! << 16) | (buf[i + 1]! << 8) | buf[i + 2]!;
    o[p++] = B64C[v >> 18]!;
    o[p++] = B64C[(v >> 12) & 63]!;
    o[p++] = B64C[(v >> 6) & 63]!;
    o[p++] = B64C[v & 63]!;
  }
  if (e - i === 1) {
    const v = buf[i]! << 16;
    o[p++] = B64C[v >> 18]!;
    o[p++] = B64C[(v >> 12) & 63]!;
    o[p++] = 61;
    o[p++] = 61;
  } else if (e - i === 2) {
    const v = (buf[i]! << 16) | (buf[i + 1]! << 8);
    o[p++] = B64C[v >> 18]!;
    o[p++] = B64C[(v >> 12) & 63]!;
    o[p++] = B64C[(v >> 6) & 63]!;
    o[p++] = 61;
  }
  o[p++] = 34;
  op = p;
}

export function outFloat(v: number): boolean {
  if (Number.isNaN(v)) outAscii('"NaN"');
  else if (v === Infinity) outAscii('"Infinity"');
  else if (v === -Infinity) outAscii('"-Infinity"');
  else outAscii(String(v));
  return Object.is(v, 0);
}

export function outInt(n: number): boolean {
  if (n >= 0 && n < 10) outByte(48 + n);
  else outAscii(String(n));
  return n === 0;
}

export function outQuoted(text: string): void {
  ensure(text.length + 2);
  ob[op++] = 34;
  outAscii(text);
  ob[op++] = 34;
}

/** A key as JSON: printable ASCII other than " and \ as is, anything else through JSON.stringify. */
export function outKey(k: string): void {
  const n = k.length;
  ensure(n + 2);
  const at = op;
  ob[op++] = 34;
  for (let i = 0; i < n; i++) {
    const c = k.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
      op = at;
      return outText(JSON.stringify(k));
    }
    ob[op++] = c;
  }
  ob[op++] = 34;
}


/** Start a conversion's text. */
export function startOutput(): void {
  op = 0;
  oascii = true;
}

/** The text written since startOutput(), as one string. */
export function outputText(): string {
  return oascii ? obuf.latin1Slice(0, op) : obuf.utf8Slice(0, op);
}

/** After a conversion: drop a scratch buffer one large message grew. */
export function releaseOutput(): void {
  if (ob.length > OUT_KEEP) {
    ob = new Uint8Array(OUT_INITIAL);
    obuf = Buffer.from(ob.buffer);
  }
}

/** Where the text is now (to undo a key written for a value that turns out to be left out). */
export function mark(): number {
  return op;
}

/** Back to a mark(). */
export function reset(m: number): void {
  op = m;
}

/** Bytes >= 0x80 were written by other means (pre-encoded keys or names): decode the text as UTF-8. */
export function notAscii(): void {
  oascii = false;
}
