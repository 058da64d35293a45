import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { replica } from "./support.js";

const code = (e: unknown): Code | undefined => (e instanceof GatewayError ? e.code : undefined);

describe("redis runtime: state", () => {
  let server: TestRedisServer;
  let a: Awaited<ReturnType<typeof replica>>;
  let b: Awaited<ReturnType<typeof replica>>;
  before(async () => {
    server = await startTestRedis();
    a = await replica(server.url, { queryMaxKeys: 20 });
    b = await replica(server.url, { queryMaxKeys: 20 });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await server?.close();
  });

  it("saves, reads back and bumps the etag on every write; two replicas see the same item", async () => {
    const e1 = await a.state.save("s", "k", "v1");
    assert.deepEqual(await b.state.get("s", "k"), { key: "k", value: "v1", etag: e1 });
    const e2 = await b.state.save("s", "k", "v2");
    assert.notEqual(e2, e1);
    assert.deepEqual(await a.state.get("s", "k"), { key: "k", value: "v2", etag: e2 });
    assert.equal(await a.state.get("s", "missing"), undefined);
    assert.equal(await a.state.get("other-store", "k"), undefined);
  });

  it("etag first-write-wins across two replicas: one save wins, the other gets ABORTED and changes nothing", async () => {
    const etag = await a.state.save("s", "race", "start");
    for (let round = 0; round < 20; round++) {
      const current = (await a.state.get("s", "race"))!.etag;
      const results = await Promise.allSettled([
        a.state.save("s", "race", `a${round}`, { etag: current }),
        b.state.save("s", "race", `b${round}`, { etag: current }),
      ]);
      const won = results.filter((r) => r.status === "fulfilled");
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
      assert.equal(won.length, 1, `round ${round}: exactly one writer wins`);
      assert.equal(code(lost[0]!.reason), Code.ABORTED);
      const stored = (await b.state.get("s", "race"))!;
      assert.equal(stored.etag, (won[0] as PromiseFulfilledResult<string>).value);
    }
    assert.notEqual(etag, (await a.state.get("s", "race"))!.etag);
  });

  it("an etag on a key that is not stored is ABORTED and creates nothing (the port's contract, not contrib redis')", async () => {
    await assert.rejects(a.state.save("s", "never", "x", { etag: "1" }), (e) => code(e) === Code.ABORTED && /not stored/.test((e as Error).message));
    assert.equal(await a.state.get("s", "never"), undefined);
  });

  it("delete with a stale etag deletes nothing; with the current one it deletes; without one a missing key is fine", async () => {
    const e1 = await a.state.save("s", "d", "x");
    await a.state.save("s", "d", "y");
    await assert.rejects(b.state.delete("s", "d", { etag: e1 }), (e) => code(e) === Code.ABORTED);
    assert.equal((await a.state.get("s", "d"))!.value, "y");
    await b.state.delete("s", "d", { etag: (await a.state.get("s", "d"))!.etag });
    assert.equal(await a.state.get("s", "d"), undefined);
    await a.state.delete("s", "d");
    await assert.rejects(a.state.delete("s", "d", { etag: e1 }), (e) => code(e) === Code.ABORTED);
  });

  it("a key deleted and written again never gets back an old etag", async () => {
    const e1 = await a.state.save("s", "again", "1");
    await a.state.delete("s", "again");
    const e2 = await a.state.save("s", "again", "2");
    assert.notEqual(e2, e1);
    await assert.rejects(a.state.save("s", "again", "3", { etag: e1 }), (e) => code(e) === Code.ABORTED);
  });

  it("bulk get returns the stored keys in request order; bulk delete removes them all", async () => {
    await a.state.save("bulk", "x", "1");
    await a.state.save("bulk", "y", "2");
    await a.state.save("bulk", "z", "3");
    const got = await b.state.getBulk("bulk", ["z", "nope", "x"]);
    assert.deepEqual(got.map((i) => [i.key, i.value]), [["z", "3"], ["x", "1"]]);
    assert.deepEqual(await b.state.getBulk("bulk", []), []);
    await b.state.deleteBulk("bulk", ["x", "z", "nope"]);
    assert.deepEqual((await a.state.getBulk("bulk", ["x", "y", "z"])).map((i) => i.key), ["y"]);
    assert.deepEqual((await a.state.query("bulk", "{}", 0)).items.map((i) => i.key), ["y"]);
  });

  it("query runs the DSL over the store's items (filter, sort, page)", async () => {
    for (let i = 0; i < 6; i++) await a.state.save("q", `item${i}`, JSON.stringify({ n: i, even: i % 2 === 0 }));
    const r = await b.state.query("q", JSON.stringify({ filter: { EQ: { even: true } }, sort: [{ key: "n", order: "DESC" }] }), 0);
    assert.deepEqual(r.items.map((i) => i.key), ["item4", "item2", "item0"]);
    const page = await b.state.query("q", JSON.stringify({ sort: [{ key: "n" }], page: { limit: 2 } }), 0);
    assert.deepEqual(page.items.map((i) => i.key), ["item0", "item1"]);
    assert.notEqual(page.token, "");
    await assert.rejects(b.state.query("q", "{not json", 0), (e) => code(e) === Code.INVALID_ARGUMENT);
  });

  it("a query on a store with more keys than the bound fails RESOURCE_EXHAUSTED naming the bound", async () => {
    for (let i = 0; i < 21; i++) await a.state.save("big", `k${i}`, "{}");
    await assert.rejects(a.state.query("big", "{}", 0), (e) => code(e) === Code.RESOURCE_EXHAUSTED && /at most 20 keys/.test((e as Error).message));
    await a.state.delete("big", "k0");
    assert.equal((await a.state.query("big", "{}", 0)).items.length, 20);
  });

  it("a cancelled call fails CANCELLED and changes nothing", async () => {
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(a.state.save("s", "cancel", "x", { signal: ac.signal }), (e) => code(e) === Code.CANCELLED);
    assert.equal(await a.state.get("s", "cancel"), undefined);
  });
});
