import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Code } from "../../src/shared/code.js";
import {
  nextFireTime,
  parseGoDuration,
  parseIsoDuration,
  parseRfc3339Ms as parseRfc3339,
  parseSchedule,
  planJob,
  resolveTimeSpec,
  type JobPlan,
  type Schedule,
} from "../../src/runtime/schedule/index.js";

const T0 = Date.parse("2030-01-01T00:00:00Z"); // a Tuesday
const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

function sched(text: string, anchor = T0): Schedule {
  const s = parseSchedule(text, anchor);
  if (s instanceof GatewayError) throw s;
  return s;
}

function times(s: Schedule, from: number, n: number): string[] {
  const out: string[] = [];
  let t = from;
  for (let i = 0; i < n; i++) {
    t = s.nextAfter(t)!;
    out.push(iso(t)!);
  }
  return out;
}

function rejects(text: string, pattern: RegExp): void {
  const s = parseSchedule(text, T0);
  assert.ok(s instanceof GatewayError, `${text} should be rejected`);
  assert.equal(s.code, Code.INVALID_ARGUMENT);
  assert.match(s.message, /^schedule /);
  assert.match(s.message, pattern);
}

function plan(spec: Record<string, unknown>): JobPlan {
  const p = planJob({ name: "j", ...spec }, T0);
  if (p instanceof GatewayError) throw p;
  return p;
}

function planError(spec: Record<string, unknown>, field: string, pattern: RegExp): void {
  const p = planJob({ name: "j", ...spec } as { name: string }, T0);
  assert.ok(p instanceof GatewayError, `${JSON.stringify(spec)} should be rejected`);
  assert.equal(p.code, Code.INVALID_ARGUMENT);
  assert.ok(p.message.startsWith(`${field} `), `message names ${field}: ${p.message}`);
  assert.match(p.message, pattern);
}

describe("Go durations", () => {
  it("parses Go's syntax", () => {
    assert.deepEqual(parseGoDuration("1m30s"), { ms: 90_000 });
    assert.deepEqual(parseGoDuration("1.5h"), { ms: 5_400_000 });
    assert.deepEqual(parseGoDuration("300ms"), { ms: 300 });
    assert.deepEqual(parseGoDuration("2h45m10s"), { ms: 9_910_000 });
    assert.deepEqual(parseGoDuration("0"), { ms: 0 });
    assert.deepEqual(parseGoDuration("-1s"), { ms: -1000 });
    assert.deepEqual(parseGoDuration("1500us"), { ms: 1.5 });
  });
  it("rejects what Go rejects", () => {
    for (const bad of ["", "10", "1d", "1 m", "m", "1.5", "1h-5m", "abc"]) assert.ok("error" in parseGoDuration(bad), bad);
  });
});

describe("ISO-8601 durations and RFC 3339 times", () => {
  it("parses ISO durations", () => {
    assert.deepEqual(parseIsoDuration("PT1M30S"), { years: 0, months: 0, days: 0, ms: 90_000 });
    assert.deepEqual(parseIsoDuration("P1Y2M3DT4H"), { years: 1, months: 2, days: 3, ms: 14_400_000 });
    assert.deepEqual(parseIsoDuration("P2W"), { years: 0, months: 0, days: 14, ms: 0 });
    for (const bad of ["P", "PT", "1M", "PT1.5M", "P-1D", "PT1.5S", "PT0,5S"]) assert.equal(parseIsoDuration(bad), undefined, bad);
  });
  it("parses RFC 3339 and refuses impossible dates", () => {
    assert.equal(parseRfc3339("2030-01-01T00:00:00Z"), T0);
    assert.equal(parseRfc3339("2030-01-01T01:00:00.250+01:00"), T0 + 250);
    assert.equal(parseRfc3339("2029-12-31T19:00:00-05:00"), T0);
    for (const bad of ["2030-02-30T00:00:00Z", "2030-01-01T24:00:00Z", "2030-01-01T00:00:60Z", "2030-01-01T00:00:00", "2030-01-01", "tomorrow"]) {
      assert.equal(parseRfc3339(bad), undefined, bad);
    }
  });
  it("resolves due_time and ttl forms against a base", () => {
    assert.deepEqual(resolveTimeSpec("due_time", "2030-01-02T00:00:00Z", T0), { at: T0 + 86_400_000, kind: "timestamp" });
    assert.deepEqual(resolveTimeSpec("due_time", "1m", T0), { at: T0 + 60_000, kind: "duration" });
    assert.deepEqual(resolveTimeSpec("ttl", "P1M", T0), { at: Date.parse("2030-02-01T00:00:00Z"), kind: "iso8601" });
    const neg = resolveTimeSpec("ttl", "-5s", T0);
    assert.ok("error" in neg && /^ttl "-5s" is a negative duration/.test(neg.error.message));
    const bad = resolveTimeSpec("due_time", "soon", T0);
    assert.ok("error" in bad && /^due_time "soon" is neither an RFC 3339 timestamp/.test(bad.error.message));
  });
});

