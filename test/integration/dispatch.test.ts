import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { invokeFronts } from "../support/backends/fronts.js";
import { RICH_ORDER } from "../support/backends/rich-order.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";

const KEY = "k1";
const h = { headers: { "x-api-key": KEY } };

for (const fixture of runtimeFixtures) {
  describe(`dynamic dispatch [${fixture.name}]`, () => {
    let rich: OrderBackend;
    let alpha: OrderBackend;
    let gw: TestGateway;
    let closeRuntime: () => Promise<void>;

    before(async () => {
      const rt = await fixture.setup();
      closeRuntime = rt.close;
      rich = await startOrderBackend({ reflection: ["v1", "v1alpha"] });
      alpha = await startOrderBackend({ reflection: ["v1alpha"], admin: false });
      gw = await startTestGateway(
        {
          ...rt.options,
          apiKeys: [KEY],
          services: [
            { name: "orders", grpc: { host: "127.0.0.1", port: rich.port, channels: 2 } },
            { name: "alpha", grpc: { host: "127.0.0.1", port: alpha.port } },
            { name: "components-only", pubsub: { pubsubName: "pubsub" } },
          ],
        },
        rt.overrides,
      );
    });
    after(async () => {
      await gw.close();
      rich.close();
      alpha.close();
      await closeRuntime();
    });

    for (const front of invokeFronts(KEY)) {
      describe(front.name, () => {
        it("round-trips every proto3 JSON feature exactly", async () => {
          const r = await front.invoke(gw, "orders", "PutOrder", JSON.stringify(RICH_ORDER));
          assert.equal(r.message, "");
          assert.equal(r.status, "OK");
          assert.equal(r.success, true);
          assert.deepEqual(JSON.parse(r.responseData), RICH_ORDER);
        });

        it("resolves short, slash and dotted full method names", async () => {
          for (const m of ["Ping", "ops.v1.Admin/Ping", "ops.v1.Admin.Ping"]) {
            const r = await front.invoke(gw, "orders", m, '{"text":"hi"}');
            assert.equal(r.success, true, `${m}: ${r.message}`);
            assert.equal(JSON.parse(r.responseData).text, "hi");
          }
        });

        it("an empty request means the default message", async () => {
          const r = await front.invoke(gw, "orders", "shop.v1.OrderService/ListOrders", "");
          assert.equal(r.success, true, r.message);
          assert.deepEqual(JSON.parse(r.responseData), { orders: [{ orderId: "a" }, { orderId: "b" }] });
        });

        it("rejects an unknown field, a bad enum, a wrong type and malformed JSON in-band, naming the problem", async () => {
          // REST invoke carries the request as an object inside the body, so malformed JSON is a bad body there.
          const malformed = front.name === "REST invoke" ? /^request body is not valid JSON: / : /^malformed JSON for shop\.v1\.Order: /;
          const cases: Array<[string, RegExp]> = [
            ['{"orderId":"x","nope":1}', /^field "nope" is not a field of shop\.v1\.Order$/],
            ['{"status":"STATUS_BOGUS"}', /^field "status": "STATUS_BOGUS" is not a value of enum shop\.v1\.Status$/],
            ['{"paid":"yes"}', /^field "paid": expected boolean, got "yes"$/],
            ['{"items":[{"quantity":"x"}]}', /^field "items\[0\]\.quantity": expected number \(uint32\), got "x"$/],
            ['{"orderId": ', malformed],
          ];
          for (const [json, re] of cases) {
            const r = await front.invoke(gw, "orders", "PutOrder", json);
            assert.equal(r.success, false, json);
            assert.equal(r.status, "INVALID_ARGUMENT", `${json}: ${r.message}`);
            assert.match(r.message, re, json);
          }
        });

        it("reports backend errors in-band with their code and text", async () => {
          const r = await front.invoke(gw, "orders", "GetOrder", JSON.stringify({ orderId: "fail:PERMISSION_DENIED:order 7 is not yours" }));
          assert.deepEqual(r, { success: false, status: "PERMISSION_DENIED", message: "order 7 is not yours", responseData: "" });
        });

        it("reports unknown service and method as in-band NOT_FOUND, ambiguity and streaming precisely", async () => {
          const svc = await front.invoke(gw, "nope", "GetOrder", "{}");
          assert.equal(svc.status, "NOT_FOUND");
          assert.match(svc.message, /service nope is not registered/);
          const nd = await front.invoke(gw, "components-only", "GetOrder", "{}");
          assert.equal(nd.status, "NOT_FOUND");
          assert.match(nd.message, /components-only/);
          const m = await front.invoke(gw, "orders", "Nope", "{}");
          assert.equal(m.status, "NOT_FOUND");
          assert.match(m.message, /method Nope not found on service orders.*shop\.v1\.OrderService\/GetOrder/);
          // A huge method name is quoted cut, so the list of the methods it has still fits the message.
          const long = await front.invoke(gw, "orders", "N".repeat(100_000), "{}");
          assert.equal(long.status, "NOT_FOUND");
          assert.match(long.message, /method N{256}…\(99744 more characters\) not found on service orders; it has .*shop\.v1\.OrderService\/GetOrder/);
          const amb = await front.invoke(gw, "orders", "ListOrders", "{}");
          assert.equal(amb.status, "INVALID_ARGUMENT");
          assert.match(amb.message, /ambiguous.*shop\.v1\.OrderService\/ListOrders.*ops\.v1\.Admin\/ListOrders/);
          const st = await front.invoke(gw, "orders", "WatchOrders", "{}");
          assert.equal(st.status, "UNIMPLEMENTED");
          assert.match(st.message, /server-streaming.*unary methods only/);
          const bidi = await front.invoke(gw, "orders", "SyncOrders", "{}");
          assert.equal(bidi.status, "UNIMPLEMENTED");
          assert.match(bidi.message, /bidi-streaming/);
        });

        it("works against a backend that serves only reflection v1alpha", async () => {
          const r = await front.invoke(gw, "alpha", "GetOrder", '{"orderId":"from-alpha"}');
          assert.equal(r.success, true, r.message);
          assert.equal(JSON.parse(r.responseData).orderId, "from-alpha");
        });
      });
    }

    describe("metadata allow-list (asserted on the backend)", () => {
      const sent = {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "x-request-id": "req-1",
        "x-b3-traceid": "abc",
        authorization: "Bearer secret",
        cookie: "session=1",
        "x-custom": "nope",
        "trace-bin": "binary",
      };
      for (const front of invokeFronts(KEY)) {
        it(`${front.name}: forwards only tracing headers; never x-api-key, authority or -bin entries`, async () => {
          const before = rich.received.length;
          const r = await front.invoke(gw, "orders", "GetOrder", `{"orderId":"md-${front.name}"}`, sent);
          assert.equal(r.success, true, r.message);
          const calls = rich.received.slice(before).filter((c) => c.path.endsWith("/GetOrder"));
          assert.equal(calls.length, 1);
          const md = calls[0]!.metadata;
          assert.equal(md["traceparent"], sent.traceparent);
          assert.equal(md["x-request-id"], "req-1");
          assert.equal(md["x-b3-traceid"], "abc");
          for (const k of ["x-api-key", "authorization", "cookie", "x-custom", "trace-bin"]) assert.equal(md[k], undefined, `${k} reached the backend`);
        });
      }

      it("/v1/grpc/call forwards nothing when metadata is absent, even with tracing headers on the request", async () => {
        const before = rich.received.length;
        const res = await fetch(`${gw.http}/v1/grpc/call`, {
          method: "POST",
          headers: { "x-api-key": KEY, traceparent: sent.traceparent, "content-type": "application/json" },
          body: JSON.stringify({ service: "orders", method: "GetOrder", request: '{"orderId":"no-md"}' }),
        });
        const body = (await res.json()) as { error: boolean; statusCode: string; data: string };
        assert.equal(body.error, false, body.data);
        const md = rich.received.slice(before).find((c) => c.path.endsWith("/GetOrder"))!.metadata;
        assert.equal(md["traceparent"], undefined);
        assert.equal(md["x-api-key"], undefined);
      });

      it("/v1/grpc/call rejects metadata that is not an object of strings in-band", async () => {
        const res = await fetch(`${gw.http}/v1/grpc/call`, {
          method: "POST",
          headers: { "x-api-key": KEY, "content-type": "application/json" },
          body: JSON.stringify({ service: "orders", method: "GetOrder", request: "{}", metadata: { traceparent: 5 } }),
        });
        assert.deepEqual(await res.json(), { error: true, statusCode: "INVALID_ARGUMENT", data: "metadata.traceparent must be a string (got number)" });
      });
    });

    describe("listings", () => {
      it("lists dialable services only, over gRPC and REST", async () => {
        const g = await unary(gw.client("platform.Gateway"), "ListServices", {}, withKey(KEY));
        assert.deepEqual(g.services, ["orders", "alpha"]);
        const r = await (await fetch(`${gw.http}/v1/gateway/list-services`, h)).json();
        assert.deepEqual(r, { services: ["orders", "alpha"] });
      });

      it("lists methods with streaming flags over gRPC, /v1/gateway and /v1/grpc", async () => {
        const g = await unary(gw.client("platform.Gateway"), "ListMethods", { service: "orders" }, withKey(KEY));
        const watch = g.methods.find((m: { name: string }) => m.name === "WatchOrders");
        assert.deepEqual(watch, {
          name: "WatchOrders",
          full_name: "shop.v1.OrderService/WatchOrders",
          input_type: "shop.v1.GetOrderRequest",
          output_type: "shop.v1.Order",
          is_client_streaming: false,
          is_server_streaming: true,
        });
        assert.equal(g.methods.length, 8);
        const r = (await (await fetch(`${gw.http}/v1/gateway/list-methods?service=orders`, h)).json()) as { methods: Array<Record<string, unknown>> };
        assert.deepEqual(r.methods.find((m) => m["name"] === "Ping"), {
          name: "Ping",
          fullName: "ops.v1.Admin/Ping",
          inputType: "ops.v1.PingRequest",
          outputType: "ops.v1.PingReply",
          isClientStreaming: false,
          isServerStreaming: false,
        });
        const refreshed = await fetch(`${gw.http}/v1/gateway/list-methods?service=orders&refresh=true`, h);
        assert.equal(refreshed.status, 200);
        const v = (await (await fetch(`${gw.http}/v1/grpc/orders/methods`, h)).json()) as Array<{ name: string; streamingType: string }>;
        assert.deepEqual(
          Object.fromEntries(v.filter((m) => m.name.endsWith("Orders") && m.name !== "ListOrders").map((m) => [m.name, m.streamingType])),
          { WatchOrders: "server", UploadOrders: "client", SyncOrders: "bidi" },
        );
        assert.equal(v.find((m) => m.name === "GetOrder")?.streamingType, "unary");
      });

      it("answers NOT_FOUND for an unknown service: gRPC status and REST 404 body", async () => {
        await assert.rejects(unary(gw.client("platform.Gateway"), "ListMethods", { service: "nope" }, withKey(KEY)), (e: grpc.ServiceError) => {
          assert.equal(e.code, grpc.status.NOT_FOUND);
          assert.match(e.details, /service nope is not registered/);
          return true;
        });
        for (const path of ["/v1/gateway/list-methods?service=nope", "/v1/grpc/nope/methods", "/v1/grpc/nope/schema/GetOrder", "/v1/grpc/nope/protos"]) {
          const res = await fetch(gw.http + path, h);
          assert.equal(res.status, 404, path);
          const body = (await res.json()) as { code: number; message: string; details: unknown[] };
          assert.equal(body.code, 5);
          assert.match(body.message, /nope/);
        }
        const missing = await fetch(`${gw.http}/v1/gateway/list-methods`, h);
        assert.equal(missing.status, 400);
      });

      it("describes a method's input and output message (REST and gRPC)", async () => {
        const input = (await (await fetch(`${gw.http}/v1/grpc/orders/schema/PutOrder`, h)).json()) as {
          inputTypeName: string;
          outputTypeName: string;
          schemaType: string;
          fields: Array<{ name: string; type: string; typeName: string; isRepeated: boolean; isOptional: boolean }>;
        };
        assert.equal(input.inputTypeName, "shop.v1.Order");
        assert.equal(input.outputTypeName, "shop.v1.Order");
        assert.equal(input.schemaType, "input");
        const f = Object.fromEntries(input.fields.map((x) => [x.name, x]));
        assert.deepEqual(f["big_signed"], { name: "big_signed", type: "int64", typeName: "", isRepeated: false, isOptional: false });
        assert.deepEqual(f["status"], { name: "status", type: "enum", typeName: "shop.v1.Status", isRepeated: false, isOptional: false });
        assert.deepEqual(f["items"], { name: "items", type: "message", typeName: "shop.v1.Item", isRepeated: true, isOptional: false });
        assert.deepEqual(f["note"], { name: "note", type: "string", typeName: "", isRepeated: false, isOptional: true });
        assert.equal(f["counters"]?.type, "map");
        assert.equal(f["created_at"]?.typeName, "google.protobuf.Timestamp");
        const out = (await (await fetch(`${gw.http}/v1/grpc/orders/schema/ops.v1.Admin/Ping?type=output`, h)).json()) as { schemaType: string; fields: unknown[] };
        assert.equal(out.schemaType, "output");
        assert.deepEqual(out.fields, [
          { name: "text", type: "string", typeName: "", isRepeated: false, isOptional: false },
          { name: "count", type: "int64", typeName: "", isRepeated: false, isOptional: false },
        ]);
        const bad = await fetch(`${gw.http}/v1/grpc/orders/schema/Ping?type=sideways`, h);
        assert.equal(bad.status, 400);
        assert.match(((await bad.json()) as { message: string }).message, /type must be input or output/);
        const unknown = await fetch(`${gw.http}/v1/grpc/orders/schema/Nope`, h);
        assert.equal(unknown.status, 404);
        const g = await unary(gw.client("platform.Gateway"), "GetMethodSchema", { service: "orders", method: "Ping", type: "output" }, withKey(KEY));
        assert.equal(g.schema_type, "output");
        assert.equal(g.input_type_name, "ops.v1.PingRequest");
        assert.deepEqual(g.fields[1], { name: "count", type: "int64", type_name: "", is_repeated: false, is_optional: false });
      });

      it("serves the backend's descriptors as a binary FileDescriptorSet", async () => {
        const res = await fetch(`${gw.http}/v1/grpc/orders/protos`, h);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("content-type"), "application/x-protobuf");
        const set = fromBinary(FileDescriptorSetSchema, new Uint8Array(await res.arrayBuffer()));
        const names = set.file.map((f) => f.name);
        for (const n of ["shop/v1/shop.proto", "shop/v1/common.proto", "ops/v1/admin.proto", "google/protobuf/any.proto", "google/protobuf/timestamp.proto"]) {
          assert.ok(names.includes(n), `${n} missing from ${names.join(", ")}`);
        }
        // Dependencies come before their dependents.
        assert.ok(names.indexOf("shop/v1/common.proto") < names.indexOf("shop/v1/shop.proto"));
      });
    });

    it("reports the channel pools in /health", async () => {
      const body = (await (await fetch(`${gw.http}/health`)).json()) as { entries: Record<string, { status: string; description: string }> };
      assert.equal(body.entries["grpc-channel-pool"]?.status, "Healthy");
    });
  });
}
