import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { createBackend, type Backend } from "../../src/backends/backend.js";
import { addGrpcJsReflectionService } from "../support/grpc-js-reflection.js";
import { Code } from "../../src/shared/code.js";
import type { GatewayError } from "../../src/shared/gateway-error.js";
import { protoDir } from "../../src/shared/paths.js";
import { startOrderBackend } from "../support/backends/order-backend.js";
import { encodedFileDescriptorProtos, SHOP_PROTO } from "../support/protos/descriptors.js";

const v1Definition = (): grpc.ServiceDefinition =>
  loadSync("grpc/reflection/v1/reflection.proto", { keepCase: true, oneofs: true, includeDirs: [protoDir()] })["grpc.reflection.v1.ServerReflection"] as grpc.ServiceDefinition;

async function listen(server: grpc.Server): Promise<number> {
  return new Promise((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
}

describe("reflection client", () => {
  const cleanup: Array<() => void> = [];
  after(() => {
    for (const c of cleanup.reverse()) c();
  });
  const backendAt = (port: number, extra: Partial<Parameters<typeof createBackend>[0]> = {}): Backend => {
    const b = createBackend({ name: "svc", host: "127.0.0.1", port, channels: 1, maxReceiveBytes: 4 << 20, ...extra });
    cleanup.push(() => b.close());
    return b;
  };

  it("falls back to v1alpha once and remembers it", async () => {
    const server = new grpc.Server();
    let v1Attempts = 0;
    server.addService(v1Definition(), {
      ServerReflectionInfo: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
        v1Attempts++;
        call.emit("error", { code: grpc.status.UNIMPLEMENTED, details: "v1 not here" });
      },
    });
    addGrpcJsReflectionService(server, { files: encodedFileDescriptorProtos(SHOP_PROTO), services: ["shop.v1.OrderService"], versions: ["v1alpha"] });
    const port = await listen(server);
    cleanup.push(() => server.forceShutdown());
    const b = backendAt(port);
    const s = await b.schema();
    assert.ok(s.find("GetOrder"));
    assert.deepEqual(b.reflectionStats(), { fetches: 1, version: "v1alpha" });
    assert.equal(v1Attempts, 1);
    await b.refresh();
    assert.equal(b.reflectionStats().fetches, 2);
    assert.equal(v1Attempts, 1, "the second fetch went straight to v1alpha");
  });

  it("shares one in-flight fetch between concurrent callers and caches the result", async () => {
    const order = await startOrderBackend();
    cleanup.push(() => order.close());
    const b = backendAt(order.port);
    const all = await Promise.all(Array.from({ length: 8 }, () => b.schema()));
    assert.ok(all.every((s) => s === all[0]));
    await b.schema();
    await b.resolve("GetOrder");
    assert.deepEqual(b.reflectionStats(), { fetches: 1, version: "v1" });
  });

  it("refreshes when a method is not found (rate limited) and picks up a changed backend", async () => {
    const first = await startOrderBackend({ admin: false });
    const b = backendAt(first.port, { minRefreshIntervalMs: 0 });
    await assert.rejects(b.resolve("Ping"), (e: GatewayError) => {
      assert.equal(e.code, Code.NOT_FOUND);
      assert.match(e.message, /method Ping not found on service svc; it has shop\.v1\.OrderService\/GetOrder/);
      return true;
    });
    assert.equal(b.reflectionStats().fetches, 2, "initial fetch plus one refresh");
    const idBefore = b.cachedSchema()!.set.id;
    first.close();
    const second = await startOrderBackend({ admin: true, port: first.port });
    cleanup.push(() => second.close());
    const { method, schema } = await b.resolve("Ping");
    assert.equal(method.fullName, "ops.v1.Admin/Ping");
    assert.notEqual(schema.set.id, idBefore);

    const limited = backendAt(second.port); // default: at most one not-found refresh per second
    await limited.schema();
    await assert.rejects(limited.resolve("Nope"), /not found/);
    assert.equal(limited.reflectionStats().fetches, 1);
  });

  it("passes the backend's own error_response text through", async () => {
    const server = new grpc.Server();
    server.addService(v1Definition(), {
      ServerReflectionInfo: (call: grpc.ServerDuplexStream<Record<string, unknown>, unknown>) => {
        call.on("data", (req) => call.write({ original_request: req, error_response: { error_code: grpc.status.PERMISSION_DENIED, error_message: "reflection is restricted to operators" } }));
        call.on("end", () => call.end());
      },
    });
    const port = await listen(server);
    cleanup.push(() => server.forceShutdown());
    await assert.rejects(backendAt(port).schema(), (e: GatewayError) => {
      assert.equal(e.code, Code.PERMISSION_DENIED);
      assert.equal(e.message, `service svc: reflection on 127.0.0.1:${port} failed for list_services: reflection is restricted to operators`);
      return true;
    });
  });

  it("does not cache a failed fetch: the next use retries", async () => {
    const order = await startOrderBackend();
    const port = order.port;
    order.close();
    const b = backendAt(port);
    await assert.rejects(b.schema(), (e: GatewayError) => e.code === Code.UNAVAILABLE && /backend 127\.0\.0\.1:\d+ is unavailable/.test(e.message));
    const again = await startOrderBackend({ port });
    cleanup.push(() => again.close());
    // The channel may still be backing off from the failed attempt: retry until it connects (bounded).
    const end = Date.now() + 10_000;
    for (;;) {
      try {
        await b.schema();
        break;
      } catch (e) {
        if (Date.now() > end) throw e;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    assert.ok(b.reflectionStats().fetches >= 2);
  });
});
