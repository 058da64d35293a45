import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { openFrameSocket } from "../support/web.js";
import { SpanKind, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";

const KEY = "k1";
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

type Duplex = grpc.ClientDuplexStream<object, { response_data?: string; status?: { success: boolean } }>;

/** The traceparent the backend received on its latest call to `path`, split. */
function backendSaw(backend: OrderBackend, path: string): { traceId: string; spanId: string } {
  const call = [...backend.received].reverse().find((c) => c.path === path);
  assert.ok(call, `the backend got a call to ${path}`);
  const [, traceId, spanId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(call!.metadata["traceparent"])) ?? [];
  assert.ok(traceId, `a sampled W3C traceparent (got ${String(call!.metadata["traceparent"])})`);
  return { traceId: traceId!, spanId: spanId! };
}

/**
 * The streamed invocation's tree under the caller's span `parent`: the server span `name`, schema resolution and the
 * backend client span its children, and the client span's id the one the backend saw.
 */
async function assertStreamTree(receiver: OtlpReceiver, backend: OrderBackend, name: string, parent: string, method: string): Promise<ReceivedSpan> {
  const path = `/shop.v1.OrderService/${method}`;
  const clientName = `shop.v1.OrderService/${method}`;
  const seen = backendSaw(backend, path);
  assert.equal(seen.traceId, CALLER_TRACE);
  const pick = (): ReceivedSpan[] => receiver.spans.filter((s) => s.traceId === CALLER_TRACE);
  await waitFor(() => pick().some((s) => s.spanId === seen.spanId) && pick().some((s) => s.name === name && s.parentSpanId === parent), `the spans of ${name}`, 10_000);
  const server = pick().find((s) => s.name === name && s.parentSpanId === parent)!;
  assert.equal(server.kind, SpanKind.SERVER);
  assert.equal(server.attributes["rpc.grpc.status_code"], 0);
  assert.equal(server.attributes["gateway.service"], "orders");
  const client = pick().find((s) => s.spanId === seen.spanId)!;
  assert.equal(client.name, clientName, "the backend sees the client span's id");
  assert.equal(client.kind, SpanKind.CLIENT);
  assert.equal(client.parentSpanId, server.spanId);
  assert.equal(client.attributes["rpc.grpc.status_code"], 0);
  await waitFor(() => pick().some((s) => s.name === "resolve schema" && s.parentSpanId === server.spanId), "the schema span", 10_000);
  return server;
}

describe("tracing: streaming invoke", () => {
  let backend: OrderBackend;
  let receiver: OtlpReceiver;
  let gw: TestGateway;

  before(async () => {
    backend = await startOrderBackend();
    receiver = await startOtlpReceiver();
    gw = await startTestGateway({
      apiKeys: [KEY],
      services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
      otlpTracesEndpoint: receiver.url,
      traceExportDelayMs: 20,
    });
  });
  after(async () => {
    await gw?.close();
    await receiver?.close();
    backend?.close();
  });

  it("invoke-stream (NDJSON): server span, schema, and the backend client span whose id the backend sees", async () => {
    const parent = "1111111111111111";
    const r = await fetch(gw.http + "/v1/gateway/invoke-stream", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": KEY, traceparent: `00-${CALLER_TRACE}-${parent}-01` },
      body: JSON.stringify({ service: "orders", method: "WatchOrders", requestData: { orderId: "count:3" } }),
    });
    const lines = (await r.text()).trim().split("\n");
    assert.equal(lines.length, 4, lines.join("\n"));
    await assertStreamTree(receiver, backend, "POST /v1/gateway/invoke-stream", parent, "WatchOrders");
  });

  it("InvokeStream over gRPC (bidi): the same tree under the caller's metadata", async () => {
    const parent = "2222222222222222";
    const md = withKey(KEY);
    md.set("traceparent", `00-${CALLER_TRACE}-${parent}-01`);
    const call = (gw.client("platform.Gateway") as unknown as { InvokeStream(md: grpc.Metadata): Duplex }).InvokeStream(md);
    const got: unknown[] = [];
    const done = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("InvokeStream did not end within 5 s")), 5000);
      call.on("data", (m) => got.push(m));
      call.on("error", (e) => (clearTimeout(t), reject(e)));
      call.on("end", () => (clearTimeout(t), resolve()));
    });
    call.write({ service: "orders", method: "SyncOrders", request_data: JSON.stringify({ orderId: "1" }) });
    call.write({ request_data: JSON.stringify({ orderId: "2" }) });
    call.end();
    await done;
    assert.equal(got.length, 3, JSON.stringify(got));
    const server = await assertStreamTree(receiver, backend, "platform.Gateway/InvokeStream", parent, "SyncOrders");
    assert.equal(server.attributes["gateway.method.kind"], "bidi-streaming");
  });

  it("invoke-ws: the upgrade request's traceparent parents the invocation's server span", async () => {
    const parent = "3333333333333333";
    const c = await openFrameSocket(gw.http.replace("http:", "ws:") + "/v1/gateway/invoke-ws", [], {
      headers: { "x-api-key": KEY, traceparent: `00-${CALLER_TRACE}-${parent}-01` },
    });
    c.send({ op: "start", service: "orders", method: "SyncOrders", requestData: { orderId: "1" } });
    c.send({ op: "end" });
    assert.equal(await c.closed, 1000);
    assert.equal(c.frames.at(-1).op, "status");
    await assertStreamTree(receiver, backend, "GET /v1/gateway/invoke-ws", parent, "SyncOrders");
  });
});
