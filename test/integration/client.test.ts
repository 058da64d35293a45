import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { CloudEvent } from "cloudevents";
import { createGatewayClient, GatewayClientError, GatewayInvocationError, type GatewayClient } from "../../src/client/index.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures, QUERY_INDEX, QUERY_STORE } from "../support/runtimes.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { nextMessage } from "../support/client-helpers.js";

const KEY = "client-key";

/** A code name check for assert.rejects. */
function code(name: string, message?: RegExp) {
  return (e: unknown): boolean => {
    assert.ok(e instanceof GatewayClientError, `expected a GatewayClientError, got ${String(e)}`);
    assert.equal(e.codeName, name, e.message);
    if (message) assert.match(e.message, message);
    return true;
  };
}

for (const fixture of runtimeFixtures) {
  describe(`client library against a gateway (${fixture.name} runtime)`, () => {
    let gw: TestGateway;
    let backend: OrderBackend;
    let client: GatewayClient;
    let teardown: () => Promise<void>;

    before(async () => {
      const rt = await fixture.setup();
      backend = await startOrderBackend({ admin: false });
      gw = await startTestGateway(
        {
          ...rt.options,
          apiKeys: [KEY],
          services: [
            { name: "orders", grpc: { host: "127.0.0.1", port: backend.port }, pubsub: { pubsubName: "pubsub" }, state: { storeName: "orders-store", keys: ["order.*"] } },
            { name: "shared-components", pubsub: { pubsubName: "pubsub" } },
            // Queries need a query store on Dapr (Redis Stack with an index; docs/dapr.md "State").
            { name: "catalog", state: { storeName: QUERY_STORE, keys: [], queryIndexName: QUERY_INDEX } },
          ],
        },
        rt.overrides,
      );
      client = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY });
      teardown = rt.close;
    });
    after(async () => {
      client.close();
      await gw.close();
      backend.close();
      await teardown();
    });

    describe("auth", () => {
      it("sends the key on every call; no key or a wrong key is UNAUTHENTICATED", async () => {
        assert.equal((await client.listConfigServices()).length, 3);
        const anon = createGatewayClient({ address: gw.grpcAddress });
        const wrong = createGatewayClient({ address: gw.grpcAddress, apiKey: "nope" });
        try {
          await assert.rejects(anon.listConfigServices(), code("UNAUTHENTICATED"));
          await assert.rejects(wrong.getState("orders", "order.1"), code("UNAUTHENTICATED"));
        } finally {
          anon.close();
          wrong.close();
        }
      });

      it("with tls: true it speaks TLS (a plaintext gateway cannot be reached)", async () => {
        const tls = createGatewayClient({ address: `localhost:${gw.gateway.grpcPort}`, apiKey: KEY, tls: true });
        try {
          await assert.rejects(tls.listConfigServices({ timeoutMs: 3000 }), code("UNAVAILABLE"));
        } finally {
          tls.close();
        }
      });
    });

    describe("listings", () => {
      it("lists config services (non-dialable included) and one config service", async () => {
        const all = await client.listConfigServices();
        assert.deepEqual(all[0], {
          name: "orders",
          grpc: { host: "127.0.0.1", port: backend.port },
          pubsub: { pubsubName: "pubsub" },
          state: { storeName: "orders-store", keys: ["order.*"] },
        });
        assert.deepEqual(all[1], { name: "shared-components", pubsub: { pubsubName: "pubsub" } });
        assert.deepEqual(await client.getConfigService("shared-components"), all[1]);
        assert.equal(await client.getConfigService("nope"), null);
      });

      it("lists invocable services, their methods and a method schema", async () => {
        assert.deepEqual(await client.listServices(), ["orders"]);
        const methods = await client.listMethods("orders");
        const get = methods.find((m) => m.name === "GetOrder");
        assert.ok(get, `GetOrder in ${JSON.stringify(methods.map((m) => m.name))}`);
        assert.match(get.fullName, /^shop\.v1\.OrderService[./]GetOrder$/);
        assert.equal(get.inputType.replace(/^\./, ""), "shop.v1.GetOrderRequest");
        assert.equal(get.isServerStreaming, false);
        assert.equal(methods.find((m) => m.name === "WatchOrders")?.isServerStreaming, true);
        const schema = await client.getMethodSchema("orders", "GetOrder");
        assert.equal(schema.schemaType, "input");
        assert.ok(schema.fields.some((f) => f.name === "order_id" || f.name === "orderId"), JSON.stringify(schema.fields));
        const out = await client.getMethodSchema("orders", "GetOrder", "output");
        assert.equal(out.schemaType, "output");
      });
    });

    describe("invoke", () => {
      it("resolves the typed JSON response", async () => {
        const order = await client.invoke<{ orderId: string }>("orders", "GetOrder", { orderId: "o-1" });
        assert.equal(order.orderId, "o-1");
      });

      it("rejects with GatewayInvocationError carrying the backend's code and message", async () => {
        await assert.rejects(client.invoke("orders", "GetOrder", { orderId: "fail:NOT_FOUND:no such order" }), (e: unknown) => {
          assert.ok(e instanceof GatewayInvocationError);
          assert.equal(e.status, "NOT_FOUND");
          assert.equal(e.codeName, "NOT_FOUND");
          assert.match(e.message, /no such order/);
          return true;
        });
        await assert.rejects(client.invoke("nope", "GetOrder", {}), (e: unknown) => e instanceof GatewayInvocationError);
      });

      it("invokeJson returns the raw result, failures included", async () => {
        const ok = await client.invokeJson("orders", "GetOrder", { orderId: "o-2" });
        assert.equal(ok.success, true);
        assert.equal(ok.status, "OK");
        assert.equal((JSON.parse(ok.responseData) as { orderId: string }).orderId, "o-2");
        const failed = await client.invokeJson("orders", "GetOrder", JSON.stringify({ orderId: "fail:PERMISSION_DENIED:go away" }));
        assert.equal(failed.success, false);
        assert.equal(failed.status, "PERMISSION_DENIED");
        assert.match(failed.message, /go away/);
      });
    });

    describe("state", () => {
      it("saves, gets (value + etag), saves with the etag, rejects a stale etag", async () => {
        const saved = await client.saveState({ service: "orders", key: "order.1", value: "v1" });
        assert.equal(saved.success, true);
        const got = await client.getState("orders", "order.1");
        assert.equal(got.value, "v1");
        assert.ok(got.etag !== "", "an etag");
        await client.saveState({ service: "orders", key: "order.1", value: "v2", etag: got.etag });
        assert.equal((await client.getState("orders", "order.1")).value, "v2");
        await assert.rejects(client.saveState({ service: "orders", key: "order.1", value: "v3", etag: got.etag }), code("ABORTED"));
        assert.equal((await client.getState("orders", "order.1")).value, "v2");
      });

      it("bulk get, query, delete and bulk delete", async () => {
        for (const k of ["order.a", "order.b", "order.c"]) await client.saveState({ service: "orders", key: k, value: `value of ${k}` });
        const bulk = await client.getBulkState("orders", ["order.a", "order.b"]);
        assert.deepEqual(bulk.map((i) => [i.key, i.value]).sort(), [["order.a", "value of order.a"], ["order.b", "value of order.b"]]);
        for (const k of ["item.a", "item.b"]) await client.saveState({ service: "catalog", key: k, value: JSON.stringify({ name: k }) });
        const all = await client.queryState({ service: "catalog", query: {} });
        assert.ok(all.items.some((i) => i.key === "item.b"), JSON.stringify(all.items));
        const limited = await client.queryState({ service: "catalog", query: "{}", limit: 1 });
        assert.equal(limited.items.length, 1);
        const del = await client.deleteState({ service: "orders", key: "order.c" });
        assert.equal(del.success, true);
        assert.equal((await client.getState("orders", "order.c")).value, "");
        const bulkDel = await client.deleteBulkState({ service: "orders", keys: ["order.a", "order.b", "order.zz"] });
        assert.equal(bulkDel.success, true);
        assert.match(bulkDel.message, /2/);
        assert.deepEqual((await client.getBulkState("orders", ["order.a"])).filter((i) => i.value !== ""), []);
      });

      it("publishes a change notification when asked (Tier 0 with the value)", async () => {
        const sub = client.subscribe("state.change");
        await sub.ready;
        await client.saveState({ service: "orders", key: "order.n", value: "hello", publishChange: true, includeValue: true });
        const value = await nextMessage(sub[Symbol.asyncIterator](), "the state change event");
        sub.close();
        assert.equal(value.topic, "state.change");
        assert.equal(value.event.type, "com.platform.api.state-saved");
        assert.deepEqual(JSON.parse(value.event.text_data!), { service: "orders", key: "order.n", action: "save", value: "hello" });
      });

      it("bad input names the field and changes nothing", async () => {
        await assert.rejects(client.saveState({ service: "orders", key: "", value: "x" }), code("INVALID_ARGUMENT", /key/));
        await assert.rejects(client.getState("unknown-service", "k"), code("NOT_FOUND", /unknown-service/));
        await assert.rejects(client.queryState({ service: "orders", limit: -1 }), code("INVALID_ARGUMENT", /limit/));
      });
    });

    describe("publish", () => {
      it("publishes a plain object and a cloudevents SDK CloudEvent with extensions and data", async () => {
        const sub = client.subscribe(["client.publish"]);
        await sub.ready;
        const st = await client.publish("client.publish", { source: "urn:test:client", type: "t.plain", data: { n: 1 }, tenant: "acme" });
        assert.equal(st.success, true);
        const sdk = new CloudEvent({ source: "https://example.com/client", type: "t.sdk", data: "plain text", datacontenttype: "text/plain", priority: 5 });
        await client.publish("client.publish", sdk);
        const it = sub[Symbol.asyncIterator]();
        const first = await nextMessage(it, "the plain event");
        const second = await nextMessage(it, "the SDK event");
        sub.close();
        assert.equal(first.event.type, "t.plain");
        assert.equal(first.event.source, "urn:test:client");
        assert.equal(first.event.spec_version, "1.0");
        assert.ok(first.event.id !== "");
        assert.deepEqual(JSON.parse(first.event.text_data!), { n: 1 });
        assert.equal(first.event.attributes["tenant"]?.ce_string, "acme");
        assert.equal(first.event.attributes["datacontenttype"]?.ce_string, "application/json");
        assert.equal(second.event.id, sdk.id);
        assert.equal(second.event.text_data, "plain text");
        assert.equal(second.event.attributes["priority"]?.ce_integer, 5);
        assert.equal(second.event.attributes["datacontenttype"]?.ce_string, "text/plain");
      });

      it("invalid input rejects with the gateway's INVALID_ARGUMENT", async () => {
        await assert.rejects(client.publish("", { source: "urn:a:b", type: "t" }), code("INVALID_ARGUMENT", /topic/));
        await assert.rejects(client.publish("x", { source: "a/b", type: "t" }), code("INVALID_ARGUMENT", /source/));
        await assert.rejects(client.publish("x", { source: "", type: "t" }), code("INVALID_ARGUMENT", /source/));
      });
    });

    describe("triggers", () => {
      it("schedules, gets, lists and deletes; errors are rejected with their code", async () => {
        const st = await client.scheduleTrigger({ name: "client-trigger", targetTopic: "client.tick", schedule: "@every 1h" });
        assert.equal(st.success, true);
        await assert.rejects(client.scheduleTrigger({ name: "client-trigger", targetTopic: "client.tick", schedule: "@every 1h" }), code("ALREADY_EXISTS"));
        const t = await client.getTrigger("client-trigger");
        assert.equal(t.name, "client-trigger");
        assert.equal(t.targetTopic, "client.tick");
        assert.equal(t.schedule, "@every 1h");
        assert.equal(t.timesFired, 0);
        assert.ok((await client.listTriggers()).some((x) => x.name === "client-trigger"));
        await client.deleteTrigger("client-trigger");
        await assert.rejects(client.getTrigger("client-trigger"), code("NOT_FOUND"));
        assert.ok(!(await client.listTriggers()).some((x) => x.name === "client-trigger"));
      });

      it("a fired trigger reaches a subscriber", async () => {
        const sub = client.subscribe("client.fired");
        await sub.ready;
        await client.scheduleTrigger({ name: "client-fire-once", targetTopic: "client.fired", dueTime: "0s", repeats: 1 });
        const value = await nextMessage(sub[Symbol.asyncIterator](), "the trigger event");
        sub.close();
        assert.equal(value.event.type, "com.runtime.event.sent");
        assert.equal(value.event.source, "urn:com.platform:api");
      });
    });
  });
}

