import { Cron } from "croner";
import { invalidArgument, type GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { parseGoDuration } from "./go-duration.js";
import { MAX_SCHEDULE_TIME_MS } from "./limits.js";
import { timeZoneProblem } from "./time-zones.js";

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

/** Dapr's descriptors (dapr/kit cron's parseDescriptor, case-sensitive), as 6-field cron in the schedule's time zone. */
const DESCRIPTORS: Record<string, string> = {
  "@yearly": "0 0 0 1 1 *",
  "@annually": "0 0 0 1 1 *",
  "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0",
  "@daily": "0 0 0 * * *",
  "@midnight": "0 0 0 * * *",
  "@hourly": "0 0 * * * *",
};

/**
 * Go's `unicode.IsSpace`: what dapr/kit's cron parser splits fields on (`strings.Fields`) and trims after a time zone
 * prefix (`strings.TrimSpace`). Not JavaScript's `\s`, which also has U+FEFF and lacks U+0085.
 */
const GO_SPACE = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const GO_SPACES = new RegExp(`[${GO_SPACE}]+`);
const GO_EDGES = new RegExp(`^[${GO_SPACE}]+|[${GO_SPACE}]+$`, "g");
const goTrimSpace = (s: string): string => s.replace(GO_EDGES, "");

/** One cron field as dapr/kit's parser bounds it (`spec.go` seconds ... dow), with the names it takes. */
interface CronField {
  name: string;
  min: number;
  max: number;
  /** Three-letter names (any case) for min, min+1, ... */
  names?: readonly string[];
  /** What the field takes, for error messages. */
  accepts: string;
}

const CRON_FIELDS: readonly CronField[] = [
  { name: "second", min: 0, max: 59, accepts: "0-59" },
  { name: "minute", min: 0, max: 59, accepts: "0-59" },
  { name: "hour", min: 0, max: 23, accepts: "0-23" },
  { name: "day-of-month", min: 1, max: 31, accepts: "1-31" },
  { name: "month", min: 1, max: 12, names: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], accepts: "1-12 or JAN-DEC" },
  { name: "day-of-week", min: 0, max: 6, names: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], accepts: "0-6 (Sunday is 0) or SUN-SAT" },
];
const SIX_FIELDS = "a cron schedule needs exactly 6 fields: second minute hour day-of-month month day-of-week (e.g. \"0 */5 * * * *\")";

/** The last year croner computes cron fire times in (its search stops at year 3000 for patterns without a year). */
export const CRON_LAST_YEAR = 2999;
const CRON_EPOCH = Date.UTC(2000, 0, 1);

/** `t` when it is a time the scheduler can hold, else undefined (the schedule is over). */
function within(t: number | undefined): number | undefined {
  return t !== undefined && Number.isFinite(t) && t <= MAX_SCHEDULE_TIME_MS ? t : undefined;
}

/**
 * One field read as dapr/kit's cron reads it (`parser.go` getField / getRange): a comma list of `*` or `?` (the whole
 * range), a number or name, or a range `a-b`, each optionally with a step `/n`; `a/n` runs from a to the field's
 * maximum. Returns the values it matches and whether it counts as unrestricted (`*` or `?` with step 1, which decides
 * how day-of-month and day-of-week combine), or the problem. Where kit's parser is looser the gateway refuses, on
 * every runtime: `+` signs (`+5`, a step of `+2`), empty list items (`1,,2`) and `*-5` (kit ignores the `-5`).
 */
function parseField(field: string, f: CronField): { star: boolean; values: number[] } | string {
  const at = `${f.name} field "${echo(field)}"`;
  let letters = field.toUpperCase();
  for (const n of f.names ?? []) letters = letters.replaceAll(n, "0");
  if (!/^[0-9*?,/-]+$/.test(letters)) {
    const names = f.names ? ` or ${f.name === "month" ? "month names JAN-DEC" : "day names SUN-SAT"}` : "";
    return `${at} may only contain numbers, *, ?, ranges (a-b), lists (a,b) and steps (/n)${names}`;
  }
  let item = "";
  const value = (token: string): number | string => {
    if (/^[0-9]+$/.test(token)) return Number(token);
    const i = f.names?.indexOf(token.toUpperCase()) ?? -1;
    if (i >= 0) return f.min + i;
    if (token === "") return `${at}: "${echo(item)}" is missing a number`;
    return `${at}: "${echo(token)}" is not a number${f.names ? ` or a ${f.name === "month" ? "month" : "day"} name (${f.names[0]}-${f.names[f.names.length - 1]})` : ""}`;
  };
  const values = new Set<number>();
  let star = false;
  for (item of field.split(",")) {
    if (item === "") return `${at} has an empty list item`;
    const [base, step, ...moreSlashes] = item.split("/");
    if (moreSlashes.length > 0) return `${at}: "${echo(item)}" has more than one /`;
    const ends = base!.split("-");
    if (ends.length > 2) return `${at}: "${echo(item)}" has more than one -`;
    let start: number;
    let end: number;
    const whole = base === "*" || base === "?";
    if (whole) {
      start = f.min;
      end = f.max;
    } else {
      if (ends.includes("*") || ends.includes("?")) return `${at}: * and ? stand for the whole range, not one end of a range ("${echo(item)}")`;
      const a = value(ends[0]!);
      if (typeof a === "string") return a;
      const b = ends.length === 2 ? value(ends[1]!) : step !== undefined ? f.max : a;
      if (typeof b === "string") return b;
      [start, end] = [a, b];
    }
    let every = 1;
    if (step !== undefined) {
      if (!/^[0-9]+$/.test(step)) return `${at}: the step of "${echo(item)}" must be a whole number`;
      every = Number(step);
    }
    if (start < f.min || end > f.max) return `${f.name} is ${f.accepts}, so "${echo(item)}" is out of range`;
    if (start > end) return `${f.name} range "${echo(item)}" runs backwards: a range goes from low to high (it does not wrap)`;
    if (every === 0) return `${f.name} step in "${echo(item)}" must be at least 1`;
    if (whole && every === 1) star = true;
    for (let v = start; v <= end; v += every) values.add(v);
  }
  return { star, values: [...values].sort((x, y) => x - y) };
}

