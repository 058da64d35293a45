import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { appCallbackWithJobEvent, daprService } from "../../src/runtime/dapr/protos.js";
import { packString, structToObject } from "../../src/runtime/dapr/struct.js";
import { startTestDaprSidecar, type TestDaprSidecar } from "../support/dapr-sidecar/index.js";
import { rawDaprClient, type RawDaprClient } from "../support/dapr-sidecar/raw-client.js";
import { startTestGateway, waitFor } from "../support/gateway.js";
import { freePort } from "../support/ports.js";

/**
 * The test sidecar's behaviours that mirror daprd's awkward parts, each as read in daprd's source (dapr v1.18.3,
 * components-contrib v1.18.4, go-etcd-cron): the Scheduler's failure policy and staging, its validation and error
 * shapes, the Redis consumer group behind streaming subscriptions, undeliverable events, RETRY, trace context.
 */

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface JobCall {
  name: string;
  method: string;
  contentType: string;
  token: unknown;
  at: number;
}

/** A gRPC app daprd calls: OnJobEvent answers the next scripted code (OK once the script is empty). */
async function startJobApp(script: grpc.status[] = [], fallback = grpc.status.OK): Promise<{ address: string; calls: JobCall[]; script: grpc.status[]; close(): void }> {
  const calls: JobCall[] = [];
  const server = new grpc.Server();
  server.addService(daprService("AppCallbackHealthCheck"), { HealthCheck: (_c: unknown, cb: grpc.sendUnaryData<object>) => cb(null, {}) });
  server.addService(appCallbackWithJobEvent(), {
    ListTopicSubscriptions: (_c: unknown, cb: grpc.sendUnaryData<object>) => cb(null, { subscriptions: [] }),
    OnJobEvent: (call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<object>) => {
      calls.push({ name: call.request.name, method: call.request.method, contentType: call.request.content_type, token: call.metadata.get("dapr-api-token")[0], at: Date.now() });
      const code = script.length > 0 ? script.shift()! : fallback;
      cb(code === grpc.status.OK ? null : { code, details: `scripted ${grpc.status[code]}` }, {});
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return { address: `127.0.0.1:${port}`, calls, script, close: () => server.forceShutdown() };
}

async function rejects(p: Promise<unknown>, code: grpc.status, details: string | RegExp): Promise<void> {
  await assert.rejects(p, (e: grpc.ServiceError) => {
    assert.equal(grpc.status[e.code], grpc.status[code], e.details);
    if (typeof details === "string") assert.equal(e.details, details);
    else assert.match(e.details, details);
    return true;
  });
}

describe("test sidecar: the Scheduler's failure policy (go-etcd-cron constant 1 s, 3 retries; NotFound is done)", () => {
  it("a one-shot job whose first delivery fails is delivered again 1 s later, and still exists until then", async () => {
    const app = await startJobApp([grpc.status.UNAVAILABLE]);
    const sc = await startTestDaprSidecar({ appAddress: app.address, appApiToken: "tok" });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "once", due_time: "0s", data: packString("{}") }, overwrite: false });
      await waitFor(() => app.calls.length === 1, "the first delivery");
      // daprd still holds the job while its firing is retried: Get shows it with the Scheduler's default policy.
      const held = await raw.unary("GetJobAlpha1", { name: "once" });
      assert.equal(held.job.due_time, "0s");
      assert.deepEqual(held.job.failure_policy.constant.interval, { seconds: "1", nanos: 0 });
      assert.equal(held.job.failure_policy.constant.max_retries, 3);
      await rejects(raw.unary("ScheduleJobAlpha1", { job: { name: "once", due_time: "1h" }, overwrite: false }), grpc.status.ALREADY_EXISTS, /job already exists: 'app\|\|default\|\|platform-gateway\|\|once'/);
      await waitFor(() => app.calls.length === 2, "the retry", 3000);
      await waitFor(() => sc.jobCallbacks.length === 2, "the sidecar to record the retry's answer");
      const gap = app.calls[1]!.at - app.calls[0]!.at;
      assert.ok(gap >= 900 && gap < 1900, `retried after ${gap} ms`);
      assert.deepEqual(
        sc.jobCallbacks.map((c) => [c.code, c.attempt]),
        [
          ["UNAVAILABLE", 1],
          ["OK", 2],
        ],
      );
      assert.ok(app.calls.every((c) => c.token === "tok" && c.method === "job/once"));
      await pause(1300);
      assert.equal(app.calls.length, 2, "done after the OK");
      await rejects(raw.unary("GetJobAlpha1", { name: "once" }), grpc.status.INTERNAL, "failed to get job due to: rpc error: code = NotFound desc = job not found: once");
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("NotFound from the app counts as done: no retry", async () => {
    const app = await startJobApp([], grpc.status.NOT_FOUND);
    const sc = await startTestDaprSidecar({ appAddress: app.address, jobRetryIntervalMs: 100 });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "gone", due_time: "0s" }, overwrite: false });
      await waitFor(() => sc.jobCallbacks.length === 1, "the delivery");
      await pause(600);
      assert.equal(app.calls.length, 1);
      assert.deepEqual(sc.jobCallbacks.map((c) => c.code), ["NOT_FOUND"]);
      assert.deepEqual((await raw.unary("ListJobsAlpha1", {})).jobs, []);
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("a firing that keeps failing is delivered four times (1 + 3 retries), then given up", async () => {
    const app = await startJobApp([], grpc.status.INTERNAL);
    const sc = await startTestDaprSidecar({ appAddress: app.address, jobRetryIntervalMs: 100 });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "doomed", due_time: "0s" }, overwrite: false });
      await waitFor(() => sc.jobCallbacks.length === 4, "four deliveries");
      await pause(500);
      assert.equal(app.calls.length, 4);
      assert.deepEqual(sc.jobCallbacks.map((c) => [c.code, c.attempt]), [["INTERNAL", 1], ["INTERNAL", 2], ["INTERNAL", 3], ["INTERNAL", 4]]);
      assert.equal(sc.scheduler.pending, 0, "no retry timer left");
      assert.deepEqual((await raw.unary("ListJobsAlpha1", {})).jobs, [], "the one-shot job is gone with its firing");
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("a job's own failure_policy is applied: drop never retries, constant uses its interval and max_retries", async () => {
    const app = await startJobApp([], grpc.status.UNAVAILABLE);
    const sc = await startTestDaprSidecar({ appAddress: app.address });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "dropped", due_time: "0s", failure_policy: { drop: {} } }, overwrite: false });
      await raw.unary("ScheduleJobAlpha1", {
        job: { name: "twice", due_time: "0s", failure_policy: { constant: { interval: { seconds: "0", nanos: 200_000_000 }, max_retries: 1 } } },
        overwrite: false,
      });
      await waitFor(() => app.calls.filter((c) => c.name === "twice").length === 2, "two deliveries of 'twice'", 3000);
      await pause(600);
      assert.equal(app.calls.filter((c) => c.name === "dropped").length, 1);
      const twice = app.calls.filter((c) => c.name === "twice");
      assert.equal(twice.length, 2);
      assert.ok(twice[1]!.at - twice[0]!.at >= 150, `${twice[1]!.at - twice[0]!.at} ms apart`);
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("deleting a job ends the retries of its firing", async () => {
    const app = await startJobApp([], grpc.status.UNAVAILABLE);
    const sc = await startTestDaprSidecar({ appAddress: app.address, jobRetryIntervalMs: 300 });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "abandon", due_time: "0s" }, overwrite: false });
      await waitFor(() => app.calls.length === 1, "the first delivery");
      await raw.unary("DeleteJobAlpha1", { name: "abandon" });
      await pause(800);
      assert.equal(app.calls.length, 1);
      assert.equal(sc.scheduler.pending, 0);
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("a firing while daprd is down is staged, not failed: it is delivered, as a first attempt, once daprd serves again", async () => {
    const app = await startJobApp();
    const sc = await startTestDaprSidecar({ appAddress: app.address, jobRetryIntervalMs: 100 });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "staged", due_time: "300ms" }, overwrite: false });
      await sc.stop();
      await pause(900);
      assert.equal(app.calls.length, 0, "nothing while daprd is down");
      assert.equal(sc.scheduler.pending, 1);
      await sc.restart();
      await waitFor(() => sc.jobCallbacks.length === 1, "the staged firing");
      assert.equal(app.calls.length, 1);
      assert.deepEqual(sc.jobCallbacks.map((c) => [c.code, c.attempt]), [["OK", 1]]);
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("JobEventRequest.content_type carries the data's type URL", async () => {
    const app = await startJobApp();
    const sc = await startTestDaprSidecar({ appAddress: app.address });
    const raw = rawDaprClient(sc.port);
    try {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "typed", due_time: "0s", data: packString("x") }, overwrite: false });
      await raw.unary("ScheduleJobAlpha1", { job: { name: "untyped", due_time: "0s" }, overwrite: false });
      await waitFor(() => app.calls.length === 2, "both deliveries");
      assert.equal(app.calls.find((c) => c.name === "typed")!.contentType, "type.googleapis.com/google.protobuf.StringValue");
      assert.equal(app.calls.find((c) => c.name === "untyped")!.contentType, "");
    } finally {
      raw.close();
      await sc.close();
      app.close();
    }
  });

  it("gateway: a trigger that fires before the gateway listens is delivered by the Scheduler's retry", async () => {
    const grpcPort = await freePort();
    const sc = await startTestDaprSidecar({ appAddress: `127.0.0.1:${grpcPort}` });
    const raw = rawDaprClient(sc.port);
    const sub = await raw.subscribe("boot");
    let gw: Awaited<ReturnType<typeof startTestGateway>> | undefined;
    try {
      // Constant 1 s like the default policy, with more than its 3 retries so a slow gateway start on a busy machine
      // does not exhaust them (the default's count is checked above).
      const failure_policy = { constant: { interval: { seconds: "1", nanos: 0 }, max_retries: 10 } };
      await raw.unary("ScheduleJobAlpha1", { job: { name: "boot-trigger", due_time: "0s", data: packString('{"targetTopic":"boot"}'), failure_policy }, overwrite: false });
      await waitFor(() => sc.jobCallbacks.length === 1, "the first delivery, to a closed port");
      assert.equal(sc.jobCallbacks[0]!.code, "UNAVAILABLE");
      gw = await startTestGateway({ sidecar: "dapr", daprHost: "127.0.0.1", daprGrpcPort: sc.port, grpcPort });
      await waitFor(() => sub.events.length === 1, "the trigger event, published by the gateway on a retry", 12_000);
      // The gateway answers the callback after publishing: the sidecar records the OK just after the event.
      await waitFor(() => sc.jobCallbacks.some((c) => c.code === "OK"), "the OK job callback");
      const ok = sc.jobCallbacks.find((c) => c.code === "OK");
      assert.ok(ok && ok.attempt > 1, JSON.stringify(sc.jobCallbacks));
      assert.equal(sub.events[0].type, "com.runtime.event.sent");
    } finally {
      sub.cancel();
      raw.close();
      await gw?.close();
      await sc.close();
    }
  });
});

