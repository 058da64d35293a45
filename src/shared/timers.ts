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

/**
 * Resolve once `reached()` is true, looking every `everyMs`, or after `timeoutMs` whichever comes first (never
 * rejects: the caller re-checks what it waited for). For a condition no event announces, such as a counter in shared
 * memory or a runtime's read position.
 */
export function pollUntil(reached: () => boolean, timeoutMs: number, everyMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const deadline = Date.now() + timeoutMs;
    const look = (): void => {
      if (reached() || Date.now() >= deadline) return resolve();
      setTimeout(look, everyMs);
    };
    look();
  });
}

/** Resolve when `work` settles or after `ms`, whichever comes first; the timer is cleared either way. */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, clampTimerMs(ms));
  });
  await Promise.race([work.then(noop, noop), timeout]);
  clearTimeout(timer);
}

/**
 * `work`'s outcome, or a rejection with `expired()` once `ms` have passed, whichever comes first. The timer is cleared
 * either way and does not count as keeping the process up (what it bounds does, if anything must); a failure of `work`
 * after the timeout is dropped, as nobody waits for it any more.
 */
export async function within<T>(work: Promise<T>, ms: number, expired: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(expired()), clampTimerMs(ms));
    timer.unref();
  });
  work.catch(noop);
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function noop(): void {}

/**
 * Now as epoch milliseconds with sub-millisecond precision. Each thread's `performance.now()` counts from its own
 * origin (the thread's start), so an instant taken on one thread and compared on another is taken as origin + now.
 */
export function preciseEpochMs(): number {
  return TIME_ORIGIN + performance.now();
}

/** This thread's `performance.timeOrigin`, read once (it is fixed; the getter costs as much again as `now()`). */
const TIME_ORIGIN = performance.timeOrigin;
