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

/**
 * A word source: xoshiro128** (Blackman and Vigna), seeded (for ids: from the operating system's random source when the
 * module loads, each thread's isolate its own): a few integer operations per word. Ids are not secrets, and the
 * OpenTelemetry SDKs draw them from non-cryptographic generators too (Go's seeded math/rand, JavaScript's
 * Math.random); drawn from crypto.randomFillSync, 56 bytes per traced invoke cost about 0.5 us of its CPU. Words are
 * signed 32-bit integers (see above).
 */
export function xoshiro128ss(seed: Int32Array): () => number {
  if (allZero(seed)) throw new RangeError("xoshiro128** needs a seed that is not all zeros");
  let x0 = seed[0]!;
  let x1 = seed[1]!;
  let x2 = seed[2]!;
  let x3 = seed[3]!;
  return () => {
    const m = Math.imul(x1, 5);
    const out = Math.imul((m << 7) | (m >>> 25), 9);
    const t = x1 << 9;
    x2 ^= x0;
    x3 ^= x1;
    x1 ^= x2;
    x0 ^= x3;
    x2 ^= t;
    x3 = (x3 << 11) | (x3 >>> 21);
    return out;
  };
}

/** Whether a xoshiro128** state is the one it cannot leave. */
function allZero(seed: Int32Array): boolean {
  return (seed[0]! | seed[1]! | seed[2]! | seed[3]!) === 0;
}

function osSeed(): Int32Array {
  const seed = new Int32Array(4);
  do randomFillSync(seed);
  while (allZero(seed));
  return seed;
}

/** A random 32-bit word (signed, see above). */
export const randomWord = xoshiro128ss(osSeed());

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

  get hex(): string {
    return (this.text ??= hex32(this.w0) + hex32(this.w1) + hex32(this.w2) + hex32(this.w3));
  }

  /** "00-<trace id>-": a W3C traceparent up to its span id (made once per trace, every client span of it sends one). */
  get headerPrefix(): string {
    return (this.prefix ??= `00-${this.hex}-`);
  }
}

/** A W3C `traceparent`'s context: its trace, the parent span id's words and the trace flags. */
export interface Traceparent {
  readonly trace: TraceId;
  readonly s0: number;
  readonly s1: number;
  readonly flags: number;
}

/** Hex digit values of the lowercase digits W3C trace context allows; -1 for every other code unit below 128. */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) HEX_VALUE["0123456789abcdef".charCodeAt(i)] = i;

/** The value of the lowercase hex digit at `i` of `s`; -1 for anything else (or past the end). */
function hexDigit(s: string, i: number): number {
  const c = s.charCodeAt(i);
  return c < 128 ? HEX_VALUE[c]! : -1;
}

/** The 32-bit word (signed, see above) of the 8 hex digits at `at`; NaN when one is not a lowercase hex digit. */
function hexWord(s: string, at: number): number {
  let w = 0;
  for (let i = at; i < at + 8; i++) {
    const d = hexDigit(s, i);
    if (d < 0) return NaN;
    w = (w << 4) | d;
  }
  return w;
}

/** The byte of the two hex digits at `at`; -1 when one is not a lowercase hex digit. */
function hexByte(s: string, at: number): number {
  const hi = hexDigit(s, at);
  const lo = hexDigit(s, at + 1);
  return hi < 0 || lo < 0 ? -1 : (hi << 4) | lo;
}

const DASH = 0x2d;
const WHITESPACE = /^\s$/;

/**
 * Parse a W3C `traceparent` header: undefined when it is malformed or names the invalid (all-zero) trace or span.
 * It accepts what the OpenTelemetry SDK's propagator accepts (test/unit/trace-ids.test.ts checks the two against each
 * other): one optional whitespace character at either end, version `ff` refused, and for a version other than `00`
 * more fields after the flags. Words come straight from the digits: no regular expression, substring or parseInt.
 */
export function parseTraceparent(header: string): Traceparent | undefined {
  const end = header.length;
  // A leading whitespace character is skipped (asked of the regular expression only when the first is not a digit).
  const at = end > 0 && hexDigit(header, 0) < 0 && WHITESPACE.test(header[0]!) ? 1 : 0;
  if (end - at < 55) return undefined;
  if (header.charCodeAt(at + 2) !== DASH || header.charCodeAt(at + 35) !== DASH || header.charCodeAt(at + 52) !== DASH) return undefined;
  const version = hexByte(header, at);
  const flags = hexByte(header, at + 53);
  if (version < 0 || version === 0xff || flags < 0) return undefined;
  if (end > at + 55) {
    // More after the flags: a future version's fields (`-...`), or one trailing whitespace character.
    const next = header.charCodeAt(at + 55);
    if (next === DASH) {
      if (version === 0) return undefined;
    } else if (end !== at + 56 || !WHITESPACE.test(header[at + 55]!)) return undefined;
  }
  const w0 = hexWord(header, at + 3);
  const w1 = hexWord(header, at + 11);
  const w2 = hexWord(header, at + 19);
  const w3 = hexWord(header, at + 27);
  const s0 = hexWord(header, at + 36);
  const s1 = hexWord(header, at + 44);
  // NaN | 0 is 0, so a bad digit is caught by the isNaN checks, never by the all-zero ones.
  if (Number.isNaN(w0 + w1 + w2 + w3 + s0 + s1)) return undefined;
  if ((w0 | w1 | w2 | w3) === 0 || (s0 | s1) === 0) return undefined;
  return { trace: new TraceId(w0, w1, w2, w3), s0, s1, flags };
}

/** A random word that is not zero: the last word of a new id, so that no id is all zeros (0 becomes 1: a 2^-32 bias). */
export function nonZeroWord(): number {
  return randomWord() || 1;
}
