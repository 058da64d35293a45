import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { backoffDelay, type BackoffPolicy } from "../../src/shared/backoff.js";
import { backoffDelay as clientBackoffDelay } from "../../src/client/index.js";

const P: BackoffPolicy = { initialDelayMs: 50, maxDelayMs: 2000, multiplier: 2, jitter: 0.5 };

describe("one backoff", () => {
  it("grows by the multiplier from the initial delay and stops at the cap", () => {
    const mid = (): number => 0.5; // no spread
    assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelay(P, a, mid)), [50, 100, 200, 400, 800, 1600, 2000, 2000]);
    assert.equal(backoffDelay({ ...P, multiplier: 1.5 }, 2, mid), 113, "rounded to whole ms");
  });

  it("spreads by +-jitter and never passes the cap or goes below zero", () => {
    assert.equal(backoffDelay(P, 2, () => 0), 100);
    assert.equal(backoffDelay(P, 2, () => 1), 300);
    assert.equal(backoffDelay(P, 10, () => 1), 2000, "jitter does not lift a capped delay past the cap");
    assert.equal(backoffDelay({ ...P, jitter: 0 }, 3, Math.random), 400);
    for (let a = 0; a < 200; a++) {
      const d = backoffDelay(P, a);
      const base = Math.min(2000, 50 * 2 ** a);
      assert.ok(d >= Math.floor(base / 2) && d <= Math.min(2000, Math.ceil(base * 1.5)), `attempt ${a}: ${d}`);
    }
  });

  it("stays finite however many attempts failed, even from a zero initial delay", () => {
    assert.equal(backoffDelay(P, 5000, () => 0.5), 2000);
    assert.equal(backoffDelay({ ...P, initialDelayMs: 0 }, 5000, () => 0.5), 0);
    assert.equal(backoffDelay({ ...P, initialDelayMs: 0 }, 3, () => 0.5), 0);
  });

  it("is the function the client library exports", () => {
    assert.equal(clientBackoffDelay, backoffDelay);
  });
});
