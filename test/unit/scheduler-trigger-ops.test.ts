import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { Writable } from "node:stream";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { createMemoryScheduler } from "../../src/runtime/embedded/scheduler.js";
import { createServiceRegistry } from "../../src/config/services.js";
import type { GatewayContext } from "../../src/ops/context.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { createTriggerOps, toJobSpec, toTriggerRecord } from "../../src/ops/trigger.js";
import { createTriggerStats } from "../../src/ops/trigger-stats.js";
import { applyCronJobs, configuredCronJobs } from "../../src/ops/trigger-crons.js";
import { FakeClock } from "../support/fake-clock.js";

/** A context with an embedded scheduler on a fake clock and a pub/sub whose publish can be made to fail. */
function setup() {
  const clock = new FakeClock();
  const jobs = createMemoryScheduler({ clock });
  const published: Array<{ topic: string; event: CloudEvent }> = [];
  let failing = false;
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "debug" },
    new Writable({
      write(chunk: Buffer, _e, cb) {
        logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const metrics = createMetrics({ processMetrics: false });
  const ctx = {
    services: createServiceRegistry([], "pubsub"),
    logger,
    metrics,
    isClosing: () => false,
    options: { maxTriggers: 10_000 },
    runtime: {
      jobs,
      pubsub: {
        async publish(topic: string, event: CloudEvent) {
          if (failing) throw new GatewayError(Code.UNAVAILABLE, "sidecar down");
          published.push({ topic, event });
        },
      },
    },
  } as unknown as GatewayContext;
  const ops = createTriggerOps(ctx);
  jobs.setHandler((name, data) => ops.fire(name, data));
  return { clock, jobs, ops, published, logs, metrics, fail: (v: boolean) => void (failing = v) };
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("trigger operations (fake clock)", () => {
  it("each firing publishes an empty event to the target topic; a failed publish is logged, counted, and the schedule continues", async () => {
    const t = setup();
    await t.ops.schedule({ name: "p", target_topic: "a.topic", schedule: "@every 10s" });
    t.clock.advance(10_000);
    await settle();
    t.fail(true);
    t.clock.advance(20_000);
    await settle();
    t.fail(false);
    t.clock.advance(10_000);
    await settle();
    assert.equal(t.published.length, 2);
    for (const { topic, event } of t.published) {
      assert.equal(topic, "a.topic");
      assert.equal(event.type, "com.runtime.event.sent");
      assert.equal(event.source, "urn:com.platform:api");
      assert.equal(event.spec_version, "1.0");
      assert.equal(event.data, undefined);
    }
    assert.notEqual(t.published[0]!.event.id, t.published[1]!.event.id);
    const errors = t.logs.filter((l) => l["msg"] === "trigger firing could not be published; the schedule continues");
    assert.equal(errors.length, 2);
    assert.equal(errors[0]!["trigger"], "p");
    const text = await t.metrics.registry.metrics();
    assert.match(text, /^platform_trigger_publishes_total 4$/m);
    assert.match(text, /^platform_trigger_publish_failures_total 2$/m);
    assert.equal((await t.ops.get("p")).times_fired, 4);
    t.jobs.close();
  });

  it("records show the fields given and the run state", async () => {
    const t = setup();
    await t.ops.schedule({ name: "r", target_topic: "x", schedule: "*/30 * * * * *", repeats: 3, ttl: "1h" });
    t.clock.advance(31_000);
    assert.deepEqual(await t.ops.get("r"), {
      name: "r",
      target_topic: "x",
      schedule: "*/30 * * * * *",
      due_time: "",
      repeats: 3,
      ttl: "1h",
      created_at: "2030-01-01T00:00:00.000Z",
      next_fire_time: "2030-01-01T00:01:00.000Z",
      last_fire_time: "2030-01-01T00:00:30.000Z",
      expires_at: "2030-01-01T01:00:00.000Z",
      times_fired: 1,
    });
    assert.deepEqual((await t.ops.list()).map((r) => r.name), ["r"]);
    await t.ops.delete("r");
    await assert.rejects(t.ops.get("r"), (e: GatewayError) => e.code === Code.NOT_FOUND);
    t.jobs.close();
  });

  it("jobs that are not triggers are not listed", async () => {
    const t = setup();
    await t.jobs.schedule({ name: "foreign", schedule: "@hourly", data: "{}" });
    assert.deepEqual(await t.ops.list(), []);
    await assert.rejects(t.ops.get("foreign"), (e: GatewayError) => e.code === Code.NOT_FOUND);
    t.jobs.close();
  });
});

describe("records from a runtime that reports only the job spec (Dapr)", () => {
  const now = Date.parse("2030-01-01T00:00:10.500Z");
  it("fills times fired and last firing from what this process saw, and estimates next firing and expiry", () => {
    const stats = createTriggerStats();
    const cron = { name: "c", schedule: "0 */5 * * * *", data: "" };
    assert.deepEqual(stats.complete(cron, now), { ...cron, timesFired: 0, nextFireAt: Date.parse("2030-01-01T00:05:00Z") });
    stats.fired("e", Date.parse("2030-01-01T00:00:07Z"));
    stats.fired("e", Date.parse("2030-01-01T00:00:09Z"));
    const every = { name: "e", schedule: "@every 2s", data: "" };
    assert.deepEqual(stats.complete(every, now), { ...every, timesFired: 2, lastFiredAt: Date.parse("2030-01-01T00:00:09Z"), nextFireAt: Date.parse("2030-01-01T00:00:11Z") });
    // @every with no firing seen: its anchor (creation time) is unknown, so no estimate
    assert.equal(stats.complete({ name: "x", schedule: "@every 2s", data: "" }, now).nextFireAt, undefined);
    const due = { name: "d", schedule: "@hourly", dueTime: "2030-02-01T00:00:00Z", ttl: "P1D", data: "" };
    assert.deepEqual(stats.complete(due, now), { ...due, timesFired: 0, nextFireAt: Date.parse("2030-02-01T00:00:00Z"), expiresAt: Date.parse("2030-02-02T00:00:00Z") });
    const done = { name: "e", schedule: "@every 2s", repeats: 2, data: "" };
    assert.equal(stats.complete(done, now).nextFireAt, undefined);
    stats.retain(new Set(["c"]));
    assert.equal(stats.complete(every, now).timesFired, 0);
  });
  it("never overrides what the runtime reports", () => {
    const stats = createTriggerStats();
    stats.fired("j", now);
    const job = { name: "j", schedule: "@hourly", data: "", createdAt: now - 5000, timesFired: 7, nextFireAt: now + 1 };
    assert.deepEqual(stats.complete(job, now), job);
  });
});

describe("configured crons", () => {
  const registry = (crons: Array<{ name: string; schedule: string; targetTopic: string }>, other = crons.slice(0, 0)) =>
    createServiceRegistry(
      [
        { name: "a", jobs: { crons } },
        { name: "b", jobs: { crons: other } },
      ],
      "pubsub",
    );

  it("reports every bad entry and duplicate name at once", () => {
    assert.throws(
      () =>
        configuredCronJobs(
          registry(
            [
              { name: "ok", schedule: "@hourly", targetTopic: "t" },
              { name: "five", schedule: "* * * * *", targetTopic: "t" },
            ],
            [{ name: "ok", schedule: "@daily", targetTopic: "u" }],
          ),
        ),
      (e: GatewayError) =>
        e.code === Code.INVALID_ARGUMENT &&
        e.message.includes('service "a".jobs.crons[1]: schedule "* * * * *" has 5 fields') &&
        e.message.includes('service "b".jobs.crons[0]: trigger name "ok" is also used by service "a".jobs.crons[0]'),
    );
  });

  it("leaves an identical trigger as is and replaces one that differs", async () => {
    const clock = new FakeClock();
    const jobs = createMemoryScheduler({ clock });
    const logger = pino({ level: "silent" });
    await jobs.schedule(toJobSpec({ name: "same", target_topic: "t", schedule: "@every 10s" }, clock.now()));
    await jobs.schedule(toJobSpec({ name: "changed", target_topic: "t", schedule: "@every 10s" }, clock.now()));
    clock.advance(10_000);
    const specs = configuredCronJobs(
      registry([
        { name: "same", schedule: "@every 10s", targetTopic: "t" },
        { name: "changed", schedule: "@hourly", targetTopic: "t2" },
        { name: "new", schedule: "@daily", targetTopic: "t3" },
      ]),
    );
    assert.deepEqual(await applyCronJobs(jobs, specs, logger), []);
    assert.equal((await jobs.get("same"))!.timesFired, 1);
    assert.equal((await jobs.get("changed"))!.schedule, "@hourly");
    assert.equal((await jobs.get("changed"))!.timesFired, 0);
    assert.equal((await jobs.get("new"))!.schedule, "@daily");
    jobs.close();
    // a runtime that refuses: reported back for retry
    assert.equal((await applyCronJobs(jobs, specs, logger)).length, 3);
  });
});

describe("records with times that cannot be formatted", () => {
  it("a job record whose times are invalid or out of range reads back with empty times instead of failing get and list", () => {
    const data = JSON.stringify({ targetTopic: "t" });
    for (const bad of [NaN, Infinity, 1e20, -1e20, 9e15]) {
      const rec = toTriggerRecord({ name: "b", data, schedule: "@every 1s", createdAt: bad, nextFireAt: bad, lastFiredAt: bad, expiresAt: bad, timesFired: 2 ** 40 });
      assert.ok(rec, String(bad));
      assert.deepEqual([rec.created_at, rec.next_fire_time, rec.last_fire_time, rec.expires_at], ["", "", "", ""], String(bad));
      assert.equal(rec.times_fired, 2_147_483_647, "int32 on the wire: saturated, never wrapped negative");
    }
  });
});
