/**
 * setTimeout's range. Node keeps a delay in a signed 32-bit integer: a longer one (or a negative or NaN one) fires
 * after 1 ms, so every timer whose delay comes from input or from a far-off instant is bounded by this.
 */

/** The longest delay setTimeout holds (2^31-1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` within setTimeout's range: negative or NaN becomes 0, past MAX_TIMER_MS becomes MAX_TIMER_MS. */
export function clampTimerMs(ms: number): number {
  return ms > MAX_TIMER_MS ? MAX_TIMER_MS : ms > 0 ? ms : 0;
}
