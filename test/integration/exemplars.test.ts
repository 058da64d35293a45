import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { httpRequest } from "../support/http-request.js";
import { tracedOrdersOptions } from "../support/traced-gateway.js";
import { startOtlpReceiver, type OtlpReceiver } from "../support/otlp-receiver.js";
import { parseOpenMetrics, type OmSample } from "../support/openmetrics.js";

const OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";
/** What Prometheus sends when it scrapes. */
const PROMETHEUS_ACCEPT = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
const INVOKE_BUCKET = "platform_gateway_invoke_duration_seconds_bucket";

async function scrape(gw: TestGateway, accept?: string): Promise<{ type: string; body: string }> {
  const r = await fetch(`${gw.http}/metrics`, { headers: accept ? { accept } : {}, signal: AbortSignal.timeout(10_000) });
  assert.equal(r.status, 200);
  return { type: r.headers.get("content-type") ?? "", body: await r.text() };
}

async function invokeJson(gw: TestGateway, orderId: string): Promise<void> {
  const r = await httpRequest(gw.http, "POST", "/v1/gateway/invoke-json", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId }) });
  assert.equal(r.status, 200, r.body);
  assert.equal((JSON.parse(r.body) as { success: boolean }).success, true, r.body);
}

/** The trace id the backend received on its latest call. */
function backendTraceId(backend: OrderBackend): string {
  const tp = String(backend.received.at(-1)!.metadata["traceparent"]);
  const m = /^00-([0-9a-f]{32})-[0-9a-f]{16}-01$/.exec(tp);
  assert.ok(m, `a sampled traceparent reached the backend (got ${tp})`);
  return m[1]!;
}

/** The invoke latency buckets of service orders, code OK, that carry an exemplar. */
function invokeExemplars(body: string): OmSample[] {
  const family = parseOpenMetrics(body).find((f) => f.name === "platform_gateway_invoke_duration_seconds");
  assert.ok(family, "the invoke histogram is exposed");
  assert.equal(family.type, "histogram");
  return family.samples.filter((s) => s.name === INVOKE_BUCKET && s.labels["service"] === "orders" && s.labels["code"] === "OK" && s.exemplar !== undefined);
}

/**
 * One traced REST invoke, then: the OpenMetrics scrape has an exemplar on the invoke latency bucket the call fell in,
 * whose trace_id is the call's trace and whose span_id is the exported server span's.
 */
async function assertInvokeExemplar(gw: TestGateway, backend: OrderBackend, receiver: OtlpReceiver, orderId: string): Promise<void> {
  await invokeJson(gw, orderId);
  const traceId = backendTraceId(backend);
  await waitFor(() => receiver.spans.some((s) => s.traceId === traceId && s.name === "POST /v1/gateway/invoke-json"), "the server span", 10_000);
  const server = receiver.spans.find((s) => s.traceId === traceId && s.name === "POST /v1/gateway/invoke-json")!;
  const { type, body } = await scrape(gw, PROMETHEUS_ACCEPT);
  assert.equal(type, OPENMETRICS);
  const mine = invokeExemplars(body).filter((s) => s.exemplar!.labels["trace_id"] === traceId);
  assert.equal(mine.length, 1, `one bucket holds the call's exemplar:\n${body.split("\n").filter((l) => l.startsWith(INVOKE_BUCKET)).join("\n")}`);
  const ex = mine[0]!.exemplar!;
  assert.deepEqual(Object.keys(ex.labels).sort(), ["span_id", "trace_id"]);
  assert.equal(ex.labels["span_id"], server.spanId, "the exemplar names the server span");
  assert.ok(ex.value > 0 && ex.value < 10, `the exemplar's value is the call's latency in seconds (${ex.value})`);
  const le = mine[0]!.labels["le"]!;
  assert.ok(ex.value <= (le === "+Inf" ? Infinity : Number(le)), `the exemplar ${ex.value} lies in its bucket le=${le}`);
  assert.ok(ex.timestamp !== undefined && Math.abs(ex.timestamp - Date.now() / 1000) < 60, "timestamped now, in seconds");
}

