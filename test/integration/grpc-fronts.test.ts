import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { GRPC_SERVERS } from "../../src/main/options.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { event, publish, subscribe } from "./pubsub-support.js";

/**
 * The gateway's gRPC port behaves the same on either server behind it (`grpcServer`: the native one, the default
 * the rest of the suite runs on, and grpc-js): a unary invoke, a refusal, a streaming subscription with its header,
 * metadata forwarding, and a graceful close that lets an in-flight call finish and refuses new ones.
 */

const KEY = "k1";

for (const kind of GRPC_SERVERS) {
  describe(`the gRPC port on the ${kind} server`, () => {
    let backend: OrderBackend;
    let gw: TestGateway;
    before(async () => {
      backend = await startOrderBackend();
      gw = await startTestGateway({
        grpcServer: kind,
        apiKeys: [KEY],
        forwardHeaders: ["x-tenant"],
        services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
      });
    });
    after(async () => {
      await gw.close();
      backend.close();
    });

    it("invokes a backend method through InvokeJson and forwards only allow-listed metadata", async () => {
      const md = withKey(KEY);
      md.set("x-tenant", "acme");
      md.set("x-secret-thing", "no");
      const res = await unary(gw.client("platform.Gateway"), "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "o-1" }) }, md);
      assert.equal(res.success, true, res.message);
      assert.equal(JSON.parse(res.response_data).orderId, "o-1");
      const seen = backend.received.at(-1)?.metadata ?? {};
      assert.equal(seen["x-tenant"], "acme");
      assert.equal(seen["x-secret-thing"], undefined);
      assert.equal(seen["x-api-key"], undefined);
    });

    it("refuses a call without x-api-key with UNAUTHENTICATED", async () => {
      const err = await unary(gw.client("platform.Gateway"), "ListServices", {}).then(
        () => assert.fail("accepted"),
        (e: grpc.ServiceError) => e,
      );
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
      assert.match(err.details, /x-api-key/);
    });

    it("streams a subscription: x-subscription-id header first, then events in publish order", async () => {
      const client = gw.client("io.cloudevents.v1.Pubsub");
      const s = subscribe(client, ["fronts"], withKey(KEY));
      await s.ready();
      assert.match(s.id(), /^[0-9a-f-]{36}$/);
      for (let i = 0; i < 20; i++) await publish(client, "fronts", event(i), withKey(KEY));
      await s.count(20);
      assert.deepEqual(
        s.got.map((e) => e.cloudevent.text_data),
        Array.from({ length: 20 }, (_, i) => String(i)),
      );
      s.call.cancel();
      assert.equal((await s.ended()).code, grpc.status.CANCELLED);
    });

    it("closes gracefully: a call in flight finishes OK, a new call is refused", async () => {
      const client = gw.client("platform.Gateway");
      const slow = unary(client, "InvokeJson", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: "sleep:300" }) }, withKey(KEY));
      await new Promise((r) => setTimeout(r, 100));
      const closing = gw.gateway.close();
      const res = await slow;
      assert.equal(res.success, true, res.message);
      const late = await unary(client, "ListServices", {}, withKey(KEY), { deadline: Date.now() + 2000 }).then(
        () => "accepted",
        (e: grpc.ServiceError) => grpc.status[e.code],
      );
      assert.notEqual(late, "accepted");
      await closing;
    });
  });
}
