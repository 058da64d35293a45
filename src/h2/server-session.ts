import type net from "node:net";
import {
  ACK,
  CONNECTION_WINDOW,
  END_STREAM,
  FrameReader,
  H2Error,
  MAX_FRAME_IN,
  MAX_WINDOW,
  PADDED,
  PREFACE,
  PRIORITY_FLAG,
  SETTINGS,
  SETTINGS_ACK,
  STREAM_WINDOW,
  WINDOW_UPDATE,
  frameHeader,
} from "./frames.js";
import { HpackDecoder, HpackError, type HeaderSink } from "./hpack.js";
import { RequestHeaders, TrailerCheck } from "./server-headers.js";
import { IndexingEncoder } from "./server-encode.js";
import { Bucket, CLOSED_BY_CLIENT, CLOSED_BY_US, CLOSED_ENDED, ClosedStreams } from "./server-guards.js";
import { ConnectionTimers, type LifecycleSettings, type TimerHost } from "./server-lifecycle.js";
import { ServerStream, type StreamOwner } from "./server-stream.js";
import type { H2ServerOptions, H2ServerSession, HeaderList } from "./types.js";
import { FrameWriter, type FlushOwner } from "./server-writer.js";

/**
 * One client connection of the native HTTP/2 server (RFC 9113, server role, cleartext with prior knowledge), the
 * mirror of the raw-frame client in src/h2/client-connection.ts: it checks the 24-byte client preface, sends our
 * SETTINGS (MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE) and a connection WINDOW_UPDATE, parses
 * the client's frames from one 'data' listener and writes ours.
 *
 * Reading: SETTINGS applied and acknowledged (INITIAL_WINDOW_SIZE moves open streams' send windows, MAX_FRAME_SIZE
 * sizes our frames, a lowered HEADER_TABLE_SIZE is signalled with a table size update 0: this side never indexes);
 * PING answered; PING/SETTINGS/PRIORITY/empty-DATA and RST_STREAM floods end the connection (ENHANCE_YOUR_CALM); HEADERS with
 * CONTINUATION, padding and priority decoded through the connection's HPACK decoder (every block, also refused ones,
 * so the table stays in step); new streams odd and increasing, beyond MAX_CONCURRENT_STREAMS refused (REFUSED_STREAM),
 * a header list over maxHeaderListSize refused (ENHANCE_YOUR_CALM, as node:http2 does; grpc-js reports it as
 * RESOURCE_EXHAUSTED); DATA delivered with its credit returned unless the stream is paused; anything malformed is a
 * connection error (GOAWAY with the code, the socket ended) or a stream error (RST_STREAM) as RFC 9113 says.
 * Closed streams are remembered (src/h2/server-guards.ts) so that frames on them get what 5.1 says (ignored after our
 * RST_STREAM, STREAM_CLOSED after the client's RST_STREAM or END_STREAM), each metered; the stream errors this layer
 * raises itself and oversize header lists are metered too (docs/operations.md, "HTTP/2 frame defences").
 *
 * Lifecycle (src/h2/server-lifecycle.ts): idle timeout, keepalive PING, maximum connection age, SETTINGS-ACK and
 * header-block timeouts; a graceful close is two GOAWAYs (the first naming every stream, the final one the last
 * stream id seen); connection flow-control credit is returned as DATA is consumed, not as it arrives.
 *
 * Writing (frames batched into one socket write per flush by src/h2/server-writer.ts, PING ACKs riding with
 * the connection's next write): DATA respects the client's windows and MAX_FRAME_SIZE, the rest waits per stream; the
 * socket's own backlog is bounded too (SOCKET_HWM), so a client that grants windows but does not read cannot grow this
 * process's memory. Request header lists are collected and checked by src/h2/server-headers.ts, response ones encoded
 * by src/h2/server-encode.ts.
 */

/** DATA waits (like a closed window) while the socket holds this many unsent bytes; its 'drain' resumes it. */
const SOCKET_HWM = 1 << 20;
/** A socket backlog beyond this (control-frame answers to a client that does not read) ends the connection. */
const SOCKET_LIMIT = SOCKET_HWM + (4 << 20);
/** The client preface and its first SETTINGS must arrive within this time. */
const PREFACE_TIMEOUT_MS = 10_000;
/** After our side of the socket has ended, the client has this long to end its side. */
const END_TIMEOUT_MS = 2000;
/**
 * Frames that cost us work but carry nothing (PING, SETTINGS, PRIORITY, empty DATA, unknown types) are metered by a
 * token bucket: a burst of FLOOD_BURST, refilled at FLOOD_RATE per second; an empty bucket is ENHANCE_YOUR_CALM.
 * Every HEADERS or DATA frame we send on a stream adds FLOOD_GRANT back (up to the burst): grpc-go's BDP estimator
 * PINGs once per burst of DATA it reads, so a busy connection PINGs as often as it is answered (thousands a second),
 * and grpc-go's own server forgives PINGs the same way (its ping strikes reset whenever it sends data or headers).
 * A PING flood with no calls behind it still meets the rate.
 */
export const FLOOD_BURST = 1000;
export const FLOOD_RATE = 200;
const FLOOD_GRANT = 1;
/**
 * Client RST_STREAMs (the "rapid reset" attack, CVE-2023-44487, opens and cancels streams as fast as it can, each one
 * work for the gRPC layer) are counted against nghttp2's budget (nghttp2_ratelim): RESET_BUDGET per connection,
 * refilled RESET_REFILL per whole second, so clients tuned against nghttp2 servers meet the same limit. At half of it
 * the connection is closed gracefully (calls in flight finish; a client that cancels a lot reconnects with a full
 * budget); a client that keeps resetting on it until the budget is gone loses it with ENHANCE_YOUR_CALM.
 */