describe("test sidecar: job specs are checked where daprd checks them", () => {
  let sc: TestDaprSidecar;
  let raw: RawDaprClient;
  before(async () => {
    sc = await startTestDaprSidecar();
    raw = rawDaprClient(sc.port);
  });
  after(async () => {
    raw.close();
    await sc.close();
  });

  it("the jobs API's own checks are INVALID_ARGUMENT '<field> is empty'", async () => {
    await rejects(raw.unary("ScheduleJobAlpha1", { overwrite: false }), grpc.status.INVALID_ARGUMENT, "Job is empty");
    await rejects(raw.unary("ScheduleJobAlpha1", { job: { name: "", due_time: "1s" }, overwrite: false }), grpc.status.INVALID_ARGUMENT, "Name is empty");
    await rejects(raw.unary("ScheduleJobAlpha1", { job: { name: "n" }, overwrite: false }), grpc.status.INVALID_ARGUMENT, "Schedule is empty");
    await rejects(raw.unary("GetJobAlpha1", { name: "" }), grpc.status.INVALID_ARGUMENT, "Name is empty");
    await rejects(raw.unary("DeleteJobAlpha1", { name: "" }), grpc.status.INVALID_ARGUMENT, "Name is empty");
  });

  it("the Scheduler's refusals are INTERNAL 'failed to schedule job due to: rpc error: code = Unknown desc = job failed validation: ...'", async () => {
    const inTwoHours = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d{3}Z$/, "Z");
    const cases: Array<[object, string]> = [
      [{ schedule: "* * * * *" }, "expected exactly 6 fields, found 5: [* * * * *]"],
      [{ schedule: "0 0 25 * * *" }, "end of range (25) above maximum (23): 25"],
      [{ schedule: "0 0 0 * * 7" }, "end of range (7) above maximum (6): 7"],
      [{ schedule: "x 0 0 * * *" }, 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'],
      [{ schedule: "@fortnightly" }, "unrecognized descriptor: @fortnightly"],
      [{ schedule: "@every 1d" }, 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'],
      [{ schedule: "TZ=Mars/Olympus 0 0 0 * * *" }, "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"],
      [{ due_time: "tomorrow" }, "due time format not recognized"],
      [{ due_time: "R2/PT1S" }, "repeats not supported for due time"],
      [{ due_time: "1s", repeats: 2 }, "job must have a schedule to repeat"],
      [{ schedule: "@daily", repeats: 0 }, "defined repeats must be greater than 0"],
      [{ due_time: "1s", ttl: "1h" }, "job must have a schedule to have a ttl"],
      [{ schedule: "@daily", ttl: "soon" }, "ttl format not recognized"],
      [{ schedule: "@daily", due_time: "3h", ttl: inTwoHours }, "ttl must be greater than due time"],
    ];
    for (const [spec, why] of cases) {
      await rejects(
        raw.unary("ScheduleJobAlpha1", { job: { name: "bad", ...spec }, overwrite: false }),
        grpc.status.INTERNAL,
        `failed to schedule job due to: rpc error: code = Unknown desc = job failed validation: ${why}`,
      );
    }
    // And what it takes: a 6-field cron with names and steps, a descriptor, ISO-8601 and Go durations, RFC 3339.
    for (const spec of [
      { schedule: "*/5 0-30/10 0-23 * jan-dec sun-sat", ttl: "PT1H" },
      { schedule: "TZ=Europe/Berlin @daily", repeats: 3 },
      { due_time: "PT90S" },
      { due_time: "1h30m" },
      { due_time: inTwoHours },
    ]) {
      await raw.unary("ScheduleJobAlpha1", { job: { name: "good", ...spec }, overwrite: true });
    }
    await raw.unary("DeleteJobAlpha1", { name: "good" });
  });

  it("an existing name is ALREADY_EXISTS; Get and Delete refuse invalid names INTERNAL; Delete of a missing job is OK", async () => {
    await raw.unary("ScheduleJobAlpha1", { job: { name: "dup", due_time: "1h" }, overwrite: false });
    await rejects(
      raw.unary("ScheduleJobAlpha1", { job: { name: "dup", due_time: "2h" }, overwrite: false }),
      grpc.status.ALREADY_EXISTS,
      "failed to schedule job due to: rpc error: code = AlreadyExists desc = job already exists: 'app||default||platform-gateway||dup'",
    );
    await raw.unary("ScheduleJobAlpha1", { job: { name: "dup", due_time: "2h" }, overwrite: true });
    assert.equal((await raw.unary("GetJobAlpha1", { name: "dup" })).job.due_time, "2h");
    await raw.unary("DeleteJobAlpha1", { name: "dup" });
    await raw.unary("DeleteJobAlpha1", { name: "dup" });
    await rejects(raw.unary("GetJobAlpha1", { name: "Dup#" }), grpc.status.INTERNAL, /^failed to get job due to: rpc error: code = Unknown desc = job name is invalid/);
    await rejects(raw.unary("DeleteJobAlpha1", { name: "Dup#" }), grpc.status.INTERNAL, /^failed to delete job due to: rpc error: code = Unknown desc = job name is invalid/);
  });
});

/** Publish a CloudEvent JSON through the raw client. */
function publishCe(raw: RawDaprClient, topic: string, ce: Record<string, unknown>): Promise<unknown> {
  return raw.unary("PublishEvent", { pubsub_name: "pubsub", topic, data: Buffer.from(JSON.stringify({ specversion: "1.0", source: "urn:x", type: "t", ...ce })), data_content_type: "application/cloudevents+json" });
}

describe("test sidecar: streaming subscriptions over contrib pubsub/redis (the app's consumer group)", () => {
  let sc: TestDaprSidecar;
  let raw: RawDaprClient;
  before(async () => {
    sc = await startTestDaprSidecar({ pubsubNames: ["pubsub"], pubsubComponent: { processingTimeoutMs: 300, redeliverIntervalMs: 100, maxLenApprox: 3 } });
    raw = rawDaprClient(sc.port);
  });
  after(async () => {
    raw.close();
    await sc.close();
  });

  it("events published while the app has no stream on the topic are kept and arrive, in order, on its next stream", async () => {
    const first = await raw.subscribe("kept");
    await publishCe(raw, "kept", { id: "k1" });
    await waitFor(() => first.events.length === 1, "k1");
    await waitFor(() => sc.broker.backlog("kept") === 0, "k1 acked");
    first.cancel();
    await waitFor(() => sc.broker.count("kept") === 0, "the stream to close");
    await publishCe(raw, "kept", { id: "k2" });
    await publishCe(raw, "kept", { id: "k3" });
    const second = await raw.subscribe("kept");
    await waitFor(() => second.events.length === 2, "the events published meanwhile");
    assert.deepEqual(second.events.map((e) => e.id), ["k2", "k3"]);
    second.cancel();
  });

  it("the first stream of a topic starts its group at the start of the stream: it gets what the stream still holds (maxLenApprox)", async () => {
    for (const id of ["o1", "o2", "o3", "o4"]) await publishCe(raw, "old", { id });
    const sub = await raw.subscribe("old");
    await waitFor(() => sub.events.length === 3, "the three entries the stream holds");
    assert.deepEqual(sub.events.map((e) => e.id), ["o2", "o3", "o4"]);
    sub.cancel();
  });

  it("two streams of one app on one topic compete: each event reaches one of them", async () => {
    const [a, b] = [await raw.subscribe("shared-topic"), await raw.subscribe("shared-topic")];
    for (let i = 0; i < 10; i++) await publishCe(raw, "shared-topic", { id: `s${i}` });
    await waitFor(() => a.events.length + b.events.length === 10, "ten events between them");
    await pause(200);
    assert.deepEqual([...a.events, ...b.events].map((e) => e.id).sort(), [...Array(10).keys()].map((i) => `s${i}`).sort());
    assert.ok(a.events.length > 0 && b.events.length > 0, `${a.events.length} / ${b.events.length}`);
    a.cancel();
    b.cancel();
  });

  it("a RETRY answer is acked, not redelivered (contrib v1.17+, no resiliency policy): it is listed as discarded", async () => {
    const sub = await raw.subscribe("retried", { autoAck: false });
    await publishCe(raw, "retried", { id: "r1" });
    await waitFor(() => sub.events.length === 1, "r1");
    sub.ack("r1", "RETRY");
    await waitFor(() => sc.broker.backlog("retried") === 0, "acked");
    await pause(500); // beyond processingTimeout + redeliverInterval
    assert.equal(sub.events.length, 1);
    assert.deepEqual(sc.broker.discarded.filter((d) => d.topic === "retried"), [{ topic: "retried", id: "r1", reason: "RETRY" }]);
    sub.cancel();
  });

  it("an event daprd cannot build (text/* or xml data that is not a string, bad data_base64) never reaches the app and does not hold up the next", async () => {
    const sub = await raw.subscribe("undeliverable");
    await publishCe(raw, "undeliverable", { id: "u1", datacontenttype: "text/plain", data: { a: 1 } });
    await publishCe(raw, "undeliverable", { id: "u2", datacontenttype: "text/json", data: { a: 1 } });
    await publishCe(raw, "undeliverable", { id: "u3", datacontenttype: "application/xml", data: 5 });
    await publishCe(raw, "undeliverable", { id: "u4", datacontenttype: "application/octet-stream", data_base64: 7 });
    await publishCe(raw, "undeliverable", { id: "u5", datacontenttype: "text/plain", data: "fine" });
    await waitFor(() => sub.events.length === 1, "the deliverable event");
    assert.equal(sub.events[0].id, "u5");
    await waitFor(() => sc.broker.backlog("undeliverable") === 0, "every entry acked");
    assert.deepEqual(
      sc.broker.discarded.filter((d) => d.topic === "undeliverable").map((d) => d.id),
      ["u1", "u2", "u3", "u4"],
    );
    sub.cancel();
  });
});

describe("test sidecar: pubsub.in-memory", () => {
  it("every stream of a topic gets every event; nothing is kept for a stream opened later", async () => {
    const sc = await startTestDaprSidecar({ pubsubNames: ["pubsub"], pubsubKind: "in-memory" });
    const raw = rawDaprClient(sc.port);
    try {
      const [a, b] = [await raw.subscribe("fan"), await raw.subscribe("fan")];
      await publishCe(raw, "fan", { id: "f1" });
      await waitFor(() => a.events.length === 1 && b.events.length === 1, "f1 on both streams");
      a.cancel();
      b.cancel();
      await waitFor(() => sc.broker.count("fan") === 0, "both closed");
      await publishCe(raw, "fan", { id: "f2" });
      const late = await raw.subscribe("fan");
      await pause(200);
      assert.equal(late.events.length, 0);
      late.cancel();
    } finally {
      raw.close();
      await sc.close();
    }
  });
});

describe("test sidecar: the trace context daprd writes into published events", () => {
  const W3C = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
  const CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

  async function publishedExtensions(sc: TestDaprSidecar, topic: string, md: Record<string, string>): Promise<Record<string, unknown>> {
    const raw = rawDaprClient(sc.port);
    try {
      const sub = await raw.subscribe(topic);
      const meta = new grpc.Metadata();
      for (const [k, v] of Object.entries(md)) meta.set(k, v);
      await new Promise<void>((resolve, reject) =>
        (raw.client as any).PublishEvent({ pubsub_name: "pubsub", topic, data: Buffer.from('{"specversion":"1.0","id":"t","source":"s","type":"t"}'), data_content_type: "application/cloudevents+json" }, meta, (e: unknown) => (e ? reject(e) : resolve())),
      );
      await waitFor(() => sub.events.length === 1, "the event");
      sub.cancel();
      return structToObject(sub.events[0].extensions);
    } finally {
      raw.close();
    }
  }

  it("tracing off (samplingRate '0'): traceparent, traceid and tracestate are empty strings, whatever the caller sent", async () => {
    const sc = await startTestDaprSidecar({ tracing: { samplingRate: "0" } });
    try {
      const ext = await publishedExtensions(sc, "untraced", { traceparent: CALLER, tracestate: "a=b" });
      assert.equal(ext["traceparent"], "");
      assert.equal(ext["traceid"], "");
      assert.equal(ext["tracestate"], "");
    } finally {
      await sc.close();
    }
  });

  it("tracing on (no configuration): a child of the caller's context with its flags and tracestate, else a new unsampled trace", async () => {
    const sc = await startTestDaprSidecar();
    try {
      const child = await publishedExtensions(sc, "traced", { traceparent: CALLER, tracestate: "a=b" });
      const m = W3C.exec(String(child["traceparent"]));
      assert.ok(m, String(child["traceparent"]));
      assert.equal(m[1], "4bf92f3577b34da6a3ce929d0e0e4736");
      assert.notEqual(m[2], "00f067aa0ba902b7");
      assert.equal(m[3], "01");
      assert.equal(child["traceid"], child["traceparent"]);
      assert.equal(child["tracestate"], "a=b");
      const fresh = await publishedExtensions(sc, "traced-new", {});
      const f = W3C.exec(String(fresh["traceparent"]));
      assert.ok(f, String(fresh["traceparent"]));
      assert.notEqual(f[1], "4bf92f3577b34da6a3ce929d0e0e4736");
      assert.equal(f[3], "00", "sampled 1 in 10,000 by default");
    } finally {
      await sc.close();
    }
  });
});

describe("gateway on the dapr runtime: what the Redis consumer group means for its subscribers", () => {
  it("events published while the gateway's upstream stream is down are not missed: they arrive after it resubscribes", async () => {
    // Two daprd on one Redis: the gateway's, and another app instance's that publishes while the gateway's is down.
    const { createSharedDaprBackend } = await import("../support/dapr-sidecar/shared.js");
    const { event, publish, subscribe } = await import("./pubsub-support.js");
    const { withKey } = await import("../support/gateway.js");
    const backend = createSharedDaprBackend();
    const grpcPort = await freePort();
    const mine = await startTestDaprSidecar({ shared: backend, appAddress: `127.0.0.1:${grpcPort}`, pubsubComponent: { concurrency: 1 } });
    const other = await startTestDaprSidecar({ shared: backend, pubsubComponent: { concurrency: 1 } });
    const otherRaw = rawDaprClient(other.port);
    const gw = await startTestGateway({ sidecar: "dapr", daprGrpcPort: mine.port, grpcPort, apiKeys: ["k"] });
    const ps = gw.client("io.cloudevents.v1.Pubsub");
    const s = subscribe(ps, ["late"], withKey("k"));
    try {
      await s.ready();
      assert.equal((await publish(ps, "late", event(1), withKey("k"))).status.success, true);
      await s.count(1);
      await waitFor(() => mine.broker.backlog("late") === 0, "the ack of the first event");
      await mine.stop();
      for (const n of [2, 3]) await publishCe(otherRaw, "late", { id: `e-${n}`, source: "urn:test:pubsub", type: "com.test.event", datacontenttype: "text/plain", data: String(n) });
      await mine.restart();
      await s.count(3, 10_000);
      assert.deepEqual(s.got.map((g) => g.cloudevent.id), ["e-1", "e-2", "e-3"]);
      assert.equal(s.status, undefined, "the subscriber stream stayed open");
    } finally {
      s.call.cancel();
      otherRaw.close();
      await gw.close();
      await mine.close();
      await other.close();
      backend.close();
    }
  });

  it("the first subscriber of a topic the gateway does not follow yet also gets what the app's group has not read (published before it subscribed)", async () => {
    const { event, publish, subscribe } = await import("./pubsub-support.js");
    const { withKey } = await import("../support/gateway.js");
    const grpcPort = await freePort();
    const sc = await startTestDaprSidecar({ appAddress: `127.0.0.1:${grpcPort}` });
    const gw = await startTestGateway({ sidecar: "dapr", daprGrpcPort: sc.port, grpcPort, apiKeys: ["k"], subscriptionLingerMs: 50 });
    const ps = gw.client("io.cloudevents.v1.Pubsub");
    try {
      for (const n of [1, 2]) assert.equal((await publish(ps, "before", event(n), withKey("k"))).status.success, true);
      const s = subscribe(ps, ["before"], withKey("k"));
      await s.ready();
      await s.count(2);
      assert.deepEqual(s.got.map((g) => g.cloudevent.id), ["e-1", "e-2"], "a new group starts at the start of the stream");
      s.call.cancel();
      await waitFor(() => sc.broker.count("before") === 0, "the topic released after the linger");
      await publish(ps, "before", event(3), withKey("k"));
      const again = subscribe(ps, ["before"], withKey("k"));
      await again.ready();
      await again.count(1);
      await pause(200);
      assert.deepEqual(again.got.map((g) => g.cloudevent.id), ["e-3"], "an existing group resumes where it stopped");
      again.call.cancel();
    } finally {
      await gw.close();
      await sc.close();
    }
  });
});
