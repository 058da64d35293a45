import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, withKey, type TestGateway } from "../support/gateway.js";

const KEY = "k1";
const METHOD = "platform.Gateway/InvokeJson";

/** One InvokeJson call; resolves the final status code (OK = 0) instead of rejecting. */
function invoke(client: grpc.Client, orderId: string, cancelAfterMs?: number): Promise<grpc.status> {
  return new Promise((resolve) => {
    const fn = (client as unknown as Record<string, Function>)["InvokeJson"]!;
    const call = fn.call(
      client,
      { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId }) },
      withKey(KEY),
      { deadline: Date.now() + 10_000 },
      (err: grpc.ServiceError | null) => resolve(err ? err.code : grpc.status.OK),
    ) as grpc.ClientUnaryCall;
    if (cancelAfterMs !== undefined) setTimeout(() => call.cancel(), cancelAfterMs);
  });
}

async function counted(gw: TestGateway, code: string): Promise<number> {
  const text = await (await fetch(`${gw.http}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`platform_grpc_requests_total{method="${METHOD}",code="${code}"}`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

describe("gRPC cancellation bursts", () => {
  let backend: OrderBackend;
  let gw: TestGateway;
  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
  });
  after(async () => {
    await gw.close();
    backend.close();
  });

  it("cancels cost only the cancelled calls: healthy calls on the same connection succeed, cancels count as CANCELLED", async () => {
    // One client = one HTTP/2 connection. 30 batches of 50 calls cancelled at 20-100 ms: 1,500 RST_STREAMs in a few
    // seconds, past nghttp2's reset-flood budget (1,000 burst + 33/s), with 2 healthy calls in flight per batch.
    const client = gw.client("platform.Gateway");
    assert.equal(await invoke(client, "warm"), grpc.status.OK);
    const cancelledCodes: grpc.status[] = [];
    const healthyCodes: grpc.status[] = [];
    for (let batch = 0; batch < 30; batch++) {
      const cancels = Array.from({ length: 50 }, (_, i) => invoke(client, "sleep:400", 20 + ((i * 37 + batch * 11) % 81)));
      const healthy = [invoke(client, "sleep:60"), invoke(client, "sleep:120")];
      cancelledCodes.push(...(await Promise.all(cancels)));
      healthyCodes.push(...(await Promise.all(healthy)));
    }
    const healthyFailed = healthyCodes.filter((c) => c !== grpc.status.OK).map((c) => grpc.status[c]);
    assert.deepEqual(healthyFailed, [], "healthy calls failed");
    const notCancelled = cancelledCodes.filter((c) => c !== grpc.status.CANCELLED).map((c) => grpc.status[c]);
    assert.deepEqual(notCancelled, [], "cancelled calls ended with another code");
    // The server counted the cancels as CANCELLED, never OK: OK is the warm-up call and the healthy ones. (A call the
    // client cancels while its new connection is still being set up never reaches the server and is not counted.)
    const deadline = Date.now() + 5000;
    while ((await counted(gw, "CANCELLED")) < 1400 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const cancelled = await counted(gw, "CANCELLED");
    assert.ok(cancelled >= 1400 && cancelled <= 1500, `CANCELLED counted ${cancelled} times`);
    assert.equal(await counted(gw, "OK"), 1 + healthyCodes.length);
    // The connection was rotated before nghttp2's reset budget ran out, and that was logged.
    assert.ok(gw.logs.some((l) => String(l["msg"]).includes("near the HTTP/2 reset-flood limit")), "no rotation logged");
    assert.ok(!gw.logs.some((l) => String(l["msg"]).includes("closed by HTTP/2 reset-flood protection")), "nghttp2 closed a connection");
  });
});
