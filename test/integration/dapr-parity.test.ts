import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { runtimeFixtures, useGatewayOn } from "../support/runtimes.js";
import { unary, withKey } from "../support/gateway.js";
import { publish, subscribe } from "./pubsub-support.js";

/**
 * What must be identical on both runtimes although daprd re-encodes JSON: state values and
 * event data come back byte for byte, and trigger names follow the Scheduler's DNS-1123 rule on the embedded runtime
 * too.
 */
const KEY = "parity-key";
const services = [{ name: "orders", state: { storeName: "orders-store", keys: [] }, pubsub: { pubsubName: "pubsub" } }];

// Members out of order, an integer past 2^53, HTML characters, a long fraction, non-ASCII, U+2028.
const TRICKY_JSON = '{"z":1,"a":12345678901234567891,"s":"<b>&amp;</b>","f":0.12345678912345,"u":"caf\u00e9\u2028"}';

const contentTypes: Array<[string, { text_data?: string; binary_data?: Buffer }]> = [
  ["application/json", { text_data: TRICKY_JSON }],
  ["application/problem+json", { text_data: TRICKY_JSON }],
  ["application/vnd.x+json", { text_data: TRICKY_JSON }],
  ["text/json", { text_data: TRICKY_JSON }],
  ["application/atom+xml", { text_data: "<feed a='1'>&amp;</feed>" }],
  ["application/xml", { text_data: "<a>&lt;</a>" }],
  ["text/plain", { text_data: "plain <words> & more" }],
  ["application/octet-stream", { binary_data: Buffer.from([0, 1, 2, 0xfe, 0xff]) }],
];

for (const fixture of runtimeFixtures) {
  describe(`nothing is lost through ${fixture.name}`, () => {
    const gw = useGatewayOn(fixture, { services, apiKeys: [KEY] });

    it("a state value comes back byte-identical (big integers, key order, <>&)", async () => {
      const state = gw().client("platform.State");
      const saved = await unary(state, "SaveState", { service: "orders", key: "exact", value: TRICKY_JSON }, withKey(KEY));
      assert.equal(saved.status.success, true, saved.status.message);
      const got = await unary(state, "GetState", { service: "orders", key: "exact" }, withKey(KEY));
      assert.equal(got.value, TRICKY_JSON);
    });

    it("event data of every content type reaches subscribers byte-identical with its datacontenttype", async () => {
      const ps = gw().client("io.cloudevents.v1.Pubsub");
      const sub = subscribe(ps, ["parity"], withKey(KEY));
      try {
        await sub.ready();
        for (const [i, [ct, data]] of contentTypes.entries()) {
          const ev = { id: `p${i}`, source: "urn:test:parity", type: "com.test.parity", spec_version: "1.0", attributes: { datacontenttype: { ce_string: ct } }, ...data };
          const res = await publish(ps, "parity", ev, withKey(KEY));
          assert.equal(res.status.success, true, res.status.message);
        }
        // No datacontenttype and no data at all.
        assert.equal((await publish(ps, "parity", { id: "none", source: "urn:test:parity", type: "com.test.parity", spec_version: "1.0" }, withKey(KEY))).status.success, true);
        await sub.count(contentTypes.length + 1);
        for (const [i, [ct, data]] of contentTypes.entries()) {
          const ce = sub.got[i].cloudevent;
          assert.equal(ce.id, `p${i}`);
          assert.equal(ce.attributes.datacontenttype?.ce_string, ct, ct);
          if (data.text_data !== undefined) assert.equal(ce.text_data, data.text_data, ct);
          else assert.deepEqual(Buffer.from(ce.binary_data), data.binary_data, ct);
        }
        const none = sub.got[contentTypes.length].cloudevent;
        assert.equal(none.id, "none");
        assert.equal(none.text_data ?? "", "");
        assert.equal(Buffer.from(none.binary_data ?? []).length, 0);
      } finally {
        sub.call.cancel();
      }
    });

    it("the Tier 0 state change payload keeps its documented members and their order (service, key, action, value)", async () => {
      const ps = gw().client("io.cloudevents.v1.Pubsub");
      const sub = subscribe(ps, ["state.change"], withKey(KEY));
      try {
        await sub.ready();
        const state = gw().client("platform.State");
        const res = await unary(state, "SaveState", { service: "orders", key: "tier0", value: TRICKY_JSON, publish_change: true, include_value: true }, withKey(KEY));
        assert.equal(res.status.success, true, res.status.message);
        await sub.count(1);
        const text = sub.got[0].cloudevent.text_data as string;
        assert.deepEqual(Object.keys(JSON.parse(text)), ["service", "key", "action", "value"]);
        assert.equal(text, JSON.stringify({ service: "orders", key: "tier0", action: "save", value: TRICKY_JSON }));
      } finally {
        sub.call.cancel();
      }
    });

    it("trigger names the Scheduler refuses (not a DNS-1123 subdomain) are refused in-band, naming the rule", async () => {
      const trigger = gw().client("platform.Trigger");
      for (const name of ["nightly#1", "a..b", "x.", "Nightly", "caf\u00e9", ".x", "-"]) {
        const res = await unary(trigger, "ScheduleTrigger", { name, target_topic: "t", due_time: "1h" }, withKey(KEY));
        assert.equal(res.status.success, false, name);
        assert.match(res.status.message, /^name .* is not a DNS-1123 subdomain, as Dapr's Scheduler requires/, name);
      }
      const ok = await unary(trigger, "ScheduleTrigger", { name: "nightly-1.report_a:b", target_topic: "t", due_time: "1h" }, withKey(KEY));
      assert.equal(ok.status.success, true, ok.status.message);
      await unary(trigger, "DeleteTrigger", { name: "nightly-1.report_a:b" }, withKey(KEY));
    });

    // TODO (known gap, found with the test sidecar's Scheduler rules, test/support/dapr-sidecar/scheduler-rules.ts):
    // the gateway accepts these, daprd's Scheduler refuses them, so on Dapr ScheduleTrigger fails in-band INTERNAL
    // "failed to schedule job due to: ... job failed validation: ..." instead of INVALID_ARGUMENT naming the field, and
    // on embedded they are scheduled. dapr/kit's cron has day-of-week 0-6 only; its ISO-8601 parser takes whole
    // numbers only; Go's time.Parse(time.RFC3339) takes an upper-case "T" only.
    it("trigger specs daprd's Scheduler refuses are refused in-band INVALID_ARGUMENT on both runtimes", { todo: "src/ops/trigger.ts is looser than the Scheduler" }, async () => {
      const trigger = gw().client("platform.Trigger");
      const lowerT = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d{3}Z$/, "Z").replace("T", "t");
      for (const [i, spec] of [{ schedule: "0 0 0 * * 7" }, { due_time: "PT1.5S" }, { due_time: lowerT }].entries()) {
        const res = await unary(trigger, "ScheduleTrigger", { name: `scheduler-refuses-${i}`, target_topic: "t", ...spec }, withKey(KEY));
        if (res.status.success) await unary(trigger, "DeleteTrigger", { name: `scheduler-refuses-${i}` }, withKey(KEY));
        assert.equal(res.status.status, "INVALID_ARGUMENT", `${JSON.stringify(spec)}: ${res.status.status} ${res.status.message}`);
      }
    });
  });
}
