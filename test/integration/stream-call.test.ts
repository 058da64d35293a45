import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { createBackend } from "../../src/backends/backend.js";
import { openStreamCall } from "../../src/backends/stream-call.js";
import { Code } from "../../src/shared/code.js";
import { startOrderBackend } from "../support/backends/order-backend.js";

/** shop.v1.Order with only `order_id` (field 1): what the order backend's SyncOrders reads and echoes. */
const order = (id: string): Buffer => Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(id)]), Buffer.from(id)]);
const orderId = (b: Buffer): string => b.subarray(2, 2 + b[1]!).toString();

describe("a streaming backend call (openStreamCall)", () => {
  const cleanup: Array<() => void> = [];
  after(() => {
    for (const c of cleanup.reverse()) c();
  });

  it("sends every message written without waiting, in order, then half-closes, on a channel not yet connected", async () => {
    const backend = await startOrderBackend();
    cleanup.push(() => backend.close());
    // A fresh backend: its channel connects on the first call, so every write below is made before it can be sent.
    const b = createBackend({ name: "orders", host: "127.0.0.1", port: backend.port, channels: 1, maxReceiveBytes: 4 << 20 });
    cleanup.push(() => b.close());
    const echoes: string[] = [];
    let written = false;
    const status = await new Promise<Code>((resolve) => {
      const call = openStreamCall(b, "/shop.v1.OrderService/SyncOrders", new grpc.Metadata(), Date.now() + 10_000, {
        onMessage(bytes) {
          echoes.push(orderId(bytes));
          call.read();
        },
        onStatus: (code) => resolve(code),
      });
      call.read();
      const writes = ["a", "b", "c", "d"].map((id) => call.write(order(id)));
      call.end();
      void Promise.all(writes).then(() => (written = true));
    });
    assert.equal(status, Code.OK);
    assert.deepEqual(backend.streamed, ["a", "b", "c", "d"], "every request reached the backend, in order");
    assert.deepEqual(echoes, ["echo:a", "echo:b", "echo:c", "echo:d"]);
    assert.equal(written, true, "every write resolved");
  });

  it("releases writes still waiting when the call ends, and sends none of them", async () => {
    const backend = await startOrderBackend();
    cleanup.push(() => backend.close());
    const b = createBackend({ name: "orders", host: "127.0.0.1", port: backend.port, channels: 1, maxReceiveBytes: 4 << 20 });
    cleanup.push(() => b.close());
    let status: Code | undefined;
    const call = openStreamCall(b, "/shop.v1.OrderService/SyncOrders", new grpc.Metadata(), Date.now() + 10_000, {
      onMessage: () => undefined,
      onStatus: (code) => (status = code),
    });
    const writes = ["a", "b", "c"].map((id) => call.write(order(id)));
    call.cancel("the test cancelled");
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve("timed out"), 5000).unref());
    assert.equal(await Promise.race([Promise.all(writes).then(() => "released"), timeout]), "released");
    assert.equal(status, Code.CANCELLED);
    assert.equal(await call.write(order("late")), undefined, "a write after the end resolves at once");
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(backend.streamed, [], "nothing written after the cancel reached the backend");
  });
});
