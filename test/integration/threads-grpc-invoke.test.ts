import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import * as grpc from "@grpc/grpc-js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import type { GatewayOptions } from "../../src/config/options.js";

const KEY = "grpc-thread-key";

interface InvokeReply {
  success: boolean;
  status: string;
  message: string;
  response_data: string;
}

function options(backend: OrderBackend, threads: number): GatewayOptions {
  return {
    threads,
    apiKeys: [KEY],
    forwardHeaders: ["traceparent", "x-tenant"],
    services: [
      { name: "orders", grpc: { host: "127.0.0.1", port: backend.port, channels: 1 } },
      { name: "kv", state: { storeName: "kv-store", keys: [] } },
    ],
  };
}

/** Key, two allow-listed entries (one repeated) and two that must not reach a backend. */
function callMetadata(): grpc.Metadata {
  const md = withKey(KEY);
  md.add("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  md.add("x-tenant", "t1");
  md.add("x-tenant", "t2");
  md.add("authorization", "Bearer secret-token");
  md.add("x-unlisted", "nope");
  return md;
}

function invoke(gw: TestGateway, method: "Invoke" | "InvokeJson", request: object, options: grpc.CallOptions = {}): Promise<InvokeReply> {
  return unary<InvokeReply>(gw.client("platform.Gateway"), method, request, callMetadata(), options);
}

function get(base: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(`${base}${path}`, { agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        res.on("error", reject);
      })
      .on("error", reject);
  });
}

/** The value of one series in Prometheus text (0 when absent). */
function metricValue(text: string, name: string, labels: string[]): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && labels.every((p) => l.includes(p)));
  return line ? Number(line.split(" ").pop()) : 0;
}

/** The calls the parity test makes: success with metadata, a backend failure, and every in-band refusal of the op. */
const CASES: Array<[string, object]> = [
  ["ok", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "o1" }) }],
  ["full name", { service: "orders", method: "shop.v1.OrderService/GetOrder", request_data: JSON.stringify({ orderId: "o2" }) }],
  ["empty request", { service: "orders", method: "shop.v1.OrderService/ListOrders", request_data: "" }],
  ["backend failure", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "fail:NOT_FOUND:no such order" }) }],
  ["unknown service", { service: "nope", method: "GetOrder", request_data: "{}" }],
  ["service without address", { service: "kv", method: "GetOrder", request_data: "{}" }],
  ["empty service", { service: "", method: "GetOrder", request_data: "{}" }],
  ["unknown method", { service: "orders", method: "NoSuchMethod", request_data: "{}" }],
  ["ambiguous method", { service: "orders", method: "ListOrders", request_data: "{}" }],
  ["bad JSON", { service: "orders", method: "GetOrder", request_data: "{not json" }],
  ["unknown field", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ nope: 1 }) }],
  ["streaming method", { service: "orders", method: "WatchOrders", request_data: "{}" }],
];

