import http2 from "node:http2";
import type * as grpc from "@grpc/grpc-js";
import type { Logger } from "../logger.js";
import type { CounterMetric } from "../metrics.js";
import { HTTP2_SERVERS_SHAPE, internalsProblem, serverHttp2Servers } from "./grpc-js-internals.js";

/**
 * nghttp2's reset-flood protection (CVE-2023-44487, "rapid reset"): a token bucket of 1,000 RST_STREAM frames per
 * server session, refilled by 33 a second. When a client's resets drain it, nghttp2 itself sends GOAWAY
 * INTERNAL_ERROR, which fails every healthy call still in flight on that connection, and Node logs nothing. Node 20
 * ignores the `streamResetBurst`/`streamResetRate` options that later versions take, so the budget is fixed here.
 */
export const NGHTTP2_RESET_BURST = 1000;
/** Tokens nghttp2 adds back per second. */
export const NGHTTP2_RESET_RATE = 33;

/**
 * One connection's reset budget, counted as nghttp2 counts it (nghttp2_ratelim_update): a token bucket of
 * NGHTTP2_RESET_BURST, refilled NGHTTP2_RESET_RATE per whole second. Both gRPC fronts keep one per connection.
 */
export class ResetBudget {
  tokens = NGHTTP2_RESET_BURST;
  /** The budget has had its graceful close (set by the guard that did it). */
  rotated = false;
  private lastSec = Math.floor(performance.now() / 1000);

  /** Count one client reset; returns the tokens left. */
  take(): number {
    const nowSec = Math.floor(performance.now() / 1000);
    this.tokens = Math.min(NGHTTP2_RESET_BURST, this.tokens + (nowSec - this.lastSec) * NGHTTP2_RESET_RATE) - 1;
    this.lastSec = nowSec;
    return this.tokens;
  }

  /** Tokens used and not yet refilled. */
  get used(): number {
    return NGHTTP2_RESET_BURST - this.tokens;
  }
}

/** What the guards log when they close a connection gracefully for its resets. */
export const ROTATED_MESSAGE = "gRPC connection closed gracefully (GOAWAY NO_ERROR): its client reset streams near the HTTP/2 reset-flood limit; new calls go to a new connection";

/** Options of the reset guard. */
export interface ResetGuardOptions {
  logger: Logger;
  /** Connections closed gracefully by the guard. */
  rotated: CounterMetric<never>;
  /**
   * Rotate a connection once this many resets of the budget are used (default half the burst): the other half covers
   * resets the guard cannot see (a cancel that crosses the server's own end of the stream) and the cancels of calls
   * still in flight when the connection is rotated.
   */
  rotateAfter?: number;
}

/**
 * Keep a burst of client cancellations from costing the calls that were not cancelled.
 *
 * Every HTTP/2 session of the gRPC server mirrors nghttp2's reset budget, counting streams the client reset. Before
 * the budget runs out, the session is closed gracefully: GOAWAY NO_ERROR, so the client opens a new connection for new
 * calls while the calls in flight finish on the old one (a fresh connection has a full budget). Should nghttp2 still
 * end a session for resets, that is logged with its cause.
 *
 * grpc-js does not expose its HTTP/2 sessions, so this reaches its http2 servers through the `http2Servers` map
 * (grpc-js 1.14); when that is missing the guard logs a warning and does nothing. Call it right after bindAsync.
 */
export function guardResetFloods(server: grpc.Server, opts: ResetGuardOptions): void {
  const rotateAfter = opts.rotateAfter ?? NGHTTP2_RESET_BURST / 2;
  onSession(server, opts.logger, (session) => watch(session, rotateAfter, opts));
}

/**
 * Run `fn` for every HTTP/2 session the gRPC server accepts. grpc-js does not expose its sessions, so this reaches its
 * http2 servers through the `http2Servers` map (grpc-js 1.14); when that is missing it logs a warning.
 */
function onSession(server: grpc.Server, logger: Logger, fn: (session: http2.ServerHttp2Session) => void): void {
  const servers = serverHttp2Servers(server);
  if (!servers) {
    logger.warn({}, `gRPC session guards unavailable: ${internalsProblem(HTTP2_SERVERS_SHAPE)}`);
    return;
  }
  for (const h2 of servers) h2.on("session", fn);
}

