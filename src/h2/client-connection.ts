import net from "node:net";
import tls from "node:tls";
import {
  ACK,
  CONNECTION_WINDOW,
  CONTINUATION,
  DATA,
  END_HEADERS,
  END_STREAM,
  FrameReader,
  GOAWAY,
  H2Error,
  HEADERS,
  MAX_WINDOW,
  PADDED,
  PING,
  PREFACE,
  SETTINGS,
  SETTINGS_ACK,
  STREAM_WINDOW,
  WINDOW_UPDATE,
  frameHeader,
  writeGoaway,
  writePingAck,
  writeRst,
  writeWindowUpdate,
} from "./frames.js";
import { HpackDecoder, HpackError, type HeaderSink } from "./hpack.js";

/**
 * One cleartext HTTP/2 connection (RFC 9113, h2c with prior knowledge) over `net.Socket`, client side, written for
 * h2-unary.ts: it opens request streams, writes their frames and parses the peer's frames from one 'data' listener.
 * What it does: the preface and SETTINGS (push off, large receive windows, a connection WINDOW_UPDATE); the peer's
 * SETTINGS (MAX_FRAME_SIZE, INITIAL_WINDOW_SIZE, MAX_CONCURRENT_STREAMS: streams beyond it wait in a bounded queue)
 * acknowledged; PING answered; GOAWAY (streams above its last-stream-id are handed back as not processed, the
 * connection takes no new ones and ends when its streams have); RST_STREAM; send-side flow control (DATA waits for
 * WINDOW_UPDATE) and receive-side flow control (WINDOW_UPDATE as data is consumed); HEADERS with CONTINUATION, padding
 * and priority; HPACK decoding with the connection's dynamic table. Anything malformed from the peer is a connection
 * error: GOAWAY with the error code, the socket destroyed, every stream told. Every buffer is bounded (frames by the
 * advertised MAX_FRAME_SIZE, header blocks by HEADER_BLOCK_LIMIT, decoded header lists by the HPACK decoder, queued
 * streams by QUEUE_LIMIT); nothing throws out of a socket event handler.
 */

export { CONNECTION_WINDOW, H2Error, STREAM_WINDOW, frameHeader } from "./frames.js";

/** The largest header block (HEADERS + CONTINUATION fragments) accepted from the peer. */
export const HEADER_BLOCK_LIMIT = 64 * 1024;
/** Streams waiting for the peer's MAX_CONCURRENT_STREAMS to allow them, per connection. */
export const QUEUE_LIMIT = 4096;
/** The highest client stream id; past it the connection takes no new streams (RFC 9113 5.1.1). */
const MAX_STREAM_ID = 0x7fffffff;
/** How long a PING ACK waits for a frame to leave with (releaseAcks). */
const ACK_HOLD_MS = 20;
/** PING ACKs held at once; one more goes out at once with them (PING floods are metered before this). */
const MAX_HELD_ACKS = 8;

/** Our SETTINGS: ENABLE_PUSH 0, INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE; then a connection WINDOW_UPDATE. */
function greeting(): Buffer {
  const b = Buffer.alloc(PREFACE.length + 9 + 18 + 9 + 4);
  PREFACE.copy(b, 0);
  let p = frameHeader(b, PREFACE.length, 18, SETTINGS, 0, 0);
  b.writeUInt16BE(0x2, p);
  b.writeUInt32BE(0, p + 2);
  b.writeUInt16BE(0x4, p + 6);
  b.writeUInt32BE(STREAM_WINDOW, p + 8);
  b.writeUInt16BE(0x6, p + 12);
  b.writeUInt32BE(HEADER_BLOCK_LIMIT, p + 14);
  p = frameHeader(b, p + 18, 4, WINDOW_UPDATE, 0, 0);
  b.writeUInt32BE(CONNECTION_WINDOW - 65_535, p);
  return b;
}
const GREETING = greeting();

