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

/** A streamed (chunked) reply body with backpressure and the write-stall clock; the router's `RestStream`. */
export interface StreamWriter {
  /** Write a chunk; false when the client is behind (the chunk is kept: wait for `onWritable` before the next). */
  write(chunk: string): boolean;
  /** Called once, when the buffered output drained after a `write` that returned false. */
  onWritable(cb: () => void): void;
  /** End the body. Safe after the connection went away (then it does nothing). */
  end(chunk?: string): void;
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
