import type { JobRecord } from "../runtime/jobs-port.js";
import { parseRfc3339Ms, parseSchedule, resolveTimeSpec } from "../runtime/schedule/index.js";

/** What this gateway process saw of one trigger's firings. */
interface Seen {
  timesFired: number;
  lastFiredAt: number;
}

/**
 * Firings seen by this process, per trigger, to complete records from a runtime that reports only the job's spec
 * (Dapr's GetJob/ListJobs have no counters or times). The embedded scheduler's own figures always win.
 */
export interface TriggerStats {
  /** Count one firing of `name` at `at` (epoch ms). */
  fired(name: string, at: number): void;
  /** Forget `name` (deleted). */
  forget(name: string): void;
  /** Forget every name not in `live` (finished triggers). */
  retain(live: ReadonlySet<string>): void;
  /**
   * `job` with the run-state fields the runtime left out filled where they can be known: times fired and last firing
   * as seen by this process; next firing from the schedule (cron: the next match after now; `@every`: the next
   * multiple after the last firing seen) or a future RFC 3339 due_time; expiry when due_time or ttl is a timestamp.
   */
  complete(job: JobRecord, now: number): JobRecord;
}

function estimateNext(job: JobRecord, seen: Seen | undefined, now: number): number | undefined {
  const due = job.dueTime ? parseRfc3339Ms(job.dueTime) : undefined;
  if (due !== undefined && due > now && !seen) return due;
  if (!job.schedule) return undefined;
  const anchor = job.schedule.trim().startsWith("@every") ? seen?.lastFiredAt : now;
  if (anchor === undefined) return undefined;
  const s = parseSchedule(job.schedule, anchor);
  if (!("nextAfter" in s)) return undefined;
  const next = s.nextAfter(now);
  if (next === undefined) return undefined;
  if (job.repeats && seen && seen.timesFired >= job.repeats) return undefined;
  return next;
}

function estimateExpiry(job: JobRecord): number | undefined {
  if (!job.ttl) return undefined;
  const due = job.dueTime ? parseRfc3339Ms(job.dueTime) : undefined;
  const ttlAt = parseRfc3339Ms(job.ttl);
  if (ttlAt !== undefined) return ttlAt;
  if (due === undefined) return undefined;
  const r = resolveTimeSpec("ttl", job.ttl, due);
  return "at" in r ? r.at : undefined;
}

/** Create an empty stats table. */
export function createTriggerStats(): TriggerStats {
  const seen = new Map<string, Seen>();
  return {
    fired(name, at) {
      const s = seen.get(name);
      if (s) {
        s.timesFired++;
        s.lastFiredAt = at;
      } else seen.set(name, { timesFired: 1, lastFiredAt: at });
    },
    forget: (name) => void seen.delete(name),
    retain(live) {
      for (const name of seen.keys()) if (!live.has(name)) seen.delete(name);
    },
    complete(job, now) {
      // A runtime that knows when the job was created keeps its own run state (the embedded scheduler): use it as is.
      if (job.createdAt !== undefined) return job;
      const s = seen.get(job.name);
      const out: JobRecord = { ...job };
      out.timesFired ??= s?.timesFired ?? 0;
      if (out.lastFiredAt === undefined && s) out.lastFiredAt = s.lastFiredAt;
      if (out.nextFireAt === undefined) {
        const next = estimateNext(job, s, now);
        if (next !== undefined) out.nextFireAt = next;
      }
      if (out.expiresAt === undefined) {
        const exp = estimateExpiry(job);
        if (exp !== undefined) out.expiresAt = exp;
      }
      return out;
    },
  };
}
