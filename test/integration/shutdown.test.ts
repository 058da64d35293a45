import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import * as grpc from "@grpc/grpc-js";
import type { Runtime } from "../../src/runtime/index.js";
import { startTestGateway, unary, waitFor } from "../support/gateway.js";
import { runtimeOf, wrapRuntime } from "../support/state-runtime.js";
import { startOrderBackend } from "../support/backends/order-backend.js";

/** GET over an explicit keep-alive agent so a second request reuses the first one's connection. */
function get(url: string, agent: import("node:http").Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { agent }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

describe("graceful shutdown", () => {
  it("refuses new work with UNAVAILABLE / 503 once closing, then stops; close() twice is safe", async () => {
    const gw = await startTestGateway({ shutdownTimeoutMs: 2000 });
    const { Agent } = await import("node:http");
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const c = gw.client("platform.Config");
    assert.equal((await get(`${gw.http}/v1/config/list-services`, agent)).status, 200);
    await unary(c, "ListServices", {});

    const closing = gw.gateway.close();
    const rest = await get(`${gw.http}/v1/config/list-services`, agent).catch((e: Error) => ({ status: -1, body: e.message }));
    // Either the kept-alive connection answers 503, or it was already closed: never a 200.
    assert.ok(rest.status === 503 || rest.status === -1, `status ${rest.status}`);
    if (rest.status === 503) assert.equal((JSON.parse(rest.body) as { code: number }).code, 14);
    await assert.rejects(unary(c, "ListServices", {}), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
    assert.equal(gw.gateway.close(), closing, "close() twice returns the same promise");
    await closing;
    gw.gateway.destroy();
    gw.gateway.destroy();
    assert.ok(gw.logs.some((l) => l["msg"] === "gateway stopped"));
    agent.destroy();
    c.close();
  });
});

describe("graceful shutdown with work that never finishes", () => {
  it("close() ends a stuck gRPC call with a status, and gives a runtime that never closes only the bound plus the grace", async () => {
    const base = await runtimeOf({ options: { sidecar: "embedded" }, async close() {} });
    let entered = 0;
    const stuck = wrapRuntime(base, { state: { get: () => (entered++, new Promise<never>(() => undefined)) } });
    const runtime: Runtime = {
      ...stuck,
      async close() {
        await base.close();
        await new Promise<never>(() => undefined); // a sidecar that never answers the goodbye
      },
    };
    const timeoutMs = 300;
    const gw = await startTestGateway({ shutdownTimeoutMs: timeoutMs, services: [{ name: "orders", state: { storeName: "s", keys: [] } }] }, { runtime });
    const c = gw.client("platform.State");
    // The deadline only turns a regression into a failure instead of a hung test.
    const call = unary(c, "GetState", { service: "orders", key: "k" }, undefined, { deadline: Date.now() + 10_000 }).then(
      () => "answered",
      (e: grpc.ServiceError) => e.code,
    );
    await waitFor(() => entered === 1, "the call in the runtime");

    const started = Date.now();
    await gw.gateway.close();
    const ms = Date.now() - started;
    assert.ok(ms >= timeoutMs - 20, `close() waited for the in-flight call (${ms} ms)`);
    assert.ok(ms < timeoutMs + 1000 + 1500, `close() returned within the bound and the release grace (${ms} ms)`);
    // The client is told, not left waiting on a session nobody will answer.
    assert.equal(await call, grpc.status.CANCELLED);
    assert.ok(gw.logs.some((l) => l["msg"] === "gateway stopped"));
    c.close();
  });

  it("close() with invoke calls running on both ports and HTTP worker threads returns within the timeout plus about a second", async () => {
    const backend = await startOrderBackend();
    const timeoutMs = 1500;
    const gw = await startTestGateway({ threads: 2, shutdownTimeoutMs: timeoutMs, invokeDeadlineMs: 30_000, services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    const c = gw.client("platform.Gateway");
    try {
      // Calls the backend holds for 20 s: they outlive the timeout on the gRPC port and on a worker thread's REST port.
      const request_data = JSON.stringify({ orderId: "sleep:20000" });
      const grpcCalls = [1, 2].map(() =>
        unary(c, "InvokeJson", { service: "orders", method: "GetOrder", request_data }, undefined, { deadline: Date.now() + 25_000 }).then(
          () => "answered",
          (e: grpc.ServiceError) => e.code,
        ),
      );
      const body = JSON.stringify({ service: "orders", method: "GetOrder", requestData: { orderId: "sleep:20000" } });
      const restCalls = [1, 2].map(() =>
        fetch(`${gw.http}/v1/gateway/invoke`, { method: "POST", headers: { "content-type": "application/json" }, body }).then(
          (r) => r.status,
          () => "connection closed",
        ),
      );
      await waitFor(() => backend.received.length === 4, "the four calls at the backend", 10_000);
      const started = Date.now();
      await gw.gateway.close();
      const ms = Date.now() - started;
      assert.ok(ms >= timeoutMs - 20, `close() waited for the calls in flight (${ms} ms)`);
      // docs/operations.md: the timeout, then at most about a second for the runtime and the OTLP flush.
      assert.ok(ms < timeoutMs + 1000, `close() took ${ms} ms with --shutdown-timeout ${timeoutMs}`);
      assert.deepEqual(await Promise.all(grpcCalls), [grpc.status.CANCELLED, grpc.status.CANCELLED]);
      assert.deepEqual(await Promise.all(restCalls), ["connection closed", "connection closed"]);
    } finally {
      c.close();
      backend.close();
    }
  });

  it("close() does not wait for the timeout when a client only holds an idle connection", async () => {
    const gw = await startTestGateway({ shutdownTimeoutMs: 5000 });
    const c = gw.client("platform.Config");
    await unary(c, "ListServices", {});
    const started = Date.now();
    await gw.gateway.close();
    const ms = Date.now() - started;
    assert.ok(ms < 2500, `close() took ${ms} ms with an idle client connection (timeout 5000 ms)`);
    c.close();
  });
});
