import { STATIC_TABLE, huffmanEncode, literalField, literalFieldBound, writeInt } from "./hpack.js";
import type { HeaderList } from "./types.js";

/**
 * HPACK encoding of response header lists for the native HTTP/2 server (src/h2/server-session.ts). A field that equals a
 * static-table entry (`:status: 200`) is one indexed byte; any other field is a "literal without indexing" (the name by
 * static index when it has one), never Huffman. The encoder never inserts into the client's dynamic table, so a block
 * depends only on the header list, not on the connection: the blocks of the few lists a gRPC server sends over and over
 * (`:status 200` + `content-type`, `grpc-status: 0`) are cached process-wide and reused without re-encoding.
 */

/** Full static-table matches ("name\0value" -> index) and first static index of each name. */
const EXACT = new Map<string, number>();
const NAME = new Map<string, number>();
STATIC_TABLE.forEach(([n, v], i) => {
  if (v !== "") EXACT.set(`${n}\0${v}`, i + 1);
  if (!NAME.has(n)) NAME.set(n, i + 1);
});

/** Encode `list` as one header block (no frame header). */
export function encodeHeaderList(list: HeaderList): Buffer {
  let bound = 0;
  for (let i = 0; i < list.length; i++) bound += literalFieldBound(list[i]![0].length * 3, list[i]![1].length * 3);
  const out = Buffer.allocUnsafe(bound);
  let p = 0;
  for (let i = 0; i < list.length; i++) {
    const [name, value] = list[i]!;
    const exact = EXACT.get(`${name}\0${value}`);
    if (exact !== undefined) p = writeInt(out, p, exact, 7, 0x80);
    else p = literalField(out, p, NAME.get(name) ?? 0, name, value);
  }
  return out.subarray(0, p);
}

/** Blocks cached: a small ring, searched linearly (strings the gRPC layer reuses compare by identity first). */
const CACHE_SLOTS = 32;
/** Blocks larger than this are encoded every time (they carry per-call values, e.g. a long grpc-message). */
const CACHE_MAX_BLOCK = 256;
const cacheKeys: (string[] | undefined)[] = new Array<string[] | undefined>(CACHE_SLOTS);
const cacheBlocks: (Buffer | undefined)[] = new Array<Buffer | undefined>(CACHE_SLOTS);
let cacheNext = 0;

/** The header block of `list`, from the cache when the same list (by value) was encoded recently. */
export function headerBlock(list: HeaderList): Buffer {
  const n = list.length * 2;
  search: for (let i = 0; i < CACHE_SLOTS; i++) {
    const k = cacheKeys[i];
    if (k === undefined) break;
    if (k.length !== n) continue;
    for (let j = 0; j < list.length; j++) {
      const f = list[j]!;
      if (k[2 * j] !== f[0] || k[2 * j + 1] !== f[1]) continue search;
    }
    return cacheBlocks[i]!;
  }
  const block = encodeHeaderList(list);
  if (block.length <= CACHE_MAX_BLOCK) {
    const key: string[] = [];
    for (const [name, value] of list) key.push(name, value);
    cacheKeys[cacheNext] = key;
    cacheBlocks[cacheNext] = block;
    cacheNext = (cacheNext + 1) % CACHE_SLOTS;
  }
  return block;
}

/** RFC 7541 4.1: an entry's size is its name's and value's lengths plus 32. */
const ENTRY_OVERHEAD = 32;
/** The dynamic table a decoder has until it says otherwise (SETTINGS_HEADER_TABLE_SIZE's initial value). */
const DEFAULT_TABLE_SIZE = 4096;

/**
 * HPACK as grpc-go's and nghttp2's servers write it: a field of the static table is one indexed byte; any other is
 * looked up in this connection's dynamic table, sent as an indexed byte when there, else as a literal with incremental
 * indexing (the name by static index when it has one) with both strings Huffman-coded, and inserted. Stateful per
 * connection: each block must reach the client in the order it was encoded. A server uses it only when told to
 * (H2ServerOptions `headerEncoding: "indexed"`): the warm-up's echo backend (src/main/warmup-invoke.ts), so that the
 * gateway's backend client has decoded what a real backend sends before its first call; the gateway's own server
 * keeps `headerBlock`, which costs nothing per connection.
 */
export class IndexingEncoder {
  /** The dynamic table, newest first (HPACK index 62 is entries[0]). */
  private readonly entries: Array<readonly [name: string, value: string]> = [];
  private size = 0;

  /** @param maxSize the client's SETTINGS_HEADER_TABLE_SIZE (its initial 4096 unless it announced another). */
  constructor(private readonly maxSize = DEFAULT_TABLE_SIZE) {}

  /** Encode `list` as one header block, updating the table as the client's decoder will. */
  encode(list: HeaderList): Buffer {
    const parts: Buffer[] = [];
    for (const [name, value] of list) {
      const exact = EXACT.get(`${name}\0${value}`);
      if (exact !== undefined) {
        parts.push(intBytes(exact, 7, 0x80));
        continue;
      }
      const at = this.entries.findIndex(([n, v]) => n === name && v === value);
      if (at >= 0) {
        parts.push(intBytes(STATIC_TABLE.length + 1 + at, 7, 0x80));
        continue;
      }
      const nameIndex = NAME.get(name);
      parts.push(intBytes(nameIndex ?? 0, 6, 0x40));
      if (nameIndex === undefined) parts.push(huffmanString(name));
      parts.push(huffmanString(value));
      this.insert(name, value);
    }
    return Buffer.concat(parts);
  }

  private insert(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    this.entries.unshift([name, value]);
    this.size += size;
    while (this.size > this.maxSize) {
      const [n, v] = this.entries.pop()!;
      this.size -= n.length + v.length + ENTRY_OVERHEAD;
    }
  }
}

/** An HPACK integer with a `prefix`-bit prefix and `flags` in the first byte's high bits. */
function intBytes(value: number, prefix: number, flags: number): Buffer {
  const out = Buffer.allocUnsafe(6);
  return out.subarray(0, writeInt(out, 0, value, prefix, flags));
}

/** A Huffman-coded HPACK string: its length with the H bit, then the code. */
function huffmanString(s: string): Buffer {
  const code = huffmanEncode(s);
  return Buffer.concat([intBytes(code.length, 7, 0x80), code]);
}
