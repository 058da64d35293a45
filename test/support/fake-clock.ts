import type { SchedulerClock } from "../../src/runtime/embedded/scheduler-clock.js";

/**
 * A manual clock for scheduler tests. `advance(ms)` moves time forward, running each timer that comes due at its
 * own time, in order (a timer set by a callback runs too if it falls inside the step), like sinon's `tick`.
 */
export class FakeClock implements SchedulerClock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, { at: number; fn: () => void }>();
  /** Every delay passed to setTimer, in order (to check the scheduler keeps one timer). */
  readonly delays: number[] = [];

  /** Every timer runs this many ms after its due time (a busy event loop), to show late wake-ups do not drift. */
  lateMs = 0;

  constructor(start: number | string = "2030-01-01T00:00:00Z") {
    this.#now = typeof start === "string" ? Date.parse(start) : start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): unknown {
    const id = ++this.#seq;
    this.delays.push(ms);
    this.#timers.set(id, { at: this.#now + Math.max(0, ms) + this.lateMs, fn });
    return id;
  }

  clearTimer(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** Timers pending right now. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Move time forward by `ms`, running due timers in time order. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const t of this.#timers) if (t[1].at <= end && (!next || t[1].at < next[1].at)) next = t;
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = Math.max(this.#now, next[1].at);
      next[1].fn();
    }
    this.#now = end;
  }

  /** Move time forward to `iso` (an ISO timestamp). */
  advanceTo(iso: string): void {
    this.advance(Date.parse(iso) - this.#now);
  }
}
