import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { protosDir, SHOP_PROTO } from "../support/protos/descriptors.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startLibraryBackend, type LibraryBackend } from "../support/backends/library-backend.js";
import { routesLoaded } from "../support/transcode.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { httpRequest } from "../support/http-request.js";
import { startGatewayProcess } from "../support/cli.js";
import { tracedOrdersOptions } from "../support/traced-gateway.js";
import { SpanKind, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";

const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
/** Spans one invoke run in one place makes: server, schema resolution, two conversions, the backend call. */
const SPANS_PER_INVOKE = 5;

/** The W3C traceparent the backend received on its latest call, split. */
function backendTraceparent(backend: OrderBackend): { traceId: string; spanId: string; flags: string; raw: string; tracestate: unknown } {
  const md = backend.received.at(-1)!.metadata;
  const raw = String(md["traceparent"]);
  const [, traceId, spanId, flags] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(raw) ?? [];
  assert.ok(traceId, `the backend got a W3C traceparent (got ${raw})`);
  return { traceId: traceId!, spanId: spanId!, flags: flags!, raw, tracestate: md["tracestate"] };
}

async function spansOf(receiver: OtlpReceiver, traceId: string, count: number): Promise<ReceivedSpan[]> {
  const of = (): ReceivedSpan[] => receiver.spans.filter((s) => s.traceId === traceId);
  await waitFor(() => of().length >= count, `${count} spans of trace ${traceId}`, 10_000);
  return of();
}

function named(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const s = spans.find((x) => x.name === name);
  assert.ok(s, `a span named ${name} (got ${spans.map((x) => x.name).join(", ")})`);
  return s!;
}

/**
 * The invoke span tree: `server` the root (or under `parent`), resolution, both conversions and the backend client
 * span its children, and the client span the one whose id the backend received.
 */
function assertInvokeTree(spans: ReceivedSpan[], server: ReceivedSpan, backend: OrderBackend): void {
  const resolve = named(spans, "resolve schema");
  const toBinary = named(spans, "json to protobuf");
  const client = named(spans, "shop.v1.OrderService/GetOrder");
  const toJson = named(spans, "protobuf to json");
  for (const child of [resolve, toBinary, client, toJson]) assert.equal(child.parentSpanId, server.spanId, `${child.name} is a child of the server span`);
  assert.equal(client.kind, SpanKind.CLIENT);
  assert.equal(resolve.kind, SpanKind.INTERNAL);
  assert.equal(client.attributes["rpc.system"], "grpc");
  assert.equal(client.attributes["rpc.service"], "shop.v1.OrderService");
  assert.equal(client.attributes["rpc.method"], "GetOrder");
  assert.equal(client.attributes["server.port"], backend.port);
  assert.equal(client.attributes["rpc.grpc.status_code"], 0);
  assert.equal(toBinary.attributes["gateway.conversion"], "inline");
  assert.equal(toBinary.attributes["gateway.message.type"], "shop.v1.GetOrderRequest");
  assert.ok(["hit", "miss"].includes(String(resolve.attributes["gateway.schema.cache"])));
  assert.equal(server.attributes["rpc.grpc.status_code"], 0);
  assert.equal(server.attributes["gateway.service"], "orders");
  const seen = backendTraceparent(backend);
  assert.equal(seen.traceId, server.traceId);
  assert.equal(seen.spanId, client.spanId, "the backend sees the client span's id");
  assert.equal(seen.flags, "01");
}

async function invokeJson(gw: TestGateway, orderId: string, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const r = await httpRequest(gw.http, "POST", "/v1/gateway/invoke-json", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId }) }, headers);
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as Record<string, unknown>;
}

