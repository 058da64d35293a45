/**
 * What daprd's Scheduler refuses when a job is scheduled, with its own words, written from its source rather than
 * from the gateway's rules (a fake that borrowed the gateway's parser would agree with it by construction):
 * - go-etcd-cron `internal/engine/handler/handler.go` addJob: the job name check (`jobNameError`), then
 *   `internal/scheduler/builder.go` Parse, whose errors are wrapped "job failed validation: ...";
 * - dapr/kit `cron/parser.go` (the schedule: optional `TZ=`/`CRON_TZ=`, descriptors, `@every <Go duration>`, exactly
 *   6 fields), `time/time.go` ParseISO8601Duration and Go's `time.ParseDuration` / `time.Parse(time.RFC3339)`.
 * The Scheduler answers these as plain Go errors, so gRPC status Unknown; daprd's jobs API turns that into INTERNAL
 * "failed to schedule job due to: rpc error: code = Unknown desc = <text>" (dapr `pkg/api/errors/scheduler.go`
 * SchedulerScheduleJob). See jobs.ts.
 */

/** The job fields the Scheduler looks at (proto3 `optional`: undefined = not set). */
export interface SchedulerJobSpec {
  schedule?: string | undefined;
  due_time?: string | undefined;
  ttl?: string | undefined;
  repeats?: number | undefined;
}

/** k8s.io/apimachinery `validation.IsDNS1123Subdomain`: at most 253 characters of dot-separated RFC 1123 labels. */
function isDns1123Subdomain(s: string): boolean {
  return s.length > 0 && s.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(s);
}

/**
 * The Scheduler's job name check (go-etcd-cron `internal/api/validator/validator.go` Validator.JobName on the full
 * `app||<namespace>||<app id>||<name>` key): strip `_`, `:`, `-` and spaces, then every `||` segment must be a DNS-1123
 * subdomain. (It lower-cases first; the gateway is stricter and refuses upper case itself, so this sidecar refuses it
 * too, as the issue's reading of v1.18.3 says.) The same check runs on Get and Delete. The namespace is "default"
 * (Kubernetes' default; the Scheduler keys jobs by it).
 */
export function jobNameError(name: string, appId = "platform-gateway", namespace = "default"): string | undefined {
  const sanitized = `app||${namespace}||${appId}||${name}`.replace(/[_: -]/g, "");
  for (const seg of sanitized.split("||")) {
    if (!isDns1123Subdomain(seg)) return `job name is invalid "${sanitized}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`;
  }
  return undefined;
}

/** Go's `%q` of a string, close enough for error texts. */
function quote(s: string): string {
  return JSON.stringify(s);
}

const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, "\u00b5s": 1e-3, "\u03bcs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
/** time.Duration's range: ±(2^63-1) ns, in ms. */
const MAX_DURATION_MS = 9_223_372_036_854.775;

/** Go's `time.ParseDuration`, in ms (fractional), or its error text. */
export function parseGoDuration(orig: string): number | { error: string } {
  const invalid = { error: `time: invalid duration ${quote(orig)}` };
  let s = orig;
  let neg = false;
  if (s !== "" && (s[0] === "-" || s[0] === "+")) {
    neg = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "0") return 0;
  if (s === "") return invalid;
  let total = 0;
  while (s !== "") {
    if (!(s[0] === "." || (s[0]! >= "0" && s[0]! <= "9"))) return invalid;
    const m = /^(\d*)(?:\.(\d*))?/.exec(s)!;
    const pre = m[1]!.length > 0;
    const post = m[2] !== undefined && m[2].length > 0;
    if (!pre && !post) return invalid;
    s = s.slice(m[0].length);
    let i = 0;
    while (i < s.length && s[i] !== "." && !(s[i]! >= "0" && s[i]! <= "9")) i++;
    if (i === 0) return { error: `time: missing unit in duration ${quote(orig)}` };
    const u = s.slice(0, i);
    s = s.slice(i);
    const unit = UNITS[u];
    if (unit === undefined) return { error: `time: unknown unit ${quote(u)} in duration ${quote(orig)}` };
    total += Number(`${m[1] || "0"}.${m[2] ?? ""}0`) * unit;
    if (total > MAX_DURATION_MS) return invalid;
  }
  return neg ? -total : total;
}

/**
 * dapr/kit `time.ParseISO8601Duration`, with its quirks: a letter it does not know is skipped, so `P5` or `Pxyz` is a
 * zero duration, not an error. Returns the parts (applied to a date by the caller) and the `R<n>/` repetitions
 * (-1 when absent), or undefined when it refuses the text.
 */
