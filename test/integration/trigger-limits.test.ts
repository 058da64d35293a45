import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHook } from "node:async_hooks";
import type * as grpc from "@grpc/grpc-js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import type { UpstreamSubscription } from "../../src/runtime/pubsub-port.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";

const KEY = "limits-key";
const H = { "x-api-key": KEY, "content-type": "application/json" };

/** Times and durations past what the scheduler can hold, the field each must be refused on, and why. */
const OUT_OF_RANGE: Array<{ body: Record<string, unknown>; field: string; pattern: RegExp }> = [
  { body: { due_time: "P300000Y" }, field: "due_time", pattern: /past 9999-12-31T23:59:59\.999Z/ },
  { body: { due_time: "P999999999Y" }, field: "due_time", pattern: /past 9999-12-31T23:59:59\.999Z/ },
  { body: { due_time: "P99999999999999999999999999999999999999999D" }, field: "due_time", pattern: /past 9999-12-31/ },
  { body: { due_time: "9999999999h" }, field: "due_time", pattern: /at most 2562047h47m16\.854775807s/ },
  { body: { schedule: "@every 3000000000h" }, field: "schedule", pattern: /at most 2562047h47m16\.854775807s/ },
  { body: { schedule: "@hourly", ttl: "9999999999h" }, field: "ttl", pattern: /at most 2562047h47m16\.854775807s/ },
  { body: { schedule: "@hourly", ttl: "P300000Y" }, field: "ttl", pattern: /past 9999-12-31/ },
  { body: { schedule: "@every 1s", due_time: "9999-12-31T23:59:59Z", ttl: "2562047h" }, field: "ttl", pattern: /past 9999-12-31/ },
  { body: { schedule: "0 0 0 * * *", due_time: "3000-01-01T00:00:00Z" }, field: "schedule", pattern: /cron schedules end in the year 2999/ },
  { body: { schedule: "@every 1s", repeats: 3_000_000_000 }, field: "repeats", pattern: /0 \(unlimited\) to 2147483647/ },
  { body: { schedule: "@every 1s", repeats: 2_147_483_648 }, field: "repeats", pattern: /0 \(unlimited\) to 2147483647/ },
];

