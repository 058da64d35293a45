import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { Code } from "../../src/shared/code.js";
import { waitFor, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures, useGatewayOn } from "../support/runtimes.js";
import { rejectsWith, stateFronts, type StateFront } from "../support/state-fronts.js";

/*
 * A Tier 1 change notification (publish_change with change.topic and change.cloudevent) publishes the caller's topic
 * and event after the write, so they pass the publish op's own check before it: topic length, source, spec version,
 * attribute names (ops/cloudevent-validate.ts validatePublish), named under `change`. A refused request writes
 * nothing and publishes nothing, on SaveState, DeleteState and DeleteBulkState, over gRPC and REST.
 */

const KEY = "k1";
const services = [{ name: "orders", state: { storeName: "orders-store", keys: [] } }];
const DOMAIN = "orders.domain";
const LONG_TOPIC = "t".repeat(2000);

const good = (id: string) => ({ id, source: "urn:com.example:orders", spec_version: "1.0", type: "com.example.order.updated", text_data: "{}" });

/** Bad Tier 1 changes and the message each gets; `attributes` values are proto attribute values. */
const BAD: Array<{ what: string; change: object; message: RegExp }> = [
  {
    what: "a 2,000-character topic",
    change: { topic: LONG_TOPIC, cloudevent: { source: "urn:a", spec_version: "0.3", type: "t" } },
    message: /^change\.topic must be at most 1024 characters, got 2000$/,
  },
  {
    what: "spec_version 0.3",
    change: { topic: DOMAIN, cloudevent: { ...good("sv"), spec_version: "0.3" } },
    message: /^change\.cloudevent\.spec_version '0\.3' is not supported; the gateway speaks CloudEvents 1\.0/,
  },
  {
    what: "a 2,000-character spec_version (echoed cut)",
    change: { topic: DOMAIN, cloudevent: { ...good("sv2"), spec_version: "9".repeat(2000) } },
    message: /^change\.cloudevent\.spec_version '9{256}…\(1744 more characters\)' is not supported/,
  },
  {
    what: "an attribute named data_base64",
    change: { topic: DOMAIN, cloudevent: { ...good("a1"), text_data: undefined, attributes: { data_base64: { ce_string: "ZmFrZQ==" } } } },
    message: /^change\.cloudevent\.attributes\.data_base64 is not a valid attribute name/,
  },
  {
    what: "an attribute named data",
    change: { topic: DOMAIN, cloudevent: { ...good("a2"), text_data: undefined, attributes: { data: { ce_string: "fake" } } } },
    message: /^change\.cloudevent\.attributes\.data is not a valid attribute name \(reserved: /,
  },
  {
    what: "an attribute named __proto__",
    change: { topic: DOMAIN, cloudevent: { ...good("a3"), attributes: { ["__proto__"]: { ce_string: "x" } } } },
    message: /^change\.cloudevent\.attributes\.__proto__ is not a valid attribute name/,
  },
  {
    what: "an empty attribute name",
    change: { topic: DOMAIN, cloudevent: { ...good("a4"), attributes: { "": { ce_string: "x" } } } },
    message: /^change\.cloudevent\.attributes\."" is not a valid attribute name \(it is empty\)$/,
  },
];

for (const fixture of runtimeFixtures) {
  describe(`Tier 1 change notifications are checked before the write over ${fixture.name}`, () => {
    const gw = useGatewayOn(fixture, { services, apiKeys: [KEY] });
    const seen = new Map<string, CloudEvent[]>();
    const on = (topic: string): CloudEvent[] => seen.get(topic) ?? (seen.set(topic, []), seen.get(topic)!);
    before(async () => {
      for (const topic of [DOMAIN, "state.change", LONG_TOPIC]) {
        const list = on(topic);
        await gw().gateway.context.runtime.pubsub.subscribe(topic, { onEvent: (e) => list.push(e) });
      }
    });

    /** A good Tier 1 save, and proof it is the next event: nothing refused was published anywhere. */
    async function nothingPublishedSince(s: StateFront, counts: Map<string, number>, label: string): Promise<void> {
      const id = `sentinel-${s.name}-${label}`;
      await s.save({ service: "orders", key: `${s.name}/sentinel`, value: "s", publish_change: true, change: { topic: DOMAIN, cloudevent: good(id) } });
      await waitFor(() => on(DOMAIN).length > counts.get(DOMAIN)!, `the sentinel ${id}`);
      assert.equal(on(DOMAIN)[counts.get(DOMAIN)!]!.id, id, `${label}: the next event on ${DOMAIN} is the sentinel`);
      assert.equal(on("state.change").length, counts.get("state.change"), `${label}: nothing on state.change`);
      assert.equal(on(LONG_TOPIC).length, 0, `${label}: nothing on the long topic`);
    }
    const counts = () => new Map([...seen].map(([t, l]) => [t, l.length]));
    const fronts = (g: TestGateway) => stateFronts(g, KEY);

    for (const front of ["grpc", "rest"] as const) {
      const s = (): StateFront => fronts(gw()).find((f) => f.name === front)!;

      it(`${front}: SaveState with a bad Tier 1 change is INVALID_ARGUMENT naming the field; the value is unchanged`, async () => {
        const key = `${front}/save`;
        const before = await s().save({ service: "orders", key, value: "before" });
        const c = counts();
        for (const bad of BAD) {
          await rejectsWith(s().save({ service: "orders", key, value: "after", publish_change: true, change: bad.change }), Code.INVALID_ARGUMENT, bad.message);
          const item = await s().get("orders", key);
          assert.equal(item?.value, "before", `${bad.what}: the value is unchanged`);
          assert.equal(item?.etag, before.etag, `${bad.what}: the etag is unchanged`);
        }
        await nothingPublishedSince(s(), c, "save");
      });

      it(`${front}: DeleteState with a bad Tier 1 change is INVALID_ARGUMENT naming the field; the key is still stored`, async () => {
        const key = `${front}/delete`;
        await s().save({ service: "orders", key, value: "kept" });
        const c = counts();
        for (const bad of BAD) {
          await rejectsWith(s().delete({ service: "orders", key, publish_change: true, change: bad.change }), Code.INVALID_ARGUMENT, bad.message);
          assert.equal((await s().get("orders", key))?.value, "kept", `${bad.what}: the key is still stored`);
        }
        await nothingPublishedSince(s(), c, "delete");
      });

      it(`${front}: DeleteBulkState with a bad Tier 1 change is INVALID_ARGUMENT naming the field; every key is still stored`, async () => {
        const keys = [`${front}/bulk1`, `${front}/bulk2`];
        for (const key of keys) await s().save({ service: "orders", key, value: key });
        const c = counts();
        for (const bad of BAD) {
          await rejectsWith(s().deleteBulk({ service: "orders", keys, publish_change: true, change: bad.change }), Code.INVALID_ARGUMENT, bad.message);
          assert.deepEqual((await s().getBulk("orders", keys)).map((i) => i.value), keys, `${bad.what}: every key is still stored`);
        }
        await nothingPublishedSince(s(), c, "bulk");
      });
    }

    it("rest: the CloudEvents JSON form of change.cloudevent gets the same checks", async () => {
      const s = fronts(gw()).find((f) => f.name === "rest")!;
      const key = "rest/json-format";
      await s.save({ service: "orders", key, value: "before" });
      const c = counts();
      const structured = { specversion: "0.3", id: "j1", source: "urn:com.example:orders", type: "t" };
      await rejectsWith(
        s.save({ service: "orders", key, value: "after", publish_change: true, change: { topic: DOMAIN, cloudevent: structured } }),
        Code.INVALID_ARGUMENT,
        /^change\.cloudevent\.spec_version '0\.3' is not supported/,
      );
      await rejectsWith(
        s.save({ service: "orders", key, value: "after", publish_change: true, change: { topic: LONG_TOPIC, cloudevent: { ...structured, specversion: "1.0" } } }),
        Code.INVALID_ARGUMENT,
        /^change\.topic must be at most 1024 characters, got 2000$/,
      );
      assert.equal((await s.get("orders", key))?.value, "before");
      await nothingPublishedSince(s, c, "json-format");
    });
  });
}
