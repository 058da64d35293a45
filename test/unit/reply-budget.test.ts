import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createUnreadReplies } from "../../src/http/reply-writer.js";
import { freeBuffer, ownBuffer } from "../../src/http/free-buffer.js";

/** A held reply for the bound, idle since `progressAt`; `evicted` says whether the bound closed it. */
function held(bytes: number, progressAt: number): { bytes: number; progressAt: number; evicted: boolean; evict(): void } {
  return {
    bytes,
    progressAt,
    evicted: false,
    evict() {
      this.evicted = true;
    },
  };
}

describe("UnreadReplies (--max-unread-reply-bytes)", () => {
  it("admits replies while they fit, and always one when nothing is held", () => {
    const u = createUnreadReplies(100, 1000);
    assert.equal(u.admit(500), true, "one reply goes out even over the bound when nothing else is held");
    const a = held(60, performance.now());
    u.hold(a);
    assert.equal(u.admit(40), true);
    assert.equal(u.admit(41), false, "a reply that does not fit beside a busy one is refused");
    assert.equal(a.evicted, false, "a reply whose client read within the idle time is kept");
    u.release(a);
    assert.deepEqual([u.held, u.count], [0, 0]);
    u.release(a);
    assert.equal(u.held, 0, "releasing twice counts once");
  });

  it("makes room by closing replies idle for the idle time, longest idle first, and only as many as needed", () => {
    const u = createUnreadReplies(100, 1000);
    const now = performance.now();
    const recent = held(30, now - 500);
    const older = held(30, now - 2000);
    const oldest = held(30, now - 5000);
    for (const r of [recent, older, oldest]) u.hold(r);
    // The bound does not release for the caller: evict() closes the connection, whose finish releases it.
    oldest.evict = function () {
      this.evicted = true;
      u.release(this);
    };
    older.evict = function () {
      this.evicted = true;
      u.release(this);
    };
    assert.equal(u.admit(40), true);
    assert.deepEqual([oldest.evicted, older.evicted, recent.evicted], [true, false, false]);
    assert.equal(u.admit(70), true);
    assert.deepEqual([older.evicted, recent.evicted], [true, false]);
    assert.equal(u.admit(71), false, "a reply whose client is reading is never closed for another");
  });
});

describe("freeBuffer", () => {
  it("empties a buffer it owns whole, and leaves pool slices and views alone", () => {
    const own = Buffer.alloc(100 * 1024, 1);
    freeBuffer(own);
    assert.equal(own.byteLength, 0);
    const pooled = Buffer.from("small");
    assert.equal(ownBuffer(pooled), undefined);
    freeBuffer(pooled);
    assert.equal(pooled.toString(), "small");
    const whole = Buffer.alloc(100 * 1024, 2);
    const view = whole.subarray(10);
    freeBuffer(view);
    assert.equal(whole.byteLength, 100 * 1024);
  });
});
