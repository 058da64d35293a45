import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { unary, waitFor, withKey } from "../support/gateway.js";
import { httpRequest } from "../support/http-request.js";
import { runtimeFixtures } from "../support/runtimes.js";
import { EMBEDDED, useTracedGatewayOn } from "../support/traced-gateway.js";
import { connectWs } from "../support/web.js";
import { SpanKind, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";

const KEY = "trace-key";
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

async function spansWhere(receiver: OtlpReceiver, pred: (s: ReceivedSpan) => boolean, count: number, what: string): Promise<ReceivedSpan[]> {
  await waitFor(() => receiver.spans.filter(pred).length >= count, what, 10_000);
  return receiver.spans.filter(pred);
}

function named(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const s = spans.find((x) => x.name === name);
  assert.ok(s, `a span named ${name} (got ${spans.map((x) => x.name).join(", ")})`);
  return s!;
}

for (const fixture of runtimeFixtures) {
  describe(`tracing: state and triggers on ${fixture.name}`, () => {
    const { gw, receiver: rx, sockets: open } = useTracedGatewayOn(fixture, { apiKeys: [KEY], services: [{ name: "orders", state: { storeName: "orders-store", keys: [] } }] });
    const traceparent = (span: string): Record<string, string> => ({ "x-api-key": KEY, traceparent: `00-${CALLER_TRACE}-${span}-01` });

    it("REST save and get: a server span each, with the runtime call as its client child", async () => {
      const saveParent = "1111111111111111";
      const getParent = "2222222222222222";
      const saved = await httpRequest(gw().http, "POST", "/v1/state/save-state", { service: "orders", key: "o-1", value: "v" }, traceparent(saveParent));
      assert.equal(saved.status, 200, saved.body);
      const got = await httpRequest(gw().http, "GET", "/v1/state/orders/o-1", undefined, traceparent(getParent));
      assert.equal(got.status, 200, got.body);
      const spans = await spansWhere(rx(), (s) => s.traceId === CALLER_TRACE && s.name.startsWith("state."), 2, "two runtime spans");
      const all = rx().spans.filter((s) => s.traceId === CALLER_TRACE);
      const save = all.find((s) => s.name === "POST /v1/state/save-state" && s.parentSpanId === saveParent);
      const get = all.find((s) => s.name === "GET /v1/state/{service}/{key+}" && s.parentSpanId === getParent);
      assert.ok(save && get, all.map((s) => `${s.name}<-${s.parentSpanId}`).join(", "));
      assert.equal(save.kind, SpanKind.SERVER);
      assert.equal(save.attributes["rpc.grpc.status_code"], 0);
      const saveCall = named(spans.filter((s) => s.parentSpanId === save.spanId), "state.save orders-store");
      assert.equal(saveCall.kind, SpanKind.CLIENT);
      assert.equal(saveCall.attributes["db.system.name"], fixture.name);
      assert.equal(saveCall.attributes["db.operation.name"], "save");
      assert.equal(saveCall.attributes["db.namespace"], "orders-store");
      const getCall = named(spans.filter((s) => s.parentSpanId === get.spanId), "state.get orders-store");
      assert.equal(getCall.kind, SpanKind.CLIENT);
      assert.equal(getCall.attributes["rpc.grpc.status_code"], 0);
    });

    it("gRPC GetState and a failing save: the failure ends the spans with its code", async () => {
      const md = withKey(KEY);
      md.set("traceparent", `00-${CALLER_TRACE}-3333333333333333-01`);
      await unary(gw().client("platform.State"), "GetState", { service: "orders", key: "o-1" }, md);
      const grpcServer = (await spansWhere(rx(), (s) => s.name === "platform.State/GetState" && s.parentSpanId === "3333333333333333", 1, "GetState span"))[0]!;
      assert.equal(grpcServer.attributes["rpc.system"], "grpc");
      await spansWhere(rx(), (s) => s.parentSpanId === grpcServer.spanId && s.name === "state.get orders-store", 1, "its runtime span");
      // A stale etag: the runtime refuses (ABORTED), the client span is an error, the server span records the code.
      const r = await httpRequest(gw().http, "POST", "/v1/state/save-state", { service: "orders", key: "o-1", value: "w", etag: "999999" }, traceparent("4444444444444444"));
      assert.notEqual(r.status, 200, r.body);
      const server = (await spansWhere(rx(), (s) => s.parentSpanId === "4444444444444444", 1, "the failed save's span"))[0]!;
      assert.equal(server.attributes["rpc.grpc.status_code"], 10);
      const call = (await spansWhere(rx(), (s) => s.parentSpanId === server.spanId, 1, "its runtime span"))[0]!;
      assert.equal(call.attributes["rpc.grpc.status_code"], 10);
      assert.equal(call.status.code, 2, "a failed runtime call is an error span");
    });

    it("a trigger firing is a span of its own naming the trigger; its event carries the firing's context to subscribers", async () => {
      const c = await connectWs(gw().http, { key: KEY });
      open.push(c);
      c.send({ op: "subscribe", topics: ["traced.tick"], id: "s" });
      await c.next((f) => f.op === "subscribed", "subscribed");
      const r = await httpRequest(gw().http, "POST", "/v1/trigger/traced-once", { target_topic: "traced.tick", due_time: "1s" }, { "x-api-key": KEY });
      assert.equal(r.status, 200, r.body);
      const ev = await c.next((f) => f.op === "event", "the trigger's event", 15_000);
      const [, traceId, spanId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(ev.cloudevent.traceparent)) ?? [];
      assert.ok(traceId, `the trigger event carries a traceparent (got ${String(ev.cloudevent.traceparent)})`);
      const spans = await spansWhere(rx(), (s) => s.traceId === traceId, 3, "the firing's spans");
      const firing = named(spans, "trigger fire");
      assert.equal(firing.parentSpanId, "", "a firing starts a trace");
      assert.equal(firing.attributes["gateway.trigger.name"], "traced-once");
      assert.equal(firing.attributes["gateway.job.id"], "traced-once");
      const producer = named(spans, "publish traced.tick");
      assert.equal(producer.parentSpanId, firing.spanId);
      assert.equal(producer.spanId, spanId);
      assert.equal(named(spans, "deliver traced.tick").parentSpanId, producer.spanId);
    });
  });
}

describe("tracing: state saved through a uWS worker thread (--threads 2)", () => {
  const { gw, receiver } = useTracedGatewayOn(EMBEDDED, { apiKeys: [KEY], threads: 2, services: [{ name: "orders", state: { storeName: "orders-store", keys: [] } }] });

  it("the forwarded request keeps its traceparent: the main thread's spans continue the caller's", async () => {
    // Several requests: the kernel spreads connections over the threads, and each must keep the caller's context.
    for (let i = 0; i < 4; i++) {
      const parent = `${i + 1}`.repeat(16);
      const r = await httpRequest(gw().http, "POST", "/v1/state/save-state", { service: "orders", key: `t-${i}`, value: "v" }, { "x-api-key": KEY, traceparent: `00-${CALLER_TRACE}-${parent}-01` });
      assert.equal(r.status, 200, r.body);
      const server = (await spansWhere(receiver(), (s) => s.parentSpanId === parent && s.name === "POST /v1/state/save-state", 1, `the save span under ${parent}`))[0]!;
      await spansWhere(receiver(), (s) => s.parentSpanId === server.spanId && s.name === "state.save orders-store", 1, "its runtime span");
    }
  });
});
