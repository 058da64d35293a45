import type { SpanAttributes } from "./span.js";
import { spanHex, type TraceId } from "./trace-ids.js";

/**
 * Spans' data and their OTLP encodings (ExportTraceServiceRequest of opentelemetry-proto's collector/trace/v1,
 * protobuf and JSON). The SDK's exporters keep its ReadableSpan objects until export and build an intermediate object
 * tree per span before writing it; here a span is written straight into its batch's buffer when it ends (measured in
 * docs/observability.md: the SDK's serializer about 2 us a span, and spans kept for seconds cost the GC).
 */

/** OTLP span kinds (SPAN_KIND_*). */
export const OtlpKind = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;
export type OtlpKind = (typeof OtlpKind)[keyof typeof OtlpKind];

/** A span context: the trace, the span id's words (both 0: none), the W3C flags and trace state. */
export interface SpanContextWords {
  readonly trace: TraceId;
  readonly s0: number;
  readonly s1: number;
  readonly traceState: string | undefined;
  readonly flags: number;
}

export interface SpanEvent {
  readonly name: string;
  /** performance.now() */
  readonly time: number;
  readonly attributes: SpanAttributes | undefined;
}

/** One span's data (recorded while open, exported once ended). */
export interface SpanData extends SpanContextWords {
  /** The parent span id's words; both 0 for a root span. */
  readonly p0: number;
  readonly p1: number;
  readonly name: string;
  readonly kind: OtlpKind;
  /** performance.now() at start and end. */
  readonly startTime: number;
  readonly endTime: number;
  /** Attributes given at start (often a frozen object shared by every span of a route). */
  readonly attributes: SpanAttributes | undefined;
  /** Attributes set later, as key/value pairs in order. */
  readonly extra: ReadonlyArray<string | number | boolean> | undefined;
  /** The gRPC status code (`rpc.grpc.status_code`, after the other attributes); -1: none. */
  readonly code: number;
  readonly dropped: number;
  readonly events: readonly SpanEvent[] | undefined;
  readonly links: readonly SpanContextWords[] | undefined;
  /** OTLP status code: 0 unset, 2 error. */
  readonly status: number;
  readonly statusMessage: string | undefined;
}

/** Unix time in microseconds of performance.now() values (an integer below 2^53). */
const ORIGIN_US = performance.timeOrigin * 1000;
function unixMicros(now: number): number {
  return Math.round(ORIGIN_US + now * 1000);
}

/** Unix nanoseconds as a decimal string (the OTLP JSON form of a fixed64). */
function nanosString(now: number): string {
  return `${unixMicros(now)}000`;
}

const TWO32 = 2 ** 32;
const STATUS_CODE = "rpc.grpc.status_code";
const EMPTY = Buffer.alloc(0);
const EMPTY_LIST: ReadonlyArray<string | number | boolean> = [];

/** The encoded KeyValue fields of frozen attribute sets (field 9 of a span: the only field they are written in). */
const ENCODED = new WeakMap<SpanAttributes, Uint8Array>();

/** A protobuf writer into one growing buffer; nested messages get their length prefix when they end. */
class Writer {
  buf: Buffer = EMPTY;
  pos = 0;

