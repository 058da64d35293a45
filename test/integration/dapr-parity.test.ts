import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { runtimeFixtures, useGatewayOn } from "../support/runtimes.js";
import { unary, withKey } from "../support/gateway.js";
import { publish, subscribe } from "./pubsub-support.js";
import { Code } from "../../src/shared/code.js";
import type { GatewayError } from "../../src/shared/gateway-error.js";
import type { JobSpec } from "../../src/runtime/jobs-port.js";

/**
 * What must be identical on both runtimes although daprd re-encodes JSON: state values and
 * event data come back byte for byte; trigger names follow the Scheduler's DNS-1123 rule on the embedded runtime
 * too, and trigger specs the Scheduler refuses are refused up front on both.
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

    // Specs daprd's Scheduler refuses (test/support/dapr-sidecar/scheduler-rules.ts, from its source) that the gateway
    // once accepted: on Dapr they failed INTERNAL "failed to schedule job due to: ... job failed validation: ...", on
    // embedded they were scheduled. Now refused up front on both, naming the field and what is accepted.
    const lowerT = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d{3}Z$/, "Z").replace("T", "t");
    const refused: Array<[Record<string, unknown>, RegExp]> = [
      // dapr/kit cron: day-of-week 0-6 only.
      [{ schedule: "0 0 0 * * 7" }, /^schedule "0 0 0 \* \* 7" is not a valid cron expression: day-of-week is 0-6 \(Sunday is 0\)/],
      [{ schedule: "0 0 0 * * MON-7" }, /^schedule .*day-of-week is 0-6 \(Sunday is 0\)/],
      // dapr/kit ParseISO8601Duration: whole numbers only.
      [{ due_time: "PT1.5S" }, /^due_time "PT1\.5S": an ISO-8601 duration takes whole numbers only/],
      [{ schedule: "@hourly", ttl: "PT90.5S" }, /^ttl "PT90\.5S": an ISO-8601 duration takes whole numbers only/],
      // Go's time.Parse(time.RFC3339): upper-case T and Z only.
      [{ due_time: lowerT }, /^due_time ".*" has a lower-case "t" or "z": write an RFC 3339 time with upper-case T and Z/],
      [{ due_time: lowerT.replace("t", "T").replace(/Z$/, "z") }, /^due_time ".*" has a lower-case "t" or "z"/],
      // dapr/kit descriptors: exact, lower-case; @every hands Go's ParseDuration the rest as it is.
      [{ schedule: "@Daily" }, /^schedule "@Daily" is not a known descriptor/],
      [{ schedule: "@daily " }, /^schedule "@daily " is not a known descriptor/],
      [{ schedule: " @daily" }, /^schedule " @daily" must start with @/],
      [{ schedule: "@every  1m" }, /^schedule "@every {2}1m": " 1m" is not a Go duration/],
      // Go's time.LoadLocation: tzdata names, case-sensitive, after "TZ=" up to the first space.
      [{ schedule: "TZ=europe/paris 0 0 9 * * *" }, /^schedule ".*": time zone "europe\/paris" is spelled Europe\/Paris: time zone names are case-sensitive/],
      [{ schedule: "TZ=UTC\t0 0 9 * * *" }, /^schedule ".*": unknown time zone "UTC\t0"/],
      // A time part past Go's time.Duration, which kit's ISO-8601 parser would overflow.
      [{ due_time: "PT2562048H" }, /^due_time "PT2562048H" is out of range: .* at most 2562047h47m16\.854775807s/],
    ];

    it("trigger specs daprd's Scheduler refuses are refused in-band INVALID_ARGUMENT, naming the field, on both runtimes", async () => {
      const trigger = gw().client("platform.Trigger");
      for (const [i, [spec, message]] of refused.entries()) {
        const res = await unary(trigger, "ScheduleTrigger", { name: `scheduler-refuses-${i}`, target_topic: "t", ...spec }, withKey(KEY));
        if (res.status.success) await unary(trigger, "DeleteTrigger", { name: `scheduler-refuses-${i}` }, withKey(KEY));
        assert.equal(res.status.status, "INVALID_ARGUMENT", `${JSON.stringify(spec)}: ${res.status.status} ${res.status.message}`);
        assert.match(res.status.message, message, JSON.stringify(spec));
      }
    });

    it("cron forms the Scheduler takes are scheduled on both runtimes (a/n, */n past the range, ?, names, tzdata links)", async () => {
      const trigger = gw().client("platform.Trigger");
      const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
      for (const [i, spec] of [
        { schedule: "5/20 * * * * *" },
        { schedule: "*/100 0 0 * * *" },
        { schedule: "0 0 0 ?,1 * sun" },
        { schedule: "TZ=US/Pacific 0 0 9 * jan-dec MON-FRI/2" },
        { schedule: "CRON_TZ=Etc/UTC @daily" },
        { schedule: "@hourly", due_time: inAnHour, ttl: "P1DT2H" },
      ].entries()) {
        const res = await unary(trigger, "ScheduleTrigger", { name: `scheduler-takes-${i}`, target_topic: "t", ...spec }, withKey(KEY));
        assert.equal(res.status.success, true, `${JSON.stringify(spec)}: ${res.status.message}`);
        await unary(trigger, "DeleteTrigger", { name: `scheduler-takes-${i}` }, withKey(KEY));
      }
    });

    it("the runtime's jobs port refuses a spec the Scheduler refuses INVALID_ARGUMENT naming the field (Dapr: the Scheduler's own reason)", async () => {
      const jobs = gw().gateway.context.runtime.jobs;
      const cases: Array<[JobSpec, string, RegExp]> = [
        [{ name: "port-refuses-0", schedule: "0 0 0 * * 7", data: "{}" }, "schedule", /^schedule "0 0 0 \* \* 7" /],
        [{ name: "port-refuses-1", dueTime: "PT1.5S", data: "{}" }, "due_time", /^due_time "PT1\.5S"/],
        [{ name: "port-refuses-2", schedule: "@daily", ttl: "soon", data: "{}" }, "ttl", /^ttl "soon"/],
      ];
      for (const [job, field, message] of cases) {
        const err = await jobs.schedule(job).then(
          () => undefined,
          (e: unknown) => e as GatewayError,
        );
        assert.ok(err, `${JSON.stringify(job)} was scheduled`);
        assert.equal(err.code, Code.INVALID_ARGUMENT, `${JSON.stringify(job)}: ${err.message}`);
        assert.equal(err.field, field);
        assert.match(err.rawMessage, message);
        if (fixture.name === "dapr") assert.match(err.rawMessage, /is refused by Dapr's Scheduler: /);
      }
    });
  });
}
