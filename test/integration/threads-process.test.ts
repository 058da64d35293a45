import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { httpRequest, type HttpReply } from "../support/http-request.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

const KEY = "process-key";
/** Connections opened to reach both threads: the kernel picks a thread per connection, so 16 all on one is 2^-15. */
const SPREAD = 16;
/** The process-wide bound under test: three pools (the main thread's and two uWS threads') share one worker. */
const BOUND = 1;

const request = (base: string, method: string, path: string, body?: unknown): Promise<HttpReply> => httpRequest(base, method, path, body, { "x-api-key": KEY });

/** invoke-json through whichever thread accepts the connection; the in-band result. */
async function invoke(gw: TestGateway, method: string, data: object): Promise<{ success: boolean; status: string; message: string; response_data: string }> {
  const r = await request(gw.http, "POST", "/v1/gateway/invoke-json", { service: "orders", method, request_data: JSON.stringify(data) });
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as { success: boolean; status: string; message: string; response_data: string };
}

/** The process's conversion workers, as /metrics and /health report them. */
async function workersSeen(gw: TestGateway): Promise<{ metric: number; health: string }> {
  const m = (await request(gw.http, "GET", "/metrics")).body;
  const help = m.split("\n").find((l) => l.startsWith("# HELP platform_gateway_conversion_workers "));
  assert.ok(help && help.length > 60, "the gauge has help text");
  const line = m.split("\n").find((l) => l.startsWith("platform_gateway_conversion_workers "));
  assert.ok(line, "the gauge is on /metrics once");
  const h = JSON.parse((await request(gw.http, "GET", "/health")).body) as { entries: Record<string, { description: string }> };
  return { metric: Number(line.split(" ").pop()), health: h.entries["conversion-workers"]!.description };
}

const schemaLoads = (gw: TestGateway, thread: number, schemaId?: string): number =>
  gw.logs.filter((l) => l["thread"] === thread && l["msg"] === "backend schema loaded" && (schemaId === undefined || l["schemaId"] === schemaId)).length;

