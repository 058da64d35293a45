import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import type { UpstreamSubscription } from "../../src/runtime/pubsub-port.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";

const KEY = "trigger-key";
const H = { "x-api-key": KEY, "content-type": "application/json" };

const services = [{ name: "billing", jobs: { crons: [{ name: "cfg-tick", schedule: "* * * * * *", targetTopic: "cfg.tick" }] } }];

/** Invalid ScheduleTrigger inputs, the field each error must name, and a pattern of its message. */
const INVALID: Array<{ input: Record<string, unknown>; field: string; pattern: RegExp }> = [
  { input: { name: "has space", target_topic: "t", schedule: "@hourly" }, field: "name", pattern: /must not contain whitespace/ },
  { input: { name: "v1", schedule: "@hourly" }, field: "target_topic", pattern: /is required/ },
  { input: { name: "v2", target_topic: "t" }, field: "schedule", pattern: /or due_time is required/ },
  { input: { name: "v3", target_topic: "t", schedule: "*/5 * * * *" }, field: "schedule", pattern: /has 5 fields; a cron schedule needs exactly 6 fields/ },
  { input: { name: "v4", target_topic: "t", schedule: "@fortnightly" }, field: "schedule", pattern: /not a known descriptor/ },
  { input: { name: "v5", target_topic: "t", schedule: "@every 1x" }, field: "schedule", pattern: /not a Go duration/ },
  { input: { name: "v6", target_topic: "t", schedule: "0 0 0 * FOO *" }, field: "schedule", pattern: /month field "FOO"/ },
  { input: { name: "v7", target_topic: "t", due_time: "next tuesday" }, field: "due_time", pattern: /neither an RFC 3339 timestamp/ },
  { input: { name: "v8", target_topic: "t", schedule: "@hourly", ttl: "-1h" }, field: "ttl", pattern: /negative duration/ },
  { input: { name: "v9", target_topic: "t", due_time: "10s", repeats: 3 }, field: "repeats", pattern: /needs a schedule/ },
  { input: { name: "v10", target_topic: "t", due_time: "10s", ttl: "1h" }, field: "ttl", pattern: /needs a schedule/ },
  { input: { name: "v11", target_topic: "t", schedule: "@hourly", repeats: -1 }, field: "repeats", pattern: /whole number from 0/ },
  { input: { name: "v12", target_topic: "t", schedule: "@daily", ttl: "1m" }, field: "ttl", pattern: /before the first firing/ },
];

