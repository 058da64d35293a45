import type uws from "uWebSockets.js";
import { freeBuffer } from "./free-buffer.js";

/** Replies up to this size are handed to uWS in one `end()`; larger ones stream as the client reads. */
export const STREAM_THRESHOLD_BYTES = 64 * 1024;

/** A held reply whose client has accepted no bytes for this long may be closed to make room for a new one, ms. */
export const EVICT_IDLE_MS = 1000;

/** A reply being streamed to a client that has not read all of it yet. */
export interface PendingReply {
  /** Bytes not yet accepted by the socket. */
  readonly pending: number;
  /** The connection went away: forget the reply (uWS must not be touched again). */
  aborted(): void;
  /** Close the connection now (shutdown). */
  close(): void;
}

/** One reply counted against an UnreadReplies bound. */
interface HeldReply {
  readonly bytes: number;
  /** When its client last accepted bytes (or the reply started), performance.now(). */
  progressAt: number;
  /** Close its connection and drop the reply. */
  evict(): void;
}

/**
 * The bytes of large replies held for clients that have not read them yet, bounded per REST server (one per uWS
 * thread, `--max-unread-reply-bytes`). A reply is held whole until its client has read all of it (the kernel takes a
 * few MiB; the rest waits for `onWritable`), so without a bound N clients that never read cost N x the reply size until
 * the write-stall timeout closes them.
 */
export interface UnreadReplies {
  readonly maxBytes: number;
  /** Bytes held now. */
  readonly held: number;
  /** Replies held now. */
  readonly count: number;
  /**
   * Whether a reply of `bytes` may be held: yes when it fits beside the others, or when nothing else is held (one
   * reply always goes out, even when it alone is over the bound). When it does not fit, held replies whose clients
   * accepted nothing for `EVICT_IDLE_MS` are closed first, longest idle first, until it fits.
   */
  admit(bytes: number): boolean;
  /** Count `reply` until `release`. */
  hold(reply: HeldReply): void;
  release(reply: HeldReply): void;
}

/** An UnreadReplies bound of `maxBytes`. */
export function createUnreadReplies(maxBytes: number, idleMs = EVICT_IDLE_MS): UnreadReplies {
  let held = 0;
  /** In the order they started. */
  const replies = new Set<HeldReply>();
  const fits = (bytes: number): boolean => held === 0 || held + bytes <= maxBytes;
  return {
    maxBytes,
    get held() {
      return held;
    },
    get count() {
      return replies.size;
    },
    admit(bytes) {
      if (fits(bytes)) return true;
      const now = performance.now();
      const idle = [...replies].filter((r) => now - r.progressAt >= idleMs).sort((a, b) => a.progressAt - b.progressAt);
      for (const r of idle) {
        r.evict();
        if (fits(bytes)) return true;
      }
      return false;
    },
    hold(reply) {
      if (replies.has(reply)) return;
      replies.add(reply);
      held += reply.bytes;
    },
    release(reply) {
      if (replies.delete(reply)) held -= reply.bytes;
    },
  };
}

/** What writeReply needs besides the response. */
export interface WriteReplyOptions {
  /** Close the connection when the client accepts no bytes for this long, ms. */
  stallTimeoutMs: number;
  /** Counts the reply while it is held (the caller has admitted it). */
  unread?: UnreadReplies;
  /** The body is the reply's own: free its memory as soon as it is written or dropped (free-buffer.ts). */
  free?: boolean;
  /** Called once when the reply is fully written (`true`) or its connection was closed first (`false`). */
  onFinish(complete: boolean): void;
}

/**
 * Write a reply whose status and headers `writeHead` writes, with uWS backpressure: the body goes out through
 * `tryEnd` only as fast as the socket takes it, and the rest waits in `body` for `onWritable`, so uWS never buffers
 * more than the kernel refuses (`tryEnd` copies nothing it cannot send). At most one reply is pending per connection
 * (uWS runs the next pipelined request after this one ends), so what a connection holds is bounded by the largest
 * reply (`--max-reply-bytes`), and what all of a server's connections hold by `opts.unread`; a client that stops
 * reading for `stallTimeoutMs` has its connection closed and the reply dropped.
 *
 * Returns undefined when the whole reply was written at once.
 */