/** Why a connection's streams end without their own outcome. */
export interface ConnectionLoss {
  /** The socket connected at some point (else the request never left this process). */
  everConnected: boolean;
  /** The peer broke the protocol (a malformed frame or header block): what was wrong. */
  protocolError?: string;
  /** The socket's error, when it had one. */
  socketError?: string;
}

/**
 * A request stream as the connection sees it. h2-unary's attempt extends it: the connection writes its frames, keeps
 * its windows here, and calls the abstract methods as frames arrive (so a call allocates no handler objects).
 */
export abstract class H2Stream implements HeaderSink {
  /** 0 until the stream is opened (queued streams have none yet). */
  id = 0;
  /** The connection it is open or queued on; null once it is done there. */
  conn: H2Connection | null = null;
  sendWindow = 0;
  recvWindow = 0;
  recvUnacked = 0;
  /** How much of the DATA payload (5-byte prefix + message) has been sent. */
  sent = 0;
  /** Our END_STREAM has been sent. */
  localEnd = false;
  /** The request message (the 5-byte gRPC prefix is written in front of it). */
  abstract readonly message: Buffer;
  /** An upper bound of writeHeaderBlock's length. */
  abstract headerBlockBound(): number;
  /** HPACK-encode the request headers at `pos`; returns the end. Called when the stream is opened. */
  abstract writeHeaderBlock(out: Buffer, pos: number): number;
  abstract header(name: string, value: string): void;
  /** A header block (response headers or trailers) ended; `endStream` when it also ended the stream. */
  abstract headersDone(endStream: boolean): void;
  /** DATA payload buf[start, end). */
  abstract data(buf: Buffer, start: number, end: number): void;
  /** The peer ended the stream (after headersDone or data). The stream is already off the connection. */
  abstract ended(): void;
  /** The peer reset the stream with this error code. Already off the connection. */
  abstract reset(code: number): void;
  /** The peer never processed the stream (its id is above a GOAWAY's last stream id): safe to send again. Already off. */
  abstract refused(): void;
  /** The connection went away under the stream. Already off. */
  abstract lost(why: ConnectionLoss): void;
}

/** Takes header fields of blocks whose stream is gone: they must still be decoded to keep the HPACK table in step. */
const DISCARD: HeaderSink = { header(): void {} };

function uncork(c: H2Connection): void {
  c.uncork();
}
function releaseAcks(c: H2Connection): void {
  c.releaseAcks();
}
function probeExpired(c: H2Connection): void {
  c.destroy(`no PING ACK within the probe timeout`);
}

/** What a connection reports to its owner. */
export interface ConnectionEvents {
  /** The connection takes no new streams any more (GOAWAY, stream ids used up, closing, or gone). Once. */
  retired(c: H2Connection): void;
  /** Streams that were queued on a retired connection and never opened, to be placed elsewhere. */
  requeue(s: H2Stream): void;
}

/** One HTTP/2 connection; see the file comment. */
export class H2Connection extends FrameReader {
  private readonly socket: net.Socket;
  private readonly decoder = new HpackDecoder();
  private readonly streams = new Map<number, H2Stream>();
  private nextId = 1;
  /** Streams waiting for MAX_CONCURRENT_STREAMS (lazily pruned: an entry whose conn is not this one is skipped). */
  private queue: H2Stream[] = [];
  private queueHead = 0;
  private queued = 0;
  /** Streams whose DATA waits for a window. */
  private blocked: H2Stream[] = [];
  // The peer's settings.
  private maxFrame = 16_384;
  private maxStreams = Infinity;
  private corked = false;
  private probeTimer: ReturnType<typeof setTimeout> | undefined;
  /**
   * PING ACKs waiting for a frame to leave with (at most ACK_HOLD_MS; releaseAcks), 17 bytes each, `heldAcks` of them;
   * the buffer is made on the first, and handed to the socket as it is.
   * One buffer rather than an array of frames: a fresh array literal starts with small-integer elements, and the first
   * frame pushed into the array of a new connection deoptimized onPing (measured: a connection to a real backend).
   */
  private ackFrames: Buffer | null = null;
  private heldAcks = 0;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  private probeCount = 0;
  private closing = false;
  /** Takes no new streams (GOAWAY, stream ids used up, closing, or gone). */
  private retiredFlag = false;
  /** The socket connected at some point. */
  private everConnected = false;
  private socketError: string | undefined;

