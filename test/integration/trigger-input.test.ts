/**
 * Trigger input a caller can make large or odd: body keys named like Object.prototype members, schedule / due_time /
 * ttl past their length limits, and errors that quote input. Over real sockets (REST and gRPC), asserting what the
 * caller sees (status, code, the message naming the field, the message's length) and that nothing was scheduled.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import { MAX_ECHO_CHARS, MAX_ERROR_MESSAGE_CHARS } from "../../src/shared/echo.js";
import { MAX_TRIGGER_SCHEDULE_CHARS, MAX_TRIGGER_TIME_CHARS } from "../../src/ops/trigger.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";

const KEY = "input-key";
const H = { "x-api-key": KEY, "content-type": "application/json" };
const EXPECTED = "expected target_topic, targetTopic, schedule, due_time, dueTime, repeats, ttl";

/** A valid 6-field cron expression of exactly `length` characters: "0", spaces, then " * * * * *". */
const longCron = (length: number): string => `0${" ".repeat(length - 11)} * * * * *`;
/** A valid Go duration of `2 * n` characters: "1s" n times (n seconds); a leading "0" makes it one longer, still valid. */
const longDuration = (n: number, unit = "s"): string => `1${unit}`.repeat(n);

/** Fields past their limit (valid values otherwise, so nothing but the length refuses them), and the limit. */
const TOO_LONG: Array<{ what: string; body: Record<string, unknown>; field: string; limit: number }> = [
  { what: "a 4 MB valid cron", body: { schedule: longCron(4_000_000) }, field: "schedule", limit: MAX_TRIGGER_SCHEDULE_CHARS },
  { what: "a cron one past the limit", body: { schedule: longCron(MAX_TRIGGER_SCHEDULE_CHARS + 1) }, field: "schedule", limit: MAX_TRIGGER_SCHEDULE_CHARS },
  { what: "a 1 MB valid due_time", body: { due_time: longDuration(500_000) }, field: "due_time", limit: MAX_TRIGGER_TIME_CHARS },
  { what: "a due_time one past the limit", body: { due_time: `0${longDuration(MAX_TRIGGER_TIME_CHARS / 2)}` }, field: "due_time", limit: MAX_TRIGGER_TIME_CHARS },
  { what: "a 1 MB valid ttl", body: { schedule: "@hourly", ttl: longDuration(500_000, "h") }, field: "ttl", limit: MAX_TRIGGER_TIME_CHARS },
  { what: "a ttl one past the limit", body: { schedule: "@hourly", ttl: `0${longDuration(MAX_TRIGGER_TIME_CHARS / 2, "h")}` }, field: "ttl", limit: MAX_TRIGGER_TIME_CHARS },
];

