import { invalidArgument, type GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import type { JobSpec } from "../jobs-port.js";
import { parseSchedule, type Schedule } from "./schedule.js";
import { resolveTimeSpec } from "./time-spec.js";
import { parseRfc3339 } from "../../shared/rfc3339.js";

/** Whether RFC 3339 time `a` is before `b`, to the nanosecond (false when either is not one). */
function isBefore(a: string, b: string): boolean {
  const x = parseRfc3339(a);
  const y = parseRfc3339(b);
  return x !== undefined && y !== undefined && (x.seconds < y.seconds || (x.seconds === y.seconds && x.nanos < y.nanos));
}

/** A validated job with its times resolved against the moment it was scheduled. */
export interface JobPlan {
  /** Absent for a one-shot job (due_time only). */
  schedule?: Schedule;
  /** First fire time, epoch ms (may be in the past: the job then fires at once). */
  firstFireAt: number;
  /** Epoch ms after which the job never fires (from ttl). */
  expiresAt?: number;
  /** Firings allowed; 0 = unlimited. A one-shot job is 1. */
  repeats: number;
}

/**
 * Largest `repeats` accepted: 2^31-1. Dapr's field is a uint32, but the gateway's own wire type (`int32 repeats` in
 * platform/trigger.proto) is signed, so a larger value would read back negative over gRPC; the smaller limit wins.
 */
export const MAX_REPEATS = 2_147_483_647;

/**
 * Validate a job spec with Dapr's rules and resolve its times against `now` (epoch ms). Fields are named as in
 * Dapr's Job message: name, schedule, due_time, repeats, ttl. Rules (go-etcd-cron `internal/scheduler/builder.go`
 * Parse, plus the gateway's stricter ones): name required; schedule or due_time required; repeats a whole number
 * 0..2^31-1 and above 1 only with a schedule; ttl only with a schedule, counted from due_time when given, and not
 * before the first firing (the Scheduler checks this against due_time only). Every resolved time is at most
 * MAX_SCHEDULE_TIME_MS. The schedule, due_time and ttl syntax: schedule.ts, time-spec.ts.
 */
export function planJob(spec: Pick<JobSpec, "name" | "schedule" | "dueTime" | "repeats" | "ttl">, now: number): JobPlan | GatewayError {
  if (!spec.name) return invalidArgument("name", "must not be empty");
  const hasSchedule = spec.schedule !== undefined && spec.schedule !== "";
  const hasDue = spec.dueTime !== undefined && spec.dueTime !== "";
  const hasTtl = spec.ttl !== undefined && spec.ttl !== "";
  if (!hasSchedule && !hasDue) return invalidArgument("schedule", "or due_time is required (a schedule repeats; a due_time alone fires once)");
  const repeats = spec.repeats ?? 0;
  if (!Number.isInteger(repeats) || repeats < 0 || repeats > MAX_REPEATS) {
    return invalidArgument("repeats", `must be a whole number from 0 (unlimited) to ${MAX_REPEATS} (got ${repeats})`);
  }
  if (repeats > 1 && !hasSchedule) return invalidArgument("repeats", `${repeats} needs a schedule; without one the job fires once at due_time`);
  if (hasTtl && !hasSchedule) return invalidArgument("ttl", "needs a schedule; a due_time-only job ends after its one firing");

  let dueAt: number | undefined;
  if (hasDue) {
    const r = resolveTimeSpec("due_time", spec.dueTime!, now);
    if ("error" in r) return r.error;
    dueAt = r.at;
  }
  let schedule: Schedule | undefined;
  if (hasSchedule) {
    const s = parseSchedule(spec.schedule!, dueAt ?? now);
    if (!("nextAfter" in s)) return s;
    schedule = s;
  }
  const firstFireAt = dueAt ?? schedule!.nextAfter(now);
  if (firstFireAt === undefined) return invalidArgument("schedule", `"${echo(spec.schedule)}" never fires after now`);
  let expiresAt: number | undefined;
  if (hasTtl) {
    const r = resolveTimeSpec("ttl", spec.ttl!, dueAt ?? now);
    if ("error" in r) return r.error;
    if (r.at < firstFireAt) {
      return invalidArgument("ttl", `"${echo(spec.ttl)}" expires at ${new Date(r.at).toISOString()}, before the first firing at ${new Date(firstFireAt).toISOString()}`);
    }
    // Both timestamps within one millisecond: compared to the nanosecond, as the Scheduler compares them.
    if (r.at === firstFireAt && r.kind === "timestamp" && hasDue && isBefore(spec.ttl!, spec.dueTime!)) {
      return invalidArgument("ttl", `"${echo(spec.ttl)}" is before due_time "${echo(spec.dueTime)}"`);
    }
    expiresAt = r.at;
  }
  return { ...(schedule ? { schedule } : {}), firstFireAt, ...(expiresAt !== undefined ? { expiresAt } : {}), repeats: hasSchedule ? repeats : 1 };
}

/**
 * The fire time after a firing that was due at `firedAt`, seen at `now`: the schedule's next time after
 * max(firedAt, now), so late wake-ups never shift later times and missed times are skipped rather than replayed in a
 * burst. Undefined when the job is finished (one-shot, repeats reached, past its ttl, schedule exhausted).
 */
export function nextFireTime(plan: JobPlan, firedAt: number, now: number, timesFired: number): number | undefined {
  if (!plan.schedule) return undefined;
  if (plan.repeats > 0 && timesFired >= plan.repeats) return undefined;
  const next = plan.schedule.nextAfter(Math.max(firedAt, now));
  if (next === undefined || (plan.expiresAt !== undefined && next > plan.expiresAt)) return undefined;
  return next;
}
