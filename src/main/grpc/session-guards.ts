/**
 * nghttp2's reset-flood protection (CVE-2023-44487, "rapid reset"): a token bucket of 1,000 RST_STREAM frames per
 * server session, refilled by 33 a second. The gateway's gRPC front (front.ts) keeps the same budget per connection,
 * so clients tuned against nghttp2 servers see the same limit.
 */
export const NGHTTP2_RESET_BURST = 1000;
/** Tokens nghttp2 adds back per second. */
export const NGHTTP2_RESET_RATE = 33;

/**
 * One connection's reset budget, counted as nghttp2 counts it (nghttp2_ratelim_update): a token bucket of
 * NGHTTP2_RESET_BURST, refilled NGHTTP2_RESET_RATE per whole second. The gRPC front keeps one per connection.
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

/** What the reset guard logs when they close a connection gracefully for its resets. */
export const ROTATED_MESSAGE = "gRPC connection closed gracefully (GOAWAY NO_ERROR): its client reset streams near the HTTP/2 reset-flood limit; new calls go to a new connection";
