/**
 * HPACK (RFC 7541) for the raw HTTP/2 unary client (h2-unary.ts). The decoder is complete, because the backends'
 * encoders (grpc-go, grpc-js on nghttp2) index into the dynamic table and use Huffman coding: indexed fields, literals
 * with and without indexing and never indexed, dynamic table size updates, Huffman strings. The encoder side is only
 * what a client needs to be cheap: static-table names and literals without indexing, no Huffman (so it never touches
 * the peer's dynamic table and its bytes can be cached per path).
 */

/** A malformed or oversized header block: the connection cannot continue (RFC 9113 COMPRESSION_ERROR). */
export class HpackError extends Error {}

/** RFC 7541 Appendix A: index 1..61. */
export const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

/** RFC 7541 Appendix B: code and bit length of symbols 0..255 and EOS (256), as pairs. */
const HUFFMAN: readonly number[] = [
  0x1ff8, 13, 0x7fffd8, 23, 0xfffffe2, 28, 0xfffffe3, 28, 0xfffffe4, 28, 0xfffffe5, 28, 0xfffffe6, 28, 0xfffffe7, 28,
  0xfffffe8, 28, 0xffffea, 24, 0x3ffffffc, 30, 0xfffffe9, 28, 0xfffffea, 28, 0x3ffffffd, 30, 0xfffffeb, 28, 0xfffffec, 28,
  0xfffffed, 28, 0xfffffee, 28, 0xfffffef, 28, 0xffffff0, 28, 0xffffff1, 28, 0xffffff2, 28, 0x3ffffffe, 30, 0xffffff3, 28,
  0xffffff4, 28, 0xffffff5, 28, 0xffffff6, 28, 0xffffff7, 28, 0xffffff8, 28, 0xffffff9, 28, 0xffffffa, 28, 0xffffffb, 28,
  0x14, 6, 0x3f8, 10, 0x3f9, 10, 0xffa, 12, 0x1ff9, 13, 0x15, 6, 0xf8, 8, 0x7fa, 11,
  0x3fa, 10, 0x3fb, 10, 0xf9, 8, 0x7fb, 11, 0xfa, 8, 0x16, 6, 0x17, 6, 0x18, 6,
  0x0, 5, 0x1, 5, 0x2, 5, 0x19, 6, 0x1a, 6, 0x1b, 6, 0x1c, 6, 0x1d, 6,
  0x1e, 6, 0x1f, 6, 0x5c, 7, 0xfb, 8, 0x7ffc, 15, 0x20, 6, 0xffb, 12, 0x3fc, 10,
  0x1ffa, 13, 0x21, 6, 0x5d, 7, 0x5e, 7, 0x5f, 7, 0x60, 7, 0x61, 7, 0x62, 7,
  0x63, 7, 0x64, 7, 0x65, 7, 0x66, 7, 0x67, 7, 0x68, 7, 0x69, 7, 0x6a, 7,
  0x6b, 7, 0x6c, 7, 0x6d, 7, 0x6e, 7, 0x6f, 7, 0x70, 7, 0x71, 7, 0x72, 7,
  0xfc, 8, 0x73, 7, 0xfd, 8, 0x1ffb, 13, 0x7fff0, 19, 0x1ffc, 13, 0x3ffc, 14, 0x22, 6,
  0x7ffd, 15, 0x3, 5, 0x23, 6, 0x4, 5, 0x24, 6, 0x5, 5, 0x25, 6, 0x26, 6,
  0x27, 6, 0x6, 5, 0x74, 7, 0x75, 7, 0x28, 6, 0x29, 6, 0x2a, 6, 0x7, 5,
  0x2b, 6, 0x76, 7, 0x2c, 6, 0x8, 5, 0x9, 5, 0x2d, 6, 0x77, 7, 0x78, 7,
  0x79, 7, 0x7a, 7, 0x7b, 7, 0x7ffe, 15, 0x7fc, 11, 0x3ffd, 14, 0x1ffd, 13, 0xffffffc, 28,
  0xfffe6, 20, 0x3fffd2, 22, 0xfffe7, 20, 0xfffe8, 20, 0x3fffd3, 22, 0x3fffd4, 22, 0x3fffd5, 22, 0x7fffd9, 23,
  0x3fffd6, 22, 0x7fffda, 23, 0x7fffdb, 23, 0x7fffdc, 23, 0x7fffdd, 23, 0x7fffde, 23, 0xffffeb, 24, 0x7fffdf, 23,
  0xffffec, 24, 0xffffed, 24, 0x3fffd7, 22, 0x7fffe0, 23, 0xffffee, 24, 0x7fffe1, 23, 0x7fffe2, 23, 0x7fffe3, 23,
  0x7fffe4, 23, 0x1fffdc, 21, 0x3fffd8, 22, 0x7fffe5, 23, 0x3fffd9, 22, 0x7fffe6, 23, 0x7fffe7, 23, 0xffffef, 24,
  0x3fffda, 22, 0x1fffdd, 21, 0xfffe9, 20, 0x3fffdb, 22, 0x3fffdc, 22, 0x7fffe8, 23, 0x7fffe9, 23, 0x1fffde, 21,
  0x7fffea, 23, 0x3fffdd, 22, 0x3fffde, 22, 0xfffff0, 24, 0x1fffdf, 21, 0x3fffdf, 22, 0x7fffeb, 23, 0x7fffec, 23,
  0x1fffe0, 21, 0x1fffe1, 21, 0x3fffe0, 22, 0x1fffe2, 21, 0x7fffed, 23, 0x3fffe1, 22, 0x7fffee, 23, 0x7fffef, 23,
  0xfffea, 20, 0x3fffe2, 22, 0x3fffe3, 22, 0x3fffe4, 22, 0x7ffff0, 23, 0x3fffe5, 22, 0x3fffe6, 22, 0x7ffff1, 23,
  0x3ffffe0, 26, 0x3ffffe1, 26, 0xfffeb, 20, 0x7fff1, 19, 0x3fffe7, 22, 0x7ffff2, 23, 0x3fffe8, 22, 0x1ffffec, 25,
  0x3ffffe2, 26, 0x3ffffe3, 26, 0x3ffffe4, 26, 0x7ffffde, 27, 0x7ffffdf, 27, 0x3ffffe5, 26, 0xfffff1, 24, 0x1ffffed, 25,
  0x7fff2, 19, 0x1fffe3, 21, 0x3ffffe6, 26, 0x7ffffe0, 27, 0x7ffffe1, 27, 0x3ffffe7, 26, 0x7ffffe2, 27, 0xfffff2, 24,
  0x1fffe4, 21, 0x1fffe5, 21, 0x3ffffe8, 26, 0x3ffffe9, 26, 0xffffffd, 28, 0x7ffffe3, 27, 0x7ffffe4, 27, 0x7ffffe5, 27,
  0xfffec, 20, 0xfffff3, 24, 0xfffed, 20, 0x1fffe6, 21, 0x3fffe9, 22, 0x1fffe7, 21, 0x1fffe8, 21, 0x7ffff3, 23,
  0x3fffea, 22, 0x3fffeb, 22, 0x1ffffee, 25, 0x1ffffef, 25, 0xfffff4, 24, 0xfffff5, 24, 0x3ffffea, 26, 0x7ffff4, 23,
  0x3ffffeb, 26, 0x7ffffe6, 27, 0x3ffffec, 26, 0x3ffffed, 26, 0x7ffffe7, 27, 0x7ffffe8, 27, 0x7ffffe9, 27, 0x7ffffea, 27,
  0x7ffffeb, 27, 0xffffffe, 28, 0x7ffffec, 27, 0x7ffffed, 27, 0x7ffffee, 27, 0x7ffffef, 27, 0x7fffff0, 27, 0x3ffffee, 26,
  0x3fffffff, 30,
];

