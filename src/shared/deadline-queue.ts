import { clampTimerMs } from "./timers.js";

/**
 * Deadlines of calls in flight, one timer for all of them.
 *
 * A timer per call costs more than its few hundred nanoseconds. Node files a timer in a list per duration in ms: a
 * referenced timer's list is made and dropped again whenever it is alone in it (at every call of a client at
 * concurrency 1: a priority-queue insert and removal, and the loop's timer handle referenced and unreferenced), and an
 * unreferenced timer's empty list is kept until its duration has passed, so calls whose deadlines a client chooses
 * (any grpc-timeout up to 24.8 days) leave a list behind per distinct duration: about 160 bytes each, held for as long
 * as the client asked. Here a call's deadline is an entry in a binary heap (as many entries as calls in flight, removed
 * when the call settles), and one unreferenced timer is armed for the earliest. The timer is moved only for an earlier
 * deadline than the one it waits for; when it fires it ends what is due and waits for the next. Calls that share a
 * timeout come with later and later deadlines, so a steady stream of them touches no timer at all.
 *
 * The timer's own delays are powers of two (ms): a delay is rounded down to one, and the timer, firing early, waits
 * again for the rest. Each move of the timer leaves Node's list for its old delay behind until that delay has passed,
 * and clients choosing ever earlier deadlines would move it at every call: with at most 32 delays there are at most 32
 * such lists. A deadline that does pass costs a few more wake-ups (about log2 of its remaining time at the last move).
 */

/** A call the queue can end: the heap's bookkeeping lives on it, so queueing allocates nothing. */
export interface Expiring {
  /** Its index in the queue's heap, -1 while not queued. Owned by the queue: start it at -1 and leave it alone. */
  deadlineSlot: number;
  /** Its deadline passed. Called once, after it left the queue. */
  deadlinePassed(): void;
}

export class DeadlineQueue {
  /** The heap: entries[i]'s deadline is at[i] (epoch ms), and no entry's is earlier than its parent's. */
  private readonly entries: Expiring[] = [];
  private readonly at: number[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the timer fires (Infinity: not armed), no later than the deadline it was armed for. */
  private armedFor = Infinity;

  /** Entries queued. */
  get size(): number {
    return this.entries.length;
  }

  /** Call `e.deadlinePassed()` at `deadline` (epoch ms, as Date.now()) unless removed first. Queued already: moved. */
  add(e: Expiring, deadline: number): void {
    if (e.deadlineSlot >= 0) this.remove(e);
    this.entries.push(e);
    this.at.push(deadline);
    this.up(e, deadline, this.entries.length - 1);
    if (deadline < this.armedFor) this.arm(deadline);
  }

  /** Take `e` out (it settled before its deadline). Not queued: nothing happens. */
  remove(e: Expiring): void {
    const i = e.deadlineSlot;
    if (i < 0) return;
    e.deadlineSlot = -1;
    const last = this.entries.pop()!;
    const lastAt = this.at.pop()!;
    if (i === this.entries.length) return;
    // The last entry fills the hole, then moves up or down to where its deadline belongs.
    if (i > 0 && lastAt < this.at[(i - 1) >> 1]!) this.up(last, lastAt, i);
    else this.down(last, lastAt, i);
  }

  /** The timer: end every entry that is due (in deadline order), then wait for the next. */
  private readonly fire = (): void => {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = Date.now();
    let failure: { error: unknown } | undefined;
    // Bounded: every turn takes one entry out.
    while (this.entries.length > 0 && this.at[0]! <= now) {
      const e = this.entries[0]!;
      this.remove(e);
      try {
        e.deadlinePassed();
      } catch (error) {
        // The others are still ended on time; the first failure is thrown after, as a timer's callback would throw it.
        failure ??= { error };
      }
    }
    if (this.entries.length > 0) this.arm(this.at[0]!);
    if (failure) throw failure.error;
  };

  private arm(deadline: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    const now = Date.now();
    // Past setTimeout's range the timer fires early, finds nothing due and is armed again.
    const delay = powerOfTwoAtMost(clampTimerMs(deadline - now));
    this.armedFor = now + delay;
    this.timer = setTimeout(this.fire, delay).unref();
  }

  /** Put `e` (deadline `t`) at `i` or above it. */
  private up(e: Expiring, t: number, i: number): void {
    const { entries, at } = this;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (at[p]! <= t) break;
      this.set(entries[p]!, at[p]!, i);
      i = p;
    }
    this.set(e, t, i);
  }

  /** Put `e` (deadline `t`) at `i` or below it. */
  private down(e: Expiring, t: number, i: number): void {
    const { entries, at } = this;
    const n = entries.length;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && at[c + 1]! < at[c]!) c++;
      if (at[c]! >= t) break;
      this.set(entries[c]!, at[c]!, i);
      i = c;
    }
    this.set(e, t, i);
  }

  private set(e: Expiring, t: number, i: number): void {
    this.entries[i] = e;
    this.at[i] = t;
    e.deadlineSlot = i;
  }
}

/** The largest power of two at most `ms` (ms >= 1), or 0 below 1 ms: the timer's delay for `ms`. */
export function powerOfTwoAtMost(ms: number): number {
  return ms < 1 ? 0 : 2 ** Math.floor(Math.log2(ms));
}

/**
 * The queue of this thread's calls: the gRPC front's and the backend clients' deadlines, SSE streams' token expiries
 * and the WebSocket front's token expiry groups.
 */
export const callDeadlines = new DeadlineQueue();
