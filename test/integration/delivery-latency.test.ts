import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { httpRequest } from "../support/http-request.js";
import { startOtlpReceiver, type OtlpReceiver } from "../support/otlp-receiver.js";
import { parseOpenMetrics, type OmFamily, type OmSample } from "../support/openmetrics.js";
import { ceJson, connectSse, connectWs, type SseTestClient, type WsTestClient } from "../support/web.js";
import { subscribe as grpcSubscribe, type Sub } from "./pubsub-support.js";
import type { GatewayOptions } from "../../src/config/options.js";

const KEY = "latency-key";
const FAMILY = "platform_pubsub_delivery_latency_seconds";
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const OPENMETRICS_ACCEPT = "application/openmetrics-text;version=1.0.0";
const TRANSPORTS = ["grpc", "websocket", "sse"] as const;

/** Every kind of subscriber on one topic: two WebSockets, two SSE streams, two plain and one positioned gRPC Subscribe. */
interface Subscribers {
  ws: WsTestClient[];
  sse: SseTestClient[];
  grpc: Sub[];
  close(): void;
}

async function subscribeAll(gw: TestGateway, topic: string): Promise<Subscribers> {
  const ws: WsTestClient[] = [];
  const sse: SseTestClient[] = [];
  const subs: Sub[] = [];
  const close = (): void => {
    for (const c of ws) c.ws.terminate();
    for (const s of sse) s.abort();
    for (const s of subs) s.call.cancel();
  };
  try {
    for (let i = 0; i < 2; i++) {
      const c = await connectWs(gw.http, { key: KEY });
      ws.push(c);
      c.send({ op: "subscribe", topics: [topic], id: "s" });
      await c.next((f) => f.op === "subscribed", "subscribed");
      const s = await connectSse(gw.http, `topic=${topic}`, { "x-api-key": KEY });
      sse.push(s);
      assert.equal(s.status, 200);
    }
    const client = gw.client("io.cloudevents.v1.Pubsub");
    const positioned = withKey(KEY);
    positioned.set("x-positions", "true");
    for (const md of [withKey(KEY), withKey(KEY), positioned]) {
      const s = grpcSubscribe(client, [topic], md);
      subs.push(s);
      await s.ready();
    }
  } catch (e) {
    close();
    throw e;
  }
  return { ws, sse, grpc: subs, close };
}

/** Publish one event over REST (with a caller's traceparent when given) and wait until every subscriber has it. */
async function publishAndReceive(gw: TestGateway, topic: string, subs: Subscribers, n: number, traceparent?: string): Promise<void> {
  const r = await httpRequest(gw.http, "POST", `/v1/pubsub/${topic}`, ceJson(n), {
    "x-api-key": KEY,
    "content-type": "application/cloudevents+json",
    ...(traceparent ? { traceparent } : {}),
  });
  assert.equal(r.status, 200, r.body);
  for (const c of subs.ws) await c.next((f) => f.op === "event", "the WebSocket event");
  for (const s of subs.sse) await waitFor(() => s.events().length >= 1, "the SSE event", 5_000);
  for (const s of subs.grpc) await s.count(1);
}

async function scrape(gw: TestGateway, accept?: string): Promise<string> {
  const r = await fetch(`${gw.http}/metrics`, { headers: accept ? { accept } : {}, signal: AbortSignal.timeout(10_000) });
  assert.equal(r.status, 200);
  return r.text();
}

async function family(gw: TestGateway): Promise<OmFamily> {
  const f = parseOpenMetrics(await scrape(gw, OPENMETRICS_ACCEPT)).find((x) => x.name === FAMILY);
  assert.ok(f, `${FAMILY} is exposed`);
  assert.equal(f.type, "histogram");
  return f;
}

function sample(f: OmFamily, name: string, transport: string): number {
  return f.samples.find((s) => s.name === `${FAMILY}_${name}` && s.labels["transport"] === transport)?.value ?? 0;
}