describe("tracing: invoke over OTLP/HTTP", () => {
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

  it("a REST invoke-json is one trace: server span, schema, conversions and the backend client span whose id the backend sees", async () => {
    const r = await invokeJson(gw, "rest-1");
    assert.equal(r["success"], true, JSON.stringify(r));
    const { traceId } = backendTraceparent(backend);
    const spans = await spansOf(receiver, traceId, SPANS_PER_INVOKE);
    assert.equal(spans.length, SPANS_PER_INVOKE, spans.map((s) => s.name).join(", "));
    const server = named(spans, "POST /v1/gateway/invoke-json");
    assert.equal(server.kind, SpanKind.SERVER);
    assert.equal(server.parentSpanId, "", "a call without traceparent starts a trace");
    assert.equal(server.attributes["http.request.method"], "POST");
    assert.equal(server.attributes["http.route"], "/v1/gateway/invoke-json");
    assert.equal(server.resource["service.name"], "platform-gateway");
    assertInvokeTree(spans, server, backend);
    assert.deepEqual(receiver.rejected, []);
    assert.ok(receiver.contentTypes.every((t) => t === "application/x-protobuf"), "http/protobuf is the default");
  });

  it("a caller's traceparent makes the server span its child; its tracestate reaches the backend", async () => {
    await invokeJson(gw, "rest-2", { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`, tracestate: "vendor=abc" });
    const seen = backendTraceparent(backend);
    assert.equal(seen.traceId, CALLER_TRACE);
    assert.notEqual(seen.spanId, CALLER_SPAN, "the caller's traceparent is replaced by the gateway's client span");
    assert.equal(seen.tracestate, "vendor=abc");
    const spans = await spansOf(receiver, CALLER_TRACE, SPANS_PER_INVOKE);
    const server = named(spans, "POST /v1/gateway/invoke-json");
    assert.equal(server.parentSpanId, CALLER_SPAN);
    assertInvokeTree(spans, server, backend);
  });

  it("a malformed traceparent starts a new trace: the backend gets the gateway's valid one, never the caller's", async () => {
    for (const bad of ["garbage", `00-${"0".repeat(32)}-${CALLER_SPAN}-01`, `00-${CALLER_TRACE}-${CALLER_SPAN}-01-extra`]) {
      const r = await invokeJson(gw, "rest-bad", { traceparent: bad, tracestate: "vendor=abc" });
      assert.equal(r["success"], true, bad);
      const seen = backendTraceparent(backend);
      assert.notEqual(seen.raw, bad);
      assert.notEqual(seen.traceId, CALLER_TRACE, bad);
      assert.equal(seen.tracestate, undefined, "a tracestate without a valid traceparent is dropped");
      const spans = await spansOf(receiver, seen.traceId, SPANS_PER_INVOKE);
      assert.equal(named(spans, "POST /v1/gateway/invoke-json").parentSpanId, "", bad);
    }
  });

  it("REST invoke (object payloads) is traced under its own route", async () => {
    const r = await httpRequest(gw.http, "POST", "/v1/gateway/invoke", { service: "orders", method: "GetOrder", requestData: { orderId: "rest-3" } });
    assert.equal(r.status, 200, r.body);
    const spans = await spansOf(receiver, backendTraceparent(backend).traceId, SPANS_PER_INVOKE);
    assertInvokeTree(spans, named(spans, "POST /v1/gateway/invoke"), backend);
  });

  it("POST /v1/grpc/call is traced under its own route", async () => {
    const r = await httpRequest(gw.http, "POST", "/v1/grpc/call", { service: "orders", method: "GetOrder", request: JSON.stringify({ orderId: "call-1" }) });
    assert.equal(r.status, 200, r.body);
    const spans = await spansOf(receiver, backendTraceparent(backend).traceId, SPANS_PER_INVOKE);
    assertInvokeTree(spans, named(spans, "POST /v1/grpc/call"), backend);
  });

  it("gRPC InvokeJson and Invoke: the server span follows the RPC conventions and the caller's metadata traceparent", async () => {
    const md = new grpc.Metadata();
    md.set("traceparent", `00-${"ab".repeat(16)}-${CALLER_SPAN}-01`);
    const r = await unary<{ success: boolean }>(gw.client("platform.Gateway"), "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "grpc-1" }) }, md);
    assert.equal(r.success, true);
    const spans = await spansOf(receiver, "ab".repeat(16), SPANS_PER_INVOKE);
    const server = named(spans, "platform.Gateway/InvokeJson");
    assert.equal(server.kind, SpanKind.SERVER);
    assert.equal(server.parentSpanId, CALLER_SPAN);
    assert.equal(server.attributes["rpc.system"], "grpc");
    assert.equal(server.attributes["rpc.service"], "platform.Gateway");
    assert.equal(server.attributes["rpc.method"], "InvokeJson");
    assertInvokeTree(spans, server, backend);

    await unary(gw.client("platform.Gateway"), "Invoke", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "grpc-2" }) });
    const invokeSpans = await spansOf(receiver, backendTraceparent(backend).traceId, SPANS_PER_INVOKE);
    assertInvokeTree(invokeSpans, named(invokeSpans, "platform.Gateway/Invoke"), backend);
  });

  it("the transparent proxy: a proxied call is a server span with the backend call's client span under it, unary and streaming", async () => {
    const def = loadSync(SHOP_PROTO, { includeDirs: [protosDir], keepCase: false, longs: String, enums: String, defaults: false, oneofs: true });
    const shop = new (grpc.loadPackageDefinition(def) as any).shop.v1.OrderService(gw.grpcAddress, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (...a: unknown[]) => unknown>;
    const caller = (trace: string): grpc.Metadata => {
      const md = new grpc.Metadata();
      md.set("traceparent", `00-${trace}-${CALLER_SPAN}-01`);
      return md;
    };
    try {
      // The proxy routes the backend's services once its schema is loaded.
      const getOrder = (): Promise<grpc.ServiceError | null> =>
        new Promise((resolve) => shop["GetOrder"]!({ orderId: "proxy-1" }, caller("ef".repeat(16)), (e: grpc.ServiceError | null) => resolve(e)));
      const until = Date.now() + 10_000;
      let failed = await getOrder();
      while (failed?.code === grpc.status.UNIMPLEMENTED && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 20));
        failed = await getOrder();
      }
      assert.equal(failed, null);
      const spans = await spansOf(receiver, "ef".repeat(16), 2);
      const server = spans.find((x) => x.kind === SpanKind.SERVER && x.name === "shop.v1.OrderService/GetOrder");
      const client = spans.find((x) => x.kind === SpanKind.CLIENT && x.name === "shop.v1.OrderService/GetOrder");
      assert.ok(server && client, spans.map((x) => `${x.name}/${x.kind}`).join(", "));
      assert.equal(server.parentSpanId, CALLER_SPAN);
      assert.equal(client.parentSpanId, server.spanId);
      assert.equal(server.attributes["rpc.grpc.status_code"], 0);
      assert.equal(client.attributes["server.port"], backend.port);
      assert.equal(backendTraceparent(backend).spanId, client.spanId, "the backend sees the proxy's client span, not the caller's");

      const stream = shop["WatchOrders"]!({ orderId: "proxy-2" }, caller("fe".repeat(16))) as grpc.ClientReadableStream<unknown>;
      let messages = 0;
      await new Promise<void>((resolve, reject) => {
        stream.on("data", () => messages++);
        stream.on("error", reject);
        stream.on("end", resolve);
      });
      assert.equal(messages, 3);
      const streamed = await spansOf(receiver, "fe".repeat(16), 2);
      const sServer = streamed.find((x) => x.kind === SpanKind.SERVER)!;
      const sClient = streamed.find((x) => x.kind === SpanKind.CLIENT)!;
      assert.equal(sServer.name, "shop.v1.OrderService/WatchOrders");
      assert.equal(sClient.parentSpanId, sServer.spanId);
      assert.equal(backendTraceparent(backend).spanId, sClient.spanId);
    } finally {
      shop.close();
    }
  });

  it("a failed backend call: the client span is an error with the gRPC code, and so is the server span for a server-side code", async () => {
    const r = await invokeJson(gw, "fail:UNAVAILABLE:backend down");
    assert.equal(r["success"], false);
    const spans = await spansOf(receiver, backendTraceparent(backend).traceId, 4);
    const client = named(spans, "shop.v1.OrderService/GetOrder");
    assert.equal(client.attributes["rpc.grpc.status_code"], 14);
    assert.equal(client.status.code, 2);
    assert.match(client.status.message, /backend down/);
    await waitFor(() => receiver.spans.some((s) => s.traceId === client.traceId && s.name === "POST /v1/gateway/invoke-json"), "the server span");
    const server = named(receiver.spans.filter((s) => s.traceId === client.traceId), "POST /v1/gateway/invoke-json");
    assert.equal(server.attributes["rpc.grpc.status_code"], 14);
    assert.equal(server.status.code, 2);
    assert.equal(spans.some((s) => s.name === "protobuf to json"), false, "no response to convert");
  });

  it("a caller error (unknown service) ends the server span with its code but not as a server error", async () => {
    const before = receiver.spans.length;
    const r = await httpRequest(gw.http, "POST", "/v1/gateway/invoke-json", { service: "nope", method: "GetOrder", request_data: "{}" }, { traceparent: `00-${"cd".repeat(16)}-${CALLER_SPAN}-01` });
    assert.equal(JSON.parse(r.body)["success"], false);
    const spans = await spansOf(receiver, "cd".repeat(16), 1);
    assert.ok(receiver.spans.length > before);
    assert.equal(spans.length, 1, "only the server span: nothing was resolved or called");
    assert.equal(spans[0]!.attributes["rpc.grpc.status_code"], 5);
    assert.equal(spans[0]!.status.code, 0, "NOT_FOUND is the caller's error, not the server's");
  });
});

describe("tracing: a transcoded REST call", () => {
  let backend: LibraryBackend;
  let receiver: OtlpReceiver;
  let gw: TestGateway;

  before(async () => {
    backend = await startLibraryBackend();
    receiver = await startOtlpReceiver();
    gw = await startTestGateway({ services: [{ name: "library", grpc: { host: "127.0.0.1", port: backend.port } }], otlpTracesEndpoint: receiver.url, traceExportDelayMs: 20 });
    // The routes exist once the backend's schema is loaded.
    await routesLoaded(gw.http);
  });
  after(async () => {
    await gw?.close();
    await receiver?.close();
    backend?.close();
  });

  it("a transcoded GET is one trace: the server span named with the rule's template, the backend client span whose id the backend sees", async () => {
    const trace = "ab".repeat(16);
    const r = await httpRequest(gw.http, "GET", "/v1/shelves/t1/books?page_size=3", undefined, { traceparent: `00-${trace}-${CALLER_SPAN}-01` });
    assert.equal(r.status, 200, r.body);
    const spans = await spansOf(receiver, trace, SPANS_PER_INVOKE);
    const server = named(spans, "GET /v1/{parent=shelves/*}/books");
    assert.equal(server.kind, SpanKind.SERVER);
    assert.equal(server.parentSpanId, CALLER_SPAN);
    assert.equal(server.attributes["http.request.method"], "GET");
    assert.equal(server.attributes["http.route"], "/v1/{parent=shelves/*}/books");
    assert.equal(server.attributes["gateway.service"], "library");
    const client = named(spans, "library.v1.Library/ListBooks");
    assert.equal(client.kind, SpanKind.CLIENT);
    assert.equal(client.parentSpanId, server.spanId);
    assert.equal(client.attributes["rpc.grpc.status_code"], 0);
    const call = backend.calls.at(-1)!;
    assert.equal(call.method, "ListBooks");
    assert.deepEqual(call.request, { parent: "shelves/t1", page_size: 3 });
    assert.equal(call.metadata["traceparent"], `00-${trace}-${client.spanId}-01`, "the backend sees the client span's id");
  });

  it("a Connect unary JSON call is one trace too, its server span named with the browser RPC route", async () => {
    const trace = "cd".repeat(16);
    const r = await fetch(`${gw.http}/library.v1.Library/ListBooks`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", traceparent: `00-${trace}-${CALLER_SPAN}-01` },
      body: JSON.stringify({ parent: "shelves/t2" }),
    });
    assert.equal(r.status, 200, await r.clone().text());
    await r.arrayBuffer();
    const spans = await spansOf(receiver, trace, SPANS_PER_INVOKE);
    const server = named(spans, "POST /{service}/{method}");
    assert.equal(server.kind, SpanKind.SERVER);
    assert.equal(server.parentSpanId, CALLER_SPAN);
    const client = named(spans, "library.v1.Library/ListBooks");
    assert.equal(client.parentSpanId, server.spanId);
    assert.equal(backend.calls.at(-1)!.metadata["traceparent"], `00-${trace}-${client.spanId}-01`);
  });

  it("Connect binary unary, gRPC-Web and Connect streaming calls are traced under the same route (no conversion spans for bytes)", async () => {
    // ListBooksRequest{parent: "shelves/t3", page_size: 2}, protobuf binary
    const request = Buffer.concat([Buffer.from([0x0a, 10]), Buffer.from("shelves/t3"), Buffer.from([0x10, 2])]);
    const envelope = (b: Buffer): Buffer => Buffer.concat([Buffer.from([0, 0, 0, 0, b.length]), b]);
    const cases: Array<{ trace: string; path: string; headers: Record<string, string>; body: Buffer; spans: number }> = [
      { trace: "c1".repeat(16), path: "ListBooks", headers: { "content-type": "application/proto", "connect-protocol-version": "1" }, body: request, spans: 3 },
      { trace: "c2".repeat(16), path: "ListBooks", headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" }, body: envelope(request), spans: 3 },
      { trace: "c3".repeat(16), path: "WatchBooks", headers: { "content-type": "application/connect+proto", "connect-protocol-version": "1" }, body: envelope(request), spans: 2 },
    ];
    for (const c of cases) {
      const r = await fetch(`${gw.http}/library.v1.Library/${c.path}`, { method: "POST", headers: { ...c.headers, traceparent: `00-${c.trace}-${CALLER_SPAN}-01` }, body: c.body });
      assert.equal(r.status, 200, `${c.headers["content-type"]}: ${await r.clone().text()}`);
      await r.arrayBuffer();
      const spans = await spansOf(receiver, c.trace, c.spans);
      const server = named(spans, "POST /{service}/{method}");
      assert.equal(server.parentSpanId, CALLER_SPAN, c.headers["content-type"]);
      const client = named(spans, `library.v1.Library/${c.path}`);
      assert.equal(client.kind, SpanKind.CLIENT);
      assert.equal(client.parentSpanId, server.spanId);
      assert.equal(backend.calls.at(-1)!.metadata["traceparent"], `00-${c.trace}-${client.spanId}-01`, c.headers["content-type"]);
    }
  });
});

describe("tracing: sampling, JSON export, and off", () => {
  let backend: OrderBackend;
  before(async () => {
    backend = await startOrderBackend();
  });
  after(() => backend?.close());

  it("ratio 0 exports nothing but still propagates: the backend gets a traceparent (unsampled) continuing the caller's trace", async () => {
    const receiver = await startOtlpReceiver();
    const gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { traceSampler: "parentbased_traceidratio", traceSamplerArg: 0 }));
    try {
      await invokeJson(gw, "ratio-1");
      const fresh = backendTraceparent(backend);
      assert.equal(fresh.flags, "00", "not sampled");
      await invokeJson(gw, "ratio-2", { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-00` });
      const cont = backendTraceparent(backend);
      assert.equal(cont.traceId, CALLER_TRACE);
      assert.notEqual(cont.spanId, CALLER_SPAN);
      assert.equal(cont.flags, "00");
    } finally {
      await gw.close();
    }
    // close() flushed whatever was queued.
    assert.deepEqual(receiver.spans, []);
    await receiver.close();
  });

  it("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json: the same tree arrives as OTLP JSON", async () => {
    const receiver = await startOtlpReceiver();
    const gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { otlpTracesProtocol: "http/json" }));
    try {
      await invokeJson(gw, "json-1");
      const spans = await spansOf(receiver, backendTraceparent(backend).traceId, SPANS_PER_INVOKE);
      assertInvokeTree(spans, named(spans, "POST /v1/gateway/invoke-json"), backend);
      assert.ok(receiver.contentTypes.length > 0 && receiver.contentTypes.every((t) => t === "application/json"));
    } finally {
      await gw.close();
      await receiver.close();
    }
  });

  it("conversions on the pool say so with their queue wait; a cached schema is a hit", async () => {
    const receiver = await startOtlpReceiver();
    const gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { workerThresholdBytes: 0, conversionWorkers: 1 }));
    try {
      for (const id of ["pool-1", "pool-2"]) {
        await invokeJson(gw, id);
        const spans = await spansOf(receiver, backendTraceparent(backend).traceId, SPANS_PER_INVOKE);
        for (const name of ["json to protobuf", "protobuf to json"]) {
          const c = named(spans, name);
          assert.equal(c.attributes["gateway.conversion"], "pool", name);
          const queued = c.attributes["gateway.conversion.queue_ms"];
          assert.ok(typeof queued === "number" && queued >= 0, `${name} queue wait ${String(queued)}`);
        }
        if (id === "pool-2") assert.equal(named(spans, "resolve schema").attributes["gateway.schema.cache"], "hit");
      }
    } finally {
      await gw.close();
      await receiver.close();
    }
  });

  it("tracing off: no traceparent is invented and the caller's is forwarded untouched", async () => {
    const gw = await startTestGateway(tracedOrdersOptions(backend, undefined));
    try {
      await invokeJson(gw, "off-1");
      assert.equal(backend.received.at(-1)!.metadata["traceparent"], undefined);
      const caller = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
      await invokeJson(gw, "off-2", { traceparent: caller, tracestate: "vendor=abc" });
      assert.equal(backend.received.at(-1)!.metadata["traceparent"], caller);
      assert.equal(backend.received.at(-1)!.metadata["tracestate"], "vendor=abc");
    } finally {
      await gw.close();
    }
  });
});

