import zlib from "node:zlib";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { asBuffer } from "../../shared/bytes.js";
import type { H2ServerSession, H2ServerStream, H2StreamHandler } from "../../h2/types.js";
import type { BidiCall, ClientStreamCall, FramedWriter, MethodHandler, ServerStreamCall, UnaryCall } from "./call-types.js";
import { CallMetadata } from "../../shared/metadata.js";
import { EMPTY, frameMessage, MessageDecoder, type Framed } from "./message-framing.js";
import { parseGrpcTimeout, responseHeaders, trailers, trailersOnly, type RequestHead, type StatusLike } from "./wire.js";
import { callDeadlines, type Expiring } from "../../shared/deadline-queue.js";
import { Cancellation, type CancelSignal } from "../../shared/signals.js";

/**
 * One gRPC call of the native server on one HTTP/2 stream: message framing and decompression in, serialization and
 * framing out, the deadline, the message timeout, the status, cancellation. What a client can see (status codes and
 * texts, headers, trailers) is grpc-js 1.14's (server-interceptors.js BaseServerInterceptingCall, server.js
 * handleUnary & co); what a handler sees is the gateway's own call types (call-types.ts), all implemented here by
 * one class.
 *
 * A unary reply goes out as respond() + write() + end() in one turn, which the HTTP/2 layer sends as one socket write.
 * Backpressure both ways: write() returns false while the HTTP/2 stream's buffer is over its high-water mark
 * (drained() resolves when it is not), and a handler that does not take its request messages pauses the HTTP/2 stream
 * (no flow-control credit goes back to the client).
 */

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
  callClosed(call: GrpcCall, code: number, why: string): void;
  /** A handler threw something other than a GatewayError, or a hook threw; the call (if open) ended UNKNOWN. */
  onError(err: unknown, path: string): void;
}

const SEND_ERROR_DETAILS = (process.env["GRPC_NODE_DEBUG_SEND_ERROR_DETAILS"] ?? "false") === "true";
/** Request messages a streaming handler may leave untaken before the HTTP/2 stream is paused (a Readable's 16). */
const READ_AHEAD = 16;
const RST_CANCEL = 0x8;

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
  /** Outbound bytes not yet handed to the socket (the write-stall sweep watches this). */
  readonly bufferedBytes: number;
  /** RST_STREAM `code` (default CANCEL); the handler's signal aborts. Not counted as a client reset. */
  reset(code?: number): void;
}

type AnyCall = UnaryCall<unknown> & ServerStreamCall<unknown, unknown> & ClientStreamCall<unknown> & BidiCall<unknown, unknown>;

/** The per-stream state, the H2StreamHandler and the handler's call object of one call. */
export class GrpcCall extends MessageDecoder implements OpenStream, AnyCall, Expiring {
  // The fields a streamed write reads come first, next to each other (declaration order is V8's field order; the
  // constructor's parameter properties precede them): a Subscribe call is written once per event, and with thousands
  // of them each cache line of a call it touches is a likely miss.
  readonly h2: H2ServerStream;
  /** Nothing more goes out: the status was sent, or the stream was reset or closed. */
  ended = false;
  private metadataSent = false;
  /** This side reset the stream (RST_STREAM from reset()). */
  resetByUs = false;
  readonly deadline: number | undefined;
  readonly metadata: CallMetadata;
  /** Made on first use of `trailers` (most calls send none; a long-lived stream should not hold an empty one). */
  private trailerMd: CallMetadata | undefined;
  request: unknown = undefined;
  /** Made on first use of `signal` (most unary handlers never look). */
  private ac: AbortController | undefined;
  /** Made on first use of `cancellation`. */
  private light: Cancellation | undefined;
  private abortReason: GatewayError | undefined;
  /** In the thread's deadline queue (callDeadlines) while it has a deadline and runs. */
  deadlineSlot = -1;
  private messageTimer: ReturnType<typeof setTimeout> | undefined;
  private paused = false;
  private halfClosed = false;
  private hasRequest = false;
  private handlerStarted = false;
  private drainWaiters: Array<() => void> | undefined;
  /** Request messages a streaming handler has not taken yet. */
  private inbox: unknown[] = [];
  private reader: ((r: IteratorResult<unknown>) => void) | undefined;
  private iterated = false;
  /** The handler stopped reading (broke out of messages()): what the client still sends is dropped. */
  private discard = false;
  /** Ordered read queue, only while an inflate is in flight. */
  private queue: QueueEntry[] | undefined;
  private inflating = 0;

