import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TopicHistory } from "../../src/broker/index.js";

describe("TopicHistory", () => {
  it("keeps at most maxEvents, oldest evicted first, and knows from where it is complete", () => {
    const h = new TopicHistory<string>({ maxEvents: 3, maxAgeMs: 60_000 }, 10);
    assert.equal(h.covers(10), true, "nothing after the start yet: exact");
    assert.equal(h.covers(9), false, "before recording started: not exact");
    for (let s = 11; s <= 15; s++) h.push(s, 0, `e${s}`);
    assert.equal(h.size, 3);
    assert.deepEqual(h.after(0).map((e) => e.data), ["e13", "e14", "e15"]);
    assert.equal(h.covers(12), true);
    assert.equal(h.covers(11), false, "e12 was evicted");
    assert.deepEqual(h.after(13).map((e) => e.seq), [14, 15]);
    assert.deepEqual(h.after(15), []);
  });

  it("evicts by age, including on read", () => {
    const h = new TopicHistory<string>({ maxEvents: 100, maxAgeMs: 1000 }, 0);
    h.push(1, 0, "a");
    h.push(2, 500, "b");
    h.push(3, 1200, "c");
    assert.deepEqual(h.after(0).map((e) => e.seq), [2, 3]);
    h.evict(1600);
    assert.deepEqual(h.after(0).map((e) => e.seq), [3]);
    assert.equal(h.covers(1), false);
    assert.equal(h.covers(2), true);
  });

  it("stays bounded in memory over many events, and with maxEvents 0 holds nothing", () => {
    const h = new TopicHistory<number>({ maxEvents: 10, maxAgeMs: 60_000 }, 0);
    for (let s = 1; s <= 10_000; s++) h.push(s, 0, s);
    assert.equal(h.size, 10);
    assert.ok((h as unknown as { entries: unknown[] }).entries.length <= 200, "compacted");
    const none = new TopicHistory<number>({ maxEvents: 0, maxAgeMs: 60_000 }, 0);
    none.push(1, 0, 1);
    assert.equal(none.size, 0);
    assert.equal(none.covers(0), false);
    assert.equal(none.covers(1), true);
  });
});
