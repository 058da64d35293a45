/**
 * Time as the embedded scheduler sees it. The default reads `Date.now()` and the global `setTimeout` at call time,
 * so node:test mock timers (`mock.timers.enable({apis: ["setTimeout", "Date"]})`) also drive it; tests may instead
 * pass a fake clock.
 */
export interface SchedulerClock {
  /** Epoch ms. */
  now(): number;
  /** Run `fn` after `ms`; the handle goes to clearTimer. */
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** The real clock. Timers are unref'd: a pending firing never keeps the process alive on its own. */
export const systemClock: SchedulerClock = {
  now: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    (t as { unref?: () => void }).unref?.();
    return t;
  },
  clearTimer: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};