describe("gRPC Invoke/InvokeJson on the uWS worker threads (--threads 2)", () => {
  let backend: OrderBackend;
  let one: TestGateway;
  let two: TestGateway;

  before(async () => {
    backend = await startOrderBackend();
    // Every call offloaded (the default keeps a lone call on the main thread), so these sequential calls cross.
    [one, two] = await Promise.all([startTestGateway(options(backend, 1)), startTestGateway(options(backend, 2), { invokeOffloadMinInflight: 0 })]);
  });
  after(async () => {
    await Promise.all([one?.close(), two?.close()]);
    backend?.close();
  });

  it("answers every call byte for byte as one thread does, runs it on the threads and counts it once", async () => {
    for (const method of ["InvokeJson", "Invoke"] as const) {
      for (const [what, req] of CASES) {
        const a = await invoke(one, method, req);
        const b = await invoke(two, method, req);
        assert.deepEqual(b, a, `${method} ${what}`);
      }
    }
    const ok = await invoke(two, "InvokeJson", CASES[0]![1]);
    assert.equal(ok.status, "OK", ok.message);
    // The backend saw the allow-listed entries (the repeated one in order) and no credential or unlisted entry.
    const attrs = (JSON.parse(ok.response_data) as { attributes: Record<string, string> }).attributes;
    assert.equal(attrs["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.equal(attrs["x-tenant"], "t1, t2");
    for (const k of ["x-api-key", "authorization", "x-unlisted"]) assert.equal(attrs[k], undefined, k);

    // Counted once: by the threads (their registries, summed in /metrics), not by the main thread, and per outcome
    // exactly as the single-thread gateway counts the same calls (plus the one more call above).
    const main = await two.gateway.context.metrics.registry.metrics();
    assert.equal(metricValue(main, "platform_gateway_invocations_total", []), 0, "the main thread ran none");
    const all = await get(two.http, "/metrics");
    const single = await get(one.http, "/metrics");
    const series: Array<[string, number]> = [
      ['service="orders"', 'code="OK"'],
      ['service="orders"', 'code="NOT_FOUND"'],
      ['service="orders"', 'code="INVALID_ARGUMENT"'],
      ['service="orders"', 'code="UNIMPLEMENTED"'],
      ['service="(unknown)"', 'code="NOT_FOUND"'],
      ['service="(unknown)"', 'code="INVALID_ARGUMENT"'],
    ].map(([s, c]) => [`${s},${c}`, c === 'code="OK"' && s === 'service="orders"' ? 1 : 0]);
    for (const [labels, extra] of series) {
      const want = metricValue(single, "platform_gateway_invocations_total", labels.split(","));
      assert.ok(want > 0, `the single-thread gateway counted ${labels}`);
      assert.equal(metricValue(all, "platform_gateway_invocations_total", labels.split(",")), want + extra, labels);
      assert.equal(metricValue(all, "platform_gateway_invoke_duration_seconds_count", labels.split(",")), want + extra, `latency ${labels}`);
    }
    assert.equal(metricValue(all, "platform_grpc_requests_total", ['method="platform.Gateway/InvokeJson"', 'code="OK"']), CASES.length + 1);
  });

  it("carries the caller's deadline to the backend and answers DEADLINE_EXCEEDED when it passes", async () => {
    const deadline = Date.now() + 400;
    const seen = backend.received.length;
    await assert.rejects(
      invoke(two, "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "sleep:5000" }) }, { deadline }),
      (e: grpc.ServiceError) => e.code === grpc.status.DEADLINE_EXCEEDED,
    );
    const call = backend.received.slice(seen).find((c) => c.path.endsWith("/GetOrder"));
    assert.ok(call?.deadline !== undefined, "the backend saw a deadline");
    assert.ok(Math.abs(call.deadline - deadline) < 250, `backend deadline ${call.deadline} vs caller's ${deadline}`);
    await waitFor(() => backend.cancelled.includes("sleep:5000"), "the backend call to end at the deadline", 3000);
  });

  it("cancels the thread's backend call when the gRPC caller cancels", async () => {
    const client = two.client("platform.Gateway");
    const fn = (client as unknown as Record<string, Function>)["InvokeJson"]!;
    const seen = backend.received.length;
    const cancelledBefore = metricValue(await get(two.http, "/metrics"), "platform_gateway_invocations_total", ['service="orders"', 'code="CANCELLED"']);
    let error: grpc.ServiceError | undefined;
    const call = fn.call(client, { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "sleep:5001" }) }, callMetadata(), {}, (err: grpc.ServiceError | null) => {
      error = err ?? undefined;
    }) as grpc.ClientUnaryCall;
    await waitFor(() => backend.received.slice(seen).some((c) => c.path.endsWith("/GetOrder")), "the backend to get the call");
    const started = Date.now();
    call.cancel();
    await waitFor(() => backend.cancelled.includes("sleep:5001"), "the backend call to be cancelled", 2000);
    assert.ok(Date.now() - started < 2000);
    await waitFor(() => error !== undefined, "the client to see its cancel");
    assert.equal(error!.code, grpc.status.CANCELLED);
    // The thread counted the cancelled call once (its outcome), the main thread did not.
    let cancelled = cancelledBefore;
    for (let i = 0; i < 100 && cancelled === cancelledBefore; i++) {
      cancelled = metricValue(await get(two.http, "/metrics"), "platform_gateway_invocations_total", ['service="orders"', 'code="CANCELLED"']);
      if (cancelled === cancelledBefore) await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 100));
    cancelled = metricValue(await get(two.http, "/metrics"), "platform_gateway_invocations_total", ['service="orders"', 'code="CANCELLED"']);
    assert.equal(cancelled, cancelledBefore + 1);
    const main = await two.gateway.context.metrics.registry.metrics();
    assert.equal(metricValue(main, "platform_gateway_invocations_total", ['service="orders"', 'code="CANCELLED"']), 0);
  });

  it("answers UNAVAILABLE in-band, not a hang, when the thread running the call crashes", async () => {
    const threads = two.gateway.threads!;
    const seen = backend.received.length;
    const pending = invoke(two, "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "sleep:5002" }) });
    await waitFor(() => backend.received.slice(seen).some((c) => c.path.endsWith("/GetOrder")), "the backend to get the call");
    const started = Date.now();
    // Whichever thread took it: both crash.
    threads.crash(1);
    threads.crash(2);
    const r = await pending;
    assert.ok(Date.now() - started < 3000, `answered after ${Date.now() - started} ms`);
    assert.equal(r.success, false);
    assert.equal(r.status, "UNAVAILABLE");
    assert.match(r.message, /uWS worker thread \d exited/);
    // The main thread counted it (the thread that had it is gone).
    const main = await two.gateway.context.metrics.registry.metrics();
    assert.equal(metricValue(main, "platform_gateway_invocations_total", ['service="orders"', 'code="UNAVAILABLE"']), 1);
    // Once the threads are back they take the calls again.
    await waitFor(() => threads.running() === 2, "both threads to start again", 10_000);
    const back = await invoke(two, "InvokeJson", CASES[0]![1]);
    assert.equal(back.status, "OK", back.message);
  });
});

describe("gRPC invoke offload policy (--threads 2)", () => {
  let backend: OrderBackend;
  let offload: TestGateway;
  let plain: TestGateway;
  before(async () => {
    backend = await startOrderBackend();
    [offload, plain] = await Promise.all([startTestGateway({ ...options(backend, 2), grpcInvokeOffload: 1 }), startTestGateway(options(backend, 2))]);
  });
  after(async () => {
    await Promise.all([offload?.close(), plain?.close()]);
    backend?.close();
  });

  const mainCount = async (gw: TestGateway): Promise<number> =>
    metricValue(await gw.gateway.context.metrics.registry.metrics(), "platform_gateway_invocations_total", ['service="orders"', 'code="OK"']);
  const concurrent = (gw: TestGateway, n: number): Promise<InvokeReply[]> =>
    Promise.all(Array.from({ length: n }, (_, i) => invoke(gw, "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: `sleep:${200 + i}` }) })));

  it("--grpc-invoke-offload 1: a lone call runs on the main thread (no thread hops), calls that would queue go to the threads", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await invoke(offload, "InvokeJson", CASES[0]![1])).status, "OK");
    assert.equal(await mainCount(offload), 3, "sequential calls ran on the main thread");
    const n = 8;
    for (const r of await concurrent(offload, n)) assert.equal(r.status, "OK", r.message);
    const here = await mainCount(offload);
    assert.ok(here < 3 + n, `some of the ${n} concurrent calls ran on the threads (main thread ran ${here - 3})`);
    assert.equal(metricValue(await get(offload.http, "/metrics"), "platform_gateway_invocations_total", ['service="orders"', 'code="OK"']), 3 + n, "each counted once");
  });

  it("by default (0) every gRPC invoke runs on the main thread", async () => {
    const n = 8;
    for (const r of await concurrent(plain, n)) assert.equal(r.status, "OK", r.message);
    assert.equal(await mainCount(plain), n);
  });
});