describe("schedules", () => {
  it("6-field cron fires on whole seconds, in UTC", () => {
    assert.deepEqual(times(sched("*/20 * * * * *"), T0, 4), ["2030-01-01T00:00:20.000Z", "2030-01-01T00:00:40.000Z", "2030-01-01T00:01:00.000Z", "2030-01-01T00:01:20.000Z"]);
    assert.deepEqual(times(sched("30 15 10 * * *"), T0, 2), ["2030-01-01T10:15:30.000Z", "2030-01-02T10:15:30.000Z"]);
    // strictly after: a time on the schedule gives the following one
    assert.equal(iso(sched("0 * * * * *").nextAfter(T0 + 60_000)), "2030-01-01T00:02:00.000Z");
    assert.equal(iso(sched("0 * * * * *").nextAfter(T0 + 59_999)), "2030-01-01T00:01:00.000Z");
  });
  it("accepts month and day names, ? and a time zone prefix", () => {
    assert.deepEqual(times(sched("0 0 0 ?,1 * *"), T0, 1), ["2030-01-02T00:00:00.000Z"]);
    assert.deepEqual(times(sched("0 0 9 * FEB-MAR MON,fri"), T0, 3), ["2030-02-01T09:00:00.000Z", "2030-02-04T09:00:00.000Z", "2030-02-08T09:00:00.000Z"]);
    assert.deepEqual(times(sched("0 0 12 ? * SUN"), T0, 1), ["2030-01-06T12:00:00.000Z"]);
    assert.deepEqual(times(sched("TZ=Europe/Paris 0 0 9 * * *"), T0, 1), ["2030-01-01T08:00:00.000Z"]);
    assert.deepEqual(times(sched("CRON_TZ=America/New_York 0 0 9 * * *"), T0, 1), ["2030-01-01T14:00:00.000Z"]);
  });
  it("day of month and day of week combine with OR when both are restricted (robfig/cron, Dapr)", () => {
    // the 15th, or any Monday
    assert.deepEqual(times(sched("0 0 0 15 * MON"), T0, 3), ["2030-01-07T00:00:00.000Z", "2030-01-14T00:00:00.000Z", "2030-01-15T00:00:00.000Z"]);
  });
  it("every descriptor", () => {
    const from = Date.parse("2030-05-05T05:05:05Z"); // a Sunday
    assert.equal(iso(sched("@yearly").nextAfter(from)), "2031-01-01T00:00:00.000Z");
    assert.equal(iso(sched("@annually").nextAfter(from)), "2031-01-01T00:00:00.000Z");
    assert.equal(iso(sched("@monthly").nextAfter(from)), "2030-06-01T00:00:00.000Z");
    assert.equal(iso(sched("@weekly").nextAfter(from)), "2030-05-12T00:00:00.000Z");
    assert.equal(iso(sched("@daily").nextAfter(from)), "2030-05-06T00:00:00.000Z");
    assert.equal(iso(sched("@midnight").nextAfter(from)), "2030-05-06T00:00:00.000Z");
    assert.equal(iso(sched("@hourly").nextAfter(from)), "2030-05-05T06:00:00.000Z");
  });
  it("@every counts from its anchor, so late callers do not shift it", () => {
    const s = sched("@every 1m30s", T0);
    assert.deepEqual(times(s, T0, 3), ["2030-01-01T00:01:30.000Z", "2030-01-01T00:03:00.000Z", "2030-01-01T00:04:30.000Z"]);
    assert.equal(iso(s.nextAfter(T0 + 90_000 + 40)), "2030-01-01T00:03:00.000Z");
    assert.equal(iso(s.nextAfter(T0 + 1000 * 90 * 1000 + 7)), iso(T0 + 1001 * 90_000));
  });
  it("refuses 5-field cron and other bad schedules, naming the field", () => {
    rejects("* * * * *", /has 5 fields; a cron schedule needs exactly 6 fields/);
    rejects("0 0 0 * * * 2030", /has 7 fields/);
    rejects("", /must not be empty/);
    rejects("61 * * * * *", /not a valid cron expression.*second/);
    rejects("0 0 0 L * *", /day-of-month field "L"/);
    rejects("0 0 0 * * FRI#2", /day-of-week field "FRI#2"/);
    rejects("0 0 0 * JANUARY *", /month field "JANUARY"/);
    rejects("0 0 0 30 2 *", /never fires/);
    rejects("@fortnightly", /not a known descriptor/);
    rejects("@every", /not a Go duration/);
    rejects("@every 1d", /not a Go duration/);
    rejects("@every 500ms", /whole number of seconds, at least 1s/);
    rejects("@every 1.5s", /whole number of seconds/);
    rejects("TZ=Mars/Olympus 0 0 0 * * *", /unknown time zone "Mars\/Olympus"/);
  });
});

