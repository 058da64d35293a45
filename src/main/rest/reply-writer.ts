import type uws from "uWebSockets.js";

/** Replies up to this size are handed to uWS in one `end()`; larger ones stream as the client reads. */
export const STREAM_THRESHOLD_BYTES = 64 * 1024;

/** A reply being streamed to a client that has not read all of it yet. */
export interface PendingReply {
  /** Bytes not yet accepted by the socket. */
  readonly pending: number;
  /** The connection went away: forget the reply (uWS must not be touched again). */
  aborted(): void;
  /** Close the connection now (shutdown). */
  close(): void;
}

/** What writeReply needs besides the response. */
export interface WriteReplyOptions {
  /** Close the connection when the client accepts no bytes for this long, ms. */
  stallTimeoutMs: number;
  /** Called once when the reply is fully written (`true`) or its connection was closed first (`false`). */
  onFinish(complete: boolean): void;
}

/**
 * Write a reply whose status and headers `writeHead` writes, with uWS backpressure: the body goes out through
 * `tryEnd` only as fast as the socket takes it, and the rest waits in `body` for `onWritable`, so uWS never buffers
 * more than the kernel refuses. At most one reply is pending per connection (uWS runs the next pipelined request
 * after this one ends), so what a connection holds is bounded by the largest reply (`--max-reply-bytes`); a client
 * that stops reading for `stallTimeoutMs` has its connection closed and the reply dropped.
 *
 * Returns undefined when the whole reply was written at once.
 */
export function writeReply(res: uws.HttpResponse, writeHead: () => void, body: Buffer, opts: WriteReplyOptions): PendingReply | undefined {
  const total = body.length;
  let base = 0;
  let finished = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const finish = (complete: boolean): void => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    opts.onFinish(complete);
  };
  const arm = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      if (finished) return;
      finish(false);
      res.close();
    }, opts.stallTimeoutMs);
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
  arm();
  res.onWritable((offset) => {
    if (finished) return true;
    const [ok, done] = res.tryEnd(body.subarray(offset - base), total);
    if (done) finish(true);
    else if (res.getWriteOffset() > offset) arm(); // progress: the stall clock restarts
    return ok;
  });
  return {
    get pending() {
      return finished ? 0 : total - (res.getWriteOffset() - base);
    },
    aborted() {
      finish(false);
    },
    close() {
      if (finished) return;
      finish(false);
      res.close();
    },
  };
}