function parseCron(text: string, expr: string, timezone: string): Schedule | GatewayError {
  const trimmed = goTrimSpace(expr);
  const fields = trimmed === "" ? [] : trimmed.split(GO_SPACES);
  if (fields.length !== 6) {
    return invalidArgument("schedule", `"${echo(text)}" has ${fields.length} field${fields.length === 1 ? "" : "s"}; ${SIX_FIELDS}`);
  }
  // croner computes the times, from each field as the explicit values kit's parser gives it: croner's own grammar
  // differs (it takes 7 as Sunday, L, W and #; refuses 5/10 and */100; treats */1 as a restriction), and only a bare
  // "*" tells it that day-of-month or day-of-week is unrestricted, as kit's star bit does.
  const pattern: string[] = [];
  for (let i = 0; i < 6; i++) {
    const f = parseField(fields[i]!, CRON_FIELDS[i]!);
    if (typeof f === "string") {
      return invalidArgument("schedule", f.startsWith(`${CRON_FIELDS[i]!.name} field`) ? `"${echo(text)}": ${f}` : `"${echo(text)}" is not a valid cron expression: ${f}`);
    }
    pattern.push(f.star ? "*" : f.values.join(","));
  }
  let cron: Cron;
  try {
    cron = new Cron(pattern.join(" "), { mode: "6-part", timezone, paused: true, domAndDow: false });
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
  // Not trimmed: kit's parser hands Go's time.ParseDuration everything after "@every ", which takes no spaces.
  const d = parseGoDuration(arg);
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
 * Parse a schedule as dapr/kit's cron parser reads it (with go-etcd-cron's options: seconds, descriptors), so every
 * runtime takes the same schedules: a 6-field cron expression (`sec min hour dom month dow`, see parseField),
 * optionally after `TZ=<zone> ` or `CRON_TZ=<zone> ` (a tzdata name, case-sensitive, then a space; UTC by default),
 * `@every <Go duration>` or one of `@yearly @annually @monthly @weekly @daily @midnight @hourly` (lower-case, nothing
 * around them). `anchor` (epoch ms) is where `@every` counts from. Errors are INVALID_ARGUMENT naming the `schedule`
 * field. Stricter than kit, on every runtime: a 5-field cron, a cron that never fires, `@every` under 1s or not whole
 * seconds, `@every` with a time zone, an empty zone (`TZ= `) and the forms parseField lists are refused.
 */
export function parseSchedule(text: string, anchor: number): Schedule | GatewayError {
  if (goTrimSpace(text) === "") return invalidArgument("schedule", "must not be empty");
  let expr = text;
  let timezone = "UTC";
  const tz = text.startsWith("TZ=") || text.startsWith("CRON_TZ=");
  if (tz) {
    // kit: the zone runs from "=" to the first space (only a space), the schedule is the rest, trimmed.
    const space = text.indexOf(" ");
    if (space === -1) return invalidArgument("schedule", `"${echo(text)}": a TZ= or CRON_TZ= prefix is the zone, a space, then the schedule`);
    const zone = text.slice(text.indexOf("=") + 1, space);
    const problem = timeZoneProblem(zone);
    if (problem?.spelled) return invalidArgument("schedule", `"${echo(text)}": time zone "${echo(zone)}" is spelled ${problem.spelled}: time zone names are case-sensitive`);
    if (problem) return invalidArgument("schedule", `"${echo(text)}": unknown time zone "${echo(zone)}"`);
    timezone = zone;
    expr = goTrimSpace(text.slice(space));
  } else {
    // kit looks for "TZ=" and "@" at the very start; after spaces it reads them as cron fields.
    const start = goTrimSpace(text);
    if (!text.startsWith(start) && (start.startsWith("@") || /^(CRON_)?TZ=/.test(start))) {
      return invalidArgument("schedule", `"${echo(text)}" must start with ${start.startsWith("@") ? "@" : start.slice(0, start.indexOf("=") + 1)}: no spaces before it`);
    }
  }
  if (expr.startsWith("@")) {
    if (expr.startsWith("@every ") || expr === "@every") {
      if (tz) return invalidArgument("schedule", `"${echo(text)}": a time zone does not apply to @every`);
      return parseEvery(text, expr.slice("@every ".length), anchor);
    }
    const cron = Object.hasOwn(DESCRIPTORS, expr) ? DESCRIPTORS[expr] : undefined;
    if (!cron) {
      return invalidArgument(
        "schedule",
        `"${echo(text)}" is not a known descriptor; use @every <duration>, ${Object.keys(DESCRIPTORS).join(" ")} (lower-case, with nothing after it)`,
      );
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