export const RESET_BUDGET = 1000;
export const RESET_REFILL = 33;
/** CONTINUATION frames allowed in one header block. */
export const MAX_CONTINUATIONS = 64;
/**
 * Frames on closed streams (DATA, HEADERS, WINDOW_UPDATE, PRIORITY) are metered by a bucket of their own: a burst of
 * CLOSED_FRAME_BURST, refilled at CLOSED_FRAME_RATE per second, and CLOSED_FRAME_GRANT more for each stream that
 * closes (a client's WINDOW_UPDATE or DATA in flight when we end or reset a stream is normal, one or two per stream).
 */
export const CLOSED_FRAME_BURST = 1000;
export const CLOSED_FRAME_RATE = 200;
const CLOSED_FRAME_GRANT = 2;
/**
 * Streams this layer refuses or resets on its own (beyond MAX_CONCURRENT_STREAMS, malformed, content-length wrong,
 * DATA after END_STREAM, ...): a burst of STREAM_ERROR_BURST, refilled at STREAM_ERROR_RATE per second (nghttp2 ends a
 * connection after about 100 such in a short time); past it, ENHANCE_YOUR_CALM.
 */
export const STREAM_ERROR_BURST = 100;
export const STREAM_ERROR_RATE = 10;
/** Header lists over maxHeaderListSize a connection may send (each refused); the next one ends it. */
export const MAX_OVERSIZE_LISTS = 8;
/**
 * The largest header block accepted, whatever maxHeaderListSize says (the block limit grows with it): 1 MiB, the
 * decoding work one block may cost. It equals MAX_CONTINUATIONS frames of the default 16 KiB.
 */
export const MAX_HEADER_BLOCK = 1 << 20;

const EMPTY = Buffer.alloc(0);

/** Takes the fields of header blocks nobody reads (refused or closed streams): decoded only to keep the table in step. */
const DISCARD: HeaderSink = { header(): void {} };

/** What every session of one server shares. */
export interface SessionShared {
  readonly options: H2ServerOptions;
  /** Our SETTINGS frame and the connection WINDOW_UPDATE, written first on every connection. */
  readonly greeting: Buffer;
  /** The largest header block (HEADERS + CONTINUATION) accepted. */
  readonly blockLimit: number;
  readonly sessions: Set<ServerSession>;
  /** Timeouts and connection policy (src/h2/server-lifecycle.ts). */
  readonly life: LifecycleSettings;
}

/** The server's first frames for these options. */
export function serverGreeting(options: H2ServerOptions): Buffer {
  const settings: Array<[id: number, value: number]> = [
    [0x3, options.maxConcurrentStreams],
    [0x4, STREAM_WINDOW],
    [0x6, options.maxHeaderListSize],
  ];
  if (options.announceMaxFrameSize === true) settings.push([0x5, MAX_FRAME_IN]);
  const b = Buffer.alloc(9 + 6 * settings.length + 9 + 4);
  let p = frameHeader(b, 0, 6 * settings.length, SETTINGS, 0, 0);
  for (const [id, value] of settings) {
    b.writeUInt16BE(id, p);
    b.writeUInt32BE(value, p + 2);
    p += 6;
  }
  p = frameHeader(b, p, 4, WINDOW_UPDATE, 0, 0);
  b.writeUInt32BE(CONNECTION_WINDOW - 65_535, p);
  return b;
}

function prefaceExpired(s: ServerSession): void {
  s.destroy(H2Error.SETTINGS_TIMEOUT);
}
function endExpired(socket: net.Socket): void {
  socket.destroy();
}

/** The largest stream id: the first GOAWAY of a graceful close names it (RFC 9113 6.8). */
const ANY_STREAM = 0x7fffffff;

/** A GOAWAY's debug data for a log line: printable ASCII, bounded. */
function debugText(buf: Buffer, start: number, end: number): string {
  return buf.toString("latin1", start, Math.min(end, start + 200)).replace(/[^\x20-\x7e]/g, "?");
}

/** One HTTP/2 connection; see the file comment. */
export class ServerSession extends FrameReader implements H2ServerSession, FlushOwner, TimerHost, StreamOwner {
  readonly remoteAddress: string;
  readonly remotePort: number;
  private readonly streams = new Map<number, ServerStream>();
  private readonly decoder = new HpackDecoder(4096, Number.MAX_SAFE_INTEGER);
  private readonly opts: H2ServerOptions;
  /** The highest client stream id seen. */
  private lastId = 0;
  /** The largest dynamic table size the client's decoder may still assume (4096 until it lowers it). */
  private encoderTable = 4096;
  // Reading: the preface, then frames (assembled by FrameReader).
  private prefaceHave = 0;
  private settingsSeen = false;
  private readonly requestHeaders: RequestHeaders;
  private readonly out: FrameWriter;
  /** Streams with DATA waiting for a window (lazily pruned: done or emptied streams are skipped). */
  private blocked: ServerStream[] = [];
  /** DATA waited because the socket and the unflushed frames passed SOCKET_HWM (see flushed()). */
  private heldBack = false;
  // close() delivery, after the call that caused it has returned.
  private closes: ServerStream[] = [];
  private closesPending = false;
  private readonly runCloses: () => void;
  private sessionCloseWhy: string | undefined;
  // Lifecycle.
  private readonly timers: ConnectionTimers;
  private goawayLast = -1;
  /** Graceful close: 1 once the first GOAWAY (all streams) is written, 2 once the final one is. */
  private drainPhase = 0;
  /** What onSessionClose says when the connection ends after a graceful close. */
  private closeWhy: string | undefined;
  private closing = false;
  private peerGoaway = false;
  private ended = false;
  private announced = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private socketError: string | undefined;
  private readonly floods = new Bucket(FLOOD_BURST, FLOOD_RATE);
  private resetTokens = RESET_BUDGET;
  private resetSec = Math.floor(performance.now() / 1000);
  private resetRotated = false;
  // Frame-level guards (src/h2/server-guards.ts).
  private readonly closedStreams = new ClosedStreams();
  private readonly closedFrames = new Bucket(CLOSED_FRAME_BURST, CLOSED_FRAME_RATE);
  private readonly streamErrors = new Bucket(STREAM_ERROR_BURST, STREAM_ERROR_RATE);
  private oversizeLists = 0;
  private readonly trailerCheck = new TrailerCheck();
  /** The stream of the HEADERS being read when its priority names the stream itself (RFC 9113 5.3.1); else 0. */
  private selfDependent = 0;