// Huffman decoding four bits at a time (the shortest code is 5 bits, so a nibble completes at most one symbol). The
// code tree has 256 internal nodes; NEXT[node * 16 + nibble] is where the nibble leads, EMIT the symbol it completes
// (-1 none, 256 EOS, which must not appear in a string). ACCEPT marks the nodes a string may end on: the root and up to
// seven 1-bits of EOS's prefix (RFC 7541 5.2 padding).
const NEXT = new Uint8Array(256 * 16);
const EMIT = new Int16Array(256 * 16);
const ACCEPT = new Uint8Array(256);
{
  // child[node * 2 + bit]: >= 0 an internal node, < 0 the leaf -(symbol + 1).
  const child = new Int32Array(512);
  let nodes = 1;
  for (let sym = 0; sym <= 256; sym++) {
    const code = HUFFMAN[sym * 2]!;
    const len = HUFFMAN[sym * 2 + 1]!;
    let node = 0;
    for (let i = len - 1; i >= 0; i--) {
      const at = node * 2 + ((code / 2 ** i) & 1);
      if (i === 0) child[at] = -(sym + 1);
      else {
        if (child[at] === 0) child[at] = nodes++;
        node = child[at]!;
      }
    }
  }
  for (let node = 0; node < 256; node++) {
    for (let nib = 0; nib < 16; nib++) {
      let n = node;
      let emit = -1;
      for (let b = 3; b >= 0; b--) {
        const c = child[n * 2 + ((nib >> b) & 1)]!;
        if (c < 0) {
          emit = -c - 1;
          n = 0;
        } else n = c;
      }
      NEXT[node * 16 + nib] = n;
      EMIT[node * 16 + nib] = emit;
    }
  }
  for (let node = 0, depth = 0; depth < 8; depth++, node = child[node * 2 + 1]!) ACCEPT[node] = 1;
}

