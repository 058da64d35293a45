import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { subscribe as grpcSubscribe } from "./pubsub-support.js";
import { httpRequest } from "../support/http-request.js";
import { runtimeFixtures } from "../support/runtimes.js";
import { EMBEDDED, useTracedGatewayOn } from "../support/traced-gateway.js";
import { ceJson, connectSse, connectWs, type WsTestClient } from "../support/web.js";
import { SpanKind, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";

const KEY = "trace-key";
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const OWN_TRACE = "0af7651916cd43dd8448eb211c80319c";
const OWN_SPAN = "b7ad6b7169203331";
const W3C = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

function split(traceparent: unknown): { traceId: string; spanId: string; flags: string } {
  const m = W3C.exec(String(traceparent));
  assert.ok(m, `a W3C traceparent (got ${String(traceparent)})`);
  return { traceId: m![1]!, spanId: m![2]!, flags: m![3]! };
}

async function spansOf(receiver: OtlpReceiver, traceId: string, names: string[]): Promise<ReceivedSpan[]> {
  const of = (): ReceivedSpan[] => receiver.spans.filter((s) => s.traceId === traceId);
  await waitFor(() => names.every((n) => of().some((s) => s.name === n)), `spans ${names.join(", ")} of trace ${traceId}`, 10_000);
  return of();
}

function named(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const s = spans.find((x) => x.name === name);
  assert.ok(s, `a span named ${name} (got ${spans.map((x) => x.name).join(", ")})`);
  return s!;
}

async function subscribe(gw: TestGateway, topic: string): Promise<WsTestClient> {
  const c = await connectWs(gw.http, { key: KEY });
  c.send({ op: "subscribe", topics: [topic], id: "s" });
  await c.next((f) => f.op === "subscribed", "subscribed");
  return c;
}

async function restPublish(gw: TestGateway, topic: string, ce: Record<string, unknown>, headers: Record<string, string> = {}): Promise<void> {
  const r = await httpRequest(gw.http, "POST", `/v1/pubsub/${topic}`, ce, { "x-api-key": KEY, "content-type": "application/cloudevents+json", ...headers });
  assert.equal(r.status, 200, r.body);
  assert.equal((JSON.parse(r.body) as { status: { success: boolean } }).status.success, true, r.body);
}

/**
 * The publish tree: the server span, its producer child ("publish <topic>") whose context the event carries, and the
 * fan-out span ("deliver <topic>") under that context, counting the WebSocket delivery.
 */
function assertPublishTree(spans: ReceivedSpan[], server: ReceivedSpan, topic: string, carried: { spanId: string }, transport = "websocket"): ReceivedSpan {
  const producer = named(spans, `publish ${topic}`);
  const fanout = named(spans, `deliver ${topic}`);
  assert.equal(producer.kind, SpanKind.PRODUCER);
  assert.equal(producer.parentSpanId, server.spanId, "the runtime call is a child of the server span");
  assert.equal(producer.attributes["messaging.destination.name"], topic);
  assert.equal(producer.attributes["rpc.grpc.status_code"], 0);
  assert.equal(carried.spanId, producer.spanId, "the event carries the publish span's context");
  assert.equal(fanout.kind, SpanKind.CONSUMER);
  assert.equal(fanout.parentSpanId, producer.spanId, "the fan-out span continues the publish span");
  assert.equal(fanout.attributes["messaging.destination.name"], topic);
  assert.equal(fanout.attributes[`gateway.deliveries.${transport}`], 1);
  assert.equal(spans.filter((s) => s.name === `deliver ${topic}`).length, 1, "one fan-out span per event");
  return producer;
}

for (const fixture of runtimeFixtures) {
  describe(`tracing: pub/sub on ${fixture.name}`, () => {
    const { gw, receiver: rx, sockets: open } = useTracedGatewayOn(fixture, { apiKeys: [KEY] });

    it("a REST publish reaches a WebSocket subscriber with the publish span's traceparent; the fan-out span continues it", async () => {
      const c = await subscribe(gw(), "traced");
      open.push(c);
      // A gRPC Subscribe stream too: the broker's own subscribers count in the same span.
      const grpcSub = grpcSubscribe(gw().client("io.cloudevents.v1.Pubsub"), ["traced"], withKey(KEY));
      await grpcSub.ready();
      await restPublish(gw(), "traced", ceJson(1), { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`, tracestate: "vendor=abc" });
      const ev = await c.next((f) => f.op === "event", "the event");
      const carried = split(ev.cloudevent.traceparent);
      assert.equal(carried.traceId, CALLER_TRACE, "the event continues the caller's trace");
      assert.equal(carried.flags, "01");
      assert.equal(ev.cloudevent.tracestate, "vendor=abc");
      await grpcSub.count(1);
      grpcSub.call.cancel();
      const spans = await spansOf(rx(), CALLER_TRACE, ["POST /v1/pubsub/{topic}", "publish traced", "deliver traced"]);
      const server = named(spans, "POST /v1/pubsub/{topic}");
      assert.equal(server.kind, SpanKind.SERVER);
      assert.equal(server.parentSpanId, CALLER_SPAN);
      assert.equal(server.attributes["rpc.grpc.status_code"], 0);
      assertPublishTree(spans, server, "traced", carried);
      assert.equal(named(spans, "deliver traced").attributes["gateway.deliveries.grpc"], 1);
      assert.deepEqual(rx().rejected, []);
    });

    it("an event that carries its own traceparent keeps it: the publish span is linked to it", async () => {
      const c = await subscribe(gw(), "own");
      open.push(c);
      const own = `00-${OWN_TRACE}-${OWN_SPAN}-01`;
      await restPublish(gw(), "own", ceJson(2, { traceparent: own }), { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
      const ev = await c.next((f) => f.op === "event", "the event");
      assert.equal(ev.cloudevent.traceparent, own, "never overwritten");
      const spans = await spansOf(rx(), CALLER_TRACE, ["publish own"]);
      const producer = named(spans, "publish own");
      assert.deepEqual(producer.links, [{ traceId: OWN_TRACE, spanId: OWN_SPAN }]);
      // The delivery continues the context the event carries: its producer's.
      const fanout = named(await spansOf(rx(), OWN_TRACE, ["deliver own"]), "deliver own");
      assert.equal(fanout.parentSpanId, OWN_SPAN);
      assert.equal(fanout.attributes["gateway.deliveries.websocket"], 1);
    });

    it("a publish over the WebSocket itself starts a trace the subscriber's event carries", async () => {
      const c = await subscribe(gw(), "wspub");
      open.push(c);
      c.send({ op: "publish", topic: "wspub", cloudevent: ceJson(3), id: 1 });
      await c.next((f) => f.op === "published", "published");
      const ev = await c.next((f) => f.op === "event", "the event");
      const carried = split(ev.cloudevent.traceparent);
      const spans = await spansOf(rx(), carried.traceId, ["WebSocket publish", "publish wspub", "deliver wspub"]);
      const server = named(spans, "WebSocket publish");
      assert.equal(server.parentSpanId, "");
      assertPublishTree(spans, server, "wspub", carried);
    });

    it("a gRPC Subscribe stream's start is a span under the caller's traceparent, ended once the subscription is live", async () => {
      const parent = "6666666666666666";
      const md = withKey(KEY);
      md.set("traceparent", `00-${CALLER_TRACE}-${parent}-01`);
      const sub = grpcSubscribe(gw().client("io.cloudevents.v1.Pubsub"), ["grpcstart-a", "grpcstart-b"], md);
      try {
        await sub.ready();
        const start = (await spansOf(rx(), CALLER_TRACE, ["io.cloudevents.v1.Pubsub/Subscribe"])).find((x) => x.parentSpanId === parent);
        assert.ok(start, "the Subscribe start span is a child of the caller's traceparent");
        assert.equal(start!.kind, SpanKind.SERVER);
        assert.equal(start!.attributes["rpc.service"], "io.cloudevents.v1.Pubsub");
        assert.equal(start!.attributes["gateway.topics"], 2);
      } finally {
        sub.call.cancel();
      }
    });

    it("a subscription's start is a span: SSE under the request's traceparent, a WebSocket subscribe on its own; an SSE subscriber counts in the fan-out", async () => {
      const parent = "5555555555555555";
      const sse = await connectSse(gw().http, "topic=ssetopic", { "x-api-key": KEY, traceparent: `00-${CALLER_TRACE}-${parent}-01` });
      try {
        assert.equal(sse.status, 200);
        const start = (await spansOf(rx(), CALLER_TRACE, ["GET /v1/pubsub/events"])).find((s) => s.parentSpanId === parent);
        assert.ok(start, "the SSE start span is a child of the request's traceparent");
        assert.equal(start!.kind, SpanKind.SERVER);
        assert.equal(start!.attributes["gateway.topics"], 1);
        const c = await subscribe(gw(), "ssetopic");
        open.push(c);
        await waitFor(() => rx().spans.some((s) => s.name === "WebSocket subscribe"), "a WebSocket subscribe span", 10_000);
        await restPublish(gw(), "ssetopic", ceJson(5));
        await waitFor(() => sse.events().length === 1, "the SSE event", 5_000);
        const carried = split(sse.events()[0].cloudevent.traceparent);
        const fanout = named(await spansOf(rx(), carried.traceId, ["deliver ssetopic"]), "deliver ssetopic");
        assert.equal(fanout.attributes["gateway.deliveries.sse"], 1);
        assert.equal(fanout.attributes["gateway.deliveries.websocket"], 1);
      } finally {
        sse.abort();
      }
    });
  });
}

describe("tracing: a WebSocket publish on a uWS worker thread (--threads 2)", () => {
  const { gw, receiver, sockets: open } = useTracedGatewayOn(EMBEDDED, { apiKeys: [KEY], threads: 2 });

  it("the publish crosses the bridge with its context: one trace from the thread's socket to the subscriber", async () => {
    // Two sockets: the kernel spreads connections over the threads, so publisher and subscriber may sit on different ones.
    const sub = await subscribe(gw(), "threaded");
    const pub = await connectWs(gw().http, { key: KEY });
    open.push(sub, pub);
    pub.send({ op: "publish", topic: "threaded", cloudevent: ceJson(4), id: 1 });
    await pub.next((f) => f.op === "published", "published");
    const ev = await sub.next((f) => f.op === "event", "the event");
    const carried = split(ev.cloudevent.traceparent);
    const spans = await spansOf(receiver(), carried.traceId, ["WebSocket publish", "publish threaded", "deliver threaded"]);
    const server = named(spans, "WebSocket publish");
    const producer = named(spans, "publish threaded");
    assert.equal(producer.parentSpanId, server.spanId);
    assert.equal(carried.spanId, producer.spanId);
    const fanout = named(spans, "deliver threaded");
    assert.equal(fanout.parentSpanId, producer.spanId);
    // The main hub hands the event to the worker threads, which deliver it to their sockets and count those
    // deliveries themselves: the span names the outlet, one span for the event whatever the threads do with it.
    assert.ok("gateway.deliveries.threads" in fanout.attributes, JSON.stringify(fanout.attributes));
    assert.equal(spans.filter((s) => s.name === "deliver threaded").length, 1);
  });
});