  constructor(
    h2: H2ServerStream,
    readonly method: MethodHandler & { readonly path: string },
    readonly head: RequestHead,
    private readonly ctx: CallContext,
    deadline: number | undefined,
  ) {
    super(ctx.maxReceive);
    this.h2 = h2;
    this.metadata = head.metadata;
    this.deadline = deadline;
  }

  /**
   * Read the call's grpc-timeout and make the call (from onStream), or answer INTERNAL for a grpc-timeout that is not
   * 1-8 digits and a unit (undefined then). grpc-js sends that status on the next tick, always before the request
   * message is handled; here the message may already be in this socket read, so the status goes out now.
   */
  static open(h2: H2ServerStream, method: MethodHandler & { readonly path: string }, head: RequestHead, ctx: CallContext): GrpcCall | undefined {
    let deadline: number | undefined;
    if (head.timeout !== undefined) {
      const ms = parseGrpcTimeout(head.timeout);
      if (ms === undefined) {
        h2.respond(trailersOnly({ code: Code.INTERNAL, message: `Invalid grpc-timeout value "${head.timeout}"` }), true);
        return undefined;
      }
      deadline = Date.now() + ms;
    }
    return new GrpcCall(h2, method, head, ctx, deadline);
  }

  get path(): string {
    return this.method.path;
  }

  get trailers(): CallMetadata {
    return (this.trailerMd ??= new CallMetadata());
  }

  get session(): H2ServerSession {
    return this.h2.session;
  }

  get bufferedBytes(): number {
    return this.h2.bufferedBytes;
  }

  get signal(): AbortSignal {
    if (!this.ac) {
      this.ac = new AbortController();
      if (this.abortReason) this.ac.abort(this.abortReason);
    }
    return this.ac.signal;
  }

  get cancellation(): CancelSignal {
    if (!this.light) {
      this.light = new Cancellation();
      if (this.abortReason) this.light.abort(this.abortReason);
    }
    return this.light;
  }

  get peer(): string {
    const s = this.h2.session;
    if (!s.remoteAddress) return "unknown";
    return s.remotePort ? `${s.remoteAddress}:${s.remotePort}` : s.remoteAddress;
  }

  get authority(): string | undefined {
    return this.head.authority;
  }

  /** Timers, then the handler for client- and bidi-streaming methods (unary and server-streaming wait for the request). */
  start(): void {
    if (this.deadline !== undefined) callDeadlines.add(this, this.deadline);
    const kind = this.method.kind;
    if (kind === "clientStream" || kind === "bidi") {
      this.runHandler();
      return;
    }
    const ms = this.ctx.messageTimeoutMs;
    if (ms > 0) {
      this.messageTimer = setTimeout(() => {
        this.messageTimer = undefined;
        if (this.ended) return;
        try {
          this.ctx.onMessageTimeout?.(this.path);
        } catch (e) {
          this.ctx.onError(e, this.path);
        }
        this.serverEnd({
          code: Code.DEADLINE_EXCEEDED,
          message: `the request message did not arrive within ${ms} ms of the call's headers (--grpc-message-timeout)`,
        });
      }, ms);
      this.messageTimer.unref();
    }
  }

  /**
   * What the HTTP/2 layer calls for this stream (a separate object: its end() is the client's half-close, the call's
   * end() is the handler's status).
   */
  h2Handler(): H2StreamHandler {
    return new StreamEvents(this);
  }

  /** @internal StreamEvents: DATA of the request. */
  data(buf: Buffer, start: number, end: number): void {
    try {
      this.decode(buf, start, end);
    } catch (e) {
      this.fail(e);
    }
  }

  end(status?: GatewayError): void {
    if (this.ended) return;
    this.sendStatus(status ? { code: status.code, message: status.rawMessage, metadata: this.trailerMd } : { code: Code.OK, message: "OK", metadata: this.trailerMd });
  }

  /** @internal StreamEvents: the stream is gone. */
  close(code: number, why: string): void {
    const wasEnded = this.ended;
    this.ended = true;
    this.clearTimers();
    this.settleWaiters();
    // A handler waiting for the next request message gets the end of them (the client reset the stream).
    this.inbox = [];
    this.settleReader();
    // The reasons are shared (a GatewayError captures a stack: made per call, it showed in the invoke profile, and
    // was a third of the main thread's time while 10,000 subscribers disconnected).
    // A unary call ends when its handler returns (or with the server's own abort, already given): nothing can still be
    // listening, so its signal is not aborted, only marked, which saves an abort per call on the invoke path.
    if (wasEnded && ((this.ac === undefined && this.light === undefined) || this.method.kind === "unary")) this.abortReason ??= CALL_OVER;
    else this.abortSoon(wasEnded ? CALL_OVER : this.deadline !== undefined && this.deadline <= Date.now() ? DEADLINE_PASSED : CALLER_CANCELLED);
    try {
      this.ctx.callClosed(this, code, why);
    } catch (e) {
      this.ctx.onError(e, this.path);
    }
  }