let scratch = Buffer.allocUnsafe(4096);

/** Decode the Huffman-coded bytes buf[start, end) to a latin1 string. */
export function huffmanDecode(buf: Buffer, start: number, end: number): string {
  // A symbol takes at least 5 bits, so the output is at most 8/5 of the input.
  const max = Math.ceil(((end - start) * 8) / 5);
  if (scratch.length < max) scratch = Buffer.allocUnsafe(Math.max(max, scratch.length * 2));
  const out = scratch;
  let n = 0;
  let state = 0;
  for (let i = start; i < end; i++) {
    const byte = buf[i]!;
    let t = state * 16 + (byte >> 4);
    let e = EMIT[t]!;
    if (e >= 0) {
      if (e === 256) throw new HpackError("Huffman string contains EOS");
      out[n++] = e;
    }
    state = NEXT[t]!;
    t = state * 16 + (byte & 15);
    e = EMIT[t]!;
    if (e >= 0) {
      if (e === 256) throw new HpackError("Huffman string contains EOS");
      out[n++] = e;
    }
    state = NEXT[t]!;
  }
  if (ACCEPT[state] !== 1) throw new HpackError("Huffman string has invalid padding");
  return out.toString("latin1", 0, n);
}

/** Receives the fields of a decoded header block, in order. */
export interface HeaderSink {
  header(name: string, value: string): void;
}

/** The entry overhead of RFC 7541 4.1. */
const ENTRY_OVERHEAD = 32;
/** A decoder's first ring size (see HpackDecoder). */
const INITIAL_ENTRIES = 8;

/**
 * One connection's HPACK decoder: its dynamic table lives as long as the connection, and every header block the peer
 * sends must go through it in order (also blocks of streams the client has given up on), or the table falls out of step.
 */
export class HpackDecoder {
  // The dynamic table as a ring, newest at `head - 1`: at most maxTableSize / 32 entries (`maxEntries`). The ring
  // starts small and doubles as entries arrive: a client's table holds a handful of entries (its first request's
  // headers), and a connection that preallocated the bound (two arrays of 128 slots) paid about 2 KB for room it
  // never used, with tens of thousands of idle subscriber connections.
  private names: string[];
  private values: string[];
  private readonly maxEntries: number;
  private head = 0;
  private count = 0;
  private size = 0;
  private tableLimit: number;
  private pos = 0;