describe("what Dapr's Scheduler refuses is refused on every runtime (dapr/kit cron, kit ISO-8601, Go's RFC 3339)", () => {
  it("cron fields within kit's ranges: day-of-week 0-6 (Sunday is 0), no wrapping ranges, steps of at least 1", () => {
    rejects("0 0 0 * * 7", /is not a valid cron expression: day-of-week is 0-6 \(Sunday is 0\) or SUN-SAT, so "7" is out of range/);
    rejects("0 0 0 * * 1-7", /day-of-week is 0-6 \(Sunday is 0\) or SUN-SAT, so "1-7" is out of range/);
    rejects("0 0 0 * * MON-7", /day-of-week is 0-6/);
    rejects("60 * * * * *", /second is 0-59, so "60" is out of range/);
    rejects("0 0 24 * * *", /hour is 0-23/);
    rejects("0 0 0 0 * *", /day-of-month is 1-31, so "0" is out of range/);
    rejects("0 0 0 * 13 *", /month is 1-12 or JAN-DEC/);
    rejects("0 0 0 * * FRI-MON", /day-of-week range "FRI-MON" runs backwards/);
    rejects("0 0 0 * DEC-JAN *", /month range "DEC-JAN" runs backwards/);
    rejects("*/0 * * * * *", /second step in "\*\/0" must be at least 1/);
    rejects("0 0 0 * JAN1 *", /month field "JAN1": "JAN1" is not a number or a month name \(JAN-DEC\)/);
    rejects("0 0 0 * * MONTUE", /day-of-week field "MONTUE": "MONTUE" is not a number or a day name \(SUN-SAT\)/);
    rejects("0 0 0 * * 1-2-3", /"1-2-3" has more than one -/);
    rejects("0 0 0 * * */2/2", /has more than one \//);
    rejects("-5 * * * * *", /"-5" is missing a number/);
    // Stricter than kit (it takes these): signs, empty list items, "*-5".
    rejects("+5 * * * * *", /second field "\+5" may only contain/);
    rejects("1,,2 * * * * *", /has an empty list item/);
    rejects("*-5 * * * * *", /\* and \? stand for the whole range, not one end of a range/);
  });
  it("fields split on Go's whitespace, as strings.Fields does (not on U+FEFF)", () => {
    assert.deepEqual(times(sched(" 0\t0\u00a00 * * * "), T0, 1), ["2030-01-02T00:00:00.000Z"]);
    rejects("0\ufeff0 0 * * * *", /second field "0\ufeff0" may only contain/);
  });
  it("kit's forms croner reads otherwise: a/n runs to the maximum, */n past the range, ? anywhere * is, */1 is *", () => {
    assert.deepEqual(times(sched("5/20 * * * * *"), T0, 3), ["2030-01-01T00:00:05.000Z", "2030-01-01T00:00:25.000Z", "2030-01-01T00:00:45.000Z"]);
    assert.deepEqual(times(sched("*/100 0 0 * * *"), T0, 1), ["2030-01-02T00:00:00.000Z"]);
    assert.deepEqual(times(sched("0 0 0 ?,15 * *"), T0, 2), ["2030-01-02T00:00:00.000Z", "2030-01-03T00:00:00.000Z"]);
    assert.deepEqual(times(sched("0 0 0 * * SUN-SAT/3"), T0, 3), ["2030-01-02T00:00:00.000Z", "2030-01-05T00:00:00.000Z", "2030-01-06T00:00:00.000Z"]);
    // kit's star bit: */1 (or ?) in day-of-month leaves day-of-week alone deciding (Mondays), a restriction would OR.
    assert.deepEqual(times(sched("0 0 0 */1 * MON"), T0, 2), ["2030-01-07T00:00:00.000Z", "2030-01-14T00:00:00.000Z"]);
    assert.deepEqual(times(sched("0 0 0 1-31 * MON"), T0, 2), ["2030-01-02T00:00:00.000Z", "2030-01-03T00:00:00.000Z"]);
  });
  it("descriptors exactly as kit spells them; TZ= and @ at the very start; @every takes what follows as it is", () => {
    rejects("@Daily", /"@Daily" is not a known descriptor; use @every <duration>, @yearly .* \(lower-case, with nothing after it\)/);
    rejects("@daily ", /is not a known descriptor/);
    rejects(" @daily", /" @daily" must start with @: no spaces before it/);
    rejects(" TZ=UTC 0 0 0 * * *", /must start with TZ=: no spaces before it/);
    rejects("@every  1s", /" 1s" is not a Go duration/);
    rejects("@every 1s ", /is not a Go duration/);
    rejects("TZ=UTC", /a TZ= or CRON_TZ= prefix is the zone, a space, then the schedule/);
    rejects("TZ=UTC\t0 0 0 * * *", /unknown time zone "UTC\t0"/);
    assert.equal(iso(sched("TZ=UTC  @daily").nextAfter(T0)), "2030-01-02T00:00:00.000Z");
  });
  it("time zones as Go's time.LoadLocation finds them in tzdata: case-sensitive, links included", () => {
    rejects("TZ=europe/paris 0 0 9 * * *", /time zone "europe\/paris" is spelled Europe\/Paris: time zone names are case-sensitive/);
    rejects("TZ=utc 0 0 9 * * *", /time zone "utc" is spelled UTC/);
    rejects("TZ=us/pacific 0 0 9 * * *", /time zone "us\/pacific" is spelled US\/Pacific/);
    rejects("TZ=SystemV/AST4 0 0 9 * * *", /unknown time zone "SystemV\/AST4"/);
    rejects("TZ=Local 0 0 9 * * *", /unknown time zone "Local"/);
    assert.deepEqual(times(sched("TZ=US/Pacific 0 0 9 * * *"), T0, 1), ["2030-01-01T17:00:00.000Z"]);
    for (const zone of ["Etc/UTC", "GMT", "Asia/Calcutta", "Asia/Kolkata", "Etc/GMT+5", "EST5EDT"]) sched(`CRON_TZ=${zone} @daily`);
  });
  it("due_time and ttl: upper-case T and Z, whole ISO-8601 numbers, an ISO time part Go can hold", () => {
    const lower = resolveTimeSpec("due_time", "2030-01-02t00:00:00Z", T0);
    assert.ok("error" in lower && /^due_time "2030-01-02t00:00:00Z" has a lower-case "t" or "z": write an RFC 3339 time with upper-case T and Z/.test(lower.error.message));
    assert.ok("error" in resolveTimeSpec("ttl", "2030-01-02T00:00:00z", T0));
    const frac = resolveTimeSpec("due_time", "PT1.5S", T0);
    assert.ok("error" in frac && /^due_time "PT1\.5S": an ISO-8601 duration takes whole numbers only/.test(frac.error.message));
    const long = resolveTimeSpec("ttl", "PT2562048H", T0);
    assert.ok("error" in long && /^ttl "PT2562048H" is out of range: .* at most 2562047h47m16\.854775807s in all/.test(long.error.message));
    assert.deepEqual(resolveTimeSpec("ttl", "PT2562047H", T0), { at: T0 + 2562047 * 3_600_000, kind: "iso8601" });
    assert.deepEqual(resolveTimeSpec("due_time", "1.5s", T0), { at: T0 + 1500, kind: "duration" });
  });
  it("a ttl before due_time within the same millisecond is refused, compared to the nanosecond as the Scheduler does", () => {
    planError({ schedule: "@hourly", dueTime: "2030-01-01T00:00:00.0009Z", ttl: "2030-01-01T00:00:00.0001Z" }, "ttl", /is before due_time "2030-01-01T00:00:00\.0009Z"/);
    plan({ schedule: "@hourly", dueTime: "2030-01-01T00:00:00.0001Z", ttl: "2030-01-01T00:00:00.0001Z" });
  });
});

describe("job validation (Dapr's rules)", () => {
  it("resolves first fire, expiry and repeats", () => {
    assert.deepEqual(plan({ dueTime: "10s" }), { firstFireAt: T0 + 10_000, repeats: 1 });
    const p = plan({ schedule: "@every 10s", dueTime: "2030-01-01T01:00:00Z", ttl: "1m", repeats: 5 });
    assert.equal(iso(p.firstFireAt), "2030-01-01T01:00:00.000Z");
    assert.equal(iso(p.expiresAt), "2030-01-01T01:01:00.000Z");
    assert.equal(p.repeats, 5);
    assert.equal(iso(p.schedule!.nextAfter(p.firstFireAt)), "2030-01-01T01:00:10.000Z");
    assert.equal(iso(plan({ schedule: "0 0 * * * *" }).firstFireAt), "2030-01-01T01:00:00.000Z");
  });
  it("refuses each invalid combination with a message naming the field", () => {
    planError({ name: "" }, "name", /must not be empty/);
    planError({}, "schedule", /or due_time is required/);
    planError({ dueTime: "1s", repeats: 3 }, "repeats", /needs a schedule/);
    planError({ dueTime: "1s", ttl: "1h" }, "ttl", /needs a schedule/);
    planError({ schedule: "@hourly", repeats: -1 }, "repeats", /whole number from 0/);
    planError({ schedule: "@hourly", repeats: 1.5 }, "repeats", /whole number from 0/);
    planError({ schedule: "@hourly", ttl: "10m" }, "ttl", /before the first firing/);
    planError({ schedule: "@hourly", ttl: "forever" }, "ttl", /neither an RFC 3339/);
    planError({ dueTime: "-1m" }, "due_time", /negative duration/);
    planError({ schedule: "* * * * *" }, "schedule", /6 fields/);
  });
  it("next fire time stops at repeats and ttl, and skips missed times instead of replaying them", () => {
    const p = plan({ schedule: "@every 10s", repeats: 3 });
    assert.equal(nextFireTime(p, T0 + 10_000, T0 + 10_000, 1), T0 + 20_000);
    assert.equal(nextFireTime(p, T0 + 30_000, T0 + 30_000, 3), undefined);
    const t = plan({ schedule: "@every 10s", ttl: "25s" });
    assert.equal(nextFireTime(t, T0 + 10_000, T0 + 10_000, 1), T0 + 20_000);
    assert.equal(nextFireTime(t, T0 + 20_000, T0 + 20_000, 2), undefined);
    const u = plan({ schedule: "@every 10s" });
    assert.equal(nextFireTime(u, T0 + 10_000, T0 + 45_000, 1), T0 + 50_000);
    assert.equal(nextFireTime(plan({ dueTime: "1s" }), T0 + 1000, T0 + 1000, 1), undefined);
  });
});
