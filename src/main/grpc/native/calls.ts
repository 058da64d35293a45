import { EventEmitter } from "node:events";
import { Duplex, Writable } from "node:stream";
import zlib from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import type { H2ServerSession, H2ServerStream, H2StreamHandler } from "../../../h2/types.js";
import { MAX_TIMER_MS, parseGrpcTimeout, responseHeaders, serverErrorToStatus, trailers, trailersOnly, type RequestHead, type StatusLike } from "./wire.js";

/**
 * One gRPC call of the native server on one HTTP/2 stream: message framing and decompression in, serialization and
 * framing out, the deadline, the message timeout, the status, cancellation. Semantics are grpc-js 1.14's
 * (server-interceptors.js BaseServerInterceptingCall and server.js handleUnary & co) wherever a client can see them.
 *
 * The handler kinds: a unary call gets a small EventEmitter (no Node stream: the hot path), and its reply goes out as
 * respond() + write() + end() in one turn, which the HTTP/2 layer sends as one socket write. Streaming calls get
 * Writable / Duplex objects shaped like grpc-js's, with backpressure both ways: write() returns false while the HTTP/2
 * stream's buffer is over its high-water mark ('drain' follows), and a reader that stops reading pauses the HTTP/2
 * stream (no flow-control credit goes back to the client).
 */

/** A registered method as grpc-js's Server.register takes it. */
export interface Handler {
  func: (...args: never[]) => unknown;
  serialize: (value: never) => Buffer;
  deserialize: (bytes: Buffer) => unknown;
  type: string;
  path: string;
}

/** What a call needs from its server. */
export interface CallContext {
  /** Largest request message (after decompression), bytes; -1: no limit. */
  readonly maxReceive: number;
  /** Largest response message, bytes; -1: no limit. */
  readonly maxSend: number;
  /** Bound on the wait for a unary / server-streaming request message, ms; 0: none. */
  readonly messageTimeoutMs: number;
  /** A call ended DEADLINE_EXCEEDED by the message timeout. */
  onMessageTimeout?(path: string): void;
  /** The call's stream is gone (called once, from the HTTP/2 layer's close()). */
  callClosed(call: CallCore, code: number, why: string): void;
  /** Code outside this layer (a handler's listener, a hook) threw while the server ran it; the call ended UNKNOWN. */
  onError(err: unknown, path: string): void;
}

const SEND_ERROR_DETAILS = (process.env["GRPC_NODE_DEBUG_SEND_ERROR_DETAILS"] ?? "false") === "true";
/** Messages at least this large are written as prefix + body (two writes, no copy) instead of one framed copy. */
const COPY_LIMIT = 16 * 1024;
const EMPTY = Buffer.alloc(0);

/** The part of the HTTP/2 stream a handler reaches through grpc-js-internals.ts `callHttp2Stream(call)` (pubsub's direct writes). */
export class DirectStream extends EventEmitter {
  writableNeedDrain = false;
  constructor(private readonly core: CallCore) {
    super();
  }
  get closed(): boolean {
    return this.core.h2.closed;
  }
  get destroyed(): boolean {
    return this.core.h2.closed || this.core.resetByUs;
  }
  /** Pre-framed gRPC messages, after the response headers (sent first if they were not). */
  write(chunk: Uint8Array): boolean {
    const core = this.core;
    if (core.done) return false;
    core.maybeSendMetadata();
    const ok = core.h2.write(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    if (!ok) this.writableNeedDrain = true;
    return ok;
  }
  /** RST_STREAM with `code`. */
  close(code: number): void {
    this.core.reset(code);
  }
}

/** An entry of the ordered read queue while a compressed message is still being inflated. */
interface QueueEntry {
  ready: boolean;
  halfClose: boolean;
  value: unknown;
}

/** A call in progress as the server's connection guards see it (NativeGrpcServer.openStreams). */
export interface OpenStream {
  readonly path: string;
  readonly session: H2ServerSession;
  /** Outbound bytes not yet handed to the socket (a write-stall sweep watches this). */
  readonly bufferedBytes: number;
  /** RST_STREAM `code`; the handler sees 'cancelled'. Not counted as a client reset. */
  reset(code: number): void;
}

/** The per-stream state and the H2StreamHandler of one call. */
export class CallCore implements H2StreamHandler, OpenStream {
  /** Nothing more goes out: the status was sent, or the stream was reset or closed. */
  done = false;
  metadataSent = false;
  /** This side reset the stream (RST_STREAM from reset()). */
  resetByUs = false;
  /** Epoch ms, Infinity without grpc-timeout (what getDeadline() returns). */
  deadline = Infinity;
  /** The handler's call object (unary EventEmitter or stream), once created. */
  call: NativeServerUnaryCall | NativeServerWritableStream | NativeServerDuplexStream | undefined;
  private deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  private messageTimer: ReturnType<typeof setTimeout> | undefined;
  private cancelNotified = false;
  private paused = false;
  private halfClosed = false;
  private request: unknown = undefined;
  private hasRequest = false;
  private pendingWrite: (() => void) | undefined;
  private direct: DirectStream | undefined;
  /** Ordered read queue, only while an inflate is in flight. */
  private queue: QueueEntry[] | undefined;
  private inflating = 0;
  // Message decoder state: the 5-byte prefix, then `need` more body bytes collected in `parts`.
  private prefix: Buffer | undefined;
  private prefixFill = 0;
  private flag = 0;
  private need = -1;
  private parts: Buffer[] | undefined;

