import { randomFillSync } from "node:crypto";

/**
 * Trace and span ids as 32-bit words (the id's bytes in order, big-endian words): made from a pool of random words
 * without a string per id, written into OTLP protobuf as bytes, turned into hex only where a header or an exemplar
 * needs it. The SDK draws each id's hex digit by digit from Math.random.
 *
 * A word is kept as a signed 32-bit integer (its bits, read with `>>>` where they are written out): V8 keeps those in
 * the object as small integers, where an unsigned word above 2^31 is a heap number, and once a field has held one,
 * every span after it allocates a box for that field (four ids per span, four words per trace).
 */

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** A word as 8 lowercase hex digits. */
function hex32(w: number): string {
  return HEX[w >>> 24]! + HEX[(w >>> 16) & 0xff]! + HEX[(w >>> 8) & 0xff]! + HEX[w & 0xff]!;
}

/** A span id (its two words) as 16 lowercase hex digits. */
export function spanHex(hi: number, lo: number): string {
  return hex32(hi) + hex32(lo);
}

const pool = new Int32Array(1024);
let poolAt = pool.length;
export function randomWord(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++]!;
}

/** A trace id (shared by every span of the trace this process records); never all zeros. */
export class TraceId {
  private text: string | undefined;
  private prefix: string | undefined;
  constructor(
    readonly w0: number,
    readonly w1: number,
    readonly w2: number,
    readonly w3: number,
  ) {}

  static random(): TraceId {
    return new TraceId(randomWord(), randomWord(), randomWord(), nonZeroWord());
  }

  /** From 32 hex digits (checked by the caller). */
  static parse(hex: string): TraceId {
    return new TraceId(parseInt(hex.slice(0, 8), 16) | 0, parseInt(hex.slice(8, 16), 16) | 0, parseInt(hex.slice(16, 24), 16) | 0, parseInt(hex.slice(24, 32), 16) | 0);
  }

  get hex(): string {
    return (this.text ??= hex32(this.w0) + hex32(this.w1) + hex32(this.w2) + hex32(this.w3));
  }

  /** "00-<trace id>-": a W3C traceparent up to its span id (made once per trace, every client span of it sends one). */
  get headerPrefix(): string {
    return (this.prefix ??= `00-${this.hex}-`);
  }
}

/** A random word that is not zero: the last word of a new id, so that no id is all zeros (0 becomes 1: a 2^-32 bias). */
export function nonZeroWord(): number {
  return randomWord() || 1;
}