/** Wait until each transport's observation count is within its range; returns the family then. */
async function observed(gw: TestGateway, want: Record<(typeof TRANSPORTS)[number], [number, number]>): Promise<OmFamily> {
  let f: OmFamily | undefined;
  const ok = (): boolean => TRANSPORTS.every((t) => sample(f!, "count", t) >= want[t][0]);
  for (let i = 0; i < 50; i++) {
    f = await family(gw);
    if (ok()) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const t of TRANSPORTS) {
    const count = sample(f!, "count", t);
    const [lo, hi] = want[t];
    assert.ok(count >= lo && count <= hi, `${t}: ${count} observations, want ${lo}..${hi}`);
    // Plausible: a local delivery takes well under five seconds, and never less than nothing.
    const mean = sample(f!, "sum", t) / count;
    assert.ok(mean >= 0 && mean < 5, `${t}: mean latency ${mean}s`);
  }
  return f!;
}

/** The delivery latency buckets of `transport` that carry an exemplar. */
function exemplars(f: OmFamily, transport: string): OmSample[] {
  return f.samples.filter((s) => s.name === `${FAMILY}_bucket` && s.labels["transport"] === transport && s.exemplar !== undefined);
}

describe("delivery latency: one observation per event per outlet, whatever the number of subscribers", () => {
  for (const threads of [1, 2]) {
    it(`WebSocket, SSE and gRPC subscribers (--threads ${threads}); tracing off: no exemplars`, async () => {
      const gw = await startTestGateway({ apiKeys: [KEY], threads });
      let subs: Subscribers | undefined;
      try {
        subs = await subscribeAll(gw, "lat");
        await publishAndReceive(gw, "lat", subs, 1);
        // gRPC: the broker's plain streams and the positioned ones are two outlets on the main thread. Web: one outlet
        // per uWS thread holding subscribers (the two of each transport may land on one thread or on both).
        const f = await observed(gw, { grpc: [2, 2], websocket: [1, threads], sse: [1, threads] });
        for (const t of TRANSPORTS) assert.deepEqual(exemplars(f, t), [], t);
        assert.match(f.help ?? "", /from when the gateway received an event from the runtime/);
        const text = await scrape(gw);
        assert.doesNotMatch(text, /trace_id/);
        assert.match(text, /^platform_pubsub_delivery_latency_seconds_bucket\{le="\+Inf",transport="grpc"\} 2$/m);
      } finally {
        subs?.close();
        await gw.close();
      }
    });
  }
});

describe("delivery latency: exemplars name the event's fan-out span (tracing on)", () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await startOtlpReceiver();
  });
  after(async () => {
    await receiver?.close();
  });

  for (const threads of [1, 2]) {
    it(`each transport's bucket links to the publish's trace (--threads ${threads})`, async () => {
      const options: GatewayOptions = { apiKeys: [KEY], threads, otlpTracesEndpoint: receiver.url, traceExportDelayMs: 20 };
      const gw = await startTestGateway(options);
      let subs: Subscribers | undefined;
      try {
        const topic = `traced${threads}`;
        subs = await subscribeAll(gw, topic);
        await publishAndReceive(gw, topic, subs, 2, `00-${CALLER_TRACE}-${CALLER_SPAN}-01`);
        await waitFor(() => receiver.spans.some((s) => s.traceId === CALLER_TRACE && s.name === `deliver ${topic}`), "the fan-out span", 10_000);
        const fanout = receiver.spans.find((s) => s.traceId === CALLER_TRACE && s.name === `deliver ${topic}`)!;
        const f = await observed(gw, { grpc: [2, 2], websocket: [1, threads], sse: [1, threads] });
        for (const t of TRANSPORTS) {
          const mine = exemplars(f, t);
          assert.ok(mine.length >= 1 && mine.length <= 2, `${t}: the event's observations carry exemplars (${mine.length})`);
          for (const s of mine) {
            const ex = s.exemplar!;
            assert.deepEqual(ex.labels, { trace_id: CALLER_TRACE, span_id: fanout.spanId }, `${t}: the exemplar is the fan-out span of the publish's trace`);
            const le = s.labels["le"]!;
            assert.ok(ex.value >= 0 && ex.value <= (le === "+Inf" ? Infinity : Number(le)), `${t}: ${ex.value} lies in its bucket le=${le}`);
          }
        }
        assert.deepEqual(receiver.rejected, []);
      } finally {
        subs?.close();
        await gw.close();
      }
    });
  }
});
