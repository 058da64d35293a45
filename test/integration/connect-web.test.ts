/**
 * Connect and gRPC-Web on the gateway's HTTP port, with connect-es's own clients (no generated code: the service is
 * built at run time from the shop protos) against the order backend behind the gateway, and raw fetch where a client
 * cannot go (gRPC-Web text, preflights, a wrong content type).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { gatewayFileDescriptors } from "../../src/shared/protos.js";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { fileDescriptorProtos, SHOP_PROTO } from "../support/protos/descriptors.js";

const KEY = "connect-key";
const ORIGIN = "http://app.example";
const MAX_BODY = 64 * 1024;
const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: fileDescriptorProtos(SHOP_PROTO) }));
const OrderService = registry.getService("shop.v1.OrderService") as DescService;
const msg = (name: string): DescMessage => registry.getMessage(name)!;
/** The gateway's own protos, as its reflection serves them. */
const own = createFileRegistry(create(FileDescriptorSetSchema, { file: gatewayFileDescriptors().map((f) => fromBinary(FileDescriptorProtoSchema, f)) }));

/** A client of shop.v1.OrderService over `transport` (connect-es's dynamic client: methods in lowerCamelCase). */
const orders = (transport: Transport): any => createClient(OrderService, transport);

function transports(base: string, key: string | null = KEY, extra: Record<string, string> = {}): Record<string, Transport> {
  const interceptors = [
    (next: (req: { header: Headers }) => Promise<unknown>) => async (req: { header: Headers }) => {
      if (key !== null) req.header.set("x-api-key", key);
      for (const [k, v] of Object.entries(extra)) req.header.set(k, v);
      return next(req);
    },
  ];
  return {
    "connect+json": createConnectTransport({ baseUrl: base, useBinaryFormat: false, interceptors: interceptors as never }),
    "connect+proto": createConnectTransport({ baseUrl: base, useBinaryFormat: true, interceptors: interceptors as never }),
    "grpc-web": createGrpcWebTransport({ baseUrl: base, interceptors: interceptors as never }),
  };
}

/** The 5-byte-prefixed frames of a gRPC-Web (or Connect streaming) body. */
function frames(body: Buffer): Array<{ flags: number; data: Buffer }> {
  const out: Array<{ flags: number; data: Buffer }> = [];
  for (let pos = 0; pos < body.length; ) {
    const len = body.readUInt32BE(pos + 1);
    out.push({ flags: body[pos]!, data: body.subarray(pos + 5, pos + 5 + len) });
    pos += 5 + len;
  }
  return out;
}

