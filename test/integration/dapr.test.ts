import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { appCallbackWithJobEvent, daprService } from "../../src/runtime/dapr/protos.js";
import { packString } from "../../src/runtime/dapr/struct.js";
import { startTestDaprSidecar, type TestDaprSidecar } from "../support/dapr-sidecar/index.js";
import { rawDaprClient, type RawDaprClient } from "../support/dapr-sidecar/raw-client.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { freePort } from "../support/ports.js";
import { validateGatewayOptions } from "../../src/config/options.js";
import { validateServicesConfig } from "../../src/config/services.js";
import { event, publish, subscribe, type Sub } from "./pubsub-support.js";

const KEY = "gw-key";
const DAPR_TOKEN = "dapr-secret";
const APP_TOKEN = "app-secret";
const services = [{ name: "orders", state: { storeName: "orders-store", keys: [] }, pubsub: { pubsubName: "pubsub" } }];

function appClient(address: string, def: grpc.ServiceDefinition, name: string): grpc.Client {
  const Ctor = grpc.makeGenericClientConstructor(def, name);
  return new Ctor(address, grpc.credentials.createInsecure());
}

function withToken(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("dapr-api-token", token);
  return md;
}

async function health(gw: TestGateway): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.http}/health`);
  return { status: res.status, body: await res.json() };
}

describe("gateway on the dapr runtime (test sidecar)", () => {
  let sidecar: TestDaprSidecar;
  let gw: TestGateway;
  let raw: RawDaprClient;
  const clients: grpc.Client[] = [];
  before(async () => {
    const grpcPort = await freePort();
    sidecar = await startTestDaprSidecar({
      appAddress: `127.0.0.1:${grpcPort}`,
      apiToken: DAPR_TOKEN,
      appApiToken: APP_TOKEN,
      pubsubNames: ["pubsub"],
      // dapr.io/enable-app-health-check: probes carry no token; jobs are delivered only once the app is healthy.
      appHealthCheck: { intervalMs: 50 },
    });
    gw = await startTestGateway({ sidecar: "dapr", daprGrpcPort: sidecar.port, grpcPort, daprApiToken: DAPR_TOKEN, appApiToken: APP_TOKEN, apiKeys: [KEY], services });
    raw = rawDaprClient(sidecar.port);
  });
  after(async () => {
    for (const c of clients) c.close();
    raw.close();
    await gw.close();
    await sidecar.close();
  });

  it("/health reflects the sidecar: Healthy, Unhealthy (503) while it is down, Healthy again after", async () => {
    let h = await health(gw);
    assert.equal(h.status, 200);
    assert.equal(h.body.entries.sidecar.status, "Healthy");
    assert.match(h.body.entries.sidecar.description, new RegExp(`dapr sidecar at 127.0.0.1:${sidecar.port}`));
    await sidecar.stop();
    try {
      h = await health(gw);
      assert.equal(h.status, 503);
      assert.equal(h.body.status, "Unhealthy");
      assert.equal(h.body.entries.sidecar.status, "Unhealthy");
      assert.match(h.body.entries.sidecar.description, /unreachable/);
    } finally {
      await sidecar.restart();
    }
    h = await health(gw);
    assert.equal(h.body.entries.sidecar.status, "Healthy");
  });

  it("state works through the sidecar with the dapr-api-token", async () => {
    const state = gw.client("platform.State");
    const saved = await unary(state, "SaveState", { service: "orders", key: "o1", value: '{"n":1}' }, withKey(KEY));
    assert.equal(saved.status.success, true);
    const got = await unary(state, "GetState", { service: "orders", key: "o1" }, withKey(KEY));
    assert.equal(got.value, '{"n":1}');
    assert.ok(got.etag);
  });

  it("a gateway with the wrong dapr-api-token is refused by the sidecar and reports it in /health", async () => {
    const wrong = await startTestGateway({ sidecar: "dapr", daprGrpcPort: sidecar.port, daprApiToken: "nope", apiKeys: [KEY], services });
    try {
      const h = await health(wrong);
      assert.equal(h.body.entries.sidecar.status, "Unhealthy");
      assert.match(h.body.entries.sidecar.description, /token/);
      await assert.rejects(unary(wrong.client("platform.State"), "GetState", { service: "orders", key: "o1" }, withKey(KEY)), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.UNAUTHENTICATED);
        return true;
      });
    } finally {
      await wrong.close();
    }
  });

  it("job callbacks require the APP_API_TOKEN; HealthCheck and ListTopicSubscriptions answer without one (daprd sends none)", async () => {
    const cb = appClient(gw.grpcAddress, appCallbackWithJobEvent(), "AppCallback");
    const alpha = appClient(gw.grpcAddress, daprService("AppCallbackAlpha"), "AppCallbackAlpha");
    const hc = appClient(gw.grpcAddress, daprService("AppCallbackHealthCheck"), "AppCallbackHealthCheck");
    clients.push(cb, alpha, hc);
    const job = { name: "ghost", data: packString("{}"), method: "job/ghost", content_type: "" };
    for (const [client, method, req] of [
      [cb, "OnJobEvent", job],
      [alpha, "OnJobEventAlpha1", job],
    ] as const) {
      await assert.rejects(unary(client, method, req), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED, `${method} without token`);
      await assert.rejects(unary(client, method, req, withToken("wrong")), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED, `${method} with a wrong token`);
    }
    assert.deepEqual(await unary(cb, "ListTopicSubscriptions", {}), { subscriptions: [] });
    assert.deepEqual(await unary(hc, "HealthCheck", {}), {});
    assert.deepEqual(await unary(cb, "ListTopicSubscriptions", {}, withToken(APP_TOKEN)), { subscriptions: [] });
    await assert.rejects(unary(cb, "OnInvoke", { id: "x", message: null }, withToken(APP_TOKEN)), (e: grpc.ServiceError) => e.code === grpc.status.UNIMPLEMENTED);
  });

  it("with app health checks on, the sidecar marks the gateway healthy and lists its (empty) subscriptions without a token", async () => {
    await waitFor(() => sidecar.appHealthy, "the sidecar to mark the app healthy", 5000);
    assert.deepEqual(sidecar.subscriptionListings[0], { ok: true });
  });

  it("a fired job reaches the gateway through OnJobEvent and publishes the trigger event", async () => {
    const sub = await raw.subscribe("tick", { token: DAPR_TOKEN });
    try {
      const trigger = gw.client("platform.Trigger");
      const res = await unary(trigger, "ScheduleTrigger", { name: "tick-job", target_topic: "tick", schedule: "@every 1s", repeats: 1 }, withKey(KEY));
      assert.equal(res.status.success, true, res.status.message);
      await waitFor(() => sub.events.length >= 1, "the trigger event at the sidecar", 5000);
      const ev = sub.events[0];
      assert.equal(ev.type, "com.runtime.event.sent");
      assert.equal(ev.source, "urn:com.platform:api");
      assert.equal(Buffer.from(ev.data).length, 0);
      // The gateway answers the callback after publishing, so the sidecar records the OK just after the event.
      await waitFor(() => sidecar.jobCallbacks.some((c) => c.name === "tick-job" && c.code === "OK" && c.via === "OnJobEvent"), "the OK job callback");
    } finally {
      sub.cancel();
    }
  });

  it("a publish while the sidecar is down is an in-band failure; the next one after it returns succeeds", async () => {
    const ps = gw.client("io.cloudevents.v1.Pubsub");
    await sidecar.stop();
    try {
      const down = await publish(ps, "down.topic", event(1), withKey(KEY));
      assert.equal(down.status.success, false);
      assert.match(down.status.message, /dapr sidecar at .* is unreachable/);
    } finally {
      await sidecar.restart();
    }
    const up = await publish(ps, "down.topic", event(2), withKey(KEY));
    assert.equal(up.status.success, true, up.status.message);
  });

  it("100 subscribers stay connected through a sidecar restart and every later event reaches all of them", async () => {
    const topic = "fleet";
    // Several clients (HTTP/2 connections), like several callers.
    const pubsubClients = Array.from({ length: 4 }, () => gw.client("io.cloudevents.v1.Pubsub"));
    const subs: Sub[] = [];
    for (let i = 0; i < 100; i++) subs.push(subscribe(pubsubClients[i % 4]!, [topic], withKey(KEY)));
    try {
      await Promise.all(subs.map((s) => s.ready()));
      await waitFor(() => sidecar.broker.count(topic) === 1, "one upstream stream for the topic");
      const ps = pubsubClients[0]!;
      assert.equal((await publish(ps, topic, event("before"), withKey(KEY))).status.success, true);
      await Promise.all(subs.map((s) => s.count(1)));
      await waitFor(() => sidecar.broker.unacked(topic) === 0, "the ack of the first event");

      await sidecar.stop();
      await sidecar.restart();
      await waitFor(() => sidecar.broker.count(topic) === 1, "the gateway to resubscribe", 10_000);
      for (const n of [1, 2, 3]) assert.equal((await publish(ps, topic, event(`after-${n}`), withKey(KEY))).status.success, true);
      await Promise.all(subs.map((s) => s.count(4, 10_000)));
      for (const s of subs) {
        assert.deepEqual(s.got.map((g) => g.cloudevent.id), ["e-before", "e-after-1", "e-after-2", "e-after-3"]);
        assert.equal(s.status, undefined, "the subscriber stream stayed open");
      }
      assert.equal(sidecar.broker.count(topic), 1);
    } finally {
      for (const s of subs) s.call.cancel();
    }
    await waitFor(() => sidecar.broker.count(topic) === 0, "the upstream stream to be released", 10_000);
  });

  it("without a Scheduler (daprd: scheduler clients are disabled) ScheduleTrigger fails in-band saying what to configure", async () => {
    const grpcPort = await freePort();
    const noSched = await startTestDaprSidecar({ appAddress: `127.0.0.1:${grpcPort}`, scheduler: false });
    const g = await startTestGateway({ sidecar: "dapr", daprGrpcPort: noSched.port, grpcPort, apiKeys: [KEY], services });
    try {
      const res = await unary(g.client("platform.Trigger"), "ScheduleTrigger", { name: "no-sched", target_topic: "t", due_time: "1h" }, withKey(KEY));
      assert.equal(res.status.success, false);
      assert.match(res.status.message, /triggers need Dapr's Scheduler.*scheduler clients are disabled/);
    } finally {
      await g.close();
      await noSched.close();
    }
  });
});

describe("dapr runtime without APP_API_TOKEN", () => {
  it("refuses to start on a non-loopback host (the job callbacks would be open), starts on loopback", async () => {
    const saved = process.env["APP_API_TOKEN"];
    delete process.env["APP_API_TOKEN"];
    try {
      await assert.rejects(startTestGateway({ sidecar: "dapr", host: "0.0.0.0", apiKeys: [KEY], services }), (e: Error) => {
        assert.match(e.message, /refusing to serve on non-loopback host 0\.0\.0\.0 with --sidecar dapr and no APP_API_TOKEN/);
        return true;
      });
      // The same host with the token, or the embedded runtime without one, is fine (validation only, no bind).
      assert.equal(validateGatewayOptions({ sidecar: "dapr", host: "0.0.0.0", apiKeys: [KEY], appApiToken: APP_TOKEN, allowPlaintext: true }).host, "0.0.0.0");
      assert.equal(validateGatewayOptions({ sidecar: "embedded", host: "0.0.0.0", apiKeys: [KEY], allowPlaintext: true }).host, "0.0.0.0");
      const local = await startTestGateway({ sidecar: "dapr", daprGrpcPort: await freePort(), apiKeys: [KEY], services });
      await local.close();
    } finally {
      if (saved !== undefined) process.env["APP_API_TOKEN"] = saved;
    }
  });
});

describe("services config state.queryIndexName", () => {
  it("is kept per service; one store cannot have two indexes; it must be a non-empty string", () => {
    const reg = validateServicesConfig({ services: [{ name: "a", state: { storeName: "s", keys: [], queryIndexName: "idx" } }, { name: "b", state: { storeName: "s", keys: [], queryIndexName: "idx" } }] });
    assert.equal(reg.get("a")?.state?.queryIndexName, "idx");
    assert.throws(
      () => validateServicesConfig({ services: [{ name: "a", state: { storeName: "s", keys: [], queryIndexName: "one" } }, { name: "b", state: { storeName: "s", keys: [], queryIndexName: "two" } }] }),
      /service "b".state.queryIndexName: store s already uses query index "one"/,
    );
    assert.throws(() => validateServicesConfig({ services: [{ name: "a", state: { storeName: "s", keys: [], queryIndexName: 5 } }] }), /a.*state.*queryIndexName/);
  });
});