  /**
   * `firstStreamId` is for tests of the stream id limit (odd, default 1). With `secure` the connection is HTTP/2 over
   * TLS: the options must offer ALPN "h2", and a peer that does not select it is a connection failure before any frame
   * is read (the preface written meanwhile sits in the TLS socket's buffer).
   */
  constructor(
    host: string,
    port: number,
    private readonly events: ConnectionEvents,
    firstStreamId = 1,
    secure?: tls.ConnectionOptions,
  ) {
    super(HEADER_BLOCK_LIMIT, H2Error.PROTOCOL_ERROR, Infinity);
    this.nextId = firstStreamId;
    if (secure) {
      const socket = tls.connect({ ...secure, host, port });
      socket.setNoDelay(true);
      socket.on("secureConnect", () => {
        if (socket.alpnProtocol === "h2") this.everConnected = true;
        else {
          this.socketError = `the backend did not select HTTP/2 over TLS (ALPN h2; it selected ${socket.alpnProtocol || "nothing"})`;
          socket.destroy();
        }
      });
      this.socket = socket;
    } else {
      this.socket = net.connect({ host, port, noDelay: true });
      this.socket.on("connect", () => {
        this.everConnected = true;
      });
    }
    this.socket.on("data", (chunk: Buffer) => {
      try {
        this.onData(chunk);
      } catch (e) {
        // A bug here must not crash the process: the connection ends, its calls fail.
        this.fail(H2Error.INTERNAL_ERROR, `client error: ${(e as Error).message}`);
      }
    });
    this.socket.on("error", (e: Error) => {
      this.socketError = e.message;
    });
    this.socket.on("close", () => this.teardown(undefined));
    this.socket.unref();
    this.write(GREETING);
  }

  /** Streams open or queued on it. */
  get openStreams(): number {
    return this.streams.size + this.queued;
  }

  /** Takes new streams. */
  get usable(): boolean {
    return !this.retiredFlag && !this.destroyed;
  }

  /**
   * Open `s` now, or queue it while the peer's MAX_CONCURRENT_STREAMS is reached. False when the connection takes no
   * new streams or the queue is full (the caller decides what to do with the stream).
   */
  open(s: H2Stream): boolean {
    if (!this.usable) return false;
    if (this.streams.size >= this.maxStreams) {
      if (this.queued >= QUEUE_LIMIT) return false;
      // Calls that left the queue (deadline, abort) stay in the array until reached: drop them before it grows past
      // twice the limit.
      if (this.queue.length - this.queueHead >= 2 * QUEUE_LIMIT) {
        this.queue = this.queue.slice(this.queueHead).filter((q) => q.conn === this && q.id === 0);
        this.queueHead = 0;
      }
      s.conn = this;
      s.id = 0;
      this.queue.push(s);
      this.queued++;
      return true;
    }
    this.start(s);
    return true;
  }

  /** End `s` on this connection: RST_STREAM with `code` if it is open, out of the queue if it waits. */
  cancel(s: H2Stream, code: number): void {
    if (s.conn !== this) return;
    s.conn = null;
    if (s.id === 0) {
      this.queued--;
      return;
    }
    this.streams.delete(s.id);
    this.unblock(s);
    this.write(rstFrame(s.id, code));
    this.next();
    this.maybeEnd();
  }