export function parseKitIso8601(from: string): { years: number; months: number; days: number; ms: number; repetition: number } | undefined {
  const out = { years: 0, months: 0, days: 0, ms: 0, repetition: -1 };
  const l = from.length;
  if (l < 2) return undefined;
  const atoi = (t: string): number | undefined => (/^[+-]?\d+$/.test(t) ? Number(t) : undefined);
  let i = 0;
  if (from[0] === "R") {
    for (;;) {
      i++;
      if (i === l || from[i] === "/") break;
    }
    if (i - 1 < 1) return undefined;
    const r = atoi(from.slice(1, i));
    if (r === undefined) return undefined;
    out.repetition = r;
    i++;
    if (i >= l) return out;
  }
  if (from[i] !== "P") return undefined;
  i++;
  let start = i;
  let time = false;
  for (; i < l; i++) {
    const c = from[i];
    const num = (): number | undefined => (start === i ? undefined : atoi(from.slice(start, i)));
    if (c === "T") {
      if (start !== i) return undefined;
      time = true;
      start = i + 1;
    } else if (c === "Y" || c === "W" || c === "D") {
      if (time) return undefined;
      const n = num();
      if (n === undefined) return undefined;
      if (c === "Y") out.years = n;
      else out.days += c === "W" ? n * 7 : n;
      start = i + 1;
    } else if (c === "H" || c === "S") {
      if (!time) return undefined;
      const n = num();
      if (n === undefined) return undefined;
      out.ms += n * (c === "H" ? 3_600_000 : 1000);
      start = i + 1;
    } else if (c === "M") {
      const n = num();
      if (n === undefined) return undefined;
      if (time) out.ms += n * 60_000;
      else out.months = n;
      start = i + 1;
    }
  }
  return out;
}

/** Go's `time.Parse(time.RFC3339, s)` (fractional seconds accepted, as Go does), epoch ms, or undefined. */
export function parseRfc3339(s: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/.exec(s);
  if (!m) return undefined;
  const [y, mo, d, h, mi, se] = [1, 2, 3, 4, 5, 6].map((k) => Number(m[k]));
  if (mo! < 1 || mo! > 12 || h! > 23 || mi! > 59 || se! > 59) return undefined;
  if (d! < 1 || d! > new Date(Date.UTC(y!, mo!, 0)).getUTCDate()) return undefined;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return undefined;
  const offset = m[8] === "Z" ? 0 : (m[8]![0] === "-" ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10])) * 60_000;
  return Date.UTC(y!, mo! - 1, d!, h, mi, se) + Math.floor(Number(`0${m[7] ?? ""}`) * 1000) - offset;
}

/** go-etcd-cron `internal/scheduler/builder.go` parsePointInTime: RFC3339, a Go duration from `now`, or kit ISO-8601. */
function parsePointInTime(str: string, now: number): number | { error: string } {
  const t = parseRfc3339(str);
  if (t !== undefined) return t;
  const dur = parseGoDuration(str);
  if (typeof dur === "number") return now + dur;
  const iso = parseKitIso8601(str);
  if (!iso) return { error: "due time format not recognized" };
  if (iso.repetition > 0) return { error: "repeats not supported for due time" };
  const d = new Date(now);
  d.setUTCFullYear(d.getUTCFullYear() + iso.years, d.getUTCMonth() + iso.months, d.getUTCDate() + iso.days);
  return d.getTime() + iso.ms;
}