describe("tracing with --threads 2", () => {
  let backend: OrderBackend;
  let receiver: OtlpReceiver;
  let gw: TestGateway;
  const KEY = "trace-thread-key";

  before(async () => {
    backend = await startOrderBackend();
    receiver = await startOtlpReceiver();
    // Every gRPC invoke offloaded to a thread, so the context must cross the hop.
    gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { threads: 2, apiKeys: [KEY] }), { invokeOffloadMinInflight: 0 });
  });
  after(async () => {
    await gw?.close();
    await receiver?.close();
    backend?.close();
  });

  it("REST invoke-json served on a uWS thread is exported by that thread, the same tree", async () => {
    for (let i = 0; i < 4; i++) {
      await invokeJson(gw, `thread-rest-${i}`, { "x-api-key": KEY });
      const spans = await spansOf(receiver, backendTraceparent(backend).traceId, SPANS_PER_INVOKE);
      const server = named(spans, "POST /v1/gateway/invoke-json");
      assertInvokeTree(spans, server, backend);
      assert.equal(typeof server.resource["gateway.thread"], "number", "a thread's own exporter");
    }
  });

  it("gRPC InvokeJson offloaded to a thread keeps the parent: the main thread's server span, the thread's spans under it", async () => {
    const md = withKey(KEY);
    md.set("traceparent", `00-${"ef".repeat(16)}-${CALLER_SPAN}-01`);
    const r = await unary<{ success: boolean }>(gw.client("platform.Gateway"), "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "thread-grpc" }) }, md);
    assert.equal(r.success, true);
    const spans = await spansOf(receiver, "ef".repeat(16), SPANS_PER_INVOKE);
    const server = named(spans, "platform.Gateway/InvokeJson");
    assert.equal(server.parentSpanId, CALLER_SPAN);
    assert.equal(server.resource["gateway.thread"], undefined, "the server span is the main thread's");
    assertInvokeTree(spans, server, backend);
    assert.equal(typeof named(spans, "shop.v1.OrderService/GetOrder").resource["gateway.thread"], "number", "the backend call ran on a thread");
  });
});

