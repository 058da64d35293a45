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

  it("the caller cancelling a unary call cancels the backend call at once", async () => {
    const started = Date.now();
    const call = client.GetOrder({ orderId: "sleep:5000" }, withKey(KEY), (e: grpc.ServiceError | null) => assert.equal(e?.code, grpc.status.CANCELLED));
    await waitFor(() => backend.received.some((c) => c.path === "/shop.v1.OrderService/GetOrder"), "the call to reach the backend");
    await new Promise((r) => setTimeout(r, 50));
    call.cancel();
    await waitFor(() => backend.cancelled.includes("sleep:5000"), "the backend to see the cancellation", 3000);
    assert.ok(Date.now() - started < 4000, "cancelled by the caller, not ended by its own timer");
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

  it("a slow reader slows the backend through the proxy (nothing buffered without bound)", async () => {
    const total = 2000; // 16 KiB each
    const writtenBefore = backend.watchWritten.count;
    const call = client.WatchOrders({ orderId: `big:${total}` }, withKey(KEY));
    let got = 0;
    call.on("data", () => got++);
    const done = new Promise<void>((resolve, reject) => {
      call.on("end", resolve);
      call.on("error", reject);
    });
    await waitFor(() => got >= 5, "the first orders");
    call.pause();
    await new Promise((r) => setTimeout(r, 500));
    const written = backend.watchWritten.count - writtenBefore;
    assert.ok(written < total / 4, `backend wrote ${written} of ${total} while the caller was not reading`);
    call.resume();
    await done;
    assert.equal(got, total);
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

describe("streams at shutdown", () => {
  it("InvokeStream and proxied streams end UNAVAILABLE at once, and the backend calls are cancelled", async () => {
    const backend = await startOrderBackend();
    const gw = await startTestGateway({ apiKeys: [KEY], shutdownTimeoutMs: 5000, services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    const client = shopClient(gw.grpcAddress);
    try {
      await waitFor(() => gw.logs.some((l) => l["msg"] === "backend services proxied"), "the backend to be routed");
      const proxied = client.WatchOrders({ orderId: "forever" }, withKey(KEY));
      let proxiedGot = 0;
      proxied.on("data", () => proxiedGot++);
      const proxiedErr = new Promise<grpc.ServiceError>((r) => proxied.on("error", r));
      const gwClient = gw.client("platform.Gateway") as any;
      const stream = gwClient.InvokeStream(withKey(KEY));
      let last: any;
      let streamGot = 0;
      stream.on("data", (r: any) => (r.status ? (last = r.status) : streamGot++));
      stream.on("error", () => undefined);
      const streamEnded = new Promise<void>((r) => stream.on("status", () => r()));
      stream.write({ service: "orders", method: "WatchOrders", request_data: '{"orderId":"forever"}' });
      await waitFor(() => proxiedGot >= 1 && streamGot >= 1, "both streams to deliver");
      const started = Date.now();
      const closed = gw.close();
      const e = await proxiedErr;
      assert.equal(e.code, grpc.status.UNAVAILABLE);
      assert.match(e.details, /shutting down/);
      await streamEnded;
      assert.deepEqual(last, { success: false, status: "UNAVAILABLE", message: "the gateway is shutting down" });
      await closed;
      assert.ok(Date.now() - started < 4000, `close took ${Date.now() - started} ms`);
      await waitFor(() => backend.cancelled.filter((c) => c === "forever").length === 2, "both backend calls to be cancelled");
    } finally {
      client.close();
      await gw.close();
      backend.close();
    }
  });
});

describe("transparent gRPC proxy: refresh", () => {
  it("routes services a backend gained after a schema refresh", async () => {
    let backend = await startOrderBackend({ admin: false });
    const port = backend.port;
    const gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port } }] });
    const raw = new grpc.Client(gw.grpcAddress, grpc.credentials.createInsecure());
    const id = (b: Buffer): Buffer => b;
    const ping = (): Promise<Buffer> =>
      new Promise((resolve, reject) =>
        raw.makeUnaryRequest("/ops.v1.Admin/Ping", id, id, Buffer.from([0x0a, 2, 0x68, 0x69]), withKey(KEY), (e, r) => (e ? reject(e) : resolve(r!))),
      );
    try {
      await waitFor(() => gw.logs.some((l) => l["msg"] === "backend services proxied"), "the backend to be routed");
      await assert.rejects(ping(), (e: grpc.ServiceError) => e.code === grpc.status.UNIMPLEMENTED);
      backend.close();
      backend = await startOrderBackend({ admin: true, port });
      const res = await fetch(`${gw.http}/v1/gateway/list-methods?service=orders&refresh=true`, { headers: { "x-api-key": KEY } });
      assert.equal(res.status, 200);
      const reply = await ping();
      assert.ok(reply.includes(Buffer.from("hi")), "PingReply echoes the text");
      assert.ok((await listServices(gw.grpcAddress)).includes("ops.v1.Admin"));
    } finally {
      raw.close();
      await gw.close();
      backend.close();
    }
  });
});