  /** @internal StreamEvents: the stream's buffer emptied. */
  drain(): void {
    this.settleWaiters();
  }

  /**
   * Code outside this layer threw while the server ran it: report it and end the call UNKNOWN "Unknown error" (what
   * grpc-js answers for a handler that throws). Nothing is thrown back into the HTTP/2 layer or a timer.
   */
  private fail(e: unknown): void {
    try {
      this.ctx.onError(e, this.path);
      if (!this.ended) this.serverEnd({ code: Code.UNKNOWN, message: SEND_ERROR_DETAILS ? `Server method handler threw error ${(e as Error)?.message}` : "Unknown error" });
    } catch {
      // onError itself threw, or the stream is gone: nothing more can be done for this call.
    }
  }

  /** A handler's rejection: a GatewayError is the status; anything else is a bug (fail). */
  private handlerFailed(e: unknown): void {
    if (this.ended) return;
    if (e instanceof GatewayError) this.sendStatus({ code: e.code, message: e.rawMessage, metadata: this.trailerMd });
    else this.fail(e);
  }

  // --- inbound ---

  protected get stopped(): boolean {
    return this.ended;
  }

  protected tooLarge(len: number, max: number): void {
    this.serverEnd({ code: Code.RESOURCE_EXHAUSTED, message: `Received message larger than max (${len} vs ${max})` });
  }

