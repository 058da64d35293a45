import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures, useGatewayOn } from "../support/runtimes.js";
import { stateFronts } from "../support/state-fronts.js";

const KEY = "k1";
const services = [{ name: "orders", state: { storeName: "orders-store", keys: [] } }];

interface Delivery {
  topic: string;
  cloudevent: CloudEvent;
}

/** Open a real `Pubsub.Subscribe` stream; resolves once the response headers arrived (the subscription is live). */
async function subscribe(gw: TestGateway, topics: string[]): Promise<{ got: Delivery[]; call: grpc.ClientReadableStream<Delivery> }> {
  const client = gw.client("io.cloudevents.v1.Pubsub") as unknown as {
    Subscribe(req: object, md: grpc.Metadata): grpc.ClientReadableStream<Delivery>;
  };
  const call = client.Subscribe({ topics }, withKey(KEY));
  const got: Delivery[] = [];
  call.on("data", (d: Delivery) => got.push(d));
  call.on("error", () => undefined); // CANCELLED when the test ends the stream
  await new Promise<void>((resolve, reject) => {
    call.once("metadata", () => resolve());
    call.once("error", reject);
  });
  return { got, call };
}

for (const fixture of runtimeFixtures) {
  describe(`state change notifications to a real Subscribe stream over ${fixture.name}`, () => {
    const gw = useGatewayOn(fixture, { services, apiKeys: [KEY] });

    it("a subscriber of state.change receives Tier 0 events; one of the Tier 1 topic receives the verbatim event", async () => {
      const tier0 = await subscribe(gw(), ["state.change"]);
      const tier1 = await subscribe(gw(), ["orders.domain"]);
      const [grpcFront, restFront] = stateFronts(gw(), KEY);
      await grpcFront!.save({ service: "orders", key: "a/1", value: "v1", publish_change: true, include_value: true });
      await restFront!.delete({ service: "orders", key: "a/1", publish_change: true });
      const ce = { id: "order-1-v2", source: "urn:com.example:orders", spec_version: "1.0", type: "com.example.order.updated", text_data: "hi" };
      await grpcFront!.save({ service: "orders", key: "a/2", value: "v2", publish_change: true, change: { topic: "orders.domain", cloudevent: ce } });

      await waitFor(() => tier0.got.length >= 2 && tier1.got.length >= 1, "two Tier 0 events and one Tier 1 event");
      const [saved, deleted] = tier0.got;
      assert.equal(saved!.topic, "state.change");
      assert.equal(saved!.cloudevent.type, "com.platform.api.state-saved");
      assert.equal(saved!.cloudevent.source, "urn:com.platform.api");
      assert.equal(saved!.cloudevent.spec_version, "1.0");
      assert.equal(saved!.cloudevent.attributes["datacontenttype"]?.ce_string, "application/json");
      assert.deepEqual(JSON.parse(saved!.cloudevent.text_data!), { service: "orders", key: "a/1", action: "save", value: "v1" });
      assert.equal(deleted!.cloudevent.type, "com.platform.api.state-deleted");
      assert.deepEqual(JSON.parse(deleted!.cloudevent.text_data!), { service: "orders", key: "a/1", action: "delete" });
      const t1 = tier1.got[0]!;
      assert.equal(t1.topic, "orders.domain");
      assert.deepEqual(
        { id: t1.cloudevent.id, source: t1.cloudevent.source, spec_version: t1.cloudevent.spec_version, type: t1.cloudevent.type, text_data: t1.cloudevent.text_data },
        ce,
      );
      // The Tier 1 write put nothing on state.change: a sentinel is the next event there.
      await grpcFront!.save({ service: "orders", key: "sentinel", value: "s", publish_change: true });
      await waitFor(() => tier0.got.length >= 3, "the sentinel event");
      assert.equal(JSON.parse(tier0.got[2]!.cloudevent.text_data!).key, "sentinel");
      tier0.call.cancel();
      tier1.call.cancel();
    });
  });
}
