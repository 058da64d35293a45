import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { event, replica, until } from "./support.js";

const unavailable = (e: unknown): boolean => e instanceof GatewayError && e.code === Code.UNAVAILABLE;

/** Settles within `ms` or fails the test: nothing may hang while Redis is down. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<PromiseSettledResult<T>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    const [r] = await Promise.race([Promise.allSettled([p]), timeout]);
    return r;
  } finally {
    clearTimeout(timer);
  }
}

describe("redis runtime: Redis restarts", () => {
  let server: TestRedisServer;
  before(async () => {
    server = await startTestRedis();
  });
  after(async () => {
    await server?.close();
  });

  for (const how of ["graceful", "kill"] as const) {
    it(`${how} stop: calls fail UNAVAILABLE fast while down; after the restart every event arrives once and calls work`, async () => {
      const sub = await replica(server.url);
      const pub = await replica(server.url);
      try {
        const got: string[] = [];
        const errors: Error[] = [];
        await sub.pubsub.subscribe(`r-${how}`, { onEvent: (e) => got.push(e.id), onError: (e) => errors.push(e) });
        for (let i = 0; i < 20; i++) await pub.pubsub.publish(`r-${how}`, event(`before${i}`));
        await until(() => got.length >= 20, 5000, "events before the restart");
        await pub.state.save("s", "k", "v");

        await server.stop(how);
        for (const [what, call] of [
          ["publish", () => pub.pubsub.publish(`r-${how}`, event("down"))],
          ["get", () => pub.state.get("s", "k")],
          ["save", () => pub.state.save("s", "k", "w")],
          ["query", () => pub.state.query("s", "{}", 0)],
          ["history", () => pub.pubsub.positions.history(`r-${how}`, 0, 10)],
          ["subscribe", () => pub.pubsub.subscribe("other", { onEvent: () => undefined })],
          ["job list", () => pub.jobs.list()],
        ] as const) {
          const r = await within<unknown>(call(), 5000, what);
          assert.equal(r.status, "rejected", `${what} fails while Redis is down`);
          assert.ok(unavailable((r as PromiseRejectedResult).reason), `${what}: ${(r as PromiseRejectedResult).reason}`);
        }
        const health = await within(pub.health(), 5000, "health");
        assert.equal(health.status, "fulfilled");
        assert.equal((health as PromiseFulfilledResult<{ status: string }>).value.status, "Unhealthy");

        // The reader waits one command deadline for a reconnect before it counts the outage (and logs it).
        const downLogged = () => sub.logger.lines.filter((l) => l.msg?.startsWith("redis unreachable; pub/sub reader")).length;
        await until(() => downLogged() === 1, 10_000, "the reader logs the outage");
        await new Promise((r) => setTimeout(r, 1000));
        await server.restart();
        await until(async () => (await pub.health()).status === "Healthy", 10_000, "healthy again");
        await until(async () => {
          try {
            await pub.pubsub.publish(`r-${how}`, event("after0"));
            return true;
          } catch {
            return false;
          }
        }, 10_000, "publish works again");
        for (let i = 1; i < 20; i++) await pub.pubsub.publish(`r-${how}`, event(`after${i}`));
        await until(() => got.length >= 40, 10_000, "events after the restart");
        await new Promise((r) => setTimeout(r, 300));
        const expected = [...Array.from({ length: 20 }, (_, i) => `before${i}`), ...Array.from({ length: 20 }, (_, i) => `after${i}`)];
        assert.deepEqual(got, expected, "every event once, in order");
        assert.deepEqual(errors, [], "a short outage ends no subscription");
        // Appendonly with fsync always: what was acknowledged before the stop is still there.
        assert.equal((await pub.state.get("s", "k"))?.value, "v");
        assert.equal(downLogged(), 1, "the outage is logged once, not per retry");
        await until(() => sub.logger.lines.some((l) => l.msg?.startsWith("redis reachable again; pub/sub reader")), 5000, "the recovery is logged");
      } finally {
        await sub.close();
        await pub.close();
      }
    });
  }

  it("start() returns at once when Redis is not there yet; the runtime works once it is", async () => {
    await server.stop("kill");
    const { createRedisRuntime } = await import("../../src/runtime/redis/index.js");
    const { captureLogger } = await import("./support.js");
    const rt = createRedisRuntime({ pubsubName: "pubsub", logger: captureLogger(), redisUrl: server.url });
    try {
      const t0 = Date.now();
      await rt.start();
      assert.ok(Date.now() - t0 < 500, "start() does not wait for Redis");
      assert.equal((await rt.health()).status, "Unhealthy");
      await server.restart();
      await until(async () => (await rt.health()).status === "Healthy", 10_000, "healthy once Redis is up");
      assert.match((await rt.health()).description, /^redis at 127\.0\.0\.1:\d+ \(version \d/);
    } finally {
      await rt.close();
    }
  });

  it("refused credentials: health says why (the server's answer), never the password; calls fail UNAVAILABLE", async () => {
    const { createRedisRuntime } = await import("../../src/runtime/redis/index.js");
    const { captureLogger } = await import("./support.js");
    const rt = createRedisRuntime({ pubsubName: "pubsub", logger: captureLogger(), redisUrl: `redis://nobody:secretpw@127.0.0.1:${server.port}` });
    try {
      await rt.start();
      await until(async () => /WRONGPASS/.test((await rt.health()).description), 5000, "health names the refusal");
      const h = await rt.health();
      assert.equal(h.status, "Unhealthy");
      assert.equal(h.description.includes("secretpw"), false);
      await assert.rejects(rt.state.get("s", "k"), (e) => unavailable(e) && !(e as Error).message.includes("secretpw"));
    } finally {
      await rt.close();
    }
  });

  it("a long outage ends every subscription with onError (the broker then lets subscribers reconnect)", async () => {
    const rt = await replica(server.url, { outageMs: 500 });
    try {
      const errors: Error[] = [];
      await rt.pubsub.subscribe("long", { onEvent: () => undefined, onError: (e) => errors.push(e) });
      await server.stop("kill");
      await until(() => errors.length === 1, 10_000, "onError after the outage bound");
      assert.ok(unavailable(errors[0]));
      await server.restart();
    } finally {
      await rt.close();
    }
  });
});
