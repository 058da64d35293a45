/**
 * The calls' deadline queue (src/shared/deadline-queue.ts): a heap of deadlines under one timer. Checked against a
 * sorted list under random adds and removes, and with real timers: entries end in deadline order at their deadline,
 * an earlier deadline moves the timer, one that throws does not hold the others back, and nothing stays queued.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DeadlineQueue, powerOfTwoAtMost, type Expiring } from "../../src/shared/deadline-queue.js";

class Call implements Expiring {
  deadlineSlot = -1;
  endedAt: number | undefined;
  constructor(
    readonly name: string,
    private readonly log: string[] = [],
    private readonly fail = false,
  ) {}
  deadlinePassed(): void {
    this.endedAt = Date.now();
    this.log.push(this.name);
    if (this.fail) throw new Error(`${this.name} failed`);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The deadlines queued, sorted (read through the heap's private array). */
function heapOrder(q: DeadlineQueue): number[] {
  const at = [...(q as unknown as { at: number[] }).at];
  return at.sort((a, b) => a - b);
}

describe("DeadlineQueue", () => {
  it("keeps the heap order and every entry's slot under random adds, moves and removes", () => {
    const q = new DeadlineQueue();
    const far = Date.now() + 3_600_000;
    const live = new Map<Call, number>();
    const calls = Array.from({ length: 200 }, (_, i) => new Call(`c${i}`));
    let seed = 7;
    const rand = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let step = 0; step < 20_000; step++) {
      const c = calls[rand(calls.length)]!;
      if (rand(3) === 0) {
        q.remove(c);
        live.delete(c);
      } else {
        const at = far + rand(1000);
        q.add(c, at);
        live.set(c, at);
      }
      if (step % 997 === 0 || step === 19_999) {
        const { entries, at } = q as unknown as { entries: Call[]; at: number[] };
        assert.equal(q.size, live.size);
        for (let i = 0; i < entries.length; i++) {
          assert.equal(entries[i]!.deadlineSlot, i, "an entry knows its slot");
          assert.equal(at[i], live.get(entries[i]!), "an entry's deadline is the last one it was given");
          if (i > 0) assert.ok(at[(i - 1) >> 1]! <= at[i]!, "no deadline is earlier than its parent's");
        }
        for (const c of calls) if (!live.has(c)) assert.equal(c.deadlineSlot, -1);
      }
    }
    assert.deepEqual(heapOrder(q), [...live.values()].sort((a, b) => a - b));
    for (const c of calls) q.remove(c);
    assert.equal(q.size, 0);
    q.remove(calls[0]!); // not queued: nothing happens
    assert.equal(q.size, 0);
  });

  it("ends each entry at its deadline, in deadline order, and never one that was removed", async () => {
    const q = new DeadlineQueue();
    const log: string[] = [];
    const t0 = Date.now();
    const late = new Call("late", log);
    const early = new Call("early", log);
    const mid = new Call("mid", log);
    const gone = new Call("gone", log);
    q.add(late, t0 + 120);
    q.add(gone, t0 + 40);
    // Earlier than the deadline the timer waits for: the timer moves.
    q.add(early, t0 + 30);
    q.add(mid, t0 + 60);
    q.remove(gone);
    await sleep(20);
    assert.deepEqual(log, [], "nothing before its deadline");
    await sleep(170);
    assert.deepEqual(log, ["early", "mid", "late"]);
    for (const [c, at] of [[early, 30], [mid, 60], [late, 120]] as const) {
      assert.ok(c.endedAt! >= t0 + at, `${c.name} not before its deadline`);
      assert.ok(c.endedAt! < t0 + at + 60, `${c.name} within 60 ms of its deadline (${c.endedAt! - t0 - at} ms late)`);
    }
    assert.equal(q.size, 0);
  });

  it("ends a deadline that has passed already on the next turn of the loop", async () => {
    const q = new DeadlineQueue();
    const c = new Call("past");
    q.add(c, Date.now() - 5);
    assert.equal(c.endedAt, undefined, "not inside add()");
    await sleep(10);
    assert.ok(c.endedAt !== undefined);
  });

  it("ends the other due entries when one throws, then throws its error", async () => {
    const q = new DeadlineQueue();
    const log: string[] = [];
    const t0 = Date.now();
    q.add(new Call("a", log), t0 + 10);
    q.add(new Call("b", log, true), t0 + 10);
    q.add(new Call("c", log), t0 + 10);
    q.add(new Call("d", log), t0 + 50);
    const thrown: unknown[] = [];
    const onError = (e: unknown): void => void thrown.push(e);
    const listeners = process.listeners("uncaughtException");
    process.removeAllListeners("uncaughtException");
    process.on("uncaughtException", onError);
    try {
      await sleep(100);
    } finally {
      process.removeListener("uncaughtException", onError);
      for (const l of listeners) process.on("uncaughtException", l);
    }
    assert.deepEqual([...log].sort(), ["a", "b", "c", "d"], "the failure held nothing back, and the timer was armed again");
    assert.equal(thrown.length, 1);
    assert.match((thrown[0] as Error).message, /b failed/);
  });

  it("moves its timer with at most 32 distinct delays, however the deadlines come", () => {
    // Node keeps an unreferenced timer's list for each delay used until that delay has passed: a client choosing ever
    // earlier deadlines must not leave a list per call behind.
    const q = new DeadlineQueue();
    const delays = new Set<number>();
    const real = globalThis.setTimeout;
    const calls: Call[] = [];
    globalThis.setTimeout = ((fn: () => void, ms: number) => {
      delays.add(ms);
      return real(fn, ms);
    }) as typeof setTimeout;
    try {
      // Ever earlier deadlines, from 20 days away down to about 80 s: each one earlier than the timer's.
      const now = Date.now();
      for (let i = 0; i < 5000; i++) {
        const c = new Call(`d${i}`);
        calls.push(c);
        const at = now + Math.floor((20 * 86_400_000) / 1.002 ** i);
        q.add(c, at);
        q.remove(c);
        q.add(c, at);
      }
    } finally {
      globalThis.setTimeout = real;
      for (const c of calls) q.remove(c);
    }
    assert.ok(delays.size > 1 && delays.size <= 32, `${delays.size} distinct delays`);
    for (const d of delays) assert.equal(d, powerOfTwoAtMost(d), `${d} is a power of two`);
    assert.equal(q.size, 0);
  });

  it("rounds a delay down to a power of two", () => {
    assert.deepEqual([0, 0.5, 1, 2, 3, 1000, 1024, 2 ** 31 - 1].map(powerOfTwoAtMost), [0, 0, 1, 2, 2, 512, 1024, 2 ** 30]);
  });

  it("waits past setTimeout's range without firing early", async () => {
    const q = new DeadlineQueue();
    const c = new Call("far");
    // setTimeout given more than 2^31-1 ms warns and fires after 1 ms: the queue must clamp its timer instead.
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on("warning", onWarning);
    try {
      q.add(c, Date.now() + 40 * 86_400_000);
      await sleep(30);
    } finally {
      process.removeListener("warning", onWarning);
    }
    assert.equal(c.endedAt, undefined);
    assert.deepEqual(warnings, []);
    q.remove(c);
    assert.equal(q.size, 0);
  });
});