  /**
   * @param maxTableSize the SETTINGS_HEADER_TABLE_SIZE this side advertised (4096 unless it sent another); the
   *   peer's size updates may not exceed it.
   * @param maxListSize the largest decoded header list accepted (RFC 7541 4.1 sizes), against header bombs that
   *   repeat a large table entry by a one-byte index.
   */
  constructor(
    private readonly maxTableSize = 4096,
    private readonly maxListSize = 256 * 1024,
  ) {
    this.tableLimit = maxTableSize;
    this.maxEntries = Math.max(1, Math.floor(maxTableSize / ENTRY_OVERHEAD));
    const cap = Math.min(INITIAL_ENTRIES, this.maxEntries);
    this.names = new Array<string>(cap).fill("");
    this.values = new Array<string>(cap).fill("");
  }

  /** The dynamic table's size in RFC 7541 octets (for tests). */
  get tableSize(): number {
    return this.size;
  }

  /** The dynamic table, newest first (for tests). */
  entries(): [string, string][] {
    const out: [string, string][] = [];
    for (let i = 1; i <= this.count; i++) out.push(this.entry(61 + i));
    return out;
  }

  /** Decode one complete header block buf[start, end), handing each field to `sink`. Throws HpackError. */
  decode(buf: Buffer, start: number, end: number, sink: HeaderSink): void {
    this.pos = start;
    let listSize = 0;
    let fields = false;
    while (this.pos < end) {
      const b = buf[this.pos]!;
      let name: string;
      let value: string;
      if (b & 0x80) {
        // Indexed field.
        const idx = this.int(buf, end, 7);
        if (idx === 0) throw new HpackError("index 0 in an indexed field");
        [name, value] = this.entry(idx);
      } else if (b & 0x40) {
        // Literal with incremental indexing.
        const idx = this.int(buf, end, 6);
        name = idx === 0 ? this.str(buf, end) : this.entry(idx)[0];
        value = this.str(buf, end);
        this.add(name, value);
      } else if (b & 0x20) {
        // Dynamic table size update: only before the first field of a block.
        if (fields) throw new HpackError("dynamic table size update after a header field");
        const size = this.int(buf, end, 5);
        if (size > this.maxTableSize) throw new HpackError(`dynamic table size update to ${size} exceeds ${this.maxTableSize}`);
        this.tableLimit = size;
        this.evict(0);
        continue;
      } else {
        // Literal without indexing (0000) or never indexed (0001): both 4-bit name index.
        const idx = this.int(buf, end, 4);
        name = idx === 0 ? this.str(buf, end) : this.entry(idx)[0];
        value = this.str(buf, end);
      }
      fields = true;
      listSize += name.length + value.length + ENTRY_OVERHEAD;
      if (listSize > this.maxListSize) throw new HpackError(`header list larger than ${this.maxListSize} bytes`);
      sink.header(name, value);
    }
  }