export function writeReply(res: uws.HttpResponse, writeHead: () => void, body: Buffer, opts: WriteReplyOptions): PendingReply | undefined {
  const total = body.length;
  let base = 0;
  let finished = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const held: HeldReply = {
    bytes: total,
    progressAt: performance.now(),
    evict: () => close(),
  };
  const finish = (complete: boolean): void => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    opts.unread?.release(held);
    // uWS copies nothing of a tryEnd it could not send, so once finished the bytes are no one's.
    if (opts.free) freeBuffer(body);
    opts.onFinish(complete);
  };
  const close = (): void => {
    if (finished) return;
    finish(false);
    res.close();
  };
  const arm = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(close, opts.stallTimeoutMs);
  };
  let ended = false;
  res.cork(() => {
    writeHead();
    base = res.getWriteOffset();
    const [, done] = res.tryEnd(body, total);
    ended = done;
  });
  if (ended) {
    finish(true);
    return undefined;
  }
  opts.unread?.hold(held);
  arm();
  res.onWritable((offset) => {
    if (finished) return true;
    const [ok, done] = res.tryEnd(body.subarray(offset - base), total);
    if (done) finish(true);
    else if (res.getWriteOffset() > offset) {
      // Progress: the stall clock restarts, and the reply is not idle.
      held.progressAt = performance.now();
      arm();
    }
    return ok;
  });
  return {
    get pending() {
      return finished ? 0 : total - (res.getWriteOffset() - base);
    },
    aborted() {
      finish(false);
    },
    close,
  };
}

/** A streamed (chunked) reply body with backpressure and the write-stall clock; the router's `RestStream`. */
export interface StreamWriter {
  /** Write a chunk; false when the client is behind (the chunk is kept: wait for `onWritable` before the next). */
  write(chunk: string | Uint8Array): boolean;
  /** Called once, when the buffered output drained after a `write` that returned false. */
  onWritable(cb: () => void): void;
  /** End the body. Safe after the connection went away (then it does nothing). */
  end(chunk?: string | Uint8Array): void;
  /** The connection went away: stop the clock (uWS must not be touched again). */
  aborted(): void;
}

/** What streamWriter needs besides the response. */
export interface StreamWriterOptions {
  /** Close the connection when a refused write has not drained for this long, ms. */
  stallTimeoutMs: number;
  /** Called once, just after the body ended (not when the connection went away first). */
  onEnd(): void;
}

/**
 * The body of a streamed reply whose status and headers are already written. uWS keeps a refused `write` and calls
 * `onWritable` once its buffer drained; a client that stops reading would hold the reply (and whatever feeds it, e.g.
 * a backend stream) until uWS's own fixed 10 s timeout. Here a refused write starts the stall clock and the drain
 * stops it: when the held chunk has not drained for `stallTimeoutMs`, the connection is closed, which the router sees
 * as an abort. What is held is one chunk, as before (the writer waits for the drain before the next).
 */
export function streamWriter(res: uws.HttpResponse, opts: StreamWriterOptions): StreamWriter {
  let waiter: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const stop = (): void => {
    stopped = true;
    if (timer) clearTimeout(timer);
    timer = undefined;
  };
  res.onWritable(() => {
    if (stopped) return true;
    if (timer) clearTimeout(timer);
    timer = undefined;
    const cb = waiter;
    waiter = undefined;
    cb?.();
    return true;
  });
  return {
    write(chunk) {
      if (stopped) return true;
      let ok = true;
      res.cork(() => (ok = res.write(chunk)));
      if (!ok && !timer) {
        timer = setTimeout(() => {
          if (stopped) return;
          stop();
          res.close();
        }, opts.stallTimeoutMs);
      }
      return ok;
    },
    onWritable(cb) {
      if (!stopped) waiter = cb;
    },
    end(chunk) {
      if (stopped) return;
      stop();
      // Never closeConnection here: uWS's end(chunk, true) on a streamed (chunked) reply closes the socket without
      // the last chunk or the chunked terminator, so a stream ended by shutdown lost its final status line and
      // the client saw a truncated body. The connection ends with the server (new requests on it get 503).
      res.cork(() => res.end(chunk ?? "", false));
      opts.onEnd();
    },
    aborted() {
      stop();
    },
  };
}