  constructor(
    readonly h2: H2ServerStream,
    readonly handler: Handler,
    readonly head: RequestHead,
    private readonly ctx: CallContext,
  ) {}

  get path(): string {
    return this.handler.path;
  }

  get session(): H2ServerSession {
    return this.h2.session;
  }

  get bufferedBytes(): number {
    return this.h2.bufferedBytes;
  }

  /** Start the call (from onStream): timers, then the handler for client- and bidi-streaming methods. */
  start(): void {
    const { head, handler } = this;
    if (head.timeout !== undefined) {
      const ms = parseGrpcTimeout(head.timeout);
      if (ms === undefined) {
        // grpc-js sends this on the next tick, always before the request message is handled (that waits for an
        // await); here the message may already be in this socket read, so the status goes out now.
        this.sendStatus({ code: grpc.status.INTERNAL, details: `Invalid grpc-timeout value "${head.timeout}"` });
        return;
      } else {
        this.deadline = Date.now() + ms;
        // A deadline beyond setTimeout's range (24.8 days) gets no timer: the client's own deadline ends the call.
        if (ms <= MAX_TIMER_MS) {
          this.deadlineTimer = setTimeout(() => this.sendStatus({ code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" }), ms);
          this.deadlineTimer.unref();
        }
      }
    }
    const type = handler.type;
    if (type === "unary" || type === "serverStream") {
      const ms = this.ctx.messageTimeoutMs;
      if (ms > 0) {
        this.messageTimer = setTimeout(() => {
          this.messageTimer = undefined;
          if (this.done) return;
          try {
            this.ctx.onMessageTimeout?.(handler.path);
          } catch (e) {
            this.ctx.onError(e, handler.path);
          }
          this.sendStatus({
            code: grpc.status.DEADLINE_EXCEEDED,
            details: `the request message did not arrive within ${ms} ms of the call's headers (--grpc-message-timeout)`,
          });
        }, ms);
        this.messageTimer.unref();
      }
      return;
    }
    if (type === "clientStream" || type === "bidi") {
      this.call = new NativeServerDuplexStream(handler.path, this, head.metadata);
      this.runHandler(type === "clientStream" ? (err, value, trailer) => this.respondWith(err, value, trailer) : undefined);
      return;
    }
    this.sendStatus({ code: grpc.status.INTERNAL, details: `Unknown handler type: ${type}` });
  }

  /** The HTTP/2 stream as grpc-js-internals.ts `callHttp2Stream` expects it (pubsub's direct write path). */
  get stream(): DirectStream {
    return (this.direct ??= new DirectStream(this));
  }

  // --- H2StreamHandler ---

  data(buf: Buffer, start: number, end: number): void {
    try {
      this.decode(buf, start, end);
    } catch (e) {
      this.fail(e);
    }
  }

  end(): void {
    if (this.done) return;
    try {
      if (this.queue) this.queue.push({ ready: true, halfClose: true, value: undefined });
      else this.onHalfClose();
    } catch (e) {
      this.fail(e);
    }
  }

  close(code: number, why: string): void {
    this.done = true;
    this.clearTimers();
    this.notifyCancel();
    try {
      this.direct?.emit("close");
      this.ctx.callClosed(this, code, why);
    } catch (e) {
      this.ctx.onError(e, this.handler.path);
    }
  }

  drain(): void {
    try {
      const cb = this.pendingWrite;
      if (cb) {
        this.pendingWrite = undefined;
        cb();
      }
      const d = this.direct;
      if (d?.writableNeedDrain) {
        d.writableNeedDrain = false;
        d.emit("drain");
      }
    } catch (e) {
      this.fail(e);
    }
  }

  /**
   * A handler's listener (or a hook) threw while this layer ran it: report it and end the call UNKNOWN "Unknown error"
   * (what grpc-js answers for a handler that throws). Nothing is thrown back into the HTTP/2 layer or a timer.
   */
  fail(e: unknown): void {
    try {
      this.ctx.onError(e, this.handler.path);
      if (!this.done) this.sendStatus({ code: grpc.status.UNKNOWN, details: SEND_ERROR_DETAILS ? `Server method handler threw error ${(e as Error)?.message}` : "Unknown error" });
    } catch {
      // onError itself threw, or the stream is gone: nothing more can be done for this call.
    }
  }

  private decode(buf: Buffer, start: number, end: number): void {
    const max = this.ctx.maxReceive;
    while (start < end && !this.done) {
      if (this.need < 0) {
        let len: number;
        if (this.prefixFill === 0 && end - start >= 5) {
          this.flag = buf[start]!;
          len = buf.readUInt32BE(start + 1);
          start += 5;
        } else {
          const p = (this.prefix ??= Buffer.allocUnsafe(5));
          const n = Math.min(5 - this.prefixFill, end - start);
          buf.copy(p, this.prefixFill, start, start + n);
          this.prefixFill += n;
          start += n;
          if (this.prefixFill < 5) return;
          this.prefixFill = 0;
          this.flag = p[0]!;
          len = p.readUInt32BE(1);
        }
        if (max !== -1 && len > max) {
          this.sendStatus({ code: grpc.status.RESOURCE_EXHAUSTED, details: `Received message larger than max (${len} vs ${max})` });
          return;
        }
        if (end - start >= len) {
          // The whole message is in this chunk (the usual case): one copy, the chunk's buffer may be reused.
          let msg = EMPTY;
          if (len > 0) {
            msg = Buffer.allocUnsafe(len);
            buf.copy(msg, 0, start, start + len);
          }
          start += len;
          this.receive(this.flag, msg);
          continue;
        }
        this.need = len;
        this.parts = [];
      }
      const n = Math.min(this.need, end - start);
      const part = Buffer.allocUnsafe(n);
      buf.copy(part, 0, start, start + n);
      this.parts!.push(part);
      this.need -= n;
      start += n;
      if (this.need === 0) {
        const msg = this.parts!.length === 1 ? this.parts![0]! : Buffer.concat(this.parts!);
        this.parts = undefined;
        this.need = -1;
        this.receive(this.flag, msg);
      }
    }
  }

  // --- inbound ---

  /** One complete message off the wire: flag byte and payload. */
  private receive(flag: number, payload: Buffer): void {
    // The message timeout bounds the client's sending, so it ends when the bytes are in (grpc-js's interceptor sees
    // the message only after inflating, which under load on the zlib thread pool can take longer than the bound).
    if (this.messageTimer) {
      clearTimeout(this.messageTimer);
      this.messageTimer = undefined;
    }
    if (flag !== 1) return this.deliverBytes(payload);
    const encoding = this.head.encoding ?? "identity";
    if (encoding === "identity") {
      // The gRPC protocol makes this an error; grpc-js 1.14 reads such a message as uncompressed (strict-decoding.ts).
      return this.sendStatus({ code: grpc.status.INTERNAL, details: "the request message has the compressed flag set, but the call names no grpc-encoding" });
    }
    if (encoding !== "gzip" && encoding !== "deflate") {
      return this.sendStatus({ code: grpc.status.UNIMPLEMENTED, details: `Received message compressed with unsupported encoding "${encoding}"` });
    }
    const entry: QueueEntry = { ready: false, halfClose: false, value: undefined };
    (this.queue ??= []).push(entry);
    this.inflating++;
    // Inbound is held while inflating: one message at a time, as grpc-js pauses its stream per message.
    this.pause();
    const max = this.ctx.maxReceive;
    const opts: zlib.ZlibOptions = max >= 0 ? { maxOutputLength: Math.max(1, max) } : {};
    const done = (err: Error | null, out: Buffer): void => {
      try {
        inflated(err, out);
      } catch (e) {
        this.fail(e);
      }
    };
    const inflated = (err: Error | null, out: Buffer): void => {
      this.inflating--;
      if (this.done) return;
      if (err || (max >= 0 && out.length > max)) {
        const tooLarge = !err || (err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE";
        this.sendStatus(
          tooLarge
            ? { code: grpc.status.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${max}` }
            : { code: grpc.status.INTERNAL, details: "Failed to decompress message" },
        );
        return;
      }
      const value = this.deserialize(out);
      if (this.done) return;
      entry.ready = true;
      entry.value = value;
      this.flushQueue();
      if (this.inflating === 0 && !this.done && this.wantsMore()) this.resume();
    };
    try {
      if (encoding === "gzip") zlib.gunzip(payload, opts, done);
      else zlib.inflate(payload, opts, done);
    } catch (e) {
      done(e as Error, EMPTY);
    }
  }

  private deliverBytes(payload: Buffer): void {
    const value = this.deserialize(payload);
    if (this.done) return;
    if (this.queue) this.queue.push({ ready: true, halfClose: false, value });
    else this.onMessage(value);
  }

  private deserialize(bytes: Buffer): unknown {
    try {
      return this.handler.deserialize(bytes);
    } catch (e) {
      this.sendStatus({
        code: grpc.status.INTERNAL,
        details: SEND_ERROR_DETAILS ? `Error deserializing request: ${(e as Error).message}` : "Error deserializing request",
      });
      return undefined;
    }
  }

  private flushQueue(): void {
    const q = this.queue;
    if (!q) return;
    while (q.length > 0 && q[0]!.ready && !this.done) {
      const e = q.shift()!;
      if (e.halfClose) this.onHalfClose();
      else this.onMessage(e.value);
    }
    if (q.length === 0) this.queue = undefined;
  }

  private onMessage(value: unknown): void {
    const call = this.call;
    if (call === undefined) {
      // unary / server-streaming: one request message, the handler runs at half-close.
      if (this.hasRequest) {
        this.sendStatus({ code: grpc.status.UNIMPLEMENTED, details: `Received a second request message for server streaming method ${this.handler.path}` });
        return;
      }
      this.hasRequest = true;
      this.request = value;
      return;
    }
    if (!(call as NativeServerDuplexStream).push(value)) this.pause();
  }

  private onHalfClose(): void {
    if (this.halfClosed) return;
    this.halfClosed = true;
    const call = this.call;
    if (call !== undefined) {
      (call as NativeServerDuplexStream).push(null);
      return;
    }
    if (!this.hasRequest) {
      this.sendStatus({ code: grpc.status.UNIMPLEMENTED, details: `Received no request message for server streaming method ${this.handler.path}` });
      return;
    }
    const { handler, head } = this;
    if (handler.type === "unary") {
      this.call = new NativeServerUnaryCall(handler.path, this, head.metadata, this.request);
      this.runHandler((err, value, trailer) => this.respondWith(err, value, trailer));
    } else {
      this.call = new NativeServerWritableStream(handler.path, this, head.metadata, this.request);
      this.runHandler(undefined);
    }
  }

  /** Whether the handler's stream wants more messages (a Readable under its high-water mark). */
  private wantsMore(): boolean {
    const call = this.call as NativeServerDuplexStream | undefined;
    return call === undefined || !(call instanceof NativeServerDuplexStream) || call.readableLength < call.readableHighWaterMark;
  }

  private runHandler(callback: grpc.sendUnaryData<unknown> | undefined): void {
    try {
      if (callback) (this.handler.func as (call: unknown, cb: unknown) => void)(this.call, callback);
      else (this.handler.func as (call: unknown) => void)(this.call);
    } catch (e) {
      this.sendStatus({ code: grpc.status.UNKNOWN, details: SEND_ERROR_DETAILS ? `Server method handler threw error ${(e as Error)?.message}` : "Unknown error" });
    }
  }

  /** Stop returning flow-control credit (the reader is behind, or a message is being inflated). */
  pause(): void {
    if (this.paused || this.done) return;
    this.paused = true;
    this.h2.pause();
  }

  /** The reader wants more (Readable _read). */
  startRead(): void {
    if (!this.paused || this.inflating > 0) return;
    this.paused = false;
    if (!this.h2.closed) this.h2.resume();
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    if (!this.h2.closed) this.h2.resume();
  }

  // --- outbound ---

  /** The unary / client-streaming reply: callback(err) or callback(null, value, trailers). */
  respondWith(err: unknown, value: unknown, trailer?: grpc.Metadata | null): void {
    if (this.done) return;
    // The deadline passed while the handler ran (its timer had not fired yet, or was due in the same instant as a
    // backend call's own deadline timer that settled the handler): the caller is owed DEADLINE_EXCEEDED, not a late
    // reply it has given up on.
    if (this.deadline <= Date.now()) {
      this.sendStatus({ code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" });
      return;
    }
    if (err) {
      this.sendStatus(serverErrorToStatus(err, trailer));
      return;
    }
    const frame = this.frame(value);
    if (frame === undefined) return;
    this.maybeSendMetadata();
    this.writeFrame(frame);
    this.sendStatus({ code: grpc.status.OK, details: "OK", metadata: trailer ?? null });
  }

  /** A streaming handler's message (Writable _write): `cb` runs once the HTTP/2 stream's buffer has room. */
  sendMessage(value: unknown, cb: () => void): void {
    if (this.done) return;
    const frame = this.frame(value);
    if (frame === undefined) return;
    this.maybeSendMetadata();
    if (this.writeFrame(frame)) cb();
    else this.pendingWrite = cb;
  }

  sendMetadata(md: grpc.Metadata | null | undefined): void {
    if (this.done || this.metadataSent) return;
    this.metadataSent = true;
    this.h2.respond(responseHeaders(md), false);
  }

  maybeSendMetadata(): void {
    if (!this.metadataSent) this.sendMetadata(null);
  }

  /** Serialize and frame a response message; undefined (and the call ended with a status) when that fails. */
  private frame(value: unknown): Buffer | [Buffer, Buffer] | undefined {
    let bytes: Buffer;
    try {
      bytes = this.handler.serialize(value as never);
    } catch (e) {
      this.sendStatus({ code: grpc.status.INTERNAL, details: SEND_ERROR_DETAILS ? `Error serializing response: ${(e as Error)?.message}` : "Error serializing response" });
      return undefined;
    }
    const len = bytes.byteLength;
    const max = this.ctx.maxSend;
    if (max !== -1 && len > max) {
      this.sendStatus({ code: grpc.status.RESOURCE_EXHAUSTED, details: `Sent message larger than max (${len + 5} vs. ${max})` });
      return undefined;
    }
    if (len >= COPY_LIMIT) {
      const prefix = Buffer.allocUnsafe(5);
      prefix[0] = 0;
      prefix.writeUInt32BE(len, 1);
      return [prefix, Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes)];
    }
    const out = Buffer.allocUnsafe(len + 5);
    out[0] = 0;
    out.writeUInt32BE(len, 1);
    out.set(bytes, 5);
    return out;
  }

  private writeFrame(frame: Buffer | [Buffer, Buffer]): boolean {
    if (Buffer.isBuffer(frame)) return this.h2.write(frame);
    this.h2.write(frame[0]);
    return this.h2.write(frame[1]);
  }

  /** End the call with `status`: trailers after the messages, or a trailers-only response. Once; later calls are ignored. */
  sendStatus(status: StatusLike): void {
    if (this.done) return;
    this.done = true;
    this.clearTimers();
    if (!this.h2.closed) {
      if (this.metadataSent) this.h2.end(trailers(status));
      else {
        this.metadataSent = true;
        this.h2.respond(trailersOnly(status), true);
      }
    }
    this.notifyCancel();
  }

  /** RST_STREAM `code` (write-stall sweep, pubsub's hard reset). */
  reset(code: number): void {
    if (this.h2.closed || this.resetByUs) return;
    this.resetByUs = true;
    this.done = true;
    this.clearTimers();
    this.h2.reset(code);
  }

  private clearTimers(): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    if (this.messageTimer) clearTimeout(this.messageTimer);
    this.deadlineTimer = this.messageTimer = undefined;
  }

  /**
   * grpc-js's notifyOnCancel: once the call is over (status sent, or the stream gone) the handler's call emits
   * 'cancelled' on the next tick, and a stream call is destroyed. Paused inbound is released (grpc-js flushes it).
   */
  private notifyCancel(): void {
    if (this.cancelNotified) return;
    this.cancelNotified = true;
    if (this.paused) {
      this.paused = false;
      if (!this.h2.closed) this.h2.resume();
    }
    if (this.call === undefined) return;
    process.nextTick(emitCancelled, this.call, this.ctx);
  }
}

function emitCancelled(call: NativeServerUnaryCall | NativeServerWritableStream | NativeServerDuplexStream, ctx: CallContext): void {
  call.cancelled = true;
  try {
    (call as EventEmitter).emit("cancelled", "cancelled");
    if (!(call instanceof NativeServerUnaryCall)) call.destroy();
  } catch (e) {
    // In grpc-js a throwing 'cancelled' listener is an uncaught exception; here it is reported, the call is over.
    ctx.onError(e, call.path);
  }
}

/** What every call object offers besides its stream methods (grpc-js's ServerSurfaceCall). */
interface Surface {
  readonly path: string;
  readonly call: CallCore;
}

function peerOf(core: CallCore): string {
  const s = core.h2.session;
  if (!s.remoteAddress) return "unknown";
  return s.remotePort ? `${s.remoteAddress}:${s.remotePort}` : s.remoteAddress;
}

/** A class to extend (mixins below): any constructor, as TypeScript's mixin pattern requires. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Base<T> = abstract new (...args: any[]) => T;

/** The methods every call object offers besides its stream methods (grpc-js's ServerSurfaceCall), once for the three. */
function surfaceCall<B extends Base<EventEmitter>>(base: B) {
  abstract class SurfaceCall extends base implements Surface {
    abstract readonly path: string;
    abstract readonly call: CallCore;
    cancelled = false;
    getPeer(): string {
      return peerOf(this.call);
    }
    sendMetadata(md: grpc.Metadata): void {
      this.call.sendMetadata(md);
    }
    getDeadline(): number {
      return this.call.deadline;
    }
    getPath(): string {
      return this.path;
    }
    getHost(): string | undefined {
      return this.call.head.authority;
    }
    getAuthContext(): Record<string, never> {
      return {};
    }
  }
  return SurfaceCall;
}

/**
 * What the server-streaming and the duplex call share: response messages written through the call, a status set by
 * emit('error', status) or OK, sent with the trailers end() was given once the writable side finishes.
 */
function streamingCall<B extends Base<Writable>>(base: B) {
  abstract class StreamingCall extends surfaceCall(base) {
    pendingStatus: StatusLike = { code: grpc.status.OK, details: "OK" };
    trailingMetadata = new grpc.Metadata();
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    constructor(...args: any[]) {
      super(...args);
      // As grpc-js: emit('error', status) is how a handler ends the call with a status.
      this.on("error", (err) => {
        this.pendingStatus = serverErrorToStatus(err);
        this.end();
      });
    }
    override _write(chunk: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
      this.call.sendMessage(chunk, callback);
    }
    /**
     * Listeners run inside this layer or in Node's stream ticks; one that throws ends the call UNKNOWN and is reported
     * (onError) instead of becoming an uncaught exception that takes the process down.
     */
    override emit(event: string | symbol, ...args: unknown[]): boolean {
      try {
        return super.emit(event, ...args);
      } catch (e) {
        if (this.call === undefined) throw e;
        this.call.fail(e);
        return true;
      }
    }
    override _final(callback: (error?: Error | null) => void): void {
      callback(null);
      this.call.sendStatus({ ...this.pendingStatus, metadata: this.pendingStatus.metadata ?? this.trailingMetadata });
    }
    /** End the call with OK (or the status an 'error' set), `metadata` as trailers. */
    override end(metadata?: unknown): this {
      if (metadata instanceof grpc.Metadata) this.trailingMetadata = metadata;
      return super.end();
    }
  }
  return StreamingCall;
}

/** A unary call (grpc-js ServerUnaryCall): request, metadata, deadline, 'cancelled'. */
export class NativeServerUnaryCall extends surfaceCall(EventEmitter) {
  constructor(
    readonly path: string,
    readonly call: CallCore,
    readonly metadata: grpc.Metadata,
    readonly request: unknown,
  ) {
    super();
  }
}

/** A server-streaming call (grpc-js ServerWritableStream): an object-mode Writable of response messages. */
export class NativeServerWritableStream extends streamingCall(Writable) {
  constructor(
    readonly path: string,
    readonly call: CallCore,
    readonly metadata: grpc.Metadata,
    readonly request: unknown,
  ) {
    super({ objectMode: true });
  }
}

/** A client-streaming or bidi call (grpc-js ServerDuplexStream): request messages in, response messages out. */
export class NativeServerDuplexStream extends streamingCall(Duplex) {
  constructor(
    readonly path: string,
    readonly call: CallCore,
    readonly metadata: grpc.Metadata,
  ) {
    super({ objectMode: true });
  }
  override _read(): void {
    this.call.startRead();
  }
}