  constructor(private readonly initial = 1024) {}

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n, this.initial));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** Write into `buf` from its start (memory no one else uses any more). */
  reuse(buf: Buffer): void {
    this.buf = buf;
    this.pos = 0;
  }

  /** Leave `n` bytes to be filled in later. */
  skip(n: number): void {
    this.room(n);
    this.pos += n;
  }

  varint(v: number): void {
    this.room(10);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  string(field: number, s: string): void {
    this.tag(field, 2);
    const n = s.length;
    // Most strings here are short ASCII (names, keys, routes): written byte by byte, no call into C++ per string.
    if (n < 0x80) {
      this.room(n + 1);
      const buf = this.buf;
      const at = this.pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[at + i] = c;
      }
      if (i === n) {
        buf[this.pos] = n;
        this.pos = at + n;
        return;
      }
    }
    const len = Buffer.byteLength(s);
    this.varint(len);
    this.room(len);
    this.pos += this.buf.write(s, this.pos, len, "utf8");
  }

  /** A 16-byte trace id. */
  traceId(field: number, id: TraceId): void {
    this.tag(field, 2);
    this.varint(16);
    this.be32(id.w0);
    this.be32(id.w1);
    this.be32(id.w2);
    this.be32(id.w3);
  }

  /** An 8-byte span id from its words. */
  spanId(field: number, hi: number, lo: number): void {
    this.tag(field, 2);
    this.varint(8);
    this.be32(hi);
    this.be32(lo);
  }

  private be32(v: number): void {
    this.room(4);
    const buf = this.buf;
    buf[this.pos++] = v >>> 24;
    buf[this.pos++] = (v >>> 16) & 0xff;
    buf[this.pos++] = (v >>> 8) & 0xff;
    buf[this.pos++] = v & 0xff;
  }

  /** A fixed64 time field from a performance.now() value, as unix nanoseconds (exact: two 32-bit halves). */
  time(field: number, now: number): void {
    const us = unixMicros(now);
    const usHi = Math.floor(us / TWO32);
    const lo = (us - usHi * TWO32) * 1000;
    const carry = Math.floor(lo / TWO32);
    // Every time field here has a number below 16: a one-byte tag, then the two words in one room check.
    this.room(9);
    const buf = this.buf;
    buf[this.pos] = (field << 3) | 1;
    putLE32(buf, this.pos + 1, lo - carry * TWO32);
    this.pos = putLE32(buf, this.pos + 5, usHi * 1000 + carry);
  }

  fixed32(field: number, v: number): void {
    this.tag(field, 5);
    this.room(4);
    this.pos = putLE32(this.buf, this.pos, v);
  }

  double(field: number, v: number): void {
    this.tag(field, 1);
    this.room(8);
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  /**
   * The head of a span (ScopeSpans.spans, field 2) up to its times, with one room check: the span's length (two bytes,
   * see endSpan), trace id, span id, trace state, parent span id, name, kind, start and end times. Returns where the
   * length goes.
   */
  spanHead(s: SpanData): number {
    const name = s.name;
    const state = s.traceState;
    // Tag and length 3, ids 18 + 10 + 10, kind 2, times 18, name and state headers 8, strings at 3 bytes a UTF-16
    // unit, and the 10 bytes the writes below check for at the end: the calls below then never grow the buffer.
    this.room(96 + 3 * (name.length + (state?.length ?? 0)));
    let buf = this.buf;
    let p = this.pos;
    buf[p++] = 0x12; // field 2, length-delimited
    const at = p;
    p += 2;
    buf[p++] = 0x0a; // 1: trace_id
    buf[p++] = 16;
    p = put32(buf, p, s.trace.w0);
    p = put32(buf, p, s.trace.w1);
    p = put32(buf, p, s.trace.w2);
    p = put32(buf, p, s.trace.w3);
    buf[p++] = 0x12; // 2: span_id
    buf[p++] = 8;
    p = put32(buf, p, s.s0);
    p = put32(buf, p, s.s1);
    this.pos = p;
    if (state) this.string(3, state);
    buf = this.buf;
    p = this.pos;
    if ((s.p0 | s.p1) !== 0) {
      buf[p++] = 0x22; // 4: parent_span_id
      buf[p++] = 8;
      p = put32(buf, p, s.p0);
      p = put32(buf, p, s.p1);
      this.pos = p;
    }
    this.string(5, name);
    buf = this.buf;
    p = this.pos;
    buf[p++] = 0x30; // 6: kind (a one-byte varint)
    buf[p++] = s.kind;
    this.pos = p;
    this.time(7, s.startTime);
    this.time(8, s.endTime);
    return at;
  }

  /**
   * Close a span spanHead opened. Its length was given two bytes: a span is usually 100-300 bytes, so a one-byte
   * length would move most spans' bytes when they end; one shorter than 128 bytes gets the two-byte (non-minimal,
   * which every protobuf parser reads) form of its length rather than a move.
   */
  endSpan(at: number): void {
    const len = this.pos - at - 2;
    if (len < 0x4000) {
      this.buf[at] = (len & 0x7f) | 0x80;
      this.buf[at + 1] = len >>> 7;
      return;
    }
    // A span of 16 KiB or more (long attribute values): one byte of the two is kept, the rest as end() does.
    this.buf.copyWithin(at + 1, at + 2, this.pos);
    this.pos--;
    this.end(at);
  }

  /** Open a length-delimited field: one byte is kept for its length (most messages here are shorter than 128 B). */
  begin(field: number): number {
    this.tag(field, 2);
    this.room(1);
    return this.pos++;
  }

  /** Close the field `begin` opened: write its length, moving the body when the length takes more than one byte. */
  end(at: number): void {
    const len = this.pos - at - 1;
    if (len < 0x80) {
      this.buf[at] = len;
      return;
    }
    let extra = 0;
    for (let v = len >>> 7; v > 0; v >>>= 7) extra++;
    this.room(extra);
    this.buf.copyWithin(at + 1 + extra, at + 1, this.pos);
    this.pos += extra;
    let v = len;
    let p = at;
    while (v >= 0x80) {
      this.buf[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[p] = v;
  }

  keyValue(field: number, key: string, value: string | number | boolean): void {
    const kv = this.begin(field);
    this.string(1, key);
    const any = this.begin(2);
    if (typeof value === "string") this.string(1, value);
    else if (typeof value === "boolean") {
      this.tag(2, 0);
      this.varint(value ? 1 : 0);
    } else if (Number.isSafeInteger(value) && value >= 0) {
      this.tag(3, 0);
      this.varint(value);
    } else if (Number.isSafeInteger(value)) {
      // int64 two's complement: ten varint bytes
      this.tag(3, 0);
      const high = Math.floor(value / TWO32);
      const hi = high >>> 0;
      const lo = (value - high * TWO32) >>> 0;
      this.room(10);
      let l = lo;
      let h = hi;
      for (let i = 0; i < 9; i++) {
        this.buf[this.pos++] = (l & 0x7f) | 0x80;
        l = (l >>> 7) | ((h & 0x7f) << 25);
        h >>>= 7;
      }
      this.buf[this.pos++] = l & 0x01;
    } else this.double(4, value);
    this.end(any);
    this.end(kv);
  }

  /** The span attribute `rpc.grpc.status_code` (field 9): the gRPC codes' encodings are made once. */
  statusCode(code: number): void {
    const bytes = code < STATUS_KEYVALUES.length ? STATUS_KEYVALUES[code]! : undefined;
    if (bytes === undefined) return this.keyValue(9, STATUS_CODE, code);
    this.room(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  attributes(field: number, attrs: SpanAttributes | undefined): void {
    if (attrs === undefined) return;
    // A frozen attribute set is one the code keeps and shares (a route's, a backend method's): its encoding is made
    // once and copied. The cache is asked first: Object.isFrozen is a call into the runtime.
    const bytes = field === 9 ? ENCODED.get(attrs) : undefined;
    if (bytes === undefined) {
      const at = this.pos;
      for (const key in attrs) this.keyValue(field, key, attrs[key]!);
      if (field === 9 && Object.isFrozen(attrs)) ENCODED.set(attrs, Buffer.from(this.buf.subarray(at, this.pos)));
      return;
    }
    this.room(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /** The bytes written, handed over as they are (an export may be retried later); writing again starts a new buffer. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.pos);
    this.buf = EMPTY;
    this.pos = 0;
    return out;
  }
}

/** `rpc.grpc.status_code` as a span's KeyValue field (9), one per gRPC code. */
const STATUS_KEYVALUES: readonly Buffer[] = Array.from({ length: 17 }, (_, code) => {
  const w = new Writer(32);
  w.keyValue(9, STATUS_CODE, code);
  return w.take();
});

/** A 32-bit word (its low 32 bits), little-endian, at `p` (room checked by the caller); returns the end. */
function putLE32(buf: Buffer, p: number, v: number): number {
  buf[p] = v & 0xff;
  buf[p + 1] = (v >>> 8) & 0xff;
  buf[p + 2] = (v >>> 16) & 0xff;
  buf[p + 3] = v >>> 24;
  return p + 4;
}

/** A 32-bit word, big-endian, at `p` (room checked by the caller); returns the end. */
function put32(buf: Buffer, p: number, v: number): number {
  buf[p] = v >>> 24;
  buf[p + 1] = (v >>> 16) & 0xff;
  buf[p + 2] = (v >>> 8) & 0xff;
  buf[p + 3] = v & 0xff;
  return p + 4;
}

function writeSpan(w: Writer, s: SpanData): void {
  const at = w.spanHead(s);
  w.attributes(9, s.attributes);
  const extra = s.extra;
  if (extra !== undefined) for (let i = 0; i < extra.length; i += 2) w.keyValue(9, extra[i] as string, extra[i + 1]!);
  if (s.code >= 0) w.statusCode(s.code);
  if (s.dropped > 0) {
    w.tag(10, 0);
    w.varint(s.dropped);
  }
  if (s.events !== undefined)
    for (const e of s.events) {
      const ev = w.begin(11);
      w.time(1, e.time);
      w.string(2, e.name);
      w.attributes(3, e.attributes);
      w.end(ev);
    }
  if (s.links !== undefined)
    for (const l of s.links) {
      const link = w.begin(13);
      w.traceId(1, l.trace);
      w.spanId(2, l.s0, l.s1);
      if (l.traceState) w.string(3, l.traceState);
      w.fixed32(6, l.flags);
      w.end(link);
    }
  if (s.status !== 0) {
    const st = w.begin(15);
    if (s.statusMessage) w.string(2, s.statusMessage);
    w.tag(3, 0);
    w.varint(s.status);
    w.end(st);
  }
  w.fixed32(16, s.flags);
  w.endSpan(at);
}

/** One export request being filled: spans are encoded into it as they end (no span object waits for export). */
export interface SpanBatch {
  /** Spans in it so far. */
  readonly count: number;
  add(span: SpanData): void;
  /** The whole ExportTraceServiceRequest (called once, when the batch is sealed). */
  request(): Uint8Array;
  /** Its request has been sent and answered: its memory may hold a later batch. */
  release(): void;
}

/** Makes the batches of one tracer, in one encoding, under its resource and scope. */
export type BatchMaker = () => SpanBatch;

/** A length-delimited field's header: its tag and the varint length. */
function fieldHeader(field: number, len: number): Buffer {
  const w = new Writer(16);
  w.tag(field, 2);
  w.varint(len);
  return w.take();
}

/**
 * Protobuf batches: each span is written as a ScopeSpans.spans field into the batch's buffer when it ends; the
 * request is that buffer behind the ResourceSpans/ScopeSpans headers (resource and scope encoded once per tracer).
 */
export function protobufBatches(resource: SpanAttributes, scope: string): BatchMaker {
  const head = new Writer();
  const res = head.begin(1);
  head.attributes(1, resource);
  head.end(res);
  const resourceField = head.take();
  const sc = head.begin(1);
  head.string(1, scope);
  head.end(sc);
  const scopeField = head.take();
  // Room kept in front of a batch's spans for what precedes them: the two headers (tag and length, at most 6 bytes
  // each), the resource and the scope. request() writes them there, so a batch is never copied whole.
  const front = 12 + resourceField.length + scopeField.length;
  /** The size the last batch reached: the next starts there (no growing by doubling, one allocation per batch). */
  let lastSize = 64 * 1024;
  /**
   * The memory of a sent batch, which the next batch is written into: a fresh buffer of a few hundred KB per batch
   * costs the kernel its page faults (about a microsecond of system time per traced call at 2048 spans a batch).
   */
  let spare: Buffer | undefined;
  return () => {
    const w = new Writer(lastSize);
    if (spare !== undefined && spare.length >= lastSize) w.reuse(spare);
    spare = undefined;
    w.skip(front);
    let count = 0;
    let memory: Buffer | undefined;
    return {
      get count() {
        return count;
      },
      add(span) {
        writeSpan(w, span);
        count++;
      },
      request() {
        lastSize = Math.max(64 * 1024, w.pos);
        memory = w.buf;
        const all = w.take();
        const spansLen = all.length - front;
        const ss = fieldHeader(2, scopeField.length + spansLen);
        const rs = fieldHeader(1, resourceField.length + ss.length + scopeField.length + spansLen);
        const start = front - rs.length - resourceField.length - ss.length - scopeField.length;
        let at = start;
        for (const part of [rs, resourceField, ss, scopeField]) {
          all.set(part, at);
          at += part.length;
        }
        return all.subarray(start);
      },
      release() {
        if (memory !== undefined && (spare === undefined || memory.length > spare.length)) spare = memory;
        memory = undefined;
      },
    };
  };
}

function jsonAttributes(attrs: SpanAttributes | undefined, extra: ReadonlyArray<string | number | boolean> = EMPTY_LIST, code = -1): unknown[] {
  const out: unknown[] = [];
  const add = (key: string, v: string | number | boolean): void => {
    const value = typeof v === "string" ? { stringValue: v } : typeof v === "boolean" ? { boolValue: v } : Number.isSafeInteger(v) ? { intValue: String(v) } : { doubleValue: v };
    out.push({ key, value });
  };
  if (attrs) for (const key in attrs) add(key, attrs[key]!);
  for (let i = 0; i < extra.length; i += 2) add(extra[i] as string, extra[i + 1]!);
  if (code >= 0) add(STATUS_CODE, code);
  return out;
}

/** A span in OTLP/JSON (ids as hex strings, enums as numbers, 64-bit integers as decimal strings). */
function jsonSpan(s: SpanData): string {
  return JSON.stringify({
    traceId: s.trace.hex,
    spanId: spanHex(s.s0, s.s1),
    ...(s.traceState ? { traceState: s.traceState } : {}),
    ...((s.p0 | s.p1) !== 0 ? { parentSpanId: spanHex(s.p0, s.p1) } : {}),
    flags: s.flags,
    name: s.name,
    kind: s.kind,
    startTimeUnixNano: nanosString(s.startTime),
    endTimeUnixNano: nanosString(s.endTime),
    attributes: jsonAttributes(s.attributes, s.extra, s.code),
    droppedAttributesCount: s.dropped,
    events: (s.events ?? []).map((e) => ({ timeUnixNano: nanosString(e.time), name: e.name, attributes: jsonAttributes(e.attributes) })),
    links: (s.links ?? []).map((l) => ({ traceId: l.trace.hex, spanId: spanHex(l.s0, l.s1), ...(l.traceState ? { traceState: l.traceState } : {}), flags: l.flags })),
    status: { code: s.status, ...(s.statusMessage ? { message: s.statusMessage } : {}) },
  });
}

/** OTLP/JSON batches: each span becomes its JSON text when it ends. */
export function jsonBatches(resource: SpanAttributes, scope: string): BatchMaker {
  const head = `{"resourceSpans":[{"resource":${JSON.stringify({ attributes: jsonAttributes(resource) })},"scopeSpans":[{"scope":${JSON.stringify({ name: scope })},"spans":[`;
  return () => {
    const spans: string[] = [];
    return {
      get count() {
        return spans.length;
      },
      add(span) {
        spans.push(jsonSpan(span));
      },
      request: () => Buffer.from(`${head}${spans.join(",")}]}]}]}`),
      release() {},
    };
  };
}
