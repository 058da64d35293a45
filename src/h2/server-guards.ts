/**
 * Bookkeeping of the native HTTP/2 server's sessions (src/h2/server-session.ts) that is not frame parsing: the
 * recently closed streams (RFC 9113 5.1 tells apart frames on a stream we reset, which are ignored, from frames on a
 * stream the client reset or ended, which are errors) and the token buckets that meter frames that cost work but
 * carry nothing for a live stream.
 */

/** How a stream closed. 0 (not one of these): never opened, or closed longer ago than the rings remember. */
export const CLOSED_BY_US = 1;
export const CLOSED_BY_CLIENT = 2;
export const CLOSED_ENDED = 3;

/**
 * Streams remembered per kind (like nghttp2's closed-stream retention). Streams this side reset have a ring of their
 * own, so a run of calls that end normally does not push them out while the client's DATA for them is still in flight.
 */
export const CLOSED_RETAINED = 256;

/**
 * The last CLOSED_RETAINED stream ids this side reset, and the last ones otherwise closed; two fixed rings. A stream
 * we reset keeps its receive window: the DATA the client may still have in flight for it.
 */
export class ClosedStreams {
  private ours: Int32Array | null = null;
  private oursWindow: Int32Array | null = null;
  private others: Int32Array | null = null;
  /** For `others`: CLOSED_BY_CLIENT or CLOSED_ENDED per slot. */
  private otherHow: Uint8Array | null = null;
  private oursNext = 0;
  private othersNext = 0;

  /** Note that stream `id` closed `how`; `window`: for CLOSED_BY_US, the bytes the client may still send on it. */
  record(id: number, how: number, window = 0): void {
    if (how === CLOSED_BY_US) {
      if (this.ours === null) {
        this.ours = new Int32Array(CLOSED_RETAINED);
        this.oursWindow = new Int32Array(CLOSED_RETAINED);
      }
      this.ours[this.oursNext] = id;
      this.oursWindow![this.oursNext] = Math.max(0, Math.min(window, 0x7fffffff));
      this.oursNext = (this.oursNext + 1) % CLOSED_RETAINED;
      return;
    }
    if (this.others === null) {
      this.others = new Int32Array(CLOSED_RETAINED);
      this.otherHow = new Uint8Array(CLOSED_RETAINED);
    }
    this.others[this.othersNext] = id;
    this.otherHow![this.othersNext] = how;
    this.othersNext = (this.othersNext + 1) % CLOSED_RETAINED;
  }

  /**
   * DATA of `n` bytes (n > 0) on stream `id`, which we reset: true when it fits the window the stream had (then
   * spent), false when the stream is not remembered as ours or its window is spent.
   */
  spend(id: number, n: number): boolean {
    if (this.ours === null) return false;
    const i = this.ours.indexOf(id);
    if (i < 0 || this.oursWindow![i]! < n) return false;
    this.oursWindow![i]! -= n;
    return true;
  }

  /** How stream `id` closed, or 0 when it is not remembered. A linear scan: only frames on closed streams ask. */
  how(id: number): number {
    if (this.ours !== null && this.ours.includes(id)) return CLOSED_BY_US;
    if (this.others !== null) {
      const i = this.others.indexOf(id);
      if (i >= 0) return this.otherHow![i]!;
    }
    return 0;
  }
}

/** A token bucket: `burst` tokens, refilled at `rate` per second; take() is false once it is empty. */
export class Bucket {
  private tokens: number;
  private at = performance.now();

  constructor(
    private readonly burst: number,
    private readonly rate: number,
  ) {
    this.tokens = burst;
  }

  /** Takes one token; false when none is left (the caller ends the connection). */
  take(): boolean {
    if (this.tokens < 1) {
      const now = performance.now();
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate);
      this.at = now;
      if (this.tokens < 1) return false;
    }
    this.tokens--;
    return true;
  }

  /** Adds `n` tokens, up to the burst (credit earned by useful work). */
  grant(n: number): void {
    this.tokens = Math.min(this.burst, this.tokens + n);
  }
}