describe("per process, not per thread (--threads 2): one conversion-worker bound, one reflection", () => {
  let backend: OrderBackend;
  let proxy: TcpProxy;
  let gw: TestGateway;

  before(async () => {
    backend = await startOrderBackend({ admin: false });
    // Between the gateway and the backend, counting the connections the gateway opens.
    proxy = await startTcpProxy(backend.port);
    gw = await startTestGateway({
      threads: 2,
      conversionWorkers: BOUND,
      apiKeys: [KEY],
      services: [{ name: "orders", grpc: { host: "127.0.0.1", port: proxy.port, channels: 1 } }],
    });
    await waitFor(() => schemaLoads(gw, 1) > 0 && schemaLoads(gw, 2) > 0, "each thread's schema", 20_000);
  });
  after(async () => {
    await gw?.close();
    proxy?.close();
    backend?.close();
  });

  it("reflects once, on the main thread; invokes on both threads; an idle thread opens no grpc-js channel", async () => {
    for (let i = 0; i < SPREAD; i++) {
      const r = await invoke(gw, "GetOrder", { orderId: `o${i}` });
      assert.equal(r.success, true, r.message);
    }
    assert.equal(backend.reflections.count, 1, "one reflection for the process, not one per thread");
    // The main thread's grpc-js channel (reflection, health) and one raw-frame unary connection per thread that served
    // an invoke: no thread opened grpc-js channels of its own (before, each thread held both stacks: 5 connections).
    assert.ok(proxy.open() <= 3, `${proxy.open()} backend connections open`);
    const startup = gw.logs.find((l) => l["msg"] === "gateway listening");
    assert.equal(startup?.["conversionWorkers"], BOUND, "the startup line shows the bound");
  });

  it("large payloads convert on the threads' pools, and the process never holds more workers than the bound", async () => {
    const big = (i: number): object => ({ orderId: `big-${i}-${"x".repeat(8_000)}` });
    let seen = 0;
    let sampling = true;
    const samples: number[] = [];
    const sampler = (async () => {
      while (sampling) {
        const w = await workersSeen(gw);
        samples.push(w.metric);
        assert.match(w.health, new RegExp(`^\\d+ of at most ${BOUND} conversion workers alive in the process \\(shared by 3 pools`));
        const held = Number(w.health.split(" ")[0]);
        assert.ok(held <= BOUND, w.health);
        seen = Math.max(seen, held, w.metric);
      }
    })();
    try {
      for (let round = 0; round < 3; round++) {
        const results = await Promise.all(Array.from({ length: SPREAD }, (_, i) => invoke(gw, "PutOrder", big(round * SPREAD + i))));
        results.forEach((r, i) => {
          assert.equal(r.success, true, r.message);
          assert.equal((JSON.parse(r.response_data) as { orderId: string }).orderId, (big(round * SPREAD + i) as { orderId: string }).orderId);
        });
      }
    } finally {
      sampling = false;
      await sampler;
    }
    assert.ok(samples.every((s) => s >= 0 && s <= BOUND), `samples ${samples.join(",")}`);
    assert.ok(seen >= 1 || samples.length < 3, "a pool worker ran");
    const m = (await request(gw.http, "GET", "/metrics")).body;
    assert.match(m, /platform_gateway_invocations_total\{service="orders",code="OK"\} \d+/);
  });

  it("a backend schema change reaches both threads from the main thread's one reflection", async () => {
    const before = gw.logs.filter((l) => l["msg"] === "backend schema loaded" && l["thread"] === 1).at(-1)?.["schemaId"];
    backend.close();
    const changed = await startOrderBackend({ admin: true, port: backend.port });
    backend = changed;
    proxy.dropAll();
    // Ping is new: a thread that misses it asks the main thread to reflect again (at most once a second per thread).
    const end = Date.now() + 15_000;
    for (;;) {
      const r = await invoke(gw, "Ping", { text: "hi" });
      if (r.success) break;
      assert.ok(Date.now() < end, `Ping never resolved: ${r.status} ${r.message}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    const fresh = gw.logs.filter((l) => l["msg"] === "backend schema loaded" && l["thread"] === undefined).at(-1)?.["schemaId"] as string;
    assert.notEqual(fresh, before);
    // The main thread pushed the new schema to both threads: each logged it, and neither reflected on its own.
    await waitFor(() => schemaLoads(gw, 1, fresh) > 0 && schemaLoads(gw, 2, fresh) > 0, "the new schema on both threads", 10_000);
    for (let i = 0; i < SPREAD; i++) {
      const r = await invoke(gw, "Ping", { text: `t${i}` });
      assert.equal(r.success, true, r.message);
    }
    assert.equal(changed.reflections.count, 1, "the changed backend was reflected once, by the main thread");
    // A refresh asked on a thread is the main thread's too.
    const listed = await request(gw.http, "GET", "/v1/grpc/orders/methods?refresh=true");
    assert.equal(listed.status, 200, listed.body);
    assert.match(listed.body, /ops\.v1\.Admin\/Ping/);
    assert.equal(changed.reflections.count, 2);
  });

  it("a thread that crashes gives its conversion workers' slots back to the process", async () => {
    const big = { orderId: `crash-${"x".repeat(8_000)}` };
    // A large conversion on a thread leaves its worker alive (idle) and its slot held.
    assert.equal((await invoke(gw, "PutOrder", big)).success, true);
    assert.equal((await workersSeen(gw)).metric, BOUND);
    const threads = gw.gateway.threads!;
    for (const index of [1, 2]) {
      const restarts = gw.logs.filter((l) => l["msg"] === "uWS worker thread started again").length;
      threads.crash(index);
      await waitFor(() => gw.logs.filter((l) => l["msg"] === "uWS worker thread started again").length > restarts, `thread ${index} restarted`, 20_000);
    }
    // Whichever thread held the slot, it died with its workers: the slot is the process's again, not lost for good.
    assert.equal((await workersSeen(gw)).metric, 0);
    assert.equal((await invoke(gw, "PutOrder", big)).success, true);
  });

  it("invoke streams on the threads open their grpc-js channel when first needed", async () => {
    const open = proxy.open();
    for (let i = 0; i < 4; i++) {
      const r = await request(gw.http, "POST", "/v1/gateway/invoke-stream", { service: "orders", method: "WatchOrders", requestData: { orderId: "count:2" } });
      assert.equal(r.status, 200, r.body);
      const lines = r.body.trim().split("\n").map((l) => JSON.parse(l) as { result?: { orderId: string }; status?: { status: string } });
      assert.deepEqual(lines.map((l) => l.result?.orderId ?? l.status?.status), ["o1", "o2", "OK"]);
    }
    assert.ok(proxy.open() > open, "a thread's grpc-js channel was created for the stream");
  });
});
