/**
 * A gRPC call's metadata: the request's custom headers as a handler sees them, and the headers and trailers it sends.
 * Keys are lower-case; a key ending in `-bin` holds Buffers (base64 on the wire), any other key printable-ASCII
 * strings. The rules are grpc-js 1.14's (build/src/metadata.js), so a handler sees what it saw under grpc-js.
 */

/** One value: a Buffer for a `-bin` key, a string otherwise. */
export type MetadataValue = string | Buffer;

const LEGAL_KEY = /^[0-9a-z_.-]+$/;
const LEGAL_VALUE = /^[ -~]*$/;

/** Whether `key` holds binary values. */
export function isBinaryKey(key: string): boolean {
  return key.endsWith("-bin");
}

/** An ordered multi-map of metadata entries. */
export class CallMetadata {
  private readonly map = new Map<string, MetadataValue[]>();

  /**
   * Add a value after any others of `key`. Throws a TypeError naming the key when the key has characters a header
   * name may not have, a `-bin` key gets a string (or another key a Buffer), or a string value is not printable ASCII.
   */
  add(key: string, value: MetadataValue): void {
    const k = key.toLowerCase();
    check(k, value);
    const list = this.map.get(k);
    if (list) list.push(value);
    else this.map.set(k, [value]);
  }

  /** Replace every value of `key` with `value`. */
  set(key: string, value: MetadataValue): void {
    const k = key.toLowerCase();
    check(k, value);
    this.map.set(k, [value]);
  }

  /** Every value of `key`, in order (empty when none). */
  get(key: string): readonly MetadataValue[] {
    return this.map.get(key.toLowerCase()) ?? [];
  }

  /** The string values of `key` (a `-bin` key has none). */
  strings(key: string): string[] {
    return this.get(key).filter((v): v is string => typeof v === "string");
  }

  /** Remove `key`. */
  delete(key: string): void {
    this.map.delete(key.toLowerCase());
  }

  /** Entries in insertion order, each key once with all of its values. */
  entries(): IterableIterator<[string, MetadataValue[]]> {
    return this.map.entries();
  }

  /** No entries. */
  get empty(): boolean {
    return this.map.size === 0;
  }

  /** A copy (the value lists are copied, Buffers shared). */
  clone(): CallMetadata {
    const out = new CallMetadata();
    for (const [k, vs] of this.map) out.map.set(k, [...vs]);
    return out;
  }

  /** `{key: values}` (what grpc-js's Metadata.toJSON gives). */
  toJSON(): Record<string, MetadataValue[]> {
    return Object.fromEntries(this.map);
  }

  /**
   * One request header's value as node:http2 hands grpc-js a header (repeats already joined with ", "): a custom `-bin`
   * value is split at commas and each part base64-decoded; an entry grpc-js would refuse (bad key or value) is
   * dropped, as grpc-js drops it (it only logs).
   */
  addFromHeader(key: string, value: string): void {
    if (!LEGAL_KEY.test(key)) return;
    if (isBinaryKey(key)) {
      const parts = key.startsWith("grpc-") ? [value] : value.split(",").map((v) => v.trim());
      for (const p of parts) this.add(key, Buffer.from(p, "base64"));
      return;
    }
    if (LEGAL_VALUE.test(value)) this.add(key, value);
  }
}

function check(key: string, value: MetadataValue): void {
  if (!LEGAL_KEY.test(key)) throw new TypeError(`metadata key "${key}" contains characters a header name may not have`);
  if (isBinaryKey(key)) {
    if (!Buffer.isBuffer(value)) throw new TypeError(`metadata key "${key}" ends in -bin and takes Buffer values`);
  } else if (typeof value !== "string") {
    throw new TypeError(`metadata key "${key}" takes string values (only -bin keys take Buffers)`);
  } else if (!LEGAL_VALUE.test(value)) {
    throw new TypeError(`metadata value of "${key}" must be printable ASCII`);
  }
}
