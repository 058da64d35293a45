import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { logThrottle } from "../../src/observe/logger.js";

describe("logThrottle", () => {
  it("lets one event a period through and counts the ones it held back for the next line", () => {
    let t = 1000;
    const th = logThrottle(10_000, () => t);
    assert.deepEqual(th.take(), { notLogged: 0 }, "the first is logged");
    t += 1;
    assert.equal(th.take(), undefined);
    t += 9_998;
    assert.equal(th.take(), undefined, "still inside the period");
    t += 1;
    assert.deepEqual(th.take(), { notLogged: 2 }, "a period later: logged, with the two held back");
    t += 50_000;
    assert.deepEqual(th.take(), { notLogged: 0 }, "the count starts again after each line");
  });
});
