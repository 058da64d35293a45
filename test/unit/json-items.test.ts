import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createReplyBuildBudget, jsonItemsBody } from "../../src/rest/json-items.js";
import { ownBuffer } from "../../src/http/free-buffer.js";
import { Code } from "../../src/shared/code.js";
import type { GatewayError } from "../../src/shared/gateway-error.js";

describe("jsonItemsBody", () => {
  it("builds the same JSON as JSON.stringify, also when a long value is escaped in slices", async () => {
    // A surrogate pair straddling the 128 Ki slice boundary, quotes, control characters and non-ASCII.
    const long = "y".repeat(128 * 1024 - 1) + "😀" + '"\\\n\u0001é'.repeat(50_000);
    const items = [
      { key: "a", value: long, etag: "1" },
      { key: 'b"\n', value: "", etag: "2" },
      { key: "c", value: '{"x":1}', etag: "3" },
    ];
    const body = await jsonItemsBody(items, "7");
    assert.deepEqual(JSON.parse(body.toString("utf8")), { items, token: "7" });
    assert.deepEqual(JSON.parse((await jsonItemsBody([], undefined)).toString("utf8")), { items: [] });
  });

  it("returns a Buffer that owns its whole ArrayBuffer (so a thread can take it over and free it), escapes or not", async () => {
    for (const value of ["p".repeat(300 * 1024), '"é'.repeat(100 * 1024)]) {
      const body = await jsonItemsBody([{ key: "k", value, etag: "1" }], undefined);
      assert.ok(ownBuffer(body), "the body is its ArrayBuffer's only view");
      assert.equal((JSON.parse(body.toString("utf8")) as { items: Array<{ value: string }> }).items[0]!.value, value);
    }
  });

  it("stops when the request is aborted between slices", async () => {
    const ac = new AbortController();
    ac.abort(new Error("client gone"));
    await assert.rejects(jsonItemsBody([{ key: "a", value: "z".repeat(512 * 1024), etag: "1" }], "", ac.signal), /client gone/);
  });

  it("builds replies within a budget: one always, more while they fit, UNAVAILABLE naming the flag past it, freed when done", async () => {
    const page = [{ key: "k", value: "v".repeat(300 * 1024), etag: "1" }];
    const small = createReplyBuildBudget(100 * 1024);
    // One reply is built when nothing else is, even one over the bound.
    assert.ok(ownBuffer(await jsonItemsBody(page, undefined, undefined, small)));
    assert.equal(small.building, 0);
    const budget = createReplyBuildBudget(700 * 1024);
    // Two fit at once; the third, started while they are being built (they yield between slices), does not.
    const two = [jsonItemsBody(page, undefined, undefined, budget), jsonItemsBody(page, undefined, undefined, budget)];
    assert.equal(budget.count, 2);
    await assert.rejects(jsonItemsBody(page, undefined, undefined, budget), (e: Error) => {
      assert.equal((e as GatewayError).code, Code.UNAVAILABLE);
      assert.match(e.message, /2 replies of \d+ bytes are being built.*--max-unread-reply-bytes 716800/);
      return true;
    });
    await Promise.all(two);
    assert.deepEqual([budget.count, budget.building], [0, 0]);
    // An aborted build gives its bytes back too.
    const ac = new AbortController();
    const aborted = jsonItemsBody(page, undefined, ac.signal, budget);
    ac.abort(new Error("client gone"));
    await assert.rejects(aborted, /client gone/);
    assert.deepEqual([budget.count, budget.building], [0, 0]);
    assert.ok(ownBuffer(await jsonItemsBody(page, undefined, undefined, budget)));
  });
});