/** Count the gRPC server's open HTTP/2 sessions (connections); call it right after bindAsync. */
export function countSessions(server: grpc.Server, logger: Logger): { readonly size: number } {
  const open = new Set<http2.ServerHttp2Session>();
  onSession(server, logger, (session) => {
    open.add(session);
    session.once("close", () => open.delete(session));
  });
  return open;
}

/** Options of the write-stall guard. */
export interface WriteStallOptions {
  logger: Logger;
  /** A stream whose buffered reply makes no progress for this long is reset, ms. */
  stallTimeoutMs: number;
  /** Streams reset by the guard. */
  stalled: CounterMetric<never>;
}

/**
 * Bound what a gRPC stream that does not read can hold. A reply written to a stream whose client does not read waits
 * in the stream's buffers (flow control) for as long as the stream lives, and a client with no deadline keeps it
 * forever. Every second or so, each stream with buffered reply bytes is checked; one whose buffer has not shrunk for
 * `stallTimeoutMs` is reset (RST_STREAM CANCEL), which frees the buffer, and this is logged and counted.
 */
export function guardWriteStalls(server: grpc.Server, opts: WriteStallOptions): () => void {
  const watched = new Map<http2.ServerHttp2Stream, { size: number; since: number }>();
  onSession(server, opts.logger, (session) => {
    session.on("stream", (stream: http2.ServerHttp2Stream) => {
      watched.set(stream, { size: 0, since: performance.now() });
      stream.once("close", () => watched.delete(stream));
    });
  });
  const sweep = setInterval(() => {
    const now = performance.now();
    for (const [stream, w] of watched) {
      const size = stream.bufferSize;
      if (size === 0 || size < w.size) {
        // Empty or draining: the client reads.
        w.size = size;
        w.since = now;
        continue;
      }
      w.size = size;
      if (now - w.since < opts.stallTimeoutMs) continue;
      watched.delete(stream);
      opts.stalled.inc({});
      opts.logger.warn({ bufferedBytes: size, stalledMs: Math.round(now - w.since) }, "gRPC stream reset: its client read none of the reply for the write-stall timeout");
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }
  }, Math.min(1000, Math.max(50, opts.stallTimeoutMs / 4)));
  sweep.unref();
  return () => clearInterval(sweep);
}

function watch(session: http2.ServerHttp2Session, rotateAfter: number, opts: ResetGuardOptions): void {
  const budget = new ResetBudget();
  let resets = 0;
  const peer = (): string => `${session.socket?.remoteAddress ?? "?"}:${session.socket?.remotePort ?? "?"}`;

  session.on("stream", (stream: http2.ServerHttp2Stream) => {
    stream.once("close", () => {
      // NO_ERROR is a normal end (or our own reset after a complete reply); anything else is a reset.
      if (stream.rstCode === http2.constants.NGHTTP2_NO_ERROR) return;
      resets++;
      const left = budget.take();
      if (!budget.rotated && budget.used >= rotateAfter && !session.closed && !session.destroyed) {
        budget.rotated = true;
        opts.rotated.inc({});
        opts.logger.info({ peer: peer(), resets, budgetLeft: left }, ROTATED_MESSAGE);
        try {
          // As grpc-js does for max connection age: a last-stream-id of 2^31-1 lets streams already on the wire in.
          session.goaway(http2.constants.NGHTTP2_NO_ERROR, 2 ** 31 - 1);
          session.close();
        } catch {
          session.destroy();
        }
      }
    });
  });
  session.on("error", (err: Error) => opts.logger.warn({ peer: peer(), err: err.message }, "gRPC connection error"));
  session.once("close", () => {
    if (budget.tokens <= 0) {
      opts.logger.warn({ peer: peer(), resets }, "gRPC connection closed by HTTP/2 reset-flood protection (GOAWAY INTERNAL_ERROR after too many RST_STREAM); calls in flight on it failed");
    }
  });
}
