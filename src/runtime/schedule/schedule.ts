import { Cron } from "croner";
import { invalidArgument, type GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { parseGoDuration } from "./go-duration.js";
import { MAX_SCHEDULE_TIME_MS } from "./limits.js";

/**
 * A parsed schedule. `nextAfter(t)` is the first fire time strictly after `t` (epoch ms), or undefined when the
 * schedule never fires again. Fire times are a pure function of the schedule (and, for `@every`, its anchor), never
 * of when a timer happened to run, so a scheduler that asks `nextAfter(lastFireTime)` does not drift. A schedule
 * ends at MAX_SCHEDULE_TIME_MS: no time after it is ever returned.
 */
export interface Schedule {
  /** The schedule as given. */
  readonly text: string;
  readonly kind: "cron" | "every";
  nextAfter(t: number): number | undefined;
}

/** Dapr's descriptors (robfig/cron's), as 6-field cron in the schedule's time zone. */
const DESCRIPTORS: Record<string, string> = {
  "@yearly": "0 0 0 1 1 *",
  "@annually": "0 0 0 1 1 *",
  "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0",
  "@daily": "0 0 0 * * *",
  "@midnight": "0 0 0 * * *",
  "@hourly": "0 0 * * * *",
};

const FIELD_NAMES = ["second", "minute", "hour", "day of month", "month", "day of week"] as const;
const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const SIX_FIELDS = "a cron schedule needs exactly 6 fields: second minute hour day-of-month month day-of-week (e.g. \"0 */5 * * * *\")";

/** The last year croner computes cron fire times in (its search stops at year 3000 for patterns without a year). */
export const CRON_LAST_YEAR = 2999;
const CRON_EPOCH = Date.UTC(2000, 0, 1);

/** `t` when it is a time the scheduler can hold, else undefined (the schedule is over). */
function within(t: number | undefined): number | undefined {
  return t !== undefined && Number.isFinite(t) && t <= MAX_SCHEDULE_TIME_MS ? t : undefined;
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * Check one field against robfig/cron's grammar (numbers, `*`, `?`, ranges, lists, steps, and names in the month and
 * day-of-week fields). croner also knows `L`, `W` and `#`; Dapr's parser does not, so they are refused here to keep
 * the two runtimes equivalent.
 */
function checkField(field: string, index: number): string | undefined {
  let rest = field.toUpperCase();
  const names = index === 4 ? MONTHS : index === 5 ? DAYS : [];
  for (const n of names) rest = rest.replaceAll(n, "0");
  if (field.includes("?") && field !== "?") return `${FIELD_NAMES[index]} field "${echo(field)}": ? must stand alone (it means *)`;
  if (!/^[0-9*?,/-]+$/.test(rest)) {
    const extra = names.length > 0 ? ` or ${index === 4 ? "month names JAN-DEC" : "day names SUN-SAT"}` : "";
    return `${FIELD_NAMES[index]} field "${echo(field)}" may only contain numbers, *, ?, ranges (a-b), lists (a,b) and steps (/n)${extra}`;
  }
  return undefined;
}

function parseCron(text: string, expr: string, timezone: string): Schedule | GatewayError {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 6) {
    return invalidArgument("schedule", `"${echo(text)}" has ${fields.length} field${fields.length === 1 ? "" : "s"}; ${SIX_FIELDS}`);
  }
  for (let i = 0; i < 6; i++) {
    const problem = checkField(fields[i]!, i);
    if (problem) return invalidArgument("schedule", `"${echo(text)}": ${problem}`);
  }
  // robfig reads "?" as "*"; croner would substitute the current time, so translate first.
  const pattern = fields.map((f) => (f === "?" ? "*" : f)).join(" ");
  let cron: Cron;
  try {
    cron = new Cron(pattern, { mode: "6-part", timezone, paused: true, domAndDow: false });
  } catch (e) {
    const why = echo((e as Error).message.replace(/^CronPattern: /, ""));
    return invalidArgument("schedule", `"${echo(text)}" is not a valid cron expression: ${why}`);
  }
  const schedule: Schedule = {
    text,
    kind: "cron",
    nextAfter: (t) => within(cron.nextRun(new Date(t))?.getTime()),
  };
  return schedule;
}

function parseEvery(text: string, arg: string, anchor: number): Schedule | GatewayError {
  const d = parseGoDuration(arg.trim());
  if ("error" in d) return invalidArgument("schedule", `"${echo(text)}": ${d.error}`);
  if (d.ms < 1000 || d.ms % 1000 !== 0) {
    return invalidArgument("schedule", `"${echo(text)}": the @every interval must be a whole number of seconds, at least 1s`);
  }
  const every = d.ms;
  return {
    text,
    kind: "every",
    // The k-th fire time is anchor + k*every: computed, never accumulated.
    nextAfter: (t) => within(t < anchor ? anchor + every : anchor + (Math.floor((t - anchor) / every) + 1) * every),
  };
}

/**
 * Parse a schedule: a 6-field cron expression (`sec min hour dom month dow`, month and day names allowed, optional
 * `TZ=<IANA zone> ` or `CRON_TZ=<zone> ` prefix, UTC by default), `@every <Go duration>` or one of `@yearly @annually
 * @monthly @weekly @daily @midnight @hourly`. `anchor` (epoch ms) is where `@every` counts from. Errors are
 * INVALID_ARGUMENT naming the `schedule` field; a 5-field cron is refused, as is a cron that can never fire.
 */
export function parseSchedule(text: string, anchor: number): Schedule | GatewayError {
  let expr = text.trim();
  if (expr === "") return invalidArgument("schedule", "must not be empty");
  let timezone = "UTC";
  const tz = /^(?:CRON_)?TZ=(\S+)\s+(.*)$/.exec(expr);
  if (tz) {
    if (!isTimeZone(tz[1]!)) return invalidArgument("schedule", `"${echo(text)}": unknown time zone "${echo(tz[1])}"`);
    timezone = tz[1]!;
    expr = tz[2]!.trim();
  }
  if (expr.startsWith("@")) {
    if (expr.startsWith("@every ") || expr === "@every") {
      if (tz) return invalidArgument("schedule", `"${echo(text)}": a time zone does not apply to @every`);
      return parseEvery(text, expr.slice("@every".length), anchor);
    }
    const cron = DESCRIPTORS[expr.toLowerCase()];
    if (!cron) {
      return invalidArgument("schedule", `"${echo(text)}" is not a known descriptor; use @every <duration>, ${Object.keys(DESCRIPTORS).join(" ")}`);
    }
    return parseCron(text, cron, timezone);
  }
  const s = parseCron(text, expr, timezone);
  if ("nextAfter" in s && s.nextAfter(anchor) === undefined) {
    // croner computes cron times up to the year 2999; a pattern that matches before that but not after the anchor
    // (a due_time in year 3000 or later) is out of range, not a pattern that matches no date.
    if (s.nextAfter(CRON_EPOCH) !== undefined) {
      return invalidArgument("schedule", `"${echo(text)}" has no fire time after ${new Date(anchor).toISOString()}: cron schedules end in the year ${CRON_LAST_YEAR}`);
    }
    return invalidArgument("schedule", `"${echo(text)}" never fires (no date matches it)`);
  }
  return s;
}