  constructor(
    private readonly socket: net.Socket,
    private readonly shared: SessionShared,
  ) {
    super(Math.min(shared.blockLimit, MAX_HEADER_BLOCK), H2Error.ENHANCE_YOUR_CALM, MAX_CONTINUATIONS);
    this.opts = shared.options;
    this.requestHeaders = new RequestHeaders(this.opts.maxHeaderListSize);
    this.out = new FrameWriter(socket, this);
    if (this.opts.headerEncoding === "indexed") this.out.encoder = new IndexingEncoder();
    this.remoteAddress = socket.remoteAddress ?? "";
    this.remotePort = socket.remotePort ?? 0;
    this.runCloses = () => this.deliverCloses();
    this.timers = new ConnectionTimers(this, shared.life);
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      this.timers.read();
      try {
        this.read(chunk);
      } catch (e) {
        // A bug here must not take the process down: the connection ends, its streams are told.
        this.internalError(e);
      }
    });
    socket.on("drain", () => {
      try {
        this.flushBlocked();
      } catch (e) {
        this.internalError(e);
      }
    });
    socket.on("error", (e: Error) => {
      this.socketError = e.message;
    });
    socket.on("close", () => {
      try {
        this.teardown(H2Error.CANCEL, this.socketError ?? (this.ended ? (this.closeWhy ?? "closed") : "connection closed by the client"), false);
      } catch {
        // Nothing is left to tell: the socket is gone.
      }
    });
    shared.sessions.add(this);
    this.timer = setTimeout(prefaceExpired, PREFACE_TIMEOUT_MS, this);
    this.timer.unref();
    this.out.buffer(shared.greeting);
  }

  get openStreams(): number {
    return this.streams.size;
  }

  close(): void {
    this.retire("closed by the server");
  }

  /**
   * Graceful close, first phase (RFC 9113 6.8): GOAWAY naming every stream, so streams the client is sending right now
   * still run, and a PING; its ACK (or DRAIN_PING_WAIT_MS) brings the final GOAWAY (finalGoaway).
   */
  retire(why: string): void {
    if (this.destroyed || this.drainPhase > 0 || this.ended) return;
    this.drainPhase = 1;
    this.closeWhy = why;
    this.out.goaway(ANY_STREAM, H2Error.NO_ERROR, "");
    this.timers.draining();
  }

  /** Graceful close, second phase: GOAWAY with the real last stream id; the socket ends when its streams have. */
  finalGoaway(): void {
    if (this.destroyed || this.drainPhase === 2) return;
    this.drainPhase = 2;
    this.closing = true;
    this.writeGoaway(H2Error.NO_ERROR, "");
    this.maybeEnd();
  }

  /** A PING (not an ACK) of the lifecycle timers. */
  ping(payload: Buffer): void {
    this.out.ping(payload);
  }

  /** Reset every open stream (the connection-age grace is over). */
  resetAll(code: number, why: string): void {
    for (const s of [...this.streams.values()]) this.resetStream(s, code, why);
  }

  destroy(code: number = H2Error.NO_ERROR): void {
    if (this.destroyed) return;
    if (!this.ended) this.writeGoaway(code, "");
    this.teardown(code === H2Error.NO_ERROR ? H2Error.CANCEL : code, "destroyed by the server", true);
  }

  // ---- the stream operations (H2ServerStream delegates here) ----

  respond(s: ServerStream, headers: HeaderList, endStream: boolean): void {
    if (s.done || s.headersSent) return;
    s.headersSent = true;
    this.floods.grant(FLOOD_GRANT);
    this.out.headers(s.id, headers, endStream);
    if (endStream) this.localEnd(s);
  }

  write(s: ServerStream, data: Buffer): boolean {
    if (s.done || s.outEnded || s.trailers !== null) return false;
    const n = data.length;
    if (n === 0) return s.bufferedBytes <= this.opts.streamHighWaterMark;
    if (s.out === null && n <= s.sendWindow && n <= this.sendWindow && n <= this.out.maxFrame && !this.socketBusy()) {
      // The common case: the whole message fits the windows, one DATA frame now.
      this.floods.grant(FLOOD_GRANT);
      this.out.data(s.id, data, 0, n, 0);
      s.sendWindow -= n;
      this.sendWindow -= n;
      return true;
    }
    if (s.out === null) s.out = [data];
    else {
      // A stream that keeps a backlog never empties its queue: drop the sent chunks' slots now and then.
      if (s.outHead > 64 && s.outHead * 2 > s.out.length) {
        s.out = s.out.slice(s.outHead);
        s.outHead = 0;
      }
      s.out.push(data);
    }
    s.bufferedBytes += n;
    this.sendData(s);
    if (s.bufferedBytes > 0 && !s.blocked) {
      s.blocked = true;
      this.blocked.push(s);
      // Window-bound from now on: a PING ACK held for a later write goes with this one (see FrameWriter.pingAck).
      this.out.releaseAcks();
    }
    if (s.bufferedBytes > this.opts.streamHighWaterMark) {
      s.needDrain = true;
      return false;
    }
    return true;
  }

  end(s: ServerStream, trailers: HeaderList): void {
    if (s.done || s.outEnded || s.trailers !== null) return;
    s.headersSent = true;
    if (trailers.length === 0) s.readToEnd = true;
    if (s.out === null) this.endNow(s, trailers);
    else s.trailers = trailers;
  }

  /** Our END_STREAM: on the trailers, or on an empty DATA frame when there are none. */
  private endNow(s: ServerStream, trailers: HeaderList): void {
    this.floods.grant(FLOOD_GRANT);
    if (trailers.length === 0) this.out.data(s.id, EMPTY, 0, 0, END_STREAM);
    else this.out.headers(s.id, trailers, true);
    this.localEnd(s);
  }

  /** Reset `s` with `code` (RST_STREAM) and close it. */
  resetStream(s: ServerStream, code: number, why: string): void {
    if (s.done) return;
    this.out.rst(s.id, code);
    this.finish(s, code, why, CLOSED_BY_US);
  }

  /** Return the stream and connection credit held back (resume()). */
  returnCredit(s: ServerStream): void {
    if (s.connectionHeld > 0) {
      this.consumed(s.connectionHeld);
      s.connectionHeld = 0;
    }
    if (s.done || s.inEnded || s.recvUnacked === 0) return;
    this.out.windowUpdate(s.id, s.recvUnacked);
    s.recvWindow += s.recvUnacked;
    s.recvUnacked = 0;
  }

  /** Our END_STREAM is written: the stream closes now, or once the client's end has been delivered. */
  private localEnd(s: ServerStream): void {
    s.outEnded = true;
    if (s.endDelivered) this.finish(s, H2Error.NO_ERROR, "complete", CLOSED_ENDED);
    else if (!s.inEnded && !s.readToEnd) {
      // The response is complete before the request: ask the client to stop sending (RFC 9113 8.1).
      this.out.rst(s.id, H2Error.NO_ERROR);
      this.finish(s, H2Error.NO_ERROR, "response complete before the request ended", CLOSED_BY_US);
    }
  }

  /**
   * The stream is off the connection; its close() is delivered after the current call returns. `how` (server-guards.ts)
   * is remembered for the client's frames that may still come for it.
   */
  private finish(s: ServerStream, code: number, why: string, how: number): void {
    if (s.done) return;
    s.done = true;
    this.closedStreams.record(s.id, how, s.recvWindow);
    this.closedFrames.grant(CLOSED_FRAME_GRANT);
    s.closeCode = code;
    s.closeWhy = why;
    this.streams.delete(s.id);
    if (this.streams.size === 0) this.timers.idle();
    if (s.connectionHeld > 0) {
      // The stream is gone, and with it what it held: the client may send that much again.
      this.consumed(s.connectionHeld);
      s.connectionHeld = 0;
    }
    s.out = null;
    s.bufferedBytes = 0;
    s.trailers = null;
    this.closes.push(s);
    if (!this.closesPending) {
      this.closesPending = true;
      queueMicrotask(this.runCloses);
    }
    this.maybeEnd();
  }

  private deliverCloses(): void {
    this.closesPending = false;
    while (this.closes.length > 0) {
      const list = this.closes;
      this.closes = [];
      for (const s of list) {
        s.closed = true;
        try {
          s.handler.close(s.closeCode, s.closeWhy);
        } catch {
          // The stream is gone already; nothing is left to reset.
        }
      }
    }
    if (this.sessionCloseWhy !== undefined) {
      const why = this.sessionCloseWhy;
      this.sessionCloseWhy = undefined;
      try {
        this.opts.onSessionClose?.(this, why);
      } catch {
        // A hook's bug must not escape a microtask.
      }
    }
  }

  // ---- writing ----

  /** After each batched flush: a client that does not read even our control frames is let go. */
  flushed(): void {
    if (this.socket.writableLength > SOCKET_LIMIT) this.fail(H2Error.ENHANCE_YOUR_CALM, "the client does not read what it asks for");
    else if (this.heldBack && !this.socket.writableNeedDrain) {
      // DATA waited for bytes not yet handed over (a flush deferred to a later pass), not for the socket: no 'drain'
      // will come to resume it, so it goes on now.
      this.heldBack = false;
      this.flushBlocked();
    }
  }

  flushFailed(e: unknown): void {
    this.internalError(e);
  }

  private socketBusy(): boolean {
    if (this.socket.writableLength + this.out.pending <= SOCKET_HWM) return false;
    this.heldBack = true;
    return true;
  }

  /**
   * GOAWAY with the highest stream id seen (streams above it were not processed and may be retried elsewhere); once
   * written, later GOAWAYs repeat that id.
   */
  private writeGoaway(code: number, debug: string): void {
    if (this.goawayLast < 0) this.goawayLast = this.lastId;
    this.out.goaway(this.goawayLast, code, debug);
  }

  /** Send what the windows allow of the stream's buffered DATA, then its trailers once all of it is out. */
  private sendData(s: ServerStream): void {
    const out = s.out;
    if (out === null) return;
    while (s.outHead < out.length) {
      if (this.socketBusy()) return;
      const chunk = out[s.outHead]!;
      const left = chunk.length - s.outOff;
      const n = Math.min(left, s.sendWindow, this.sendWindow, this.out.maxFrame);
      if (n <= 0) return;
      this.floods.grant(FLOOD_GRANT);
      this.out.data(s.id, chunk, s.outOff, s.outOff + n, 0);
      s.sendWindow -= n;
      this.sendWindow -= n;
      s.bufferedBytes -= n;
      if (n === left) {
        out[s.outHead++] = EMPTY;
        s.outOff = 0;
      } else s.outOff += n;
    }
    s.out = null;
    s.outHead = 0;
    s.outOff = 0;
    if (s.trailers !== null) {
      const t = s.trailers;
      s.trailers = null;
      this.endNow(s, t);
    }
  }

  /** A window opened (or the socket drained): send what waits, and tell streams whose buffer emptied. */
  protected flushBlocked(): void {
    if (this.blocked.length === 0 || this.destroyed) return;
    const list = this.blocked;
    this.blocked = [];
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (s.done) continue;
      this.sendData(s);
      if (s.done) continue;
      if (s.out !== null) {
        this.blocked.push(s);
        continue;
      }
      s.blocked = false;
      if (s.needDrain) {
        s.needDrain = false;
        try {
          s.handler.drain();
        } catch (e) {
          this.resetStream(s, H2Error.INTERNAL_ERROR, `drain handler failed: ${(e as Error).message}`);
        }
      }
    }
  }

  // ---- lifecycle ----

  /** After GOAWAY (ours or the client's), end the socket once the last stream is done. */
  private maybeEnd(): void {
    if ((this.closing || this.peerGoaway) && this.streams.size === 0 && !this.ended && !this.destroyed) {
      this.ended = true;
      this.out.flush();
      this.socket.end();
      clearTimeout(this.timer);
      this.timer = setTimeout(endExpired, END_TIMEOUT_MS, this.socket);
      this.timer.unref();
    }
  }

  /** A connection error (RFC 9113 5.4.1): GOAWAY with the code and why, then the socket ended; every stream closed. */
  fail(code: number, why: string, reported = false): void {
    if (this.destroyed) return;
    this.writeGoaway(code, why);
    if (code !== H2Error.NO_ERROR && !reported) {
      try {
        this.opts.onConnectionError?.(this, code, why);
      } catch {
        // A hook's bug does not keep the connection open.
      }
    }
    // A NO_ERROR end (the keepalive PING unanswered) still cuts the open streams short: they close as cancelled.
    this.teardown(code === H2Error.NO_ERROR ? H2Error.CANCEL : code, why, true);
  }

  /**
   * The connection is gone: every stream closed with `code`; `letOut` flushes what is written (a GOAWAY) first and
   * ends the socket without reading from it again.
   */
  private teardown(code: number, why: string, letOut: boolean): void {
    if (this.destroyed) return;
    this.destroyed = true;
    clearTimeout(this.timer);
    this.timers.stop();
    this.shared.sessions.delete(this);
    this.dropPartial();
    if (letOut && !this.socket.destroyed) {
      this.out.flush();
      this.socket.end();
      // Nothing more is read: a client that keeps sending after a connection error (a flood) is not read and thrown
      // away at our cost; its bytes wait in the kernel until it closes or endExpired destroys the socket.
      this.socket.pause();
      setTimeout(endExpired, 1000, this.socket).unref();
    } else this.socket.destroy();
    this.out.closed = true;
    this.blocked = [];
    for (const s of this.streams.values()) {
      s.done = true;
      s.closeCode = code;
      s.closeWhy = why;
      s.out = null;
      s.bufferedBytes = 0;
      this.closes.push(s);
    }
    this.streams.clear();
    if (this.announced) this.sessionCloseWhy = why;
    if (!this.closesPending) {
      this.closesPending = true;
      queueMicrotask(this.runCloses);
    }
  }

  /** A bug of this layer surfaced in a socket event: end the connection, never throw out of the event. */
  private internalError(e: unknown): void {
    try {
      this.fail(H2Error.INTERNAL_ERROR, `server error: ${(e as Error).message}`);
    } catch {
      this.socket.destroy();
    }
  }

  /** Takes a token for a frame that costs us work but carries nothing; true (and the connection failed) when none is left. */
  private flooded(): boolean {
    if (this.floods.take()) return false;
    this.fail(H2Error.ENHANCE_YOUR_CALM, "too many control frames");
    return true;
  }


  // ---- reading ----

  private read(chunk: Buffer): void {
    if (this.destroyed) return;
    let off = 0;
    const len = chunk.length;
    if (this.prefaceHave < PREFACE.length) {
      const n = Math.min(PREFACE.length - this.prefaceHave, len);
      for (let i = 0; i < n; i++) {
        if (chunk[i] !== PREFACE[this.prefaceHave + i]) return this.fail(H2Error.PROTOCOL_ERROR, "expected the HTTP/2 client preface");
      }
      this.prefaceHave += n;
      off = n;
      if (this.prefaceHave < PREFACE.length) return;
      this.announced = true;
      try {
        this.opts.onSession?.(this);
      } catch {
        // A hook's bug does not stop the connection.
      }
      if (this.destroyed) return;
    }
    this.readFrames(chunk, off);
  }

  /** The client's first frame must be SETTINGS (RFC 9113 3.4); then FrameReader dispatches. */
  protected override frame(buf: Buffer, at: number, size: number): void {
    if (!this.settingsSeen) {
      if (buf[at + 3] !== SETTINGS || (buf[at + 4]! & ACK) !== 0) return this.fail(H2Error.PROTOCOL_ERROR, "the client's first frame is not SETTINGS");
      this.settingsSeen = true;
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    super.frame(buf, at, size);
    // A header block continued in CONTINUATION frames must end in bounded time (server-lifecycle.ts).
    if (this.contStream !== 0 || this.timers.blockTimer !== undefined) this.timers.headerBlock(this.contStream !== 0 && !this.destroyed);
  }

  protected onPriority(size: number, buf: Buffer, p: number, sid: number): void {
    if (size !== 5) return this.fail(H2Error.FRAME_SIZE_ERROR, "PRIORITY payload is not 5 bytes");
    if (this.flooded()) return;
    if ((buf.readUInt32BE(p) & 0x7fffffff) !== sid) return;
    // A stream cannot depend on itself (RFC 9113 5.3.1): a stream error; on a stream not opened yet a connection
    // error, as RST_STREAM may not name an idle stream.
    const s = this.streams.get(sid);
    if (s !== undefined) return this.streamError(sid, H2Error.PROTOCOL_ERROR, "a stream that depends on itself", s);
    if (sid > this.lastId) return this.fail(H2Error.PROTOCOL_ERROR, `PRIORITY: stream ${sid} depends on itself`);
    this.streamError(sid, H2Error.PROTOCOL_ERROR, "a stream that depends on itself", undefined);
  }

  /** A frame on a stream that is closed here: false (and the connection failed) once the closed-stream budget is spent. */
  private closedFrameOk(): boolean {
    if (this.closedFrames.take()) return true;
    this.fail(H2Error.ENHANCE_YOUR_CALM, "too many frames on closed streams");
    return false;
  }

  /**
   * A stream error this layer raises on its own (RST_STREAM `code`; `s` is the stream when it is open, `refused` when
   * it is refused at its HEADERS): a client that earns them faster than STREAM_ERROR_RATE (refused streams, malformed
   * requests, ...) loses the connection.
   */
  private streamError(sid: number, code: number, why: string, s: ServerStream | undefined, refused = false): void {
    if (!this.streamErrors.take()) return this.fail(H2Error.ENHANCE_YOUR_CALM, `too many stream errors (the last: ${why})`);
    if (s !== undefined) return this.resetStream(s, code, why);
    this.out.rst(sid, code);
    // A stream refused at its HEADERS may have DATA in flight, up to the window we advertise.
    if (refused) this.closedStreams.record(sid, CLOSED_BY_US, STREAM_WINDOW);
  }

  protected onPushPromise(): void {
    this.fail(H2Error.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
  }

  protected onUnknown(): void {
    this.flooded(); // unknown frame types are ignored (RFC 9113 4.1), but not without bound
  }

  protected sendWindowUpdate(id: number, inc: number): void {
    this.out.windowUpdate(id, inc);
  }

  protected onDataFrame(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, "DATA on stream 0");
    const pad = this.unpad(buf, p, size, flags);
    if (pad < 0) return;
    const endStream = (flags & END_STREAM) !== 0;
    if (size === 0 && !endStream && this.flooded()) return;
    // Counted against the connection window whatever the stream's state (RFC 9113 6.9), its credit returned alike.
    if (!this.connectionData(size)) return;
    const s = this.streams.get(sid);
    if (s === undefined) {
      // Credit for bytes nobody will read goes back at once (consumed), whatever dataOnClosed decides.
      this.consumed(size);
      return this.dataOnClosed(sid, size);
    }
    if (s.inEnded) {
      this.consumed(size);
      return this.streamError(sid, H2Error.STREAM_CLOSED, "DATA after the client ended the stream", s);
    }
    s.recvWindow -= size;
    if (s.recvWindow < 0) {
      this.consumed(size);
      return this.streamError(sid, H2Error.FLOW_CONTROL_ERROR, "the client overran the stream window", s);
    }
    if (endStream) s.inEnded = true;
    const start = (flags & PADDED) !== 0 ? p + 1 : p;
    const stop = p + size - pad;
    if (s.contentLength >= 0) {
      s.received += stop - start;
      if (s.received > s.contentLength || (endStream && s.received !== s.contentLength)) {
        return this.streamError(sid, H2Error.PROTOCOL_ERROR, "the DATA does not add up to the content-length", s);
      }
    }
    if (stop > start) {
      try {
        s.handler.data(buf, start, stop);
      } catch (e) {
        this.consumed(size);
        return this.resetStream(s, H2Error.INTERNAL_ERROR, `data handler failed: ${(e as Error).message}`);
      }
      if (s.done) return this.consumed(size);
    }
    // The connection's credit goes back once the bytes are consumed: now, or when a paused stream resumes (or ends).
    if (s.paused) s.connectionHeld += size;
    else this.consumed(size);
    if (endStream) return this.deliverEnd(s);
    s.recvUnacked += size;
    if (!s.paused && s.recvUnacked >= STREAM_WINDOW / 4) {
      this.out.windowUpdate(sid, s.recvUnacked);
      s.recvWindow += s.recvUnacked;
      s.recvUnacked = 0;
    }
  }

  /**
   * The connection's receive window, charged here as DATA arrives; its credit is returned by consumed(), not here
   * (FrameReader returns it on arrival): a paused stream holds what it was sent, so the connection window, not
   * streams x stream windows, bounds what one connection makes this process hold.
   */
  protected override connectionData(size: number): boolean {
    this.recvWindow -= size;
    if (this.recvWindow < 0) {
      this.fail(H2Error.FLOW_CONTROL_ERROR, "DATA beyond the connection window");
      return false;
    }
    return true;
  }

  /**
   * `n` bytes of DATA are consumed (delivered to a stream that is not paused, or dropped): their connection credit goes
   * back once it is at least what the client may still send, i.e. at half of the window paused streams leave free (half
   * of the whole window when nothing is held), so a window held down to nothing still reopens with the first bytes.
   */
  private consumed(n: number): void {
    if (this.destroyed) return;
    this.recvUnacked += n;
    if (this.recvUnacked > 0 && this.recvUnacked >= this.recvWindow) {
      this.out.windowUpdate(0, this.recvUnacked);
      this.recvWindow += this.recvUnacked;
      this.recvUnacked = 0;
    }
  }

  /**
   * DATA on a stream that is not open (RFC 9113 5.1): after our RST_STREAM it may have been in flight and is ignored;
   * after the client's RST_STREAM it is a stream error, after the client's END_STREAM (or on a stream never opened or
   * closed too long ago to be remembered) a connection error, STREAM_CLOSED both. Each costs a closed-stream token,
   * but for DATA within the window of a stream we reset.
   */
  private dataOnClosed(sid: number, size: number): void {
    if (sid > this.lastId) return this.fail(H2Error.PROTOCOL_ERROR, `DATA on idle stream ${sid}`);
    const how = this.closedStreams.how(sid);
    // An upload in flight when we reset its stream may bring many frames, but no more bytes than the stream's window.
    if (how === CLOSED_BY_US && size > 0 && this.closedStreams.spend(sid, size)) return;
    if (!this.closedFrameOk() || how === CLOSED_BY_US) return;
    if (how === CLOSED_BY_CLIENT) return this.streamError(sid, H2Error.STREAM_CLOSED, "DATA after the client reset the stream", undefined);
    this.fail(H2Error.STREAM_CLOSED, `DATA on closed stream ${sid}`);
  }

  /** The client ended its side: handler.end(), and the stream closes if ours is ended too. */
  private deliverEnd(s: ServerStream): void {
    s.inEnded = true;
    s.endDelivered = true;
    try {
      s.handler.end();
    } catch (e) {
      return this.resetStream(s, H2Error.INTERNAL_ERROR, `end handler failed: ${(e as Error).message}`);
    }
    if (!s.done && s.outEnded) this.finish(s, H2Error.NO_ERROR, "complete", CLOSED_ENDED);
  }

  protected onHeaders(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, "HEADERS on stream 0");
    if ((sid & 1) === 0) return this.fail(H2Error.PROTOCOL_ERROR, `HEADERS on even stream id ${sid}`);
    if ((flags & PRIORITY_FLAG) !== 0) {
      const at = (flags & PADDED) !== 0 ? p + 1 : p;
      if (at + 5 <= p + size && (buf.readUInt32BE(at) & 0x7fffffff) === sid) this.selfDependent = sid;
    }
    this.headersFrame(buf, p, size, flags, sid);
  }

  private decode(buf: Buffer, start: number, end: number, sink: HeaderSink): boolean {
    try {
      this.decoder.decode(buf, start, end, sink);
      return true;
    } catch (e) {
      if (e instanceof HpackError) {
        this.fail(H2Error.COMPRESSION_ERROR, `malformed header block: ${e.message}`);
        return false;
      }
      throw e;
    }
  }

  protected headerBlock(sid: number, buf: Buffer, start: number, end: number, endStream: boolean): void {
    const selfDependent = this.selfDependent === sid;
    this.selfDependent = 0;
    const open = this.streams.get(sid);
    if (open !== undefined) {
      // Trailers from the client: decoded for the table and checked, then only their END_STREAM matters.
      const tc = this.trailerCheck;
      tc.reset();
      if (!this.decode(buf, start, end, tc)) return;
      let bad = "";
      if (open.inEnded) return this.streamError(sid, H2Error.STREAM_CLOSED, "HEADERS after the client ended the stream", open);
      if (!endStream) bad = "trailers without END_STREAM";
      else if (tc.bad) bad = "malformed trailers (a pseudo-header, or a field RFC 9113 8.2 forbids)";
      else if (selfDependent) bad = "a stream that depends on itself";
      else if (open.contentLength >= 0 && open.received !== open.contentLength) bad = "the DATA does not add up to the content-length";
      if (bad !== "") return this.streamError(sid, H2Error.PROTOCOL_ERROR, bad, open);
      return this.deliverEnd(open);
    }
    if (sid <= this.lastId) return this.headersOnClosed(sid, buf, start, end);
    this.lastId = sid;
    const rh = this.requestHeaders;
    rh.reset();
    if (!this.decode(buf, start, end, rh)) return;
    const fields = rh.take();
    // Streams above our GOAWAY's last id, or after the client's GOAWAY, are not processed: the client may retry them.
    if ((this.goawayLast >= 0 && sid > this.goawayLast) || this.peerGoaway || this.ended) {
      if (!this.closedFrameOk()) return;
      this.closedStreams.record(sid, CLOSED_BY_US, STREAM_WINDOW);
      return this.out.rst(sid, H2Error.REFUSED_STREAM);
    }
    if (rh.over) {
      // Each such block costs a whole decode: a client that keeps sending them (an HPACK bomb) is let go.
      if (++this.oversizeLists > MAX_OVERSIZE_LISTS) return this.fail(H2Error.ENHANCE_YOUR_CALM, `more than ${MAX_OVERSIZE_LISTS} header lists over the size limit`);
      return this.streamError(sid, H2Error.ENHANCE_YOUR_CALM, "header list over the size limit", undefined, true);
    }
    // A request that says it has no body (END_STREAM on HEADERS) but a content-length above 0 is malformed too.
    if (!rh.wellFormed || selfDependent || (endStream && rh.contentLength > 0)) return this.streamError(sid, H2Error.PROTOCOL_ERROR, "malformed request", undefined, true);
    if (this.streams.size >= this.opts.maxConcurrentStreams) return this.streamError(sid, H2Error.REFUSED_STREAM, "beyond MAX_CONCURRENT_STREAMS", undefined, true);
    const s = new ServerStream(this, sid, fields, this.peerInitialWindow, STREAM_WINDOW);
    s.contentLength = rh.contentLength;
    this.streams.set(sid, s);
    if (endStream) s.inEnded = true;
    try {
      s.handler = this.opts.onStream(s);
    } catch (e) {
      return this.resetStream(s, H2Error.INTERNAL_ERROR, `stream handler failed: ${(e as Error).message}`);
    }
    if (endStream && !s.done) this.deliverEnd(s);
  }

  /**
   * A header block on a stream id already used (RFC 9113 5.1): trailers in flight when we reset the stream are ignored,
   * after the client's RST_STREAM it is a stream error STREAM_CLOSED, after its END_STREAM a connection error
   * STREAM_CLOSED; an id never opened (or closed too long ago) is a connection error PROTOCOL_ERROR (5.1.1). Blocks
   * that do not end the connection are decoded, so the HPACK table stays in step.
   */
  private headersOnClosed(sid: number, buf: Buffer, start: number, end: number): void {
    const how = this.closedStreams.how(sid);
    if (how === 0) return this.fail(H2Error.PROTOCOL_ERROR, `HEADERS on stream ${sid}, not above the last stream ${this.lastId}`);
    if (how === CLOSED_ENDED) return this.fail(H2Error.STREAM_CLOSED, `HEADERS on closed stream ${sid}`);
    if (!this.decode(buf, start, end, DISCARD) || !this.closedFrameOk()) return;
    if (how === CLOSED_BY_CLIENT) this.streamError(sid, H2Error.STREAM_CLOSED, "HEADERS after the client reset the stream", undefined);
  }

  protected onReset(buf: Buffer, p: number, size: number, sid: number): void {
    if (!this.resetOk(size, sid)) return;
    if (sid > this.lastId) return this.fail(H2Error.PROTOCOL_ERROR, `RST_STREAM on idle stream ${sid}`);
    const nowSec = Math.floor(performance.now() / 1000);
    this.resetTokens = Math.min(RESET_BUDGET, this.resetTokens + (nowSec - this.resetSec) * RESET_REFILL) - 1;
    this.resetSec = nowSec;
    if (this.resetTokens <= 0) {
      this.resetBudgetHook("spent");
      return this.fail(H2Error.ENHANCE_YOUR_CALM, "too many stream resets", true);
    }
    const s = this.streams.get(sid);
    if (s !== undefined) this.finish(s, buf.readUInt32BE(p), "client reset", CLOSED_BY_CLIENT);
    if (!this.resetRotated && this.resetTokens <= RESET_BUDGET / 2) {
      this.resetRotated = true;
      this.resetBudgetHook("rotated");
      this.close();
    }
  }

  private resetBudgetHook(what: "rotated" | "spent"): void {
    try {
      this.opts.onResetBudget?.(this, what);
    } catch {
      // A hook's bug does not change what the budget decided.
    }
  }

  protected onSettings(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if ((flags & ACK) !== 0 && size === 0 && sid === 0) {
      // We send one SETTINGS, so one ACK is expected; a stream of them is a flood like any other control frame.
      if (this.flooded()) return;
      this.timers.settingsAcked();
    }
    if (!this.settingsToApply(size, flags, sid)) return;
    if (this.flooded()) return;
    for (let i = p; i < p + size; i += 6) {
      const id = buf.readUInt16BE(i);
      const v = buf.readUInt32BE(i + 2);
      if (id === 0x1) {
        if (v < this.encoderTable) {
          this.encoderTable = 0;
          this.out.tableUpdate = true;
          this.out.encoder = null;
        }
      } else if (id === 0x2) {
        if (v > 1) return this.fail(H2Error.PROTOCOL_ERROR, `ENABLE_PUSH ${v}`);
      } else if (id === 0x4) {
        if (!this.initialWindow(v, this.streams.values())) return;
      } else if (id === 0x5) {
        if (!this.frameSizeOk(v)) return;
        this.out.maxFrame = v;
      }
      // MAX_CONCURRENT_STREAMS (this side opens none), MAX_HEADER_LIST_SIZE (advisory) and unknown ids are ignored.
    }
    this.out.buffer(SETTINGS_ACK);
    this.flushBlocked();
  }

  protected onPing(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (!this.pingOk(size, sid)) return;
    // Our keepalive and graceful-close PINGs are acknowledged; unsolicited ACKs cost a token like any PING.
    if (this.flooded()) return;
    if ((flags & ACK) !== 0) return this.timers.pingAck(buf, p);
    // Answered with a later write of this connection (held at most ACK_HOLD_MS), or at once while DATA waits for a window:
    // see src/h2/server-writer.ts.
    this.out.pingAck(buf, p, this.blocked.length > 0);
  }

  protected onGoaway(buf: Buffer, p: number, size: number, sid: number): void {
    if (!this.goawayOk(size, sid)) return;
    // Its last stream id names streams this side initiated: there are none (no push), so it closes nothing by itself.
    const code = buf.readUInt32BE(p + 4);
    const debug = size > 8 ? `: ${debugText(buf, p + 8, p + size)}` : "";
    if (code !== H2Error.NO_ERROR) {
      // The client is tearing the connection down for an error: its streams end now, with its code.
      return this.teardown(code, `client sent GOAWAY with error code ${code}${debug}`, true);
    }
    // The client opens no more streams; those it has finish, then the connection ends.
    this.peerGoaway = true;
    this.closeWhy ??= `client sent GOAWAY NO_ERROR${debug}`;
    this.maybeEnd();
  }

  /**
   * A stream's WINDOW_UPDATE. On a closed stream it is allowed (RFC 9113 5.1: the client may not know yet) but costs a
   * closed-stream token; an increment of 0 is a stream error PROTOCOL_ERROR on any stream (6.9).
   */
  protected onStreamWindow(sid: number, inc: number): boolean {
    const s = this.streams.get(sid);
    if (s === undefined) {
      if (sid > this.lastId) this.fail(H2Error.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${sid}`);
      else if (this.closedFrameOk() && inc === 0) this.streamError(sid, H2Error.PROTOCOL_ERROR, "WINDOW_UPDATE of 0", undefined);
      return false;
    }
    if (inc === 0) this.streamError(sid, H2Error.PROTOCOL_ERROR, "WINDOW_UPDATE of 0", s);
    else if (s.sendWindow + inc > MAX_WINDOW) this.streamError(sid, H2Error.FLOW_CONTROL_ERROR, "the stream window overflowed", s);
    else {
      s.sendWindow += inc;
      return true;
    }
    return false;
  }
}
