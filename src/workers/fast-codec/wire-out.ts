/**
 * The fast encoder's output (encode.ts): protobuf wire bytes in one growable scratch buffer per thread (conversions
 * are synchronous, so never shared by two calls). Length-delimited records reserve one byte for their length and
 * shift their body when it needs more (fork/join); every varint is the library's (BinaryWriter) byte for byte.
 */
import { bail } from "./common.js";


const INITIAL = 8192;
const KEEP = 1 << 20; // a scratch buffer grown past this by one large message is dropped afterwards

let buf = new Uint8Array(INITIAL);
let view = new DataView(buf.buffer);
let pos = 0;
const forks: number[] = [];

function grow(required: number): void {
  let len = buf.length * 2;
  while (len < required) len *= 2;
  const next = new Uint8Array(len);
  next.set(buf.subarray(0, pos));
  buf = next;
  view = new DataView(next.buffer);
}

function ensure(n: number): void {
  if (pos + n > buf.length) grow(pos + n);
}

export function varint32(v: number): void {
  ensure(5);
  while (v > 0x7f) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
}

export function int32(v: number): void {
  if (v >= 0) return varint32(v);
  ensure(10); // negative: sign-extended to 64 bits, ten bytes
  for (let i = 0; i < 9; i++) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>= 7;
  }
  buf[pos++] = 1;
}

// Port of the library's BinaryWriter.writeVarint64 (same bytes for every lo/hi).
export function varint64(lo: number, hi: number): void {
  ensure(10);
  for (let i = 0; i < 28; i += 7) {
    const shift = lo >>> i;
    const more = !(shift >>> 7 === 0 && hi === 0);
    buf[pos++] = (more ? shift | 0x80 : shift) & 0xff;
    if (!more) return;
  }
  const split = ((lo >>> 28) & 0x0f) | ((hi & 0x07) << 4);
  const moreHi = !(hi >> 3 === 0);
  buf[pos++] = (moreHi ? split | 0x80 : split) & 0xff;
  if (!moreHi) return;
  for (let i = 3; i < 31; i += 7) {
    const shift = hi >>> i;
    const more = !(shift >>> 7 === 0);
    buf[pos++] = (more ? shift | 0x80 : shift) & 0xff;
    if (!more) return;
  }
  buf[pos++] = (hi >>> 31) & 0x01;
}

function varint32Size(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** UTF-8 with its length prefix. A lone surrogate bails: the library rejects it ("invalid UTF8"). */
export function string(s: string): void {
  const len = s.length;
  ensure(len * 3 + 5);
  const guess = varint32Size(len);
  const start = pos + guess;
  let p = start;
  for (let i = 0; i < len; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      buf[p++] = c;
    } else if (c < 0x800) {
      buf[p++] = 0xc0 | (c >> 6);
      buf[p++] = 0x80 | (c & 0x3f);
    } else if (c >= 0xd800 && c <= 0xdfff) {
      const d = c <= 0xdbff && i + 1 < len ? s.charCodeAt(i + 1) : 0;
      if (d < 0xdc00 || d > 0xdfff) bail();
      i++;
      c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
      buf[p++] = 0xf0 | (c >> 18);
      buf[p++] = 0x80 | ((c >> 12) & 0x3f);
      buf[p++] = 0x80 | ((c >> 6) & 0x3f);
      buf[p++] = 0x80 | (c & 0x3f);
    } else {
      buf[p++] = 0xe0 | (c >> 12);
      buf[p++] = 0x80 | ((c >> 6) & 0x3f);
      buf[p++] = 0x80 | (c & 0x3f);
    }
  }
  const written = p - start;
  const size = varint32Size(written);
  if (size !== guess) buf.copyWithin(pos + size, start, p);
  varint32(written);
  pos += written;
}

export function fork(): void {
  ensure(1);
  forks.push(pos);
  buf[pos++] = 0; // one byte reserved for the length: shifted in join() when the body is 128 bytes or more
}

export function join(): void {
  const at = forks.pop()!;
  const len = pos - at - 1;
  const size = varint32Size(len);
  if (size > 1) {
    ensure(size - 1);
    buf.copyWithin(at + size, at + 1, pos);
  }
  const end = pos + size - 1;
  pos = at;
  varint32(len);
  pos = end;
}

/** 8 bytes, little-endian: the two's complement words of a 64-bit integer (fixed64, sfixed64). */
export function fixed64(lo: number, hi: number): void {
  ensure(8);
  view.setInt32(pos, lo, true);
  view.setInt32(pos + 4, hi, true);
  pos += 8;
}

export function double(v: number): void {
  ensure(8);
  view.setFloat64(pos, v, true);
  pos += 8;
}

export function float(v: number): void {
  ensure(4);
  view.setFloat32(pos, v, true);
  pos += 4;
}

export function sfixed32(v: number): void {
  ensure(4);
  view.setInt32(pos, v, true);
  pos += 4;
}

export function fixed32(v: number): void {
  ensure(4);
  view.setUint32(pos, v, true);
  pos += 4;
}

/** Raw bytes (after their length). */
export function raw(b: Uint8Array): void {
  ensure(b.length);
  buf.set(b, pos);
  pos += b.length;
}

/** One byte, or two (a one-byte tag and a one-byte value). */
export function byte(b: number): void {
  ensure(1);
  buf[pos++] = b;
}

export function bytes2(a: number, b: number): void {
  ensure(2);
  buf[pos++] = a;
  buf[pos++] = b;
}

/** Start a conversion's bytes. */
export function startBytes(): void {
  pos = 0;
  forks.length = 0;
}

/** The bytes written since startBytes(), copied out. */
export function finishBytes(): Uint8Array {
  return buf.slice(0, pos);
}

/** After a conversion: drop a scratch buffer one large message grew. */
export function releaseBytes(): void {
  if (buf.length > KEEP) {
    buf = new Uint8Array(INITIAL);
    view = new DataView(buf.buffer);
  }
}
