import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createGatewayClient, GatewayClientError, GatewayInvocationError, type GatewayClient } from "../../src/client/index.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";

const KEY = "k1";

describe("client invokeStream()", () => {
  let backend: OrderBackend;
  let gw: TestGateway;
  let client: GatewayClient;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    client = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY });
  });
  after(async () => {
    client.close();
    await gw.close();
    backend.close();
  });

  it("server-streaming: iterates every response in order", async () => {
    const ids: string[] = [];
    for await (const o of client.invokeStream<{ orderId: string }>("orders", "WatchOrders", { orderId: "count:40" }, { highWaterMark: 4 })) ids.push(o.orderId);
    assert.deepEqual(ids, Array.from({ length: 40 }, (_, i) => `o${i + 1}`));
  });

  it("client-streaming and bidi: the writable side", async () => {
    const up = client.invokeStream<{ orders: Array<{ orderId: string }> }>("orders", "UploadOrders");
    await up.write({ orderId: "a" });
    await up.write('{"orderId":"b"}');
    up.end();
    const out = [];
    for await (const r of up) out.push(r);
    assert.deepEqual(out, [{ orders: [{ orderId: "a" }, { orderId: "b" }] }]);

    const sync = client.invokeStream<{ orderId: string }>("orders", "SyncOrders", { orderId: "1" });
    const it = sync[Symbol.asyncIterator]();
    assert.equal((await it.next()).value.orderId, "echo:1");
    await sync.write({ orderId: "2" });
    assert.equal((await it.next()).value.orderId, "echo:2");
    sync.end();
    assert.equal((await it.next()).done, true);
  });

  it("an in-band failure throws GatewayInvocationError after the messages before it", async () => {
    const ids: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const o of client.invokeStream<{ orderId: string }>("orders", "WatchOrders", { orderId: "count:2:fail" })) ids.push(o.orderId);
      })(),
      (e: GatewayInvocationError) => e instanceof GatewayInvocationError && e.status === "ABORTED",
    );
    assert.deepEqual(ids, ["o1", "o2"]);
  });

  it("breaking out of the loop cancels the backend call", async () => {
    const before = backend.cancelled.filter((c) => c === "forever").length;
    let n = 0;
    for await (const _ of client.invokeStream("orders", "WatchOrders", { orderId: "forever" })) if (++n === 2) break;
    await waitFor(() => backend.cancelled.filter((c) => c === "forever").length === before + 1, "the backend to see the cancellation");
  });

  it("an abort signal ends the iteration with CANCELLED", async () => {
    const ac = new AbortController();
    const s = client.invokeStream("orders", "WatchOrders", { orderId: "forever" }, { signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(
      (async () => {
        for await (const _ of s);
      })(),
      (e: GatewayClientError) => e instanceof GatewayClientError && e.codeName === "CANCELLED",
    );
  });
});