for (const fixture of runtimeFixtures) {
  describe(`triggers (${fixture.name} runtime)`, () => {
    let gw: TestGateway;
    let rt: Awaited<ReturnType<typeof fixture.setup>>;
    let client: grpc.Client;
    const subs: UpstreamSubscription[] = [];

    /** Subscribe to `topic` through the runtime; the returned array fills with the events. */
    async function collect(topic: string): Promise<CloudEvent[]> {
      const events: CloudEvent[] = [];
      subs.push(await gw.gateway.context.runtime.pubsub.subscribe(topic, { onEvent: (e) => void events.push(e) }));
      return events;
    }
    const call = (method: string, req: object): Promise<any> => unary(client, method, req, withKey(KEY));
    const rest = (method: string, path: string, body?: unknown): Promise<Response> =>
      fetch(`${gw.http}${path}`, { method, headers: H, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

    before(async () => {
      rt = await fixture.setup();
      gw = await startTestGateway({ ...rt.options, apiKeys: [KEY], services }, rt.overrides);
      client = gw.client("platform.Trigger");
    });
    after(async () => {
      for (const s of subs) await s.close();
      await gw.close();
      await rt.close();
    });

    it("a real subscriber receives each firing as an empty event with the trigger type and source; repeats ends it", async () => {
      const events = await collect("billing.tick");
      const once = await collect("billing.once");
      const res = await call("ScheduleTrigger", { name: "tick", target_topic: "billing.tick", schedule: "@every 1s", repeats: 2 });
      assert.deepEqual(res.status, { success: true, status: "OK", message: "" });
      const rest1 = await rest("POST", "/v1/trigger/once", { target_topic: "billing.once", due_time: "1s" });
      assert.equal(rest1.status, 200);
      assert.deepEqual(await rest1.json(), { status: { success: true, status: "OK", message: "" } });

      await waitFor(() => events.length >= 2 && once.length >= 1, "two firings of tick and one of once", 8000);
      for (const e of [...events, ...once]) {
        assert.equal(e.type, "com.runtime.event.sent");
        assert.equal(e.source, "urn:com.platform:api");
        assert.equal(e.spec_version, "1.0");
        assert.ok(e.id.length > 0);
        assert.equal(e.data ?? undefined, undefined);
        assert.equal(e.binary_data?.length ?? 0, 0);
        assert.equal(e.text_data ?? "", "");
      }
      assert.notEqual(events[0]!.id, events[1]!.id);
      // finished triggers are removed
      const gone = await call("GetTrigger", { name: "tick" });
      assert.equal(gone.status.status, "NOT_FOUND");
      assert.equal((await rest("GET", "/v1/trigger/once")).status, 404);
      assert.equal(events.length, 2);
      assert.equal(once.length, 1);
    });

    it("a gRPC Pubsub.Subscribe stream receives the firings", async () => {
      const pubsub = gw.client("io.cloudevents.v1.Pubsub");
      const stream = (pubsub as unknown as { Subscribe(req: object, md: grpc.Metadata): grpc.ClientReadableStream<any> }).Subscribe(
        { topics: ["grpc.tick"] },
        withKey(KEY),
      );
      const got: any[] = [];
      stream.on("data", (r) => void got.push(r));
      stream.on("error", () => undefined);
      // response headers come once the subscription is live (docs/pubsub.md "Subscribe")
      await new Promise((resolve, reject) => {
        stream.once("metadata", resolve);
        stream.once("error", reject);
      });
      try {
        const res = await call("ScheduleTrigger", { name: "grpc-tick", target_topic: "grpc.tick", schedule: "@every 1s", repeats: 1 });
        assert.equal(res.status.success, true);
        await waitFor(() => got.length >= 1, "a firing on the gRPC stream", 5000);
        assert.equal(got[0].topic, "grpc.tick");
        assert.equal(got[0].cloudevent.type, "com.runtime.event.sent");
        assert.equal(got[0].cloudevent.source, "urn:com.platform:api");
        assert.equal(got[0].cloudevent.spec_version, "1.0");
        assert.equal(got[0].cloudevent.data ?? undefined, undefined);
      } finally {
        stream.cancel();
      }
    });

    it("schedules the services config's crons at start", async () => {
      const events = await collect("cfg.tick");
      await waitFor(() => events.length >= 1, "a firing of the configured cron", 4000);
      assert.equal(events[0]!.type, "com.runtime.event.sent");
      const rec = (await call("GetTrigger", { name: "cfg-tick" })).trigger;
      assert.equal(rec.schedule, "* * * * * *");
      assert.equal(rec.target_topic, "cfg.tick");
      assert.ok(rec.times_fired >= 1);
    });

    it("get and list show every field given plus next fire time, times fired and expiry", async () => {
      const input = { name: "report", target_topic: "reports.daily", schedule: "0 30 6 * * MON-FRI", due_time: "2099-01-01T00:00:00Z", repeats: 5, ttl: "P30D" };
      assert.equal((await call("ScheduleTrigger", input)).status.success, true);
      const { status, trigger } = await call("GetTrigger", { name: "report" });
      assert.equal(status.success, true);
      assert.deepEqual(
        { ...trigger, created_at: typeof trigger.created_at },
        {
          ...input,
          created_at: "string",
          next_fire_time: "2099-01-01T00:00:00.000Z",
          last_fire_time: "",
          expires_at: "2099-01-31T00:00:00.000Z",
          times_fired: 0,
        },
      );
      // Dapr's Scheduler does not report when a job was created; the embedded and redis schedulers do.
      if (fixture.name !== "dapr") assert.ok(Math.abs(Date.parse(trigger.created_at) - Date.now()) < 60_000);
      else assert.equal(trigger.created_at, "");
      const list = await call("ListTriggers", {});
      assert.equal(list.status.success, true);
      assert.deepEqual(list.triggers.find((t: { name: string }) => t.name === "report"), trigger);
      assert.ok(list.triggers.some((t: { name: string }) => t.name === "cfg-tick"));

      const viaRest = await rest("GET", "/v1/trigger/report");
      assert.equal(viaRest.status, 200);
      assert.deepEqual(await viaRest.json(), { status: { success: true, status: "OK", message: "" }, trigger });
      const listRest = (await (await rest("GET", "/v1/trigger")).json()) as { triggers: Array<{ name: string }> };
      assert.deepEqual(listRest.triggers.map((t) => t.name), list.triggers.map((t: { name: string }) => t.name));
    });

    it("an existing name is ALREADY_EXISTS, in-band over gRPC and 409 over REST", async () => {
      const input = { name: "dup", target_topic: "t", schedule: "@hourly" };
      assert.equal((await call("ScheduleTrigger", input)).status.success, true);
      const again = await call("ScheduleTrigger", { ...input, schedule: "@daily" });
      assert.equal(again.status.success, false);
      assert.equal(again.status.status, "ALREADY_EXISTS");
      assert.match(again.status.message, /dup/);
      const r = await rest("POST", "/v1/trigger/dup", { target_topic: "t", schedule: "@daily" });
      assert.equal(r.status, 409);
      assert.equal(((await r.json()) as { code: number }).code, 6);
      assert.equal((await call("GetTrigger", { name: "dup" })).trigger.schedule, "@hourly");
    });

    it("delete stops future firings; deleting again is NOT_FOUND", async () => {
      const events = await collect("del.topic");
      assert.equal((await call("ScheduleTrigger", { name: "del", target_topic: "del.topic", schedule: "@every 1s" })).status.success, true);
      await waitFor(() => events.length >= 1, "a first firing", 4000);
      assert.deepEqual((await call("DeleteTrigger", { name: "del" })).status, { success: true, status: "OK", message: "" });
      const seen = events.length;
      // the next firing would have come within 1 s; the config cron (every second) shows time has passed
      const cfg = await collect("cfg.tick");
      await waitFor(() => cfg.length >= 2, "two more seconds", 5000);
      assert.equal(events.length, seen);
      const again = await call("DeleteTrigger", { name: "del" });
      assert.equal(again.status.status, "NOT_FOUND");
      assert.equal((await rest("DELETE", "/v1/trigger/del")).status, 404);

      assert.equal((await rest("POST", "/v1/trigger/del2", { target_topic: "x", schedule: "@hourly" })).status, 200);
      const d = await rest("DELETE", "/v1/trigger/del2");
      assert.equal(d.status, 200);
      assert.deepEqual(await d.json(), { status: { success: true, status: "OK", message: "" } });
      assert.equal((await call("GetTrigger", { name: "del2" })).status.status, "NOT_FOUND");
    });

    it("every validation error is in-band over gRPC, naming the field, and changes nothing", async () => {
      for (const { input, field, pattern } of INVALID) {
        const res = await call("ScheduleTrigger", input);
        assert.equal(res.status.success, false, JSON.stringify(input));
        assert.equal(res.status.status, "INVALID_ARGUMENT", JSON.stringify(input));
        assert.ok(res.status.message.startsWith(`${field} `), `${res.status.message} names ${field}`);
        assert.match(res.status.message, pattern);
      }
      const empty = await call("ScheduleTrigger", { name: "", target_topic: "t", schedule: "@hourly" });
      assert.equal(empty.status.status, "INVALID_ARGUMENT");
      assert.match(empty.status.message, /^name is required/);
      const names = (await call("ListTriggers", {})).triggers.map((t: { name: string }) => t.name);
      for (const { input } of INVALID) assert.ok(!names.includes(input["name"]));
      const get = await call("GetTrigger", { name: "" });
      assert.equal(get.status.status, "INVALID_ARGUMENT");
      assert.equal(get.trigger, null);
    });

    it("every validation error is a REST error with status 400 and the same message", async () => {
      for (const { input, field, pattern } of INVALID) {
        const { name, ...body } = input;
        const r = await rest("POST", `/v1/trigger/${encodeURIComponent(String(name))}`, body);
        assert.equal(r.status, 400, JSON.stringify(input));
        const err = (await r.json()) as { code: number; message: string; details: unknown[] };
        assert.equal(err.code, 3);
        assert.ok(err.message.startsWith(`${field} `), `${err.message} names ${field}`);
        assert.match(err.message, pattern);
        assert.deepEqual(err.details, []);
      }
      const cases: Array<[unknown, RegExp]> = [
        [{ target_topic: "t", cron: "@hourly" }, /^cron is not a trigger field/],
        [{ target_topic: "t", schedule: "@hourly", repeats: "3" }, /^repeats must be a whole number/],
        [{ target_topic: 5, schedule: "@hourly" }, /^target_topic must be a string/],
        [{ target_topic: "t", targetTopic: "u", schedule: "@hourly" }, /^target_topic is given twice/],
        [{ name: "other", target_topic: "t", schedule: "@hourly" }, /^name in the body \("other"\) differs from the name in the path/],
      ];
      for (const [body, pattern] of cases) {
        const r = await rest("POST", "/v1/trigger/rest-bad", body);
        assert.equal(r.status, 400);
        assert.match(((await r.json()) as { message: string }).message, pattern);
      }
      const notJson = await fetch(`${gw.http}/v1/trigger/rest-bad`, { method: "POST", headers: H, body: "{" });
      assert.equal(notJson.status, 400);
      assert.equal((await rest("GET", "/v1/trigger/rest-bad")).status, 404);
    });

    it("REST accepts camelCase fields", async () => {
      const r = await rest("POST", "/v1/trigger/camel", { targetTopic: "camel.topic", dueTime: "1h" });
      assert.equal(r.status, 200);
      const rec = (await call("GetTrigger", { name: "camel" })).trigger;
      assert.equal(rec.target_topic, "camel.topic");
      assert.equal(rec.due_time, "1h");
      assert.equal(rec.repeats, 0);
    });

    it("counts firings in /metrics", async () => {
      const text = await (await fetch(`${gw.http}/metrics`)).text();
      assert.match(text, /# HELP platform_trigger_publishes_total /);
      assert.match(text, /# HELP platform_trigger_publish_failures_total /);
      const m = /^platform_trigger_publishes_total (\d+)/m.exec(text);
      assert.ok(m && Number(m[1]) >= 3, "firings counted");
    });
  });
}