function envelope(data: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

const getOrderRequest = (id: string): Uint8Array => toBinary(msg("shop.v1.GetOrderRequest"), create(msg("shop.v1.GetOrderRequest"), { orderId: id }));

for (const threads of [1, 2]) {
  describe(`Connect and gRPC-Web on the HTTP port (--threads ${threads})`, () => {
    let backend: OrderBackend;
    let gw: TestGateway;
    let t: Record<string, Transport>;

    before(async () => {
      backend = await startOrderBackend();
      gw = await startTestGateway({
        apiKeys: [KEY],
        threads,
        corsOrigins: [ORIGIN],
        forwardHeaders: ["x-tenant"],
        maxBodyBytes: MAX_BODY,
        services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
      });
      t = transports(gw.http);
      // The services are routed once the schema is known (reflection at start).
      await waitFor(() => gw.logs.some((l) => l["msg"] === "backend schema loaded"), "the backend schema", 10_000);
    });
    after(async () => {
      await gw?.close();
      backend?.close();
    });

    for (const name of ["connect+json", "connect+proto", "grpc-web"]) {
      test(`${name}: unary call answers the backend's message, with allow-listed metadata only`, async () => {
        const tx = transports(gw.http, KEY, { "x-tenant": "t1", "x-secret": "s" })[name]!;
        const res = await orders(tx).getOrder({ orderId: `u-${name}` });
        assert.equal(res.orderId, `u-${name}`);
        const seen = backend.received.filter((c) => c.path === "/shop.v1.OrderService/GetOrder").at(-1)!;
        assert.equal(seen.metadata["x-tenant"], "t1");
        assert.equal(seen.metadata["x-secret"], undefined);
        assert.equal(seen.metadata["x-api-key"], undefined);
      });

      test(`${name}: server streaming delivers every message in order`, async () => {
        const got: string[] = [];
        for await (const o of orders(t[name]!).watchOrders({ orderId: "plain" })) got.push(o.orderId);
        assert.deepEqual(got, ["w1", "w2", "w3"]);
      });

      test(`${name}: a backend error keeps its code and message (unary and mid-stream)`, async () => {
        await assert.rejects(orders(t[name]!).getOrder({ orderId: "fail:NOT_FOUND:no such order" }), (e: unknown) => {
          const err = ConnectError.from(e);
          assert.equal(err.code, Code.NotFound);
          assert.equal(err.rawMessage, "no such order");
          return true;
        });
        const got: string[] = [];
        await assert.rejects(
          (async () => {
            for await (const o of orders(t[name]!).watchOrders({ orderId: "count:2:fail" })) got.push(o.orderId);
          })(),
          (e: unknown) => ConnectError.from(e).code === Code.Aborted,
        );
        assert.deepEqual(got, ["o1", "o2"]);
      });

      test(`${name}: a missing or wrong key is unauthenticated and reaches no backend`, async () => {
        const before = backend.received.length;
        for (const key of [null, "wrong"]) {
          await assert.rejects(orders(transports(gw.http, key)[name]!).getOrder({ orderId: "x" }), (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated);
        }
        assert.equal(backend.received.length, before);
      });

      test(`${name}: an unknown method or service is unimplemented`, async () => {
        const res = await fetch(`${gw.http}/shop.v1.OrderService/NoSuch`, {
          method: "POST",
          headers: { "content-type": name === "grpc-web" ? "application/grpc-web+proto" : name === "connect+json" ? "application/json" : "application/proto", "connect-protocol-version": "1", "x-api-key": KEY },
          body: name === "grpc-web" ? envelope(getOrderRequest("x")) : name === "connect+json" ? "{}" : Buffer.from(getOrderRequest("x")),
        });
        if (name === "grpc-web") {
          assert.equal(res.status, 200);
          assert.equal(res.headers.get("grpc-status"), "12");
        } else {
          assert.equal(res.status, 404);
          assert.equal(((await res.json()) as { code: string }).code, "unimplemented");
        }
        const other = await fetch(`${gw.http}/no.such.Service/Get`, { method: "POST", headers: { "content-type": "application/proto", "connect-protocol-version": "1", "x-api-key": KEY }, body: "" });
        assert.equal(other.status, 404);
        assert.equal(((await other.json()) as { code: string }).code, "unimplemented");
      });

      test(`${name}: aborting the call cancels the backend call`, async () => {
        const ac = new AbortController();
        const id = `sleep:5000`;
        const was = backend.cancelled.length;
        const calls = backend.received.length;
        const call = orders(t[name]!).getOrder({ orderId: id }, { signal: ac.signal });
        await waitFor(() => backend.received.slice(calls).some((c) => c.path.endsWith("/GetOrder")), "the call at the backend");
        ac.abort();
        await assert.rejects(call, (e: unknown) => ConnectError.from(e).code === Code.Canceled);
        await waitFor(() => backend.cancelled.length > was, "the backend to see the cancel");
        // A stream too: the "forever" watch stops once the reader aborts.
        const ac2 = new AbortController();
        const seen: string[] = [];
        await assert.rejects(
          (async () => {
            for await (const o of orders(t[name]!).watchOrders({ orderId: "forever" }, { signal: ac2.signal })) {
              seen.push(o.orderId);
              if (seen.length === 3) ac2.abort();
            }
          })(),
          (e: unknown) => ConnectError.from(e).code === Code.Canceled,
        );
        await waitFor(() => backend.cancelled.includes("forever") && backend.cancelled.length > was + 1, "the backend to see the stream cancel");
      });
    }

    test("Connect-Timeout-Ms and grpc-timeout end a slow call with deadline_exceeded", async () => {
      await assert.rejects(orders(t["connect+proto"]!).getOrder({ orderId: "sleep:3000" }, { timeoutMs: 200 }), (e: unknown) => ConnectError.from(e).code === Code.DeadlineExceeded);
      await assert.rejects(orders(t["grpc-web"]!).getOrder({ orderId: "sleep:3000" }, { timeoutMs: 200 }), (e: unknown) => ConnectError.from(e).code === Code.DeadlineExceeded);
    });

    test("gRPC-Web text: base64 request and response, unary and server streaming", async () => {
      const call = async (method: string, id: string): Promise<Array<{ flags: number; data: Buffer }>> => {
        const res = await fetch(`${gw.http}/shop.v1.OrderService/${method}`, {
          method: "POST",
          headers: { "content-type": "application/grpc-web-text", "x-grpc-web": "1", "x-api-key": KEY },
          body: envelope(getOrderRequest(id)).toString("base64"),
        });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("content-type"), "application/grpc-web-text");
        const text = await res.text();
        // Each frame is encoded on its own: decode in 4-character groups.
        const bytes = Buffer.concat((text.match(/.{4}/g) ?? []).map((g) => Buffer.from(g, "base64")));
        return frames(bytes);
      };
      const unary = await call("GetOrder", "text-1");
      assert.equal(unary.length, 2);
      assert.equal((fromBinary(msg("shop.v1.Order"), unary[0]!.data) as unknown as { orderId: string }).orderId, "text-1");
      assert.equal(unary[1]!.flags, 0x80);
      assert.match(unary[1]!.data.toString(), /grpc-status: ?0/);
      const streamed = await call("WatchOrders", "plain");
      assert.deepEqual(
        streamed.filter((f) => f.flags === 0).map((f) => (fromBinary(msg("shop.v1.Order"), f.data) as unknown as { orderId: string }).orderId),
        ["w1", "w2", "w3"],
      );
      assert.equal(streamed.at(-1)!.flags, 0x80);
    });

    test("CORS: an allowed origin's preflight lists the protocol headers; another origin gets no CORS headers and is refused", async () => {
      const pre = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, {
        method: "OPTIONS",
        headers: { origin: ORIGIN, "access-control-request-method": "POST", "access-control-request-headers": "content-type,connect-protocol-version,x-api-key" },
      });
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get("access-control-allow-origin"), ORIGIN);
      const allowed = pre.headers.get("access-control-allow-headers")!.split(/,\s*/);
      for (const h of ["content-type", "connect-protocol-version", "connect-timeout-ms", "x-grpc-web", "x-user-agent", "grpc-timeout", "x-api-key", "x-tenant"]) assert.ok(allowed.includes(h), h);
      const denied = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, { method: "OPTIONS", headers: { origin: "http://evil.example", "access-control-request-method": "POST" } });
      assert.equal(denied.headers.get("access-control-allow-origin"), null);
      await denied.arrayBuffer();

      const ok = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, { method: "POST", headers: { origin: ORIGIN, "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": KEY }, body: '{"orderId":"c1"}' });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get("access-control-allow-origin"), ORIGIN);
      assert.match(ok.headers.get("access-control-expose-headers")!, /grpc-status/);
      assert.equal(((await ok.json()) as { orderId: string }).orderId, "c1");
      const before = backend.received.length;
      const refused = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, { method: "POST", headers: { origin: "http://evil.example", "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": KEY }, body: "{}" });
      assert.equal(refused.status, 403);
      assert.equal(refused.headers.get("access-control-allow-origin"), null);
      assert.equal(((await refused.json()) as { code: string }).code, "permission_denied");
      assert.equal(backend.received.length, before);
    });

    test("a two-segment OPTIONS that is not a CORS preflight for a routed service reaches the REST router", async () => {
      // Not a preflight (no Origin), or one for a path that is no RPC service: the router's answer, 405 with Allow
      // (the path has a GET route) in its error body, never browser RPC's preflight reply.
      const asked: Array<Record<string, string>> = [{ "x-api-key": KEY }, { "x-api-key": KEY, origin: ORIGIN, "access-control-request-method": "GET" }];
      for (const headers of asked) {
        const r = await fetch(`${gw.http}/v1/openapi.json`, { method: "OPTIONS", headers });
        assert.equal(r.status, 405, JSON.stringify(headers));
        assert.equal(r.headers.get("allow"), "GET");
        assert.equal(r.headers.get("access-control-allow-origin"), null);
        assert.equal(((await r.json()) as { code: number }).code, 12);
      }
      // A routed service's path without Access-Control-Request-Method is no preflight either: the router has no route.
      const r = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, { method: "OPTIONS", headers: { "x-api-key": KEY, origin: ORIGIN } });
      assert.equal(r.status, 404);
      assert.equal(r.headers.get("access-control-allow-methods"), null);
      assert.equal(((await r.json()) as { code: number }).code, 5);
    });

    test("refusals in the protocols' shapes: compression, client streaming, wrong content type, REST routes untouched", async () => {
      const gz = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, { method: "POST", headers: { "content-type": "application/json", "content-encoding": "gzip", "connect-protocol-version": "1", "x-api-key": KEY }, body: "{}" });
      assert.equal(gz.status, 501);
      assert.equal(((await gz.json()) as { code: string }).code, "unimplemented");
      // Client streaming (which fetch cannot send): the end-of-stream message says unimplemented.
      const upload = await fetch(`${gw.http}/shop.v1.OrderService/UploadOrders`, { method: "POST", headers: { "content-type": "application/connect+proto", "connect-protocol-version": "1", "x-api-key": KEY }, body: envelope(new Uint8Array()) });
      assert.equal(upload.status, 200);
      const end = frames(Buffer.from(await upload.arrayBuffer()));
      assert.equal(end.length, 1);
      assert.equal(end[0]!.flags, 0x02);
      assert.equal((JSON.parse(end[0]!.data.toString()) as { error: { code: string } }).error.code, "unimplemented");
      const plain = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, { method: "POST", headers: { "content-type": "text/plain", "x-api-key": KEY }, body: "x" });
      assert.equal(plain.status, 415);
      await plain.arrayBuffer();
      // A two-segment REST route still reaches the REST router.
      const rest = await fetch(`${gw.http}/v1/gateway/invoke`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY }, body: JSON.stringify({ service: "orders", method: "GetOrder", requestData: '{"orderId":"r1"}' }) });
      assert.equal(rest.status, 200);
      await rest.arrayBuffer();
      const twoSeg = await fetch(`${gw.http}/dapr/subscribe`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY }, body: "{}" });
      assert.notEqual(twoSeg.headers.get("content-type"), "application/proto");
      await twoSeg.arrayBuffer();
    });

    test("the gateway's own services: unary (JSON, binary, gRPC-Web) and a server-streaming Subscribe, with the caller's key", async () => {
      for (const name of ["connect+json", "connect+proto", "grpc-web"]) {
        const gateway = createClient(own.getService("platform.Gateway")!, t[name]!) as any;
        assert.deepEqual((await gateway.listServices({})).services, ["orders"], name);
        const keyless = createClient(own.getService("platform.Gateway")!, transports(gw.http, null)[name]!) as any;
        await assert.rejects(keyless.listServices({}), (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated);
      }
      // A subscription over Connect streaming, fed by PublishEvent over Connect unary, ended by the reader.
      const pubsub = createClient(own.getService("io.cloudevents.v1.Pubsub")!, t["connect+json"]!) as any;
      const ac = new AbortController();
      const got: string[] = [];
      const reading = (async () => {
        for await (const r of pubsub.subscribe({ topics: ["browser-rpc"] }, { signal: ac.signal })) {
          got.push(r.cloudevent.id);
          ac.abort();
        }
      })().catch((e: unknown) => assert.equal(ConnectError.from(e).code, Code.Canceled));
      const end = Date.now() + 5000;
      for (let n = 0; got.length === 0 && Date.now() < end; n++) {
        const res = await pubsub.publishEvent({ topic: "browser-rpc", cloudevent: { id: `e${n}`, source: "urn:test", specVersion: "1.0", type: "t", textData: "x" } });
        assert.equal(res.status.success, true);
        await new Promise((r) => setTimeout(r, 50));
      }
      await reading;
      assert.equal(got.length, 1);
    });

    test("a request body over --max-body-bytes is resource_exhausted and reaches no backend", async () => {
      const before = backend.received.length;
      const res = await fetch(`${gw.http}/shop.v1.OrderService/GetOrder`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": KEY },
        body: JSON.stringify({ orderId: "x".repeat(MAX_BODY) }),
      });
      assert.equal(res.status, 429);
      assert.equal(((await res.json()) as { code: string }).code, "resource_exhausted");
      assert.equal(backend.received.length, before);
    });

    test("metrics count the calls with help text", async () => {
      const text = await (await fetch(`${gw.http}/metrics`)).text();
      assert.match(text, /platform_http_requests_total\{[^}]*route="\/\{service\}\/\{method\}"/);
      assert.match(text, /platform_gateway_invocations_total\{service="orders",code="OK"\}/);
      assert.match(text, /platform_gateway_stream_invocations_total\{kind="server-streaming",code="OK"\}/);
    });
  });
}