  /** One complete message off the wire: flag byte and payload. */
  protected receive(flag: number, payload: Buffer): void {
    // The message timeout bounds the client's sending, so it ends when the bytes are in (grpc-js's interceptor sees
    // the message only after inflating, which under load on the zlib thread pool can take longer than the bound).
    if (this.messageTimer) {
      clearTimeout(this.messageTimer);
      this.messageTimer = undefined;
    }
    if (flag !== 1) return this.deliverBytes(payload);
    const encoding = this.head.encoding ?? "identity";
    if (encoding === "identity") {
      // The gRPC protocol makes this an error; grpc-js 1.14 reads such a message as uncompressed
      return this.serverEnd({ code: Code.INTERNAL, message: "the request message has the compressed flag set, but the call names no grpc-encoding" });
    }
    if (encoding !== "gzip" && encoding !== "deflate") {
      return this.serverEnd({ code: Code.UNIMPLEMENTED, message: `Received message compressed with unsupported encoding "${encoding}"` });
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
      if (this.ended) return;
      if (err || (max >= 0 && out.length > max)) {
        const tooLarge = !err || (err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE";
        this.serverEnd(
          tooLarge
            ? { code: Code.RESOURCE_EXHAUSTED, message: `Received message that decompresses to a size larger than ${max}` }
            : { code: Code.INTERNAL, message: "Failed to decompress message" },
        );
        return;
      }
      const value = this.deserialize(out);
      if (this.ended) return;
      entry.ready = true;
      entry.value = value;
      this.flushQueue();
      if (this.inflating === 0 && !this.ended && this.wantsMore()) this.resume();
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
    if (this.ended) return;
    if (this.queue) this.queue.push({ ready: true, halfClose: false, value });
    else this.onMessage(value);
  }

  private deserialize(bytes: Buffer): unknown {
    try {
      return this.method.deserialize(bytes);
    } catch (e) {
      this.serverEnd({
        code: Code.INTERNAL,
        message: SEND_ERROR_DETAILS ? `Error deserializing request: ${(e as Error).message}` : "Error deserializing request",
      });
      return undefined;
    }
  }

  private flushQueue(): void {
    const q = this.queue;
    if (!q) return;
    while (q.length > 0 && q[0]!.ready && !this.ended) {
      const e = q.shift()!;
      if (e.halfClose) this.onHalfClose();
      else this.onMessage(e.value);
    }
    if (q.length === 0) this.queue = undefined;
  }

  private onMessage(value: unknown): void {
    const kind = this.method.kind;
    if (kind === "unary" || kind === "serverStream") {
      // One request message, the handler runs at half-close.
      if (this.hasRequest) {
        this.serverEnd({ code: Code.UNIMPLEMENTED, message: `Received a second request message for server streaming method ${this.path}` });
        return;
      }
      this.hasRequest = true;
      this.request = value;
      return;
    }
    if (this.discard) return;
    const reader = this.reader;
    if (reader) {
      this.reader = undefined;
      reader({ done: false, value });
      return;
    }
    this.inbox.push(value);
    if (this.inbox.length >= READ_AHEAD) this.pause();
  }

  private onHalfClose(): void {
    if (this.halfClosed) return;
    this.halfClosed = true;
    const kind = this.method.kind;
    if (kind === "clientStream" || kind === "bidi") {
      if (this.inbox.length === 0) this.settleReader();
      return;
    }
    if (!this.hasRequest) {
      this.serverEnd({ code: Code.UNIMPLEMENTED, message: `Received no request message for server streaming method ${this.path}` });
      return;
    }
    this.runHandler();
  }

  /** The HTTP/2 layer's end() (through StreamEvents): the client half-closed. */
  clientEnd(): void {
    if (this.ended) return;
    try {
      if (this.queue) this.queue.push({ ready: true, halfClose: true, value: undefined });
      else this.onHalfClose();
    } catch (e) {
      this.fail(e);
    }
  }

  messages(): AsyncIterableIterator<unknown> {
    if (this.iterated) throw new GatewayError(Code.INTERNAL, `the request messages of ${this.path} are read once`);
    this.iterated = true;
    const it: AsyncIterableIterator<unknown> = {
      next: () => {
        if (this.inbox.length > 0) {
          const value = this.inbox.shift();
          if (this.inbox.length < READ_AHEAD && this.inflating === 0) this.resume();
          return Promise.resolve({ done: false, value });
        }
        if (this.halfClosed || this.ended || this.discard) return Promise.resolve({ done: true, value: undefined });
        return new Promise<IteratorResult<unknown>>((resolve) => (this.reader = resolve));
      },
      return: (value?: unknown) => {
        // The handler stopped reading: what the client still sends is dropped, not held (held, it would pause the
        // stream for good).
        this.discard = true;
        this.inbox = [];
        this.resume();
        return Promise.resolve({ done: true, value });
      },
      [Symbol.asyncIterator]: () => it,
    };
    return it;
  }

  private settleReader(): void {
    const r = this.reader;
    if (r) {
      this.reader = undefined;
      r({ done: true, value: undefined });
    }
  }

  /** Whether a streaming handler takes more messages now. */
  private wantsMore(): boolean {
    return this.inbox.length < READ_AHEAD;
  }

  private runHandler(): void {
    if (this.handlerStarted || this.ended) return;
    this.handlerStarted = true;
    const m = this.method;
    try {
      switch (m.kind) {
        case "unary":
        case "clientStream":
          void (m.kind === "unary" ? m.handle(this) : m.handle(this)).then(
            (value) => this.reply(value),
            (e: unknown) => this.handlerFailed(e),
          );
          return;
        case "serverStream":
        case "bidi": {
          const p = m.kind === "serverStream" ? m.handle(this) : m.handle(this);
          if (p) p.then(undefined, (e: unknown) => this.handlerFailed(e));
          return;
        }
      }
    } catch (e) {
      this.fail(e);
    }
  }

  /** Stop returning flow-control credit (the handler is behind, or a message is being inflated). */
  private pause(): void {
    if (this.paused || this.ended) return;
    this.paused = true;
    this.h2.pause();
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    if (!this.h2.closed) this.h2.resume();
  }

  // --- outbound ---

  /** The unary / client-streaming reply. */
  private reply(value: unknown): void {
    if (this.ended) return;
    try {
      // The deadline passed while the handler ran (its timer had not fired yet, or was due in the same instant as a
      // backend call's own deadline that settled the handler): the caller is owed DEADLINE_EXCEEDED, not a late reply
      // it has given up on.
      if (this.deadline !== undefined && this.deadline <= Date.now()) {
        this.serverEnd({ code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
        return;
      }
      const frame = this.frame(value);
      if (frame === undefined) return;
      this.maybeSendMetadata();
      this.writeFrame(frame);
      this.sendStatus({ code: Code.OK, message: "OK", metadata: this.trailerMd });
    } catch (e) {
      this.fail(e);
    }
  }

  write(message: unknown): boolean {
    if (this.ended) return false;
    const frame = this.frame(message);
    if (frame === undefined) return false;
    this.maybeSendMetadata();
    return this.writeFrame(frame);
  }

  writeFramed(bytes: Uint8Array): boolean {
    if (this.ended) return false;
    this.maybeSendMetadata();
    return this.h2.write(asBuffer(bytes));
  }

  framedWriter(): FramedWriter {
    this.maybeSendMetadata();
    return this.h2;
  }

  drained(): Promise<void> {
    // The stream's own flag: writes through framedWriter() do not pass this object.
    if (!this.h2.needDrain || this.ended) return Promise.resolve();
    return new Promise((resolve) => (this.drainWaiters ??= []).push(resolve));
  }

  private settleWaiters(): void {
    const w = this.drainWaiters;
    if (!w) return;
    this.drainWaiters = undefined;
    for (const resolve of w) resolve();
  }

  sendMetadata(metadata: CallMetadata): void {
    if (this.ended || this.metadataSent) return;
    this.metadataSent = true;
    this.h2.respond(responseHeaders(metadata), false);
  }

  private maybeSendMetadata(): void {
    if (!this.metadataSent) this.sendMetadata(EMPTY_METADATA);
  }

  /** Serialize and frame a response message; undefined (and the call ended with a status) when that fails. */
  private frame(value: unknown): Framed | undefined {
    let bytes: Buffer;
    try {
      bytes = this.method.serialize(value);
    } catch (e) {
      this.serverEnd({ code: Code.INTERNAL, message: SEND_ERROR_DETAILS ? `Error serializing response: ${(e as Error)?.message}` : "Error serializing response" });
      return undefined;
    }
    const max = this.ctx.maxSend;
    if (max !== -1 && bytes.byteLength > max) {
      this.serverEnd({ code: Code.RESOURCE_EXHAUSTED, message: `Sent message larger than max (${bytes.byteLength + 5} vs. ${max})` });
      return undefined;
    }
    return frameMessage(bytes);
  }

  private writeFrame(frame: Framed): boolean {
    if (Buffer.isBuffer(frame)) return this.h2.write(frame);
    this.h2.write(frame[0]);
    return this.h2.write(frame[1]);
  }

  /** The server ends the call without the handler (deadline, a limit, a failure): the handler's signal aborts. */
  private serverEnd(status: StatusLike): void {
    if (this.ended) return;
    this.sendStatus({ ...status, metadata: null });
    this.abortSoon(new GatewayError(status.code, status.message));
  }

  /** End the call with `status`: trailers after the messages, or a trailers-only response. Once; later calls are ignored. */
  private sendStatus(status: StatusLike): void {
    if (this.ended) return;
    this.ended = true;
    this.clearTimers();
    this.settleWaiters();
    this.settleReader();
    if (!this.h2.closed) {
      if (this.metadataSent) this.h2.end(trailers(status));
      else {
        this.metadataSent = true;
        this.h2.respond(trailersOnly(status), true);
      }
    }
    // Inbound held for the handler is released (grpc-js flushes it): the stream can close.
    this.inbox = [];
    this.resume();
  }

  /** RST_STREAM `code` (write-stall sweep, pubsub's reset of a reader that stopped reading). */
  reset(code: number = RST_CANCEL): void {
    if (this.h2.closed || this.resetByUs) return;
    this.resetByUs = true;
    this.ended = true;
    this.clearTimers();
    this.settleWaiters();
    this.settleReader();
    this.h2.reset(code);
  }

  private clearTimers(): void {
    callDeadlines.remove(this);
    if (this.messageTimer) clearTimeout(this.messageTimer);
    this.messageTimer = undefined;
  }

  deadlinePassed(): void {
    this.serverEnd({ code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
  }

  /** Abort the handler's signal on the next tick (never inside one of the handler's own calls). Once. */
  private abortSoon(reason: GatewayError): void {
    if (this.abortReason) return;
    this.abortReason = reason;
    const { ac, light } = this;
    // No signal handed out yet: one made later is aborted from the start.
    if (!ac && !light) return;
    process.nextTick(() => {
      try {
        light?.abort(reason);
        ac?.abort(reason);
      } catch (e) {
        this.ctx.onError(e, this.path);
      }
    });
  }
}

/**
 * A call's H2StreamHandler: one small object per stream that forwards to the call (not four closures and their
 * context, which a long-lived Subscribe stream would hold for its whole life).
 */
class StreamEvents implements H2StreamHandler {
  constructor(private readonly call: GrpcCall) {}
  data(buf: Buffer, start: number, end: number): void {
    this.call.data(buf, start, end);
  }
  end(): void {
    this.call.clientEnd();
  }
  close(code: number, why: string): void {
    this.call.close(code, why);
  }
  drain(): void {
    this.call.drain();
  }
}

/** The abort reasons of calls that closed: shared, as nothing about them is per call. */
const CALL_OVER = new GatewayError(Code.CANCELLED, "the call is over");
const CALLER_CANCELLED = new GatewayError(Code.CANCELLED, "the caller cancelled the call");
const DEADLINE_PASSED = new GatewayError(Code.DEADLINE_EXCEEDED, "the call's deadline passed");

/** Sent as the response headers when the handler set none: shared, never changed. */
const EMPTY_METADATA = new CallMetadata();