describe("client transport", () => {
  it("sends x-api-key only when given", async () => {
    const seen: Array<string | undefined> = [];
    const hanging: Array<grpc.ServerUnaryCall<unknown, unknown>> = [];
    const server = new grpc.Server();
    server.addService(gatewayPackageDefinition()["platform.Config"] as grpc.ServiceDefinition, {
      ListServices: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        seen.push(call.metadata.get("x-api-key")[0] as string | undefined);
        cb(null, { services: [] });
      },
      // Never answers: for cancellation and deadlines.
      GetService: (call: grpc.ServerUnaryCall<unknown, unknown>) => {
        hanging.push(call);
      },
    });
    const port = await new Promise<number>((res, rej) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    const anon = createGatewayClient({ address: `127.0.0.1:${port}` });
    const keyed = createGatewayClient({ address: `127.0.0.1:${port}`, apiKey: "secret" });
    try {
      await anon.listConfigServices();
      await keyed.listConfigServices();
      await keyed.listConfigServices();
      assert.deepEqual(seen, [undefined, "secret", "secret"]);
      // An AbortSignal cancels a call in flight (the server sees the cancellation); a timeout is DEADLINE_EXCEEDED.
      const ac = new AbortController();
      const pending = keyed.getConfigService("x", { signal: ac.signal });
      await waitFor(() => hanging.length === 1, "the call to reach the server");
      const serverSawCancel = new Promise<void>((r) => hanging[0]!.once("cancelled", () => r()));
      ac.abort();
      await assert.rejects(pending, code("CANCELLED"));
      await serverSawCancel;
      await assert.rejects(keyed.getConfigService("x", { timeoutMs: 50 }), code("DEADLINE_EXCEEDED"));
      await assert.rejects(keyed.getConfigService("x", { signal: AbortSignal.abort() }), code("CANCELLED"));
    } finally {
      anon.close();
      keyed.close();
      server.forceShutdown();
    }
  });

  it("rejects bad options naming the field, and calls after close() are CANCELLED", async () => {
    assert.throws(() => createGatewayClient({ address: "" }), code("INVALID_ARGUMENT", /address/));
    assert.throws(() => createGatewayClient({ address: "x:1", apiKey: "" }), code("INVALID_ARGUMENT", /apiKey/));
    assert.throws(() => createGatewayClient({ address: "x:1", reconnect: { maxDelayMs: -1 } }), code("INVALID_ARGUMENT", /reconnect\.maxDelayMs/));
    const c = createGatewayClient({ address: "127.0.0.1:1" });
    c.close();
    c.close();
    await assert.rejects(c.listServices(), code("CANCELLED"));
  });
});
