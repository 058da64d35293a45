import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { protosDir, SHOP_PROTO } from "../support/protos/descriptors.js";
import { reflectionCall } from "../support/reflection.js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { fromBinary } from "@bufbuild/protobuf";

const KEY = "k1";

/** A generated-stub style client: shop.v1.OrderService from the test proto through proto-loader. */
function shopClient(address: string): any {
  const def = loadSync(SHOP_PROTO, { includeDirs: [protosDir], keepCase: false, longs: String, enums: String, defaults: false, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as any;
  return new pkg.shop.v1.OrderService(address, grpc.credentials.createInsecure());
}

function unaryCall(client: any, method: string, req: object, md: grpc.Metadata, options: grpc.CallOptions = {}): Promise<any> {
  return new Promise((resolve, reject) => client[method](req, md, options, (e: grpc.ServiceError | null, r: any) => (e ? reject(e) : resolve(r))));
}

async function listServices(address: string): Promise<string[]> {
  const r = await reflectionCall(address, "v1", { list_services: "" }, withKey(KEY));
  return (r.list_services_response.service as Array<{ name: string }>).map((s) => s.name);
}

describe("transparent gRPC proxy", () => {
  let backend: OrderBackend;
  let gw: TestGateway;
  let client: any;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({
      apiKeys: [KEY],
      forwardHeaders: ["traceparent"],
      services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
    });
    // The backend's services are routed once its reflection answered (in the background after startup).
    const end = Date.now() + 5000;
    while (!(await listServices(gw.grpcAddress)).includes("shop.v1.OrderService")) {
      if (Date.now() > end) throw new Error("backend services never appeared in the gateway's reflection");
      await new Promise((r) => setTimeout(r, 20));
    }
    client = shopClient(gw.grpcAddress);
  });
  after(async () => {
    client?.close();
    await gw.close();
    backend.close();
  });

  it("unary: a stub call reaches the backend; only allow-listed metadata is forwarded", async () => {
    const md = withKey(KEY);
    md.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    md.set("x-secret", "s3cret");
    const r = await unaryCall(client, "GetOrder", { orderId: "p1" }, md);
    assert.equal(r.orderId, "p1");
    const seen = backend.received.filter((c) => c.path === "/shop.v1.OrderService/GetOrder").at(-1)!;
    assert.equal(seen.metadata["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.equal(seen.metadata["x-secret"], undefined);
    assert.equal(seen.metadata["x-api-key"], undefined);
  });

  it("refuses a call without a valid x-api-key (UNAUTHENTICATED) without reaching the backend", async () => {
    const before = backend.received.length;
    await assert.rejects(unaryCall(client, "GetOrder", { orderId: "p2" }, new grpc.Metadata()), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
    await assert.rejects(unaryCall(client, "GetOrder", { orderId: "p2" }, withKey("wrong")), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
    assert.equal(backend.received.length, before);
  });

  it("passes the backend's status through", async () => {
    await assert.rejects(unaryCall(client, "GetOrder", { orderId: "fail:NOT_FOUND:no order 9" }, withKey(KEY)), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.NOT_FOUND);
      assert.equal(e.details, "no order 9");
      return true;
    });
  });

  it("deadlines reach the backend and cancel it", async () => {
    await assert.rejects(unaryCall(client, "GetOrder", { orderId: "sleep:3000" }, withKey(KEY), { deadline: Date.now() + 200 }), (e: grpc.ServiceError) => e.code === grpc.status.DEADLINE_EXCEEDED);
    await waitFor(() => backend.cancelled.includes("sleep:3000"), "the backend to see the deadline");
  });

  it("server-streaming: every message in order", async () => {
    const call = client.WatchOrders({ orderId: "count:30" }, withKey(KEY));
    const ids: string[] = [];
    await new Promise<void>((resolve, reject) => {
      call.on("data", (o: { orderId: string }) => ids.push(o.orderId));
      call.on("end", resolve);
      call.on("error", reject);
    });
    assert.deepEqual(ids, Array.from({ length: 30 }, (_, i) => `o${i + 1}`));
  });

  it("server-streaming: a backend error mid-stream reaches the caller after the messages", async () => {
    const call = client.WatchOrders({ orderId: "count:2:fail" }, withKey(KEY));
    const ids: string[] = [];
    const err = await new Promise<grpc.ServiceError>((resolve, reject) => {
      call.on("data", (o: { orderId: string }) => ids.push(o.orderId));
      call.on("end", () => reject(new Error("ended OK")));
      call.on("error", resolve);
    });
    assert.deepEqual(ids, ["o1", "o2"]);
    assert.equal(err.code, grpc.status.ABORTED);
  });

  it("client-streaming: requests in order, one response", async () => {
    const r = await new Promise<any>((resolve, reject) => {
      const call = client.UploadOrders(withKey(KEY), (e: grpc.ServiceError | null, res: any) => (e ? reject(e) : resolve(res)));
      for (const id of ["a", "b", "c"]) call.write({ orderId: id });
      call.end();
    });
    assert.deepEqual(
      r.orders.map((o: { orderId: string }) => o.orderId),
      ["a", "b", "c"],
    );
  });

  it("bidi: echoes in order", async () => {
    const call = client.SyncOrders(withKey(KEY));
    const ids: string[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on("data", (o: { orderId: string }) => ids.push(o.orderId));
      call.on("end", resolve);
      call.on("error", reject);
    });
    for (let i = 1; i <= 10; i++) call.write({ orderId: String(i) });
    call.end();
    await done;
    assert.deepEqual(ids, Array.from({ length: 10 }, (_, i) => `echo:${i + 1}`));
  });

  it("the caller cancelling a stream cancels the backend call", async () => {
    const call = client.WatchOrders({ orderId: "forever" }, withKey(KEY));
    let got = 0;
    call.on("data", () => got++);
    call.on("error", () => undefined);
    await waitFor(() => got >= 2, "two streamed orders");
    const before = backend.cancelled.filter((c) => c === "forever").length;
    call.cancel();
    await waitFor(() => backend.cancelled.filter((c) => c === "forever").length === before + 1, "the backend to see the cancellation");
  });

  it("reflection lists the gateway's and the backends' services and describes backend types", async () => {
    const services = await listServices(gw.grpcAddress);
    for (const s of ["platform.Gateway", "shop.v1.OrderService", "ops.v1.Admin"]) assert.ok(services.includes(s), `${s} in ${services.join(", ")}`);
    const r = await reflectionCall(gw.grpcAddress, "v1", { file_containing_symbol: "shop.v1.Order" }, withKey(KEY));
    const files = (r.file_descriptor_response.file_descriptor_proto as Uint8Array[]).map((b) => fromBinary(FileDescriptorProtoSchema, b));
    assert.equal(files[0]!.name, "shop/v1/shop.proto");
    assert.ok(files[0]!.messageType.some((m) => m.name === "Order"));
    assert.ok(files.some((f) => f.name === "shop/v1/common.proto"), "dependencies included");
    const alpha = await reflectionCall(gw.grpcAddress, "v1alpha", { file_containing_symbol: "ops.v1.Admin.Ping" }, withKey(KEY));
    assert.ok(alpha.file_descriptor_response, JSON.stringify(alpha.error_response));
    // Reflection still needs the key.
    await assert.rejects(reflectionCall(gw.grpcAddress, "v1", { list_services: "" }), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
  });
});

describe("transparent gRPC proxy: two backends exposing one service", () => {
  it("is an error naming both; the service stays routed to the first", async () => {
    const a = await startOrderBackend({ admin: false });
    const b = await startOrderBackend({ admin: false });
    const gw = await startTestGateway({
      apiKeys: [KEY],
      services: [
        { name: "first", grpc: { host: "127.0.0.1", port: a.port } },
        { name: "second", grpc: { host: "127.0.0.1", port: b.port } },
      ],
    });
    try {
      await waitFor(() => gw.logs.some((l) => l["level"] === "error" && /shop\.v1\.OrderService is exposed by both/.test(String(l["msg"]))), "the conflict error");
      const line = gw.logs.find((l) => /exposed by both/.test(String(l["msg"])))!;
      assert.match(String(line["msg"]), /backend (first|second) and backend (first|second)/);
      const health = (await (await fetch(gw.http + "/health")).json()) as { entries: Record<string, { status: string; description: string }> };
      assert.equal(health.entries["grpc-proxy"]?.status, "Degraded");
      assert.match(health.entries["grpc-proxy"]!.description, /first/);
      assert.match(health.entries["grpc-proxy"]!.description, /second/);
    } finally {
      await gw.close();
      a.close();
      b.close();
    }
  });
});
