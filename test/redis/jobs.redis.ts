import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { Redis } from "ioredis";
import { createMetrics } from "../../src/observe/metrics.js";
import type { GatewayContext } from "../../src/ops/context.js";
import { createTriggerOps } from "../../src/ops/trigger.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { captureLogger, replica, sleep, until } from "./support.js";

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

  it("a completion that fails once (the connection dropped just after the handler) is retried: the firing happens once", async () => {
    const lease = { keyPrefix: "retry:", jobLeaseMs: 1000 };
    const a = await replica(server.url, lease);
    const b = await replica(server.url, lease);
    const killer = new Redis(server.url);
    try {
      const fired: string[] = [];
      const handler = (who: string) => async (name: string) => {
        fired.push(`${who}:${name}`);
        // Drop every connection (both replicas' too) as the handler returns: the completion's first try fails.
        if (fired.length === 1) {
          await killer.client("KILL", "TYPE", "normal", "SKIPME", "yes");
          await sleep(20);
        }
      };
      a.jobs.setHandler(handler("a"));
      b.jobs.setHandler(handler("b"));
      await a.jobs.schedule({ name: "once", dueTime: "100ms", data: "" });
      await until(() => fired.length >= 1, 5000, "a replica fires");
      // Three leases: a firing whose completion was lost would be fired again after the first.
      await sleep(3000);
      assert.equal(fired.length, 1, `fired once: ${fired.join(", ")}`);
      assert.equal(await a.jobs.get("once"), undefined, "the one-shot job is done");
    } finally {
      killer.disconnect();
      await a.close();
      await b.close();
    }
  });

  it("close() with a firing in flight waits for it and stores its completion: no other replica fires it again", async () => {
    const lease = { keyPrefix: "close:", jobLeaseMs: 1000 };
    const a = await replica(server.url, lease);
    let closing: Promise<void> | undefined;
    a.jobs.setHandler(async () => {
      // The gateway shuts down while the firing publishes.
      closing = a.close();
      await sleep(200);
    });
    await a.jobs.schedule({ name: "graceful", dueTime: "100ms", data: "" });
    await until(() => closing !== undefined, 5000, "A fires");
    await closing;
    const b = await replica(server.url, lease);
    try {
      const fired: string[] = [];
      b.jobs.setHandler(async (name) => void fired.push(name));
      await sleep(2500);
      assert.deepEqual(fired, [], "not fired again after the lease");
      assert.equal(await b.jobs.get("graceful"), undefined, "the one-shot job is done");
    } finally {
      await b.close();
    }
  });

  it("a trigger whose publish Redis refuses (maxmemory, noeviction) is not counted as fired, and fires once memory is freed", async () => {
    const rt = await replica(server.url, { keyPrefix: "oom:", jobLeaseMs: 1000 });
    const admin = new Redis(server.url);
    try {
      let attempts = 0;
      const logger = captureLogger();
      const ctx = {
        logger,
        metrics: createMetrics({ processMetrics: false }),
        options: { maxTriggers: 100 },
        runtime: {
          kind: "redis",
          jobs: rt.jobs,
          pubsub: {
            async publish(topic: string, event: CloudEvent, signal?: AbortSignal) {
              // Redis runs out of memory just before the first firing's publish.
              if (attempts++ === 0) {
                await admin.config("SET", "maxmemory-policy", "noeviction");
                await admin.config("SET", "maxmemory", "1");
              }
              return rt.pubsub.publish(topic, event, signal);
            },
          },
        },
      } as unknown as GatewayContext;
      const ops = createTriggerOps(ctx);
      rt.jobs.setHandler((name, data) => ops.fire(name, data));
      await ops.schedule({ name: "oneshot", target_topic: "oom-topic", due_time: "100ms" });
      await until(() => logger.lines.some((l) => l.msg === "trigger firing could not be published; the schedule continues"), 5000, "the refused publish");
      await sleep(1500);
      // Read directly: under OOM Redis refuses every command queued in a MULTI, reads too (jobs.get is one).
      const text = await admin.hget("oom:jobs", "oneshot");
      assert.ok(text, "the one-shot trigger is still there");
      const rec = JSON.parse(text) as { timesFired: number };
      assert.equal(rec.timesFired, 0, "not counted as fired");
      assert.equal(await admin.exists("oom:stream:oom-topic"), 0, "no event");
      await admin.config("SET", "maxmemory", "0");
      await until(async () => (await rt.jobs.get("oneshot")) === undefined, 5000, "the firing retried and completed");
      assert.equal(await admin.xlen("oom:stream:oom-topic"), 1, "published once");
      assert.ok(attempts >= 2);
    } finally {
      await admin.config("SET", "maxmemory", "0");
      admin.disconnect();
      await rt.close();
    }
  });

  it("malformed job records (written by something else) are logged once and left out; the good jobs keep firing", async () => {
    const a = await replica(server.url, { keyPrefix: "bad:" });
    const raw = new Redis(server.url);
    try {
      const bad = { empty: "{}", number: "1", nulljson: "null", nospec: '{"createdAt":1}', badspec: '{"spec":{"name":1},"createdAt":1}', text: "not json" };
      for (const [name, text] of Object.entries(bad)) {
        await raw.hset("bad:jobs", name, text);
        await raw.zadd("bad:jobs:due", 0, name);
      }
      const fired: string[] = [];
      a.jobs.setHandler(async (name) => void fired.push(name));
      await a.jobs.schedule({ name: "good", schedule: "@every 1s", data: "" });
      // The malformed records are due at once: claimed and fired (an error there must not end the process).
      await until(() => fired.filter((n) => n === "good").length >= 2, 10_000, "the good job fires twice");
      assert.deepEqual([...new Set(fired)], ["good"]);
      for (const name of ["empty", "number", "nospec", "badspec", "text"]) assert.equal(await raw.hexists("bad:jobs", name), 0, `${name} removed`);
      // And get / list leave out one that is stored (written again, not due).
      await raw.hset("bad:jobs", "empty", "{}");
      assert.deepEqual((await a.jobs.list()).map((j) => j.name), ["good"], "list leaves them out and works");
      assert.equal(await a.jobs.get("empty"), undefined);
      await a.jobs.list();
      for (const name of Object.keys(bad)) {
        const lines = a.logger.lines.filter((l) => (l.obj as { job?: string }).job === name && l.level === "error").map((l) => l.msg);
        assert.ok(lines.length >= 1, `${name} logged`);
        assert.equal(new Set(lines).size, lines.length, `${name}: each message once: ${JSON.stringify(lines)}`);
      }
    } finally {
      raw.disconnect();
      await a.close();
    }
  });

  it("waits by the server's clock: a local clock ahead of Redis does not make the scheduler spin", async () => {
    const a = await replica(server.url, { keyPrefix: "clock:" });
    const raw = new Redis(server.url);
    const realNow = Date.now;
    try {
      const fired: number[] = [];
      a.jobs.setHandler(async () => void fired.push(realNow()));
      const claims = async (): Promise<number> => {
        const stats = await raw.info("commandstats");
        return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0);
      };
      // This process's clock runs 2 s ahead of the server's: the job is due here 2 s before it is due on the server.
      Date.now = () => realNow() + 2000;
      await a.jobs.schedule({ name: "ahead", dueTime: "500ms", data: "" });
      const before = await claims();
      await until(() => fired.length === 1, 10_000, "the job fires (by the server's clock)");
      const calls = (await claims()) - before;
      assert.ok(calls < 40, `scripts run while waiting: ${calls}`);
    } finally {
      Date.now = realNow;
      raw.disconnect();
      await a.close();
    }
  });
});