for (const fixture of runtimeFixtures) {
  describe(`trigger limits (${fixture.name} runtime)`, () => {
    let gw: TestGateway;
    let rt: Awaited<ReturnType<typeof fixture.setup>>;
    let client: grpc.Client;
    const subs: UpstreamSubscription[] = [];
    const call = (method: string, req: object): Promise<any> => unary(client, method, req, withKey(KEY));
    const rest = (method: string, path: string, body?: unknown): Promise<Response> =>
      fetch(`${gw.http}${path}`, { method, headers: H, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

    before(async () => {
      rt = await fixture.setup();
      gw = await startTestGateway({ ...rt.options, apiKeys: [KEY], maxTriggers: 4 }, rt.overrides);
      client = gw.client("platform.Trigger");
    });
    after(async () => {
      for (const s of subs) await s.close();
      await gw.close();
      await rt.close();
    });

    it("refuses times and durations past what the scheduler can hold, naming the field and the limit; the others keep firing", async () => {
      const events: CloudEvent[] = [];
      subs.push(await gw.gateway.context.runtime.pubsub.subscribe("lim.tick", { onEvent: (e) => void events.push(e) }));
      const ok = await rest("POST", "/v1/trigger/lim-tick", { target_topic: "lim.tick", schedule: "@every 1s" });
      assert.equal(ok.status, 200);
      for (const [i, { body, field, pattern }] of OUT_OF_RANGE.entries()) {
        const res = await rest("POST", `/v1/trigger/bad-${i}`, { target_topic: "lim.bad", ...body });
        const text = await res.text();
        assert.equal(res.status, 400, `${JSON.stringify(body)} -> ${res.status} ${text}`);
        const err = JSON.parse(text) as { code: number; message: string };
        assert.equal(err.code, 3);
        assert.ok(err.message.startsWith(field), `${JSON.stringify(body)}: "${err.message}" names ${field}`);
        assert.match(err.message, pattern);
        // The same over gRPC, in-band.
        const g = await call("ScheduleTrigger", { name: `bad-grpc-${i}`, target_topic: "lim.bad", ...body, repeats: Math.min(Number(body["repeats"] ?? 0), 2 ** 31 - 1) });
        if (body["repeats"] === undefined) {
          assert.equal(g.status.success, false, JSON.stringify(body));
          assert.equal(g.status.status, "INVALID_ARGUMENT");
          assert.match(g.status.message, pattern);
        } else {
          assert.equal(g.status.success, true, "2147483647 is the largest repeats the wire type holds, and is accepted");
          assert.equal((await call("GetTrigger", { name: `bad-grpc-${i}` })).trigger.repeats, 2_147_483_647);
          assert.equal((await call("DeleteTrigger", { name: `bad-grpc-${i}` })).status.success, true);
        }
      }
      // Nothing bad was stored, list/get/delete work, and the good trigger keeps firing.
      const list = await rest("GET", "/v1/trigger");
      assert.equal(list.status, 200);
      const names = ((await list.json()) as { triggers: Array<{ name: string; next_fire_time: string }> }).triggers.map((t) => t.name);
      assert.deepEqual(names, ["lim-tick"]);
      const before = events.length;
      await waitFor(() => events.length >= before + 2, "two more firings of the good trigger", 5000);
      assert.equal((await rest("DELETE", "/v1/trigger/lim-tick")).status, 200);
    });

    it("a repeats the int32 wire field cannot hold is refused over gRPC too, never stored wrapped", async () => {
      // grpc-js encodes 3000000000 into the int32 field; the gateway reads it as -1294967296 and must refuse it.
      const g = await call("ScheduleTrigger", { name: "rep-wrap", target_topic: "lim.rep", schedule: "@every 1s", repeats: 3_000_000_000 });
      assert.equal(g.status.success, false);
      assert.equal(g.status.status, "INVALID_ARGUMENT");
      assert.match(g.status.message, /^repeats must be a whole number from 0 \(unlimited\) to 2147483647/);
      assert.equal((await call("GetTrigger", { name: "rep-wrap" })).status.status, "NOT_FOUND");
    });

    it("the largest due_time the scheduler holds is accepted and reads back exactly", async () => {
      const res = await rest("POST", "/v1/trigger/lim-far", { target_topic: "lim.far", due_time: "9999-12-31T23:59:59Z" });
      assert.equal(res.status, 200, await res.text());
      const got = (await call("GetTrigger", { name: "lim-far" })).trigger;
      if (fixture.name === "embedded") assert.equal(got.next_fire_time, "9999-12-31T23:59:59.000Z");
      assert.equal((await rest("DELETE", "/v1/trigger/lim-far")).status, 200);
    });

    it("refuses triggers past --max-triggers with RESOURCE_EXHAUSTED naming the limit; a delete makes room", async () => {
      for (let i = 0; i < 4; i++) {
        const res = await rest("POST", `/v1/trigger/cap-${i}`, { target_topic: "lim.cap", schedule: "@hourly" });
        assert.equal(res.status, 200, await res.text());
      }
      const over = await rest("POST", "/v1/trigger/cap-4", { target_topic: "lim.cap", schedule: "@hourly" });
      assert.equal(over.status, 429);
      const err = (await over.json()) as { code: number; message: string };
      assert.equal(err.code, 8);
      assert.match(err.message, /at most 4 may \(--max-triggers\)/);
      const g = await call("ScheduleTrigger", { name: "cap-4", target_topic: "lim.cap", schedule: "@hourly" });
      assert.deepEqual([g.status.success, g.status.status], [false, "RESOURCE_EXHAUSTED"]);
      assert.equal((await rest("GET", "/v1/trigger/cap-4")).status, 404, "the refused trigger was not stored");
      assert.equal((await rest("DELETE", "/v1/trigger/cap-0")).status, 200);
      assert.equal((await rest("POST", "/v1/trigger/cap-4", { target_topic: "lim.cap", schedule: "@hourly" })).status, 200);
      for (let i = 1; i <= 4; i++) assert.equal((await rest("DELETE", `/v1/trigger/cap-${i}`)).status, 200);
    });
  });
}

describe("trigger firing resources (embedded runtime)", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], maxTriggers: 10_000, logLevel: "warn" });
  });
  after(async () => {
    await gw.close();
  });

  it("a firing that is over holds no timer: thousands of firings leave the live timers flat", async () => {
    const N = 3000;
    const each = async (fn: (i: number) => Promise<void>): Promise<void> => {
      let next = 0;
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < N) await fn(next++);
      }));
    };
    await each(async (i) => {
      const res = await fetch(`${gw.http}/v1/trigger/res-${i}`, { method: "POST", headers: H, body: JSON.stringify({ target_topic: `res.${i}`, schedule: "@every 1s" }) });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    });
    // Count the timers created from here on that are still alive (created, not yet fired or cleared).
    const live = new Set<number>();
    const hook = createHook({
      init: (id, type) => void (type === "Timeout" && live.add(id)),
      destroy: (id) => void live.delete(id),
    }).enable();
    try {
      await new Promise((r) => setTimeout(r, 2200));
      const rec = (await (await fetch(`${gw.http}/v1/trigger/res-${N - 1}`, { headers: H })).json()) as { trigger: { times_fired: number } };
      assert.ok(rec.trigger.times_fired >= 2, "every trigger fired at least twice");
      // Each firing used to hold a 10 s AbortSignal.timeout: 30,000 `@every 1s` triggers kept 300,000 timers alive
      // (memory, and CPU for 10 s after they were all deleted). Now a firing's timer is cleared when its publish ends.
      assert.ok(live.size < N / 10, `${live.size} timers alive after ${2 * N}+ firings`);
    } finally {
      hook.disable();
    }
    await each(async (i) => {
      const res = await fetch(`${gw.http}/v1/trigger/res-${i}`, { method: "DELETE", headers: H });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    });
  });
});