for (const fixture of runtimeFixtures) {
  describe(`trigger input bounds (${fixture.name} runtime)`, () => {
    let gw: TestGateway;
    let rt: Awaited<ReturnType<typeof fixture.setup>>;
    let client: grpc.Client;
    const call = (method: string, req: object): Promise<any> => unary(client, method, req, withKey(KEY));
    const post = (name: string, body: string): Promise<Response> => fetch(`${gw.http}/v1/trigger/${name}`, { method: "POST", headers: H, body });
    /** POST a body; the REST error it must be. */
    const refused = async (name: string, body: string): Promise<{ status: number; code: number; message: string }> => {
      const res = await post(name, body);
      const err = (await res.json()) as { code: number; message: string };
      return { status: res.status, code: err.code, message: err.message };
    };
    /** The names of every stored trigger, over REST and over gRPC (the same). */
    const stored = async (): Promise<string[]> => {
      const rest = (await (await fetch(`${gw.http}/v1/trigger`, { headers: H })).json()) as { triggers: Array<{ name: string }> };
      const names = rest.triggers.map((t) => t.name);
      assert.deepEqual((await call("ListTriggers", {})).triggers.map((t: { name: string }) => t.name), names);
      return names;
    };

    before(async () => {
      rt = await fixture.setup();
      gw = await startTestGateway({ ...rt.options, apiKeys: [KEY] }, rt.overrides);
      client = gw.client("platform.Trigger");
    });
    after(async () => {
      await gw.close();
      await rt.close();
    });

    it("REST body keys named like Object.prototype members are unknown fields: 400 naming the key, nothing scheduled", async () => {
      for (const key of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) {
        for (const value of ['"x"', "5", "{}"]) {
          // Raw JSON text: an object literal cannot carry "__proto__" as an own key through JSON.stringify.
          const err = await refused("proto-key", `{"target_topic":"a","schedule":"@every 1s",${JSON.stringify(key)}:${value}}`);
          assert.equal(err.status, 400, `${key}: ${value}`);
          assert.equal(err.code, 3);
          assert.equal(err.message, `${key} is not a trigger field; ${EXPECTED}`);
        }
      }
      assert.equal((await fetch(`${gw.http}/v1/trigger/proto-key`, { headers: H })).status, 404);
      assert.deepEqual(await stored(), []);
    });

    it("schedule, due_time and ttl past their length limits are refused over REST and gRPC, naming the field and the limit; nothing is stored", async () => {
      for (const [i, { what, body, field, limit }] of TOO_LONG.entries()) {
        const length = String(body[field]).length;
        const message = `${field} is ${length} characters long; the limit is ${limit}`;
        const err = await refused(`long-${i}`, JSON.stringify({ target_topic: "long.t", ...body }));
        assert.deepEqual(err, { status: 400, code: 3, message }, what);
        const g = await call("ScheduleTrigger", { name: `long-grpc-${i}`, target_topic: "long.t", ...body });
        assert.deepEqual(g.status, { success: false, status: "INVALID_ARGUMENT", message }, what);
        assert.equal((await call("GetTrigger", { name: `long-grpc-${i}` })).status.status, "NOT_FOUND", what);
        assert.equal((await fetch(`${gw.http}/v1/trigger/long-${i}`, { headers: H })).status, 404, what);
      }
      assert.deepEqual(await stored(), []);
    });

    it("schedule, due_time and ttl exactly at their limits are accepted and read back whole", async () => {
      const input = {
        name: "at-limit",
        target_topic: "limit.t",
        schedule: longCron(MAX_TRIGGER_SCHEDULE_CHARS),
        due_time: longDuration(MAX_TRIGGER_TIME_CHARS / 2),
        ttl: longDuration(MAX_TRIGGER_TIME_CHARS / 2, "h"),
      };
      assert.deepEqual((await call("ScheduleTrigger", input)).status, { success: true, status: "OK", message: "" });
      const rec = (await call("GetTrigger", { name: "at-limit" })).trigger;
      assert.deepEqual([rec.schedule, rec.due_time, rec.ttl], [input.schedule, input.due_time, input.ttl]);
      assert.equal((await call("DeleteTrigger", { name: "at-limit" })).status.success, true);
      const { name, ...body } = input;
      assert.equal((await post(name, JSON.stringify(body))).status, 200);
      assert.equal((await fetch(`${gw.http}/v1/trigger/${name}`, { method: "DELETE", headers: H })).status, 200);
    });

    it("an invalid schedule within the limit is quoted cut to the echo limit, the explanation whole, over REST and gRPC", async () => {
      const schedule = "x".repeat(MAX_TRIGGER_SCHEDULE_CHARS);
      const cut = `${"x".repeat(MAX_ECHO_CHARS)}…(${MAX_TRIGGER_SCHEDULE_CHARS - MAX_ECHO_CHARS} more characters)`;
      const pattern = new RegExp(`^schedule "${cut.replace(/[()]/g, "\\$&")}" has 1 field; a cron schedule needs exactly 6 fields`);
      const err = await refused("bad-sched", JSON.stringify({ target_topic: "t", schedule }));
      assert.equal(err.status, 400);
      assert.match(err.message, pattern);
      const g = await call("ScheduleTrigger", { name: "bad-sched", target_topic: "t", schedule });
      assert.equal(g.status.status, "INVALID_ARGUMENT");
      assert.match(g.status.message, pattern);
      // "@every <bad duration>" quotes the schedule and the duration: each cut.
      const every = `@every ${"9".repeat(MAX_TRIGGER_SCHEDULE_CHARS - 8)}x`;
      const e = await refused("bad-every", JSON.stringify({ target_topic: "t", schedule: every }));
      assert.equal(e.status, 400);
      assert.match(e.message, /^schedule "@every 9+…\(\d+ more characters\)": "9+…\(\d+ more characters\)" is not a Go duration: /);
      assert.match(e.message, /is not a number followed by a unit \(ns, us, ms, s, m, h\)$/, "the explanation is not cut off");
      assert.ok(e.message.length <= MAX_ERROR_MESSAGE_CHARS, `${e.message.length} characters`);
      assert.deepEqual(await stored(), []);
    });

    it("REST errors quoting a body key, a value or the names cut each to the echo limit and keep the explanation", async () => {
      const big = 100_000;
      const bound = MAX_ECHO_CHARS + 200;
      const cases: Array<{ body: Record<string, unknown>; pattern: RegExp }> = [
        { body: { target_topic: "t", schedule: "@hourly", ["k".repeat(big)]: 1 }, pattern: new RegExp(`^k{${MAX_ECHO_CHARS}}…\\(${big - MAX_ECHO_CHARS} more characters\\) is not a trigger field; ${EXPECTED}$`) },
        { body: { target_topic: "t", schedule: "@hourly", repeats: "r".repeat(big) }, pattern: /^repeats must be a whole number \(got "r+…\(\d+ more characters\)\)$/ },
        { body: { target_topic: ["t".repeat(big)], schedule: "@hourly" }, pattern: /^target_topic must be a string \(got \["t+…\(\d+ more characters\)\)$/ },
        { body: { target_topic: "t", schedule: { deep: "s".repeat(big) } }, pattern: /^schedule must be a string \(got \{"deep":"s+…\(\d+ more characters\)\)$/ },
        { body: { name: "n".repeat(big), target_topic: "t", schedule: "@hourly" }, pattern: /^name in the body \("n+…\(\d+ more characters\)"\) differs from the name in the path \("echo-name"\)$/ },
      ];
      for (const { body, pattern } of cases) {
        const err = await refused("echo-name", JSON.stringify(body));
        assert.equal(err.status, 400, err.message.slice(0, 80));
        assert.equal(err.code, 3);
        assert.match(err.message, pattern);
        assert.ok(err.message.length <= bound, `${err.message.length} characters: ${err.message.slice(0, 80)}`);
      }
      // A path name longer than the echo limit is cut too (it is refused as a name later, but the mismatch comes first).
      const pathName = "p".repeat(1000);
      const err = await refused(pathName, JSON.stringify({ name: "other", target_topic: "t", schedule: "@hourly" }));
      assert.equal(err.status, 400);
      assert.match(err.message, /^name in the body \("other"\) differs from the name in the path \("p{256}…\(744 more characters\)"\)$/);
      assert.equal((await fetch(`${gw.http}/v1/trigger/echo-name`, { headers: H })).status, 404);
      assert.deepEqual(await stored(), []);
    });
  });
}