interface Bounds {
  min: number;
  max: number;
  names?: Record<string, number>;
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const FIELDS: Bounds[] = [
  { min: 0, max: 59 },
  { min: 0, max: 59 },
  { min: 0, max: 23 },
  { min: 1, max: 31 },
  { min: 1, max: 12, names: Object.fromEntries(MONTHS.map((n, i) => [n, i + 1])) },
  { min: 0, max: 6, names: Object.fromEntries(DAYS.map((n, i) => [n, i])) },
];

class CronError extends Error {}

/** dapr/kit cron mustParseInt (strconv.Atoi, then no negatives). */
function mustParseInt(expr: string): number {
  if (!/^[+-]?\d+$/.test(expr)) throw new CronError(`failed to parse int from ${expr}: strconv.Atoi: parsing ${quote(expr)}: invalid syntax`);
  const n = Number(expr);
  if (n < 0) throw new CronError(`negative number (${n}) not allowed: ${expr}`);
  return n;
}

/** dapr/kit cron getRange, errors only. */
function checkRange(expr: string, r: Bounds): void {
  const rangeAndStep = expr.split("/");
  const lowAndHigh = rangeAndStep[0]!.split("-");
  const single = lowAndHigh.length === 1;
  const intOrName = (t: string): number => r.names?.[t.toLowerCase()] ?? mustParseInt(t);
  let start: number;
  let end: number;
  if (lowAndHigh[0] === "*" || lowAndHigh[0] === "?") {
    start = r.min;
    end = r.max;
  } else {
    start = intOrName(lowAndHigh[0]!);
    if (lowAndHigh.length === 1) end = start;
    else if (lowAndHigh.length === 2) end = intOrName(lowAndHigh[1]!);
    else throw new CronError(`too many hyphens: ${expr}`);
  }
  let step = 1;
  if (rangeAndStep.length === 2) {
    step = mustParseInt(rangeAndStep[1]!);
    if (single) end = r.max;
  } else if (rangeAndStep.length > 2) throw new CronError(`too many slashes: ${expr}`);
  if (start < r.min) throw new CronError(`beginning of range (${start}) below minimum (${r.min}): ${expr}`);
  if (end > r.max) throw new CronError(`end of range (${end}) above maximum (${r.max}): ${expr}`);
  if (start > end) throw new CronError(`beginning of range (${start}) beyond end of range (${end}): ${expr}`);
  if (step === 0) throw new CronError(`step of range should be a positive number: ${expr}`);
}

function validZone(name: string): boolean {
  if (name === "" || name === "UTC" || name === "Local") return true;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/**
 * dapr/kit cron Parser.Parse with go-etcd-cron's options (Second | Minute | Hour | Dom | Month | Dow | Descriptor):
 * undefined when accepted, else its error text.
 */
export function cronScheduleError(spec: string): string | undefined {
  if (spec.length === 0) return "empty spec string";
  if (spec.startsWith("TZ=") || spec.startsWith("CRON_TZ=")) {
    const i = spec.search(/\s/);
    const eq = spec.indexOf("=");
    if (i === -1) return `timezone prefix ${spec} is not followed by a schedule`;
    const zone = spec.slice(eq + 1, i);
    if (!validZone(zone)) return `provided bad location ${zone}: unknown time zone ${zone}`;
    spec = spec.slice(i).trim();
  }
  if (spec.startsWith("@")) {
    if (["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"].includes(spec)) return undefined;
    if (spec.startsWith("@every ")) {
      const d = parseGoDuration(spec.slice("@every ".length));
      return typeof d === "number" ? undefined : `failed to parse duration ${spec}: ${d.error}`;
    }
    return `unrecognized descriptor: ${spec}`;
  }
  const fields = spec.split(/\s+/).filter((f) => f !== "");
  if (fields.length !== 6) return `expected exactly 6 fields, found ${fields.length}: [${fields.join(" ")}]`;
  try {
    fields.forEach((f, k) => f.split(",").filter((x) => x !== "").forEach((expr) => checkRange(expr, FIELDS[k]!)));
  } catch (e) {
    if (e instanceof CronError) return e.message;
    throw e;
  }
  return undefined;
}

/**
 * go-etcd-cron `internal/scheduler/builder.go` Builder.Parse: undefined when the Scheduler accepts the job, else the
 * text of its refusal as addJob returns it ("job failed validation: ...").
 */
export function schedulerRefusal(job: SchedulerJobSpec, now = Date.now()): string | undefined {
  const refuse = (why: string): string => `job failed validation: ${why}`;
  const hasSchedule = job.schedule !== undefined;
  const hasDue = job.due_time !== undefined;
  if (!hasDue && !hasSchedule) return refuse("job must have either a due time or a schedule");
  if (!hasSchedule && (job.repeats ?? 0) > 1) return refuse("job must have a schedule to repeat");
  if (job.repeats !== undefined && job.repeats < 1) return refuse("defined repeats must be greater than 0");
  if (!hasSchedule && job.ttl !== undefined) return refuse("job must have a schedule to have a ttl");
  if (hasSchedule) {
    const bad = cronScheduleError(job.schedule!);
    if (bad) return refuse(bad);
  }
  let begin = now;
  if (hasDue) {
    const t = parsePointInTime(job.due_time!, now);
    if (typeof t !== "number") return refuse(t.error);
    begin = t;
  }
  if (job.ttl !== undefined) {
    const expiration = parsePointInTime(job.ttl, hasDue ? begin : now);
    if (typeof expiration !== "number") return refuse("ttl format not recognized");
    if (hasDue && begin > expiration) return refuse("ttl must be greater than due time");
  }
  return undefined;
}