  /**
   * PING the peer; no ACK within `timeoutMs` and the connection is destroyed (its calls fail, the next call dials
   * again). One probe at a time.
   */
  probe(timeoutMs: number): void {
    if (this.probeTimer !== undefined || this.destroyed) return;
    const b = Buffer.alloc(17);
    frameHeader(b, 0, 8, PING, 0, 0);
    b.writeUInt32BE(++this.probeCount, 13);
    this.probeTimer = setTimeout(probeExpired, timeoutMs, this);
    this.probeTimer.unref();
    this.write(b);
  }

  /** Take no new streams; GOAWAY, and end the socket once the open streams are done. */
  close(): void {
    if (this.destroyed || this.closing) return;
    this.closing = true;
    const b = Buffer.alloc(17);
    frameHeader(b, 0, 8, GOAWAY, 0, 0);
    this.write(b);
    this.retire();
    this.maybeEnd();
  }

  /** Destroy the connection now: every stream is lost. */
  destroy(reason: string): void {
    if (this.destroyed) return;
    this.socketError ??= reason;
    this.teardown(undefined);
  }

  uncork(): void {
    if (!this.corked) return;
    this.corked = false;
    this.socket.uncork();
  }

  // ---- writing ----

  /**
   * Frames written in one event-loop turn leave in one writev: the socket is uncorked in the check phase
   * (setImmediate), after every request the poll phase read (uWS and grpc-js both deliver there) has written its
   * frames, so at 64 calls in flight one syscall carries many calls, while a lone call waits for nothing but the end
   * of the poll phase it arrived in.
   */
  private write(b: Buffer): void {
    if (this.destroyed) return;
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      setImmediate(uncork, this);
    }
    if (this.heldAcks > 0) this.writeAcks();
    this.socket.write(b);
  }

  /**
   * Held PING ACKs now (their timer). A backend's grpc-go transport sends a BDP PING with each response it writes;
   * answered at once, every call would cost the gateway a write syscall of 17 bytes, so the ACK waits for the next
   * frame on the connection (a request, usually within the same millisecond under load) or ACK_HOLD_MS, whichever
   * comes first. Keepalive PINGs allow seconds for the ACK; a BDP sample only reads the window a little larger.
   */
  releaseAcks(): void {
    this.ackTimer = undefined;
    if (this.heldAcks === 0 || this.destroyed) return;
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      setImmediate(uncork, this);
    }
    this.writeAcks();
  }

  private writeAcks(): void {
    const frames = this.ackFrames!.subarray(0, 17 * this.heldAcks);
    // The socket keeps the bytes until it has written them: the next held ACK starts a buffer of its own.
    this.ackFrames = null;
    this.heldAcks = 0;
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    this.socket.write(frames);
  }

  private start(s: H2Stream): void {
    const id = this.nextId;
    this.nextId += 2;
    s.id = id;
    s.conn = this;
    s.sendWindow = this.peerInitialWindow;
    s.recvWindow = STREAM_WINDOW;
    this.streams.set(id, s);
    const msg = s.message;
    const total = msg.length + 5;
    const bound = s.headerBlockBound();
    if (bound <= this.maxFrame && total <= this.maxFrame && total <= s.sendWindow && total <= this.sendWindow) {
      // The common case: HEADERS and one DATA frame with END_STREAM, in one buffer (the message copied in when small).
      const copy = msg.length <= 16_384;
      const out = Buffer.allocUnsafe(9 + bound + 14 + (copy ? msg.length : 0));
      const end = s.writeHeaderBlock(out, 9);
      frameHeader(out, 0, end - 9, HEADERS, END_HEADERS, id);
      let p = frameHeader(out, end, total, DATA, END_STREAM, id);
      out[p] = 0;
      out.writeUInt32BE(msg.length, p + 1);
      p += 5;
      if (copy) {
        msg.copy(out, p);
        this.write(out.subarray(0, p + msg.length));
      } else {
        this.write(out.subarray(0, p));
        this.write(msg);
      }
      s.sendWindow -= total;
      this.sendWindow -= total;
      s.sent = total;
      s.localEnd = true;
    } else {
      this.writeHeaders(s, bound);
      if (!this.sendData(s)) this.blocked.push(s);
    }
    if (this.nextId > MAX_STREAM_ID) this.retire();
  }

  /** HEADERS and as many CONTINUATION frames as the peer's MAX_FRAME_SIZE needs. */
  private writeHeaders(s: H2Stream, bound: number): void {
    const block = Buffer.allocUnsafe(bound);
    const len = s.writeHeaderBlock(block, 0);
    const frames = Math.max(1, Math.ceil(len / this.maxFrame));
    const out = Buffer.allocUnsafe(len + 9 * frames);
    let p = 0;
    for (let off = 0, i = 0; i < frames; i++) {
      const n = Math.min(this.maxFrame, len - off);
      p = frameHeader(out, p, n, i === 0 ? HEADERS : CONTINUATION, i === frames - 1 ? END_HEADERS : 0, s.id);
      block.copy(out, p, off, off + n);
      p += n;
      off += n;
    }
    this.write(out);
  }

  /** Send what the windows allow of the stream's DATA; true when all of it (with END_STREAM) is out. */
  private sendData(s: H2Stream): boolean {
    const msg = s.message;
    const total = msg.length + 5;
    while (s.sent < total) {
      const n = Math.min(total - s.sent, s.sendWindow, this.sendWindow, this.maxFrame);
      if (n <= 0) return false;
      const last = s.sent + n === total;
      // The part of the 5-byte prefix in this frame goes with the frame header.
      const pre = s.sent < 5 ? Math.min(5 - s.sent, n) : 0;
      const h = Buffer.allocUnsafe(9 + pre);
      frameHeader(h, 0, n, DATA, last ? END_STREAM : 0, s.id);
      for (let i = 0; i < pre; i++) {
        const k = s.sent + i;
        h[9 + i] = k === 0 ? 0 : (msg.length >>> (8 * (4 - k))) & 0xff;
      }
      this.write(h);
      const from = Math.max(0, s.sent - 5);
      const to = s.sent + n - 5;
      if (to > from) this.write(msg.subarray(from, to));
      s.sendWindow -= n;
      this.sendWindow -= n;
      s.sent += n;
    }
    s.localEnd = true;
    return true;
  }

  private unblock(s: H2Stream): void {
    if (s.localEnd) return;
    const i = this.blocked.indexOf(s);
    if (i >= 0) this.blocked.splice(i, 1);
  }

  protected flushBlocked(): void {
    if (this.blocked.length === 0 || this.destroyed) return;
    const still: H2Stream[] = [];
    for (const s of this.blocked) if (s.conn === this && !this.sendData(s)) still.push(s);
    this.blocked = still;
  }

  /** Open queued streams while the peer's limit allows. */
  private next(): void {
    while (this.queued > 0 && this.streams.size < this.maxStreams && this.usable) {
      const s = this.queue[this.queueHead++]!;
      if (s.conn !== this || s.id !== 0) continue; // cancelled while queued
      this.queued--;
      this.start(s);
    }
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.queueHead);
      this.queueHead = 0;
    }
  }

  /** Hand queued streams back to the owner (this connection takes no new ones). */
  private drainQueue(): void {
    const q = this.queue.slice(this.queueHead);
    this.queue = [];
    this.queueHead = 0;
    this.queued = 0;
    for (const s of q) {
      if (s.conn !== this || s.id !== 0) continue;
      s.conn = null;
      this.events.requeue(s);
    }
  }

  private retire(): void {
    if (this.retiredFlag) return;
    this.retiredFlag = true;
    this.events.retired(this);
    this.drainQueue();
  }

  private maybeEnd(): void {
    if (this.retiredFlag && this.streams.size === 0 && !this.destroyed) {
      this.socket.end();
      // A peer that never closes its side does not keep the socket forever.
      setTimeout(() => this.destroy("closed"), 2000).unref();
    }
  }

  /** A connection error (RFC 9113 5.4.1): GOAWAY with the code, then the socket destroyed; every stream lost. */
  protected fail(code: number, message: string): void {
    if (this.destroyed) return;
    const debug = Buffer.from(message.slice(0, 200), "utf8");
    const b = Buffer.allocUnsafe(17 + debug.length);
    writeGoaway(b, 0, 0, code, debug);
    this.write(b);
    this.teardown(message);
  }

  /** The connection is gone: destroyed (after a connection error, the GOAWAY written first is let out). */
  private teardown(protocolError: string | undefined): void {
    if (this.destroyed) return;
    this.destroyed = true;
    clearTimeout(this.probeTimer);
    clearTimeout(this.ackTimer);
    this.ackFrames = null;
    this.heldAcks = 0;
    this.retire();
    this.dropPartial();
    if (protocolError !== undefined && !this.socket.destroyed) {
      if (this.corked) this.uncork();
      this.socket.end();
      setTimeout(() => this.socket.destroy(), 1000).unref();
    } else this.socket.destroy();
    const why: ConnectionLoss = { everConnected: this.everConnected };
    if (protocolError !== undefined) why.protocolError = protocolError;
    if (this.socketError !== undefined) why.socketError = this.socketError;
    const open = [...this.streams.values()];
    this.streams.clear();
    this.blocked = [];
    for (const s of open) {
      s.conn = null;
      s.lost(why);
    }
  }

  // ---- reading ----

  private onData(chunk: Buffer): void {
    if (this.destroyed) return;
    this.readFrames(chunk, 0);
  }

  protected onPriority(): void {
    // Advisory; this side does not prioritise.
  }

  protected onPushPromise(): void {
    this.fail(H2Error.PROTOCOL_ERROR, "PUSH_PROMISE though push is disabled");
  }

  protected onUnknown(): void {
    // Ignored (RFC 9113 4.1).
  }

  protected sendWindowUpdate(id: number, inc: number): void {
    const b = Buffer.allocUnsafe(13);
    writeWindowUpdate(b, 0, id, inc);
    this.write(b);
  }

  protected onDataFrame(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, "DATA on stream 0");
    const pad = this.unpad(buf, p, size, flags);
    if (pad < 0) return;
    if (!this.connectionData(size)) return;
    const s = this.streams.get(sid);
    if (s === undefined) {
      if (sid >= this.nextId) return this.fail(H2Error.PROTOCOL_ERROR, `DATA on idle stream ${sid}`);
      return; // a stream this side already ended
    }
    s.recvWindow -= size;
    if (s.recvWindow < 0) {
      this.cancel(s, H2Error.FLOW_CONTROL_ERROR);
      return s.reset(H2Error.FLOW_CONTROL_ERROR);
    }
    const start = (flags & PADDED) !== 0 ? p + 1 : p;
    s.data(buf, start, p + size - pad);
    if (s.conn !== this) return; // the stream failed on this data
    if ((flags & END_STREAM) !== 0) return this.remoteEnd(s);
    s.recvUnacked += size;
    if (s.recvUnacked >= STREAM_WINDOW / 2) {
      this.sendWindowUpdate(sid, s.recvUnacked);
      s.recvWindow += s.recvUnacked;
      s.recvUnacked = 0;
    }
  }

  protected onHeaders(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, "HEADERS on stream 0");
    if ((sid & 1) === 0 || sid >= this.nextId) return this.fail(H2Error.PROTOCOL_ERROR, `HEADERS on stream ${sid}, which this side never opened`);
    this.headersFrame(buf, p, size, flags, sid);
  }

  protected headerBlock(sid: number, buf: Buffer, start: number, end: number, endStream: boolean): void {
    const s = this.streams.get(sid);
    try {
      this.decoder.decode(buf, start, end, s ?? DISCARD);
    } catch (e) {
      if (e instanceof HpackError) return this.fail(H2Error.COMPRESSION_ERROR, `malformed header block: ${e.message}`);
      throw e;
    }
    if (s === undefined) return;
    s.headersDone(endStream);
    if (endStream && s.conn === this) this.remoteEnd(s);
  }

  /** The peer ended `s`: off the connection, and our side reset if the request was not all sent. */
  private remoteEnd(s: H2Stream): void {
    this.streams.delete(s.id);
    s.conn = null;
    if (!s.localEnd) {
      this.unblock(s);
      this.write(rstFrame(s.id, H2Error.CANCEL));
    }
    s.ended();
    this.next();
    this.maybeEnd();
  }

  protected onReset(buf: Buffer, p: number, size: number, sid: number): void {
    if (!this.resetOk(size, sid)) return;
    const s = this.streams.get(sid);
    if (s === undefined) return;
    this.streams.delete(sid);
    s.conn = null;
    this.unblock(s);
    s.reset(buf.readUInt32BE(p));
    this.next();
    this.maybeEnd();
  }

  protected onSettings(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (!this.settingsToApply(size, flags, sid)) return;
    for (let i = p; i < p + size; i += 6) {
      const id = buf.readUInt16BE(i);
      const v = buf.readUInt32BE(i + 2);
      if (id === 0x3) this.maxStreams = v;
      else if (id === 0x4) {
        if (!this.initialWindow(v, this.streams.values())) return;
      } else if (id === 0x5) {
        if (!this.frameSizeOk(v)) return;
        this.maxFrame = v;
      } else if (id === 0x2 && v > 1) return this.fail(H2Error.PROTOCOL_ERROR, `ENABLE_PUSH ${v}`);
      // HEADER_TABLE_SIZE: this side never indexes, so the peer's table size does not matter; others are advisory.
    }
    this.write(SETTINGS_ACK);
    this.flushBlocked();
    this.next();
  }

  protected onPing(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (!this.pingOk(size, sid)) return;
    if ((flags & ACK) !== 0) {
      if (this.probeTimer !== undefined && buf.readUInt32BE(p + 4) === this.probeCount) {
        clearTimeout(this.probeTimer);
        this.probeTimer = undefined;
      }
      return;
    }
    if (this.heldAcks === MAX_HELD_ACKS) {
      const b = Buffer.allocUnsafe(17);
      writePingAck(b, 0, buf, p);
      return this.write(b);
    }
    writePingAck((this.ackFrames ??= Buffer.allocUnsafe(17 * MAX_HELD_ACKS)), 17 * this.heldAcks++, buf, p);
    this.ackTimer ??= setTimeout(releaseAcks, ACK_HOLD_MS, this).unref();
  }

  protected onGoaway(buf: Buffer, p: number, size: number, sid: number): void {
    if (!this.goawayOk(size, sid)) return;
    const last = buf.readUInt32BE(p) & 0x7fffffff;
    this.retire();
    // Streams above the last id were not processed (RFC 9113 6.8): they may be sent again elsewhere.
    for (const [id, s] of [...this.streams]) {
      if (id <= last) continue;
      this.streams.delete(id);
      s.conn = null;
      this.unblock(s);
      s.refused();
    }
    this.maybeEnd();
  }

  protected onStreamWindow(sid: number, inc: number): boolean {
    const s = this.streams.get(sid);
    if (s === undefined) return false;
    if (inc === 0 || s.sendWindow + inc > MAX_WINDOW) {
      this.cancel(s, inc === 0 ? H2Error.PROTOCOL_ERROR : H2Error.FLOW_CONTROL_ERROR);
      s.reset(inc === 0 ? H2Error.PROTOCOL_ERROR : H2Error.FLOW_CONTROL_ERROR);
      return false;
    }
    s.sendWindow += inc;
    return true;
  }
}

function rstFrame(id: number, code: number): Buffer {
  const b = Buffer.allocUnsafe(13);
  writeRst(b, 0, id, code);
  return b;
}
