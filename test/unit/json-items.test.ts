import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { jsonItemsBody } from "../../src/main/rest/json-items.js";

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

  it("stops when the request is aborted between slices", async () => {
    const ac = new AbortController();
    ac.abort(new Error("client gone"));
    await assert.rejects(jsonItemsBody([{ key: "a", value: "z".repeat(512 * 1024), etag: "1" }], "", ac.signal), /client gone/);
  });
});
