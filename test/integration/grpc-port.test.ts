import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { parseCli } from "../../src/main/cli-args.js";
import { validateGatewayOptions, type GatewayOptions } from "../../src/config/options.js";
import { MAX_SUBSCRIPTION_TOPICS } from "../../src/ops/pubsub.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { event, publish, subscribe } from "./pubsub-support.js";

/**
 * The gateway's gRPC port end to end (the gateway's own gRPC server, the only one since the grpc-js server front was
 * retired): a unary invoke, a refusal, a streaming subscription with its header, the bound on its topics, metadata
 * forwarding, and a graceful close that lets an in-flight call finish and refuses new ones. Passing the removed
 * `--grpc-server` is an error that names it.
 */

const KEY = "k1";

{
  describe("the gRPC port", () => {
    let backend: OrderBackend;
    let gw: TestGateway;
    before(async () => {
      backend = await startOrderBackend();
      gw = await startTestGateway({
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

    it(`refuses a Subscribe naming more than ${MAX_SUBSCRIPTION_TOPICS} topics with INVALID_ARGUMENT naming the field and the bound`, async () => {
      const client = gw.client("io.cloudevents.v1.Pubsub");
      const tooMany = subscribe(client, Array.from({ length: MAX_SUBSCRIPTION_TOPICS + 1 }, (_, i) => `cap.${i}`), withKey(KEY));
      const st = await tooMany.ended();
      assert.equal(st.code, grpc.status.INVALID_ARGUMENT);
      assert.match(st.details, new RegExp(`topics must hold at most ${MAX_SUBSCRIPTION_TOPICS} topics, got ${MAX_SUBSCRIPTION_TOPICS + 1}`));
      // 100,000 topics (one daprd stream each on Dapr) are refused the same way, before any is subscribed.
      const huge = await subscribe(client, Array.from({ length: 100_000 }, (_, i) => `cap.${i}`), withKey(KEY)).ended();
      assert.equal(huge.code, grpc.status.INVALID_ARGUMENT);
      // The bound itself is accepted.
      const atCap = subscribe(client, Array.from({ length: MAX_SUBSCRIPTION_TOPICS }, (_, i) => `cap.${i}`), withKey(KEY));
      await atCap.ready();
      atCap.call.cancel();
      assert.equal((await atCap.ended()).code, grpc.status.CANCELLED);
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

describe("the removed --grpc-server", () => {
  it("is an error naming the flag, the variable or the option", () => {
    assert.throws(() => parseCli(["--grpc-server", "grpc-js"], {}), /--grpc-server was removed/);
    assert.throws(() => parseCli(["--grpc-server", "native"], {}), /--grpc-server was removed/);
    assert.throws(() => parseCli([], { GATEWAY_GRPC_SERVER: "grpc-js" }), /GATEWAY_GRPC_SERVER was removed/);
    assert.throws(() => validateGatewayOptions({ grpcServer: "native" } as GatewayOptions), /option grpcServer was removed/);
  });
});
