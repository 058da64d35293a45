import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { RICH_ORDER } from "../support/backends/rich-order.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";

const KEY = "k1";

/** Poll an async check until it holds, bounded. */
async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function invokeJson(gw: TestGateway, service: string, method: string, request: unknown, options: grpc.CallOptions = {}) {
  return unary(gw.client("platform.Gateway"), "InvokeJson", { service, method, request_data: JSON.stringify(request) }, withKey(KEY), options);
}

async function restInvoke(gw: TestGateway, service: string, method: string, requestData: unknown, signal?: AbortSignal) {
  const res = await fetch(`${gw.http}/v1/gateway/invoke`, {
    method: "POST",
    headers: { "x-api-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({ service, method, requestData }),
    ...(signal ? { signal } : {}),
  });
  return (await res.json()) as { success: boolean; status: string; message: string; responseData: any };
}

/** platform_gateway_invocations_total for `service` and outcome `code` (0 when not yet counted). */
async function invocations(gw: TestGateway, service: string, code: string): Promise<number> {
  const text = await (await fetch(`${gw.http}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("platform_gateway_invocations_total{") && l.includes(`service="${service}"`) && l.includes(`code="${code}"`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

async function poolEntry(gw: TestGateway): Promise<{ status: string; description: string }> {
  const body = (await (await fetch(`${gw.http}/health`)).json()) as { entries: Record<string, { status: string; description: string }> };
  return body.entries["grpc-channel-pool"]!;
}

for (const fixture of runtimeFixtures) {
  describe(`dynamic dispatch resilience [${fixture.name}]`, () => {
    let rich: OrderBackend;
    let flaky: OrderBackend;
    let late: OrderBackend;
    let bare: OrderBackend;
    let gw: TestGateway;
    let closeRuntime: () => Promise<void>;

    before(async () => {
      const rt = await fixture.setup();
      closeRuntime = rt.close;
      rich = await startOrderBackend();
      flaky = await startOrderBackend({ admin: false });
      bare = await startOrderBackend({ reflection: [] });
      late = await startOrderBackend();
      late.stop(); // down when the gateway starts
      gw = await startTestGateway(
        {
          ...rt.options,
          apiKeys: [KEY],
          invokeDeadlineMs: 400,
          workerThresholdBytes: 1024,
          services: [
            { name: "orders", grpc: { host: "127.0.0.1", port: rich.port } },
            { name: "flaky", grpc: { host: "127.0.0.1", port: flaky.port, channels: 1 } },
            { name: "late", grpc: { host: "127.0.0.1", port: late.port } },
            { name: "bare", grpc: { host: "127.0.0.1", port: bare.port } },
          ],
        },
        rt.overrides,
      );
    });
    after(async () => {
      await gw.close();
      for (const b of [rich, flaky, late, bare]) b.close();
      await closeRuntime();
    });

    it("says reflection is not enabled on a backend without it (in-band for invoke, an error for listings)", async () => {
      const expected = `service bare: gRPC reflection is not enabled on ${bare.address}`;
      const r = await invokeJson(gw, "bare", "GetOrder", {});
      assert.deepEqual(r, { success: false, status: "FAILED_PRECONDITION", message: expected, response_data: "" });
      const res = await fetch(`${gw.http}/v1/grpc/bare/methods`, { headers: { "x-api-key": KEY } });
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { message: string }).message, expected);
      await assert.rejects(unary(gw.client("platform.Gateway"), "ListMethods", { service: "bare" }, withKey(KEY)), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.FAILED_PRECONDITION);
        assert.equal(e.details, expected);
        return true;
      });
    });

    it("starts with a backend down, then serves it once it is up", async () => {
      const down = await invokeJson(gw, "late", "GetOrder", { orderId: "x" });
      assert.equal(down.success, false);
      assert.equal(down.status, "UNAVAILABLE");
      assert.match(down.message, /service late: backend 127\.0\.0\.1:\d+ is unavailable/);
      await eventually(async () => (await poolEntry(gw)).description.includes("late"), "health naming late");
      assert.equal((await poolEntry(gw)).status, "Degraded");
      await late.restart();
      await eventually(async () => (await invokeJson(gw, "late", "GetOrder", { orderId: "back" })).success, "late to answer");
    });

    it("survives a backend that goes down and comes back", async () => {
      assert.equal((await invokeJson(gw, "flaky", "GetOrder", { orderId: "1" })).success, true);
      flaky.stop();
      const r = await invokeJson(gw, "flaky", "GetOrder", { orderId: "2" });
      assert.equal(r.success, false);
      assert.equal(r.status, "UNAVAILABLE");
      await eventually(async () => {
        const e = await poolEntry(gw);
        return e.status === "Degraded" && e.description.includes("flaky");
      }, "health to name flaky");
      await flaky.restart();
      await eventually(async () => (await invokeJson(gw, "flaky", "GetOrder", { orderId: "3" })).success, "flaky to answer again");
      await eventually(async () => !(await poolEntry(gw)).description.includes("flaky"), "health to recover");
    });

    it("propagates the gRPC caller's deadline to the backend and cancels the backend call when it passes", async () => {
      // Long enough that the call reaches the backend on a loaded machine; the backend sleeps far longer.
      const deadline = Date.now() + 1500;
      await assert.rejects(invokeJson(gw, "orders", "GetOrder", { orderId: "sleep:5000" }, { deadline }), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.DEADLINE_EXCEEDED);
        return true;
      });
      const seen = rich.received.filter((c) => c.path.endsWith("/GetOrder")).at(-1);
      assert.ok(seen, "the backend received the call");
      assert.ok(seen.deadline !== undefined && Math.abs(seen.deadline - deadline) < 150, `backend deadline ${seen.deadline} vs caller ${deadline}`);
      await waitFor(() => rich.cancelled.includes("sleep:5000"), "the backend to see the call cancelled");
    });

    it("applies invokeDeadlineMs when the caller sets no deadline (REST): in-band DEADLINE_EXCEEDED", async () => {
      const started = Date.now();
      const r = await restInvoke(gw, "orders", "GetOrder", { orderId: "sleep:4000" });
      assert.equal(r.status, "DEADLINE_EXCEEDED");
      assert.equal(r.success, false);
      assert.ok(Date.now() - started < 3000);
      const seen = rich.received.filter((c) => c.path.endsWith("/GetOrder")).at(-1)!;
      assert.ok(seen.deadline !== undefined && seen.deadline - started <= 400 + 100, "backend saw the default deadline");
      await waitFor(() => rich.cancelled.includes("sleep:4000"), "the backend to see the call cancelled");
    });

    it("cancels the backend call when the gRPC caller cancels, and the invocation ends CANCELLED", async () => {
      const before = rich.received.length;
      const cancelledBefore = await invocations(gw, "orders", "CANCELLED");
      const client = gw.client("platform.Gateway") as unknown as Record<string, (...a: unknown[]) => grpc.ClientUnaryCall>;
      const errors: grpc.ServiceError[] = [];
      const call = client["InvokeJson"]!(
        { service: "orders", method: "GetOrder", request_data: '{"orderId":"sleep:3000"}' },
        withKey(KEY),
        { deadline: Date.now() + 10_000 },
        (e: grpc.ServiceError | null) => e && errors.push(e),
      );
      await waitFor(() => rich.received.length > before, "the backend to receive the call");
      call.cancel();
      await waitFor(() => rich.cancelled.includes("sleep:3000"), "the backend to see the call cancelled");
      await waitFor(() => errors.length === 1, "the caller's callback");
      assert.equal(errors[0]!.code, grpc.status.CANCELLED);
      // The gateway's side of the call finished too (counted), rather than waiting on the backend's 3 s.
      await eventually(async () => (await invocations(gw, "orders", "CANCELLED")) === cancelledBefore + 1, "the invocation to end CANCELLED", 2000);
    });

    it("cancels the backend call when the REST client goes away, and the invocation ends CANCELLED", async () => {
      const before = rich.received.length;
      const cancelledBefore = await invocations(gw, "orders", "CANCELLED");
      const ac = new AbortController();
      const pending = restInvoke(gw, "orders", "GetOrder", { orderId: "sleep:3500" }, ac.signal).catch((e: Error) => e);
      await waitFor(() => rich.received.length > before, "the backend to receive the call");
      ac.abort();
      assert.ok((await pending) instanceof Error);
      await waitFor(() => rich.cancelled.includes("sleep:3500"), "the backend to see the call cancelled");
      await eventually(async () => (await invocations(gw, "orders", "CANCELLED")) === cancelledBefore + 1, "the invocation to end CANCELLED", 2000);
    });

    it("converts large payloads in the worker pool with results equal to inline conversion", async () => {
      const inline = await startTestGateway({ apiKeys: [KEY], workerThresholdBytes: 64 * 1024 * 1024, services: [{ name: "orders", grpc: { host: "127.0.0.1", port: rich.port } }] });
      try {
        const big = {
          ...RICH_ORDER,
          samples: Array.from({ length: 20_000 }, (_, i) => i / 8),
          items: Array.from({ length: 2_000 }, (_, i) => ({ sku: `sku-${i}`, quantity: i + 1, tags: ["a", "b"], unitPrice: { currencyCode: "EUR", units: String(i + 1) } })),
          history: Array.from({ length: 2_000 }, (_, i) => String(9007199254740993n + BigInt(i))),
        };
        const viaPool = await invokeJson(gw, "orders", "PutOrder", big);
        const viaInline = await invokeJson(inline, "orders", "PutOrder", big);
        assert.equal(viaPool.success, true, viaPool.message);
        assert.equal(viaPool.response_data.length > 100_000, true);
        assert.equal(viaPool.response_data, viaInline.response_data);
        assert.deepEqual(JSON.parse(viaPool.response_data), big);
        const small = await invokeJson(gw, "orders", "PutOrder", RICH_ORDER);
        assert.deepEqual(JSON.parse(small.response_data), RICH_ORDER);
        const rest = await restInvoke(gw, "orders", "PutOrder", big);
        assert.deepEqual(rest.responseData, big);
      } finally {
        await inline.close();
      }
    });
  });
}
