import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { replica, until } from "./support.js";

const code = (e: unknown): Code | undefined => (e instanceof GatewayError ? e.code : undefined);

describe("redis runtime: the scheduler shared by replicas", () => {
  let server: TestRedisServer;
  before(async () => {
    server = await startTestRedis();
  });
  after(async () => {
    await server?.close();
  });

  it("validates like the embedded scheduler: INVALID_ARGUMENT naming the field, ALREADY_EXISTS, NOT_FOUND; list and count", async () => {
    const a = await replica(server.url, { keyPrefix: "v:" });
    const b = await replica(server.url, { keyPrefix: "v:" });
    try {
      await assert.rejects(a.jobs.schedule({ name: "", schedule: "@every 1s", data: "" }), (e) => code(e) === Code.INVALID_ARGUMENT && /name/.test((e as Error).message));
      await assert.rejects(a.jobs.schedule({ name: "x", data: "" }), (e) => code(e) === Code.INVALID_ARGUMENT && /schedule/.test((e as Error).message));
      await assert.rejects(a.jobs.schedule({ name: "x", schedule: "not a schedule", data: "" }), (e) => code(e) === Code.INVALID_ARGUMENT);
      assert.equal(await a.jobs.count(), 0, "a refused job changes nothing");
      await a.jobs.schedule({ name: "later", schedule: "@every 1h", data: '{"x":1}', repeats: 3, ttl: "2h" });
      await a.jobs.schedule({ name: "another", dueTime: "1h", data: "" });
      await assert.rejects(b.jobs.schedule({ name: "later", schedule: "@every 2h", data: "" }), (e) => code(e) === Code.ALREADY_EXISTS);
      const rec = await b.jobs.get("later");
      assert.equal(rec?.schedule, "@every 1h");
      assert.equal(rec?.repeats, 3);
      assert.equal(rec?.timesFired, 0);
      assert.ok(rec?.nextFireAt && rec.nextFireAt > Date.now() + 3_500_000);
      assert.ok(rec?.expiresAt && rec.createdAt && rec.expiresAt === rec.createdAt + 7_200_000);
      assert.deepEqual((await b.jobs.list()).map((j) => j.name), ["another", "later"]);
      assert.equal(await b.jobs.count(), 2);
      await b.jobs.schedule({ name: "later", schedule: "@every 2h", data: "" }, undefined, { overwrite: true });
      assert.equal((await a.jobs.get("later"))?.schedule, "@every 2h");
      await b.jobs.delete("later");
      await assert.rejects(a.jobs.delete("later"), (e) => code(e) === Code.NOT_FOUND);
      assert.equal(await a.jobs.get("later"), undefined);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("every firing happens exactly once across two replicas; times_fired and last_fire_time are cluster-wide", async () => {
    const a = await replica(server.url, { keyPrefix: "once:" });
    const b = await replica(server.url, { keyPrefix: "once:" });
    try {
      const fired: { by: string; name: string; data: string }[] = [];
      a.jobs.setHandler(async (name, data) => void fired.push({ by: "a", name, data }));
      b.jobs.setHandler(async (name, data) => void fired.push({ by: "b", name, data }));
      await a.jobs.schedule({ name: "rep", schedule: "@every 1s", repeats: 3, data: "r" });
      await b.jobs.schedule({ name: "one", dueTime: "300ms", data: "o" });
      await until(() => fired.filter((f) => f.name === "rep").length >= 3 && fired.some((f) => f.name === "one"), 15_000, "all firings");
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(fired.filter((f) => f.name === "rep").length, 3, "a 3-times job fires 3 times in the cluster");
      assert.equal(fired.filter((f) => f.name === "one").length, 1, "a one-shot job fires once in the cluster");
      assert.ok(fired.every((f) => f.data === (f.name === "rep" ? "r" : "o")));
      // Finished jobs are removed, as in the embedded scheduler.
      assert.equal(await a.jobs.get("rep"), undefined);
      assert.equal(await b.jobs.count(), 0);
      await a.jobs.schedule({ name: "forever", schedule: "@every 1s", data: "" });
      await until(async () => ((await b.jobs.get("forever"))?.timesFired ?? 0) >= 2, 10_000, "two firings recorded");
      const rec = (await b.jobs.get("forever"))!;
      assert.ok(rec.lastFiredAt! >= rec.createdAt! && rec.nextFireAt! > rec.lastFiredAt!);
      assert.equal(fired.filter((f) => f.name === "forever").length >= rec.timesFired!, true);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a firing that runs longer than the lease, on a live replica, is not fired again elsewhere (the claim is renewed)", async () => {
    const lease = { keyPrefix: "renew:", jobLeaseMs: 600 };
    const a = await replica(server.url, lease);
    const b = await replica(server.url, lease);
    try {
      const fired: string[] = [];
      let release: () => void = () => undefined;
      const slow = (who: string) => (name: string) => {
        fired.push(`${who}:${name}`);
        return new Promise<void>((resolve) => {
          release = resolve;
        });
      };
      a.jobs.setHandler(slow("a"));
      b.jobs.setHandler(slow("b"));
      await a.jobs.schedule({ name: "slow", dueTime: "100ms", data: "" });
      await until(() => fired.length === 1, 5000, "one replica fires");
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(fired.length, 1, `fired once during four leases: ${fired.join(", ")}`);
      release();
      await until(async () => (await a.jobs.get("slow")) === undefined, 5000, "the one-shot job completes");
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a claimer that dies mid-firing: after the lease another replica fires the job", async () => {
    const lease = { keyPrefix: "lease:", jobLeaseMs: 1000 };
    const a = await replica(server.url, lease);
    let aCalled = 0;
    // A's firing never completes (a replica stuck or killed mid-firing).
    a.jobs.setHandler(() => {
      aCalled++;
      return new Promise<void>(() => undefined);
    });
    await a.jobs.schedule({ name: "orphan", dueTime: "100ms", data: "d" });
    await until(() => aCalled === 1, 5000, "A claims and fires");
    // Close A's connections without completing the firing: the claim stays in Redis.
    await a.close();
    const b = await replica(server.url, lease);
    try {
      const fired: string[] = [];
      b.jobs.setHandler(async (name) => void fired.push(name));
      await until(() => fired.length === 1, 5000, "B fires the orphaned job after the lease");
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(fired, ["orphan"], "once");
      assert.equal(await b.jobs.get("orphan"), undefined, "the one-shot job is done");
    } finally {
      await b.close();
    }
  });
});
