import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { within } from "../../src/shared/timers.js";

describe("within: a bound on a promise", () => {
  it("resolves with the work's value when it comes in time, and rejects with its failure", async () => {
    assert.equal(await within(Promise.resolve(7), 1000, () => new Error("late")), 7);
    await assert.rejects(within(Promise.reject(new Error("broke")), 1000, () => new Error("late")), /broke/);
  });

  it("rejects with the timeout's error once the bound passes, and a later failure of the work is dropped", async () => {
    let fail: (e: Error) => void = () => {};
    const work = new Promise<number>((_, reject) => (fail = reject));
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown): void => void unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    // The bound's timer does not keep the process up: this interval does, while the test waits for it.
    const alive = setInterval(() => {}, 1000);
    try {
      const t0 = Date.now();
      await assert.rejects(within(work, 50, () => new Error("did not finish within 50 ms")), /did not finish within 50 ms/);
      assert.ok(Date.now() - t0 >= 45);
      fail(new Error("too late"));
      await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(unhandled, []);
    } finally {
      clearInterval(alive);
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