describe("exemplars: the invoke latency histogram links to traces in the OpenMetrics exposition", () => {
  let backend: OrderBackend;
  let receiver: OtlpReceiver;
  let gw: TestGateway;

  before(async () => {
    backend = await startOrderBackend();
    receiver = await startOtlpReceiver();
    gw = await startTestGateway(tracedOrdersOptions(backend, receiver));
  });
  after(async () => {
    await gw?.close();
    await receiver?.close();
    backend?.close();
  });

  it("a traced invoke leaves its trace and server span ids on its latency bucket", async () => {
    await assertInvokeExemplar(gw, backend, receiver, "ex-1");
  });

  it("a later call in the same bucket replaces the exemplar; every bucket keeps at most one", async () => {
    await assertInvokeExemplar(gw, backend, receiver, "ex-2");
    const all = invokeExemplars((await scrape(gw, PROMETHEUS_ACCEPT)).body);
    assert.equal(new Set(all.map((s) => s.labels["le"])).size, all.length);
  });

  it("the Prometheus text format is unchanged: no exemplars, no # EOF, counters keep _total after an OpenMetrics scrape", async () => {
    await scrape(gw, PROMETHEUS_ACCEPT);
    for (const accept of [undefined, "text/plain", "application/openmetrics-text;q=0"]) {
      const { type, body } = await scrape(gw, accept);
      assert.equal(type, PROMETHEUS_TEXT, String(accept));
      assert.doesNotMatch(body, /# EOF/);
      assert.doesNotMatch(body, /trace_id/);
      assert.match(body, /^# TYPE platform_gateway_invocations_total counter$/m);
      assert.match(body, /^platform_gateway_invocations_total\{service="orders",code="OK"\} \d+$/m);
      assert.match(body, /^platform_gateway_invoke_duration_seconds_bucket\{le="\+Inf",service="orders",code="OK"\} \d+$/m);
    }
    // In OpenMetrics the counter family drops _total and its sample keeps it: Prometheus stores the same series name.
    const om = parseOpenMetrics((await scrape(gw, PROMETHEUS_ACCEPT)).body);
    const inv = om.find((f) => f.name === "platform_gateway_invocations");
    assert.equal(inv?.type, "counter");
    assert.ok(inv.samples.some((s) => s.name === "platform_gateway_invocations_total" && s.labels["service"] === "orders"));
  });
});

describe("exemplars: survive the merge of uWS threads' registries; absent when tracing is off or unsampled", () => {
  let backend: OrderBackend;
  before(async () => {
    backend = await startOrderBackend();
  });
  after(() => backend?.close());

  it("with two uWS threads, the call a thread ran shows its exemplar in the merged /metrics", async () => {
    const receiver = await startOtlpReceiver();
    const gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { threads: 2 }));
    try {
      // Connections land on either thread: each call checks its own exemplar in the sum of both registries.
      for (let i = 0; i < 3; i++) await assertInvokeExemplar(gw, backend, receiver, `threads-${i}`);
    } finally {
      await gw.close();
      await receiver.close();
    }
  });

  it("tracing off: the OpenMetrics exposition has the same histogram without exemplars", async () => {
    const gw = await startTestGateway(tracedOrdersOptions(backend, undefined));
    try {
      await invokeJson(gw, "off-1");
      const { type, body } = await scrape(gw, PROMETHEUS_ACCEPT);
      assert.equal(type, OPENMETRICS);
      const family = parseOpenMetrics(body).find((f) => f.name === "platform_gateway_invoke_duration_seconds")!;
      assert.ok(family.samples.some((s) => s.name === INVOKE_BUCKET && s.labels["service"] === "orders" && s.value === 1));
      assert.ok(family.samples.every((s) => s.exemplar === undefined));
      assert.doesNotMatch(body, /trace_id/);
    } finally {
      await gw.close();
    }
  });

  it("an unsampled call (ratio 0) leaves no exemplar", async () => {
    const receiver = await startOtlpReceiver();
    const gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { traceSampler: "parentbased_traceidratio", traceSamplerArg: 0 }));
    try {
      await invokeJson(gw, "unsampled-1");
      assert.deepEqual(invokeExemplars((await scrape(gw, PROMETHEUS_ACCEPT)).body), []);
    } finally {
      await gw.close();
      await receiver.close();
    }
  });
});
