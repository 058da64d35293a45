import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners, setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { abortable, Cancellation, deadlineSignal, linkedSignal, onAbort } from "../../src/shared/signals.js";

const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("signals", () => {
  it("onAbort runs once with the reason, now when already aborted, and its disposer removes the listener", () => {
    const seen: unknown[] = [];
    const ac = new AbortController();
    const off = onAbort(ac.signal, (r) => seen.push(r));
    const dropped = onAbort(ac.signal, (r) => seen.push(["dropped", r]));
    assert.equal(getEventListeners(ac.signal, "abort").length, 2);
    dropped();
    assert.equal(getEventListeners(ac.signal, "abort").length, 1);
    ac.abort("stop");
    ac.abort("again");
    assert.deepEqual([...seen], ["stop"]);
    assert.equal(getEventListeners(ac.signal, "abort").length, 0, "the listener ran once and is gone");
    off(); // after the abort: harmless
    onAbort(ac.signal, (r) => seen.push(["late", r]));
    assert.deepEqual(seen, ["stop", ["late", "stop"]], "an aborted signal runs fn at once");
    assert.equal(getEventListeners(ac.signal, "abort").length, 0, "and adds no listener");
    onAbort(undefined, () => assert.fail("no signal, nothing runs"))();
  });

  it("a linked signal aborts with its parent's reason, and clear() unhooks it from the parent", () => {
    const parent = new AbortController();
    const a = linkedSignal({ parents: [undefined, parent.signal] });
    const b = linkedSignal({ parents: [parent.signal] });
    assert.equal(getEventListeners(parent.signal, "abort").length, 2);
    b.clear();
    assert.equal(getEventListeners(parent.signal, "abort").length, 1, "clear() removed b's listener");
    parent.abort("stop");
    assert.equal(a.signal.aborted, true);
    assert.equal(a.signal.reason, "stop");
    assert.equal(b.signal.aborted, false, "a cleared signal ignores its parent");
    assert.equal(b.cleared, true);
    const late = linkedSignal({ parents: [parent.signal] });
    assert.equal(late.signal.aborted, true, "an already aborted parent aborts at once");
    assert.equal(late.signal.reason, "stop");
  });

  it("abort() is ignored once cleared (a grpc-js 'cancelled' after the reply)", () => {
    const s = linkedSignal();
    s.clear();
    s.abort(new Error("late"));
    assert.equal(s.signal.aborted, false);
    const t = linkedSignal();
    t.abort("first");
    t.abort("second");
    assert.equal(t.signal.reason, "first");
  });

  it("a deadline aborts with its reason, or with the parent's when that comes first", async () => {
    const d = deadlineSignal(5, () => new Error("too slow"));
    await sleep(30);
    assert.equal(d.signal.aborted, true);
    assert.equal((d.signal.reason as Error).message, "too slow");
    const plain = deadlineSignal(1);
    await sleep(20);
    assert.equal((plain.signal.reason as DOMException).name, "TimeoutError");
    const parent = new AbortController();
    const p = deadlineSignal(10_000, () => "deadline", parent.signal);
    parent.abort("caller");
    assert.equal(p.signal.reason, "caller");
    assert.equal(getEventListeners(parent.signal, "abort").length, 0);
  });

  it("clear() drops the deadline timer at once (AbortSignal.timeout keeps it for its full term)", async () => {
    const parent = new AbortController();
    setMaxListeners(1000, parent.signal); // 1000 linked at once is the point here, not a leak
    const before = timeouts();
    const many = Array.from({ length: 1000 }, () => deadlineSignal(60_000, undefined, parent.signal));
    assert.equal(timeouts(), before + 1000);
    for (const d of many) d.clear();
    assert.equal(timeouts(), before, "no timer left behind");
    assert.equal(getEventListeners(parent.signal, "abort").length, 0, "no listener left on the long-lived parent");
    await sleep(5);
    assert.ok(many.every((d) => !d.signal.aborted));
  });

  it("abortable races work against one caller without cancelling it", async () => {
    let finish!: (v: string) => void;
    const shared = new Promise<string>((r) => (finish = r));
    const ac = new AbortController();
    const mine = abortable(shared, ac.signal, (reason) => new Error(`cancelled: ${String(reason)}`));
    const other = abortable(shared, new AbortController().signal, () => new Error("never"));
    ac.abort("bye");
    await assert.rejects(mine, /cancelled: bye/);
    finish("done");
    assert.equal(await other, "done", "the shared work went on");
    const quiet = new AbortController();
    assert.equal(await abortable(Promise.resolve(1), quiet.signal, () => "x"), 1);
    assert.equal(getEventListeners(quiet.signal, "abort").length, 0, "listener removed once settled");
    await assert.rejects(abortable(Promise.resolve(1), AbortSignal.abort("pre"), (r) => new Error(String(r))), /pre/);
  });

  it("abortable with a signal already aborted leaves no unhandled rejection when the work then fails", async () => {
    const unhandled: unknown[] = [];
    const seen = (reason: unknown): void => void unhandled.push(reason);
    process.on("unhandledRejection", seen);
    try {
      let fail!: (e: Error) => void;
      const work = new Promise<number>((_, reject) => (fail = reject));
      await assert.rejects(abortable(work, AbortSignal.abort("gone"), (r) => new Error(String(r))), /gone/);
      fail(new Error("the work failed later"));
      await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", seen);
    }
  });
});

describe("Cancellation", () => {
  it("tells each listener once, not one removed before, and none added after", () => {
    const c = new Cancellation();
    const told: string[] = [];
    const a = { handleEvent: (e: Event) => told.push(`a:${e.type}`) };
    const b = { handleEvent: () => told.push("b") };
    c.addEventListener("abort", a);
    c.addEventListener("abort", a);
    c.addEventListener("abort", b);
    c.removeEventListener("abort", b);
    assert.equal(c.aborted, false);
    c.abort();
    c.abort();
    c.addEventListener("abort", b);
    assert.equal(c.aborted, true);
    assert.deepEqual(told, ["a:abort"]);
  });
});
