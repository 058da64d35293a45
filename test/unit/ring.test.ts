import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Ring } from "../../src/broker/ring.js";

describe("Ring", () => {
  it("is FIFO across growth and wrap-around, and refuses past capacity", () => {
    const r = new Ring<number>(16);
    assert.equal(r.allocated, 0, "no storage while idle");
    let next = 0;
    let expect = 0;
    // Interleave pushes and shifts so head wraps while the ring grows 8 -> 16.
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 5 && r.size < 16; i++) assert.ok(r.push(next++));
      for (let i = 0; i < 3 && r.size > 0; i++) assert.equal(r.shift(), expect++);
    }
    while (r.size < 16) r.push(next++);
    assert.equal(r.push(-1), false, "full ring refuses");
    assert.equal(r.size, 16);
    assert.equal(r.peek(), expect);
    while (r.size > 0) assert.equal(r.shift(), expect++);
    assert.equal(r.shift(), undefined);
    assert.equal(r.allocated, 0, "storage released once empty");
  });

  it("holds exactly 1024 by default", () => {
    const r = new Ring<number>();
    for (let i = 0; i < 1024; i++) assert.ok(r.push(i));
    assert.equal(r.push(1024), false);
    assert.equal(r.allocated, 1024);
    r.clear();
    assert.equal(r.size, 0);
    assert.equal(r.allocated, 0);
  });

  it("rejects a capacity that is not a power of two", () => {
    assert.throws(() => new Ring(1000), /power of two/);
    assert.throws(() => new Ring(0), /power of two/);
  });
});
