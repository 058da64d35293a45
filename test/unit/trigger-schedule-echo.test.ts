/**
 * The schedule module's errors quote a schedule, due_time or ttl through echo(): cut to MAX_ECHO_CHARS, the
 * explanation kept whole. The trigger op refuses longer values before parsing (test/integration/trigger-input.test.ts);
 * these call the shared parsers directly, as the embedded scheduler and the Dapr test sidecar do, with longer input.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MAX_ECHO_CHARS } from "../../src/shared/echo.js";
import type { GatewayError } from "../../src/shared/gateway-error.js";
import { parseSchedule, planJob, resolveTimeSpec } from "../../src/runtime/schedule/index.js";

const T0 = Date.parse("2030-01-01T00:00:00Z");
const LONG = 1000;

/** `text` as an error must quote it: the first MAX_ECHO_CHARS characters, then how many were cut. */
const cut = (text: string): string => `"${text.slice(0, MAX_ECHO_CHARS)}…(${text.length - MAX_ECHO_CHARS} more characters)"`;

/** `text` as a regular expression matching it literally. */
const literal = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function message(r: unknown): string {
  const err = (r as { error?: GatewayError }).error ?? (r as GatewayError);
  assert.equal(err.name, "GatewayError", JSON.stringify(r));
  return err.rawMessage;
}

describe("schedule errors quote their input cut (echo)", () => {
  it("due_time and ttl: not a time, negative, past the latest time, out of Go's range", () => {
    const cases: Array<[string, string, RegExp]> = [
      ["due_time", "x".repeat(LONG), /is neither an RFC 3339 timestamp .* nor an ISO-8601 duration \(e\.g\. PT1M30S\)$/],
      ["ttl", `-${"0".repeat(LONG)}1s`, / is a negative duration$/],
      ["due_time", `P${"0".repeat(LONG)}300000Y`, / is past 9999-12-31T23:59:59\.999Z, the latest time the scheduler can hold$/],
      ["ttl", `${"0".repeat(LONG)}9999999999h`, / is out of range: a Go duration is at most 2562047h47m16\.854775807s$/],
    ];
    for (const [field, text, tail] of cases) {
      const m = message(resolveTimeSpec(field, text, T0));
      assert.ok(m.startsWith(`${field} ${cut(text)}`), m.slice(0, 80));
      assert.match(m, tail);
    }
  });

  it("a ttl before the first firing", () => {
    const ttl = `${"0".repeat(LONG)}1s`;
    const m = message(planJob({ name: "j", schedule: "@daily", ttl }, T0));
    assert.ok(m.startsWith(`ttl ${cut(ttl)} expires at`), m.slice(0, 80));
    assert.match(m, /before the first firing at 2030-01-02T00:00:00\.000Z$/);
  });

  it("schedule: unknown descriptor, unknown time zone, bad field, bad @every", () => {
    const zone = "A".repeat(LONG);
    const cases: Array<[string, RegExp]> = [
      [`@${"x".repeat(LONG)}`, / is not a known descriptor; use @every <duration>, @yearly/],
      [`TZ=${zone} 0 * * * * *`, new RegExp(`: unknown time zone ${literal(cut(zone))}$`)],
      [`0 0 0 * ${"F".repeat(LONG)} *`, new RegExp(`month field ${literal(cut("F".repeat(LONG)))} may only contain numbers`)],
      [`@every ${"1".repeat(LONG)}q`, /is not a number followed by a unit \(ns, us, ms, s, m, h\)$/],
    ];
    for (const [text, tail] of cases) {
      const m = message(parseSchedule(text, T0));
      assert.ok(m.startsWith(`schedule ${cut(text)}`), m.slice(0, 80));
      assert.match(m, tail);
    }
  });
});
