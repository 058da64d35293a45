import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createRedisRuntime } from "../../src/runtime/redis/index.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { captureLogger, event, holdServer, replica, sleep } from "./support.js";

const code = (e: unknown): Code | undefined => (e instanceof GatewayError ? e.code : undefined);

/**
 * Commands in flight when their connection drops while Redis stays up (CLIENT KILL, a network blip): each is run at
 * most once and its caller learns what it did. Redis is held busy (holdServer) while the write and the kill are sent,
 * so the order in which it reads them is the order they were sent.
 */
describe("redis runtime: a connection dropped with commands in flight", () => {
  let server: TestRedisServer;
  let inspect: Redis;
  before(async () => {
    server = await startTestRedis();
  });
  after(async () => {
    inspect?.disconnect();
    await server?.close();
  });

  /** Run `write` while Redis is held; send CLIENT KILL of every other normal connection before or after it. */
  async function dropWhile<T>(write: () => Promise<T>, killFirst: boolean): Promise<T | Error> {
    const holder = new Redis(server.url);
    const killer = new Redis(server.url);
    try {
      await killer.ping();
      await holder.ping();
      const held = holdServer(holder, 500);
      await sleep(100);
      let result!: Promise<T | Error>;
      const send = (): void => {
        result = write().then(
          (v) => v,
          (e: Error) => e,
        );
      };
      if (!killFirst) send();
      await sleep(100);
      const killed = killer.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      await sleep(100);
      if (killFirst) send();
      await held.catch(() => undefined);
      assert.ok(Number(await killed) >= 1, "connections were killed");
      return await result;
    } finally {
      holder.disconnect();
      killer.disconnect();
    }
  }

  it("a publish Redis ran before the drop is reported published and stored once: it is never sent again", async () => {
    const rt = await replica(server.url, { keyPrefix: "ran:" });
    try {
      // Loads the script (the first call of a script is EVALSHA, then EVAL), so the held write is one command.
      await rt.pubsub.publish("warm", event("warm"));
      const r = await dropWhile(() => rt.pubsub.publish("t", event("once")), false);
      inspect = new Redis(server.url);
      const entries = await inspect.xrange("ran:stream:t", "-", "+");
      assert.equal(r, undefined, `the caller is told it was published: ${String(r)}`);
      assert.deepEqual(entries.map(([, f]) => (JSON.parse(f[1]!) as { id: string }).id), ["once"], "one entry, one id");
      await rt.pubsub.publish("t", event("after"));
      assert.equal(await inspect.xlen("ran:stream:t"), 2, "the connection works again");
    } finally {
      await rt.close();
    }
  });

  it("a publish the drop kept from Redis fails UNAVAILABLE and is not stored: it is never sent again", async () => {
    const rt = await replica(server.url, { keyPrefix: "lost:" });
    try {
      await rt.pubsub.publish("warm", event("warm"));
      const r = await dropWhile(() => rt.pubsub.publish("t", event("never")), true);
      inspect ??= new Redis(server.url);
      assert.equal(code(r), Code.UNAVAILABLE, String(r));
      assert.match((r as Error).message, /not applied/);
      // Long enough for a resend on the new connection to have run.
      await sleep(300);
      assert.equal(await inspect.xlen("lost:stream:t"), 0, "a reported failure never delivers");
    } finally {
      await rt.close();
    }
  });

  it("a save with an etag Redis ran before the drop returns the stored etag (not ABORTED) and is applied once", async () => {
    const rt = await replica(server.url, { keyPrefix: "save:" });
    try {
      const e1 = await rt.state.save("s", "k", "v1");
      inspect ??= new Redis(server.url);
      const counterBefore = Number(await inspect.get("save:state-etag"));
      const r = await dropWhile(() => rt.state.save("s", "k", "v2", { etag: e1 }), false);
      const stored = await inspect.hgetall("save:state:s:k");
      assert.equal(stored["data"], "v2");
      assert.equal(r, stored["version"], `the caller gets the stored etag: ${String(r)}`);
      assert.equal(Number(await inspect.get("save:state-etag")), counterBefore + 1, "applied once");
    } finally {
      await rt.close();
    }
  });

  it("a save cancelled while the connection is being set up fails CANCELLED and sends nothing", async () => {
    // Not started and not waited for: the command connection is still connecting when the save is called.
    const rt = createRedisRuntime({ pubsubName: "pubsub", logger: captureLogger(), redisUrl: server.url, keyPrefix: "cancel:" });
    try {
      const ac = new AbortController();
      const saving = rt.state.save("s", "k", "v", { signal: ac.signal });
      ac.abort();
      await assert.rejects(saving, (e) => code(e) === Code.CANCELLED);
      await sleep(200);
      inspect ??= new Redis(server.url);
      assert.equal(await inspect.exists("cancel:state:s:k"), 0, "nothing was stored");
    } finally {
      await rt.close();
    }
  });
});