  private int(buf: Buffer, end: number, prefix: number): number {
    const mask = (1 << prefix) - 1;
    let v = buf[this.pos++]! & mask;
    if (v < mask) return v;
    let shift = 0;
    for (;;) {
      if (this.pos >= end) throw new HpackError("truncated integer");
      const b = buf[this.pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if ((b & 0x80) === 0) break;
      if (shift > 28) throw new HpackError("integer too large");
    }
    if (v > 0x7fffffff) throw new HpackError("integer too large");
    return v;
  }

  private str(buf: Buffer, end: number): string {
    if (this.pos >= end) throw new HpackError("truncated string");
    const huffman = (buf[this.pos]! & 0x80) !== 0;
    const len = this.int(buf, end, 7);
    const s = this.pos;
    if (len > end - s) throw new HpackError("string longer than the header block");
    this.pos = s + len;
    if (huffman) return huffmanDecode(buf, s, s + len);
    return buf.toString("latin1", s, s + len);
  }

  private entry(idx: number): [string, string] {
    if (idx <= 61) return STATIC_TABLE[idx - 1] as [string, string];
    const d = idx - 62;
    if (d >= this.count) throw new HpackError(`index ${idx} is not in the table`);
    const cap = this.names.length;
    const at = (this.head - 1 - d + cap * 2) % cap;
    return [this.names[at]!, this.values[at]!];
  }

  private add(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    // An entry larger than the table empties it and is not added (RFC 7541 4.4).
    if (size > this.tableLimit) {
      this.evict(this.tableLimit + 1);
      return;
    }
    this.evict(size);
    if (this.count === this.names.length) this.grow();
    const cap = this.names.length;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.head = (this.head + 1) % cap;
    this.count++;
    this.size += size;
  }

  /**
   * Double the ring (up to maxEntries, which the size bound keeps `count` within), oldest entry first at slot 0. Only
   * called when the ring is full, so its entries run from `head` around to `head - 1`.
   */
  private grow(): void {
    const cap = this.names.length;
    const next = Math.min(cap * 2, this.maxEntries);
    const names = new Array<string>(next).fill("");
    const values = new Array<string>(next).fill("");
    for (let i = 0; i < cap; i++) {
      names[i] = this.names[(this.head + i) % cap]!;
      values[i] = this.values[(this.head + i) % cap]!;
    }
    this.names = names;
    this.values = values;
    this.head = cap % next;
  }

  /** Evict the oldest entries until `room` more octets fit. */
  private evict(room: number): void {
    const cap = this.names.length;
    while (this.count > 0 && this.size + room > this.tableLimit) {
      const at = (this.head - this.count + cap) % cap;
      this.size -= this.names[at]!.length + this.values[at]!.length + ENTRY_OVERHEAD;
      this.names[at] = "";
      this.values[at] = "";
      this.count--;
    }
  }
}

/** Write an HPACK integer with an N-bit prefix at `pos` (the first byte's high bits from `flags`); returns the end. */
export function writeInt(out: Buffer, pos: number, value: number, prefix: number, flags: number): number {
  const mask = (1 << prefix) - 1;
  if (value < mask) {
    out[pos++] = flags | value;
    return pos;
  }
  out[pos++] = flags | mask;
  value -= mask;
  while (value >= 0x80) {
    out[pos++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 128);
  }
  out[pos++] = value;
  return pos;
}

/** The most bytes literalField writes for these lengths. */
export function literalFieldBound(nameLength: number, valueLength: number): number {
  return 12 + nameLength + valueLength;
}

/**
 * Write a "literal header field without indexing" (RFC 7541 6.2.2), plain (not Huffman) strings: the name by static
 * index when `nameIndex` > 0, else as a string. Strings are written as latin1 (header names and gRPC metadata values are
 * ASCII). Returns the end.
 */
export function literalField(out: Buffer, pos: number, nameIndex: number, name: string, value: string): number {
  if (nameIndex > 0) pos = writeInt(out, pos, nameIndex, 4, 0);
  else {
    out[pos++] = 0;
    pos = writeInt(out, pos, name.length, 7, 0);
    pos += out.write(name, pos, "latin1");
  }
  pos = writeInt(out, pos, value.length, 7, 0);
  pos += out.write(value, pos, "latin1");
  return pos;
}

/** Huffman-code a latin1 string (RFC 7541 5.2; the client does not send Huffman strings: the warm-up's echo backend, tests and fakes). */
export function huffmanEncode(s: string): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < s.length; i++) {
    const sym = s.charCodeAt(i) & 0xff;
    const code = HUFFMAN[sym * 2]!;
    for (let b = HUFFMAN[sym * 2 + 1]! - 1; b >= 0; b--) {
      acc = (acc << 1) | ((code / 2 ** b) & 1);
      if (++bits === 8) {
        out.push(acc);
        acc = 0;
        bits = 0;
      }
    }
  }
  if (bits > 0) out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) & 0xff);
  return Buffer.from(out);
}