describe("tracing: shutdown", () => {
  it("close() flushes the spans still queued, the uWS threads' included", async () => {
    const backend = await startOrderBackend();
    const receiver = await startOtlpReceiver();
    // An export delay far past the test: only the flush on close can deliver these spans.
    const gw = await startTestGateway(tracedOrdersOptions(backend, receiver, { threads: 2, traceExportDelayMs: 600_000 }));
    try {
      await invokeJson(gw, "flush-rest");
      const restTrace = backendTraceparent(backend).traceId;
      await unary(gw.client("platform.Gateway"), "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "flush-grpc" }) });
      const grpcTrace = backendTraceparent(backend).traceId;
      assert.equal(receiver.spans.length, 0, "nothing exported before close");
      await gw.close();
      for (const traceId of [restTrace, grpcTrace]) assert.equal(receiver.spans.filter((s) => s.traceId === traceId).length, SPANS_PER_INVOKE, traceId);
    } finally {
      await gw.close();
      await receiver.close();
      backend.close();
    }
  });
});

describe("tracing from the command line", () => {
  it("OTEL_TRACES_EXPORTER=otlp with the generic endpoint, JSON protocol and service name: spans arrive, and the start is logged", async () => {
    const receiver = await startOtlpReceiver();
    const base = receiver.url.replace(/\/v1\/traces$/, "");
    const gw = await startGatewayProcess(["--threads", "1"], {
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: base,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "gateway-under-test",
      OTEL_BSP_SCHEDULE_DELAY: "20",
    });
    try {
      const r = await httpRequest(`http://127.0.0.1:${gw.httpPort}`, "POST", "/v1/gateway/invoke-json", { service: "nope", method: "M", request_data: "{}" }, { traceparent: `00-${"12".repeat(16)}-${CALLER_SPAN}-01` });
      assert.equal(JSON.parse(r.body)["success"], false);
      const [server] = await spansOf(receiver, "12".repeat(16), 1);
      assert.equal(server!.name, "POST /v1/gateway/invoke-json");
      assert.equal(server!.resource["service.name"], "gateway-under-test");
      assert.ok(receiver.contentTypes.every((t) => t === "application/json"));
      const started = gw.stdout.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l["msg"] === "exporting traces over OTLP/HTTP");
      assert.deepEqual([started?.["endpoint"], started?.["protocol"], started?.["sampler"]], [receiver.url, "http/json", "parentbased_always_on"]);
    } finally {
      await gw.stop();
      await receiver.close();
    }
  });
});
