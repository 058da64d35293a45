import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createMemoryStateStore } from "../../src/runtime/embedded/state-store.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Code } from "../../src/shared/code.js";

const hasCode = (code: Code) => (e: unknown) => e instanceof GatewayError && e.code === code;

describe("embedded state store", () => {
  it("saves with a new etag on every write and reads back", async () => {
    const s = createMemoryStateStore();
    const e1 = await s.save("st", "k", "v1");
    const e2 = await s.save("st", "k", "v2");
    assert.notEqual(e1, e2);
    assert.deepEqual(await s.get("st", "k"), { key: "k", value: "v2", etag: e2 });
    assert.equal(await s.get("st", "missing"), undefined);
    assert.equal(await s.get("other-store", "k"), undefined);
  });

  it("checks etags on save and delete: ABORTED on mismatch, nothing changed", async () => {
    const s = createMemoryStateStore();
    const e1 = await s.save("st", "k", "v1");
    await assert.rejects(s.save("st", "k", "bad", { etag: "nope" }), hasCode(Code.ABORTED));
    await assert.rejects(s.save("st", "new", "bad", { etag: e1 }), hasCode(Code.ABORTED));
    await assert.rejects(s.delete("st", "k", { etag: "nope" }), hasCode(Code.ABORTED));
    assert.equal((await s.get("st", "k"))?.value, "v1");
    assert.equal(await s.get("st", "new"), undefined);
    const e2 = await s.save("st", "k", "v2", { etag: e1 });
    await assert.rejects(s.save("st", "k", "v3", { etag: e1 }), hasCode(Code.ABORTED));
    await s.delete("st", "k", { etag: e2 });
    assert.equal(await s.get("st", "k"), undefined);
    await s.delete("st", "k"); // missing key without etag: fine
    await assert.rejects(s.delete("st", "k", { etag: e2 }), hasCode(Code.ABORTED));
  });

  it("two concurrent writers with the same etag: exactly one wins", async () => {
    const s = createMemoryStateStore();
    for (let round = 0; round < 50; round++) {
      const etag = await s.save("st", "k", "base");
      const results = await Promise.allSettled([s.save("st", "k", "a", { etag }), s.save("st", "k", "b", { etag }), s.delete("st", "k", { etag })]);
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 1, `round ${round}`);
      assert.ok(results.filter((r) => r.status === "rejected").every((r) => hasCode(Code.ABORTED)((r as PromiseRejectedResult).reason)));
    }
  });

  it("bulk get keeps request order and leaves missing keys out; bulk delete ignores missing keys", async () => {
    const s = createMemoryStateStore();
    await s.save("st", "a", "1");
    await s.save("st", "b", "2");
    assert.deepEqual((await s.getBulk("st", ["b", "x", "a"])).map((i) => i.key), ["b", "a"]);
    await s.deleteBulk("st", ["a", "x"]);
    assert.deepEqual((await s.getBulk("st", ["a", "b"])).map((i) => i.key), ["b"]);
  });

  it("keeps memory proportional to data: a store disappears with its last key", async () => {
    const s = createMemoryStateStore();
    for (let i = 0; i < 100; i++) await s.save("st", `k${i}`, "v");
    assert.equal(s.size("st"), 100);
    await s.deleteBulk("st", Array.from({ length: 100 }, (_, i) => `k${i}`));
    assert.equal(s.size("st"), 0);
    assert.deepEqual(s.stores(), []);
  });

  it("queries one store only and validates the query", async () => {
    const s = createMemoryStateStore();
    await s.save("st", "a", '{"n":1}');
    await s.save("st", "b", '{"n":2}');
    await s.save("other", "c", '{"n":3}');
    assert.deepEqual((await s.query("st", '{"filter":{"GT":{"n":1}}}', 0)).items.map((i) => i.key), ["b"]);
    assert.deepEqual((await s.query("empty", "{}", 0)).items, []);
    await assert.rejects(s.query("st", '{"filter":1}', 0), hasCode(Code.INVALID_ARGUMENT));
  });

  it("refuses work on an aborted signal with CANCELLED", async () => {
    const s = createMemoryStateStore();
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(s.save("st", "k", "v", { signal: ac.signal }), hasCode(Code.CANCELLED));
    assert.equal(await s.get("st", "k"), undefined);
  });
});
