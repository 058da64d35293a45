import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { JobHandler, JobRecord, JobSpec, JobsPort } from "../jobs-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { isSchedulableTime, nextFireTime, planJob, type JobPlan } from "../schedule/index.js";
import { DueQueue } from "./due-queue.js";
import { systemClock, type SchedulerClock } from "./scheduler-clock.js";
import { echo } from "../../shared/echo.js";
import { clampTimerMs } from "../../shared/timers.js";


/** Options of the embedded scheduler. */
export interface MemorySchedulerOptions {
  /** Time source and timers. Default: the system clock. */
  clock?: SchedulerClock;
  /** Where failed deliveries are reported. Default: nowhere. */
  logger?: RuntimeLogger;
}

/** Options of one schedule call beyond the port's. */
export interface ScheduleOptions {
  /** Replace a job of the same name instead of failing with ALREADY_EXISTS (Dapr's `overwrite`). Default false. */
  overwrite?: boolean;
}

/**
 * In-process scheduler with Dapr's job semantics (see `planJob`). One timer, armed for the earliest due job; each
 * next fire time is computed from the schedule (never by adding the interval to a timer's actual wake-up), so there
 * is no drift; fire times are whole seconds for cron, anchor + k*interval for `@every`. A job that has finished
 * (one-shot fired, repeats reached, ttl passed) is removed. Jobs live in memory only.
 */
export interface MemoryScheduler extends JobsPort {
  schedule(job: JobSpec, signal?: AbortSignal, options?: ScheduleOptions): Promise<void>;
  count(signal?: AbortSignal): Promise<number>;
  /** Number of jobs held (tests, metrics). */
  readonly size: number;
  /** Whether a timer is armed right now (tests: nothing may be left running after close). */
  readonly timerArmed: boolean;
  /** Stop the timer and drop every job; later calls fail with UNAVAILABLE. Safe to call twice. */
  close(): void;
}

interface Entry {
  spec: JobSpec;
  plan: JobPlan;
  createdAt: number;
  nextFireAt: number | undefined;
  lastFiredAt: number | undefined;
  timesFired: number;
}

function checkSignal(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new GatewayError(Code.CANCELLED, "the operation was cancelled");
}

/** A job's spec without unset optional fields (what get/list report). Shared with the redis scheduler. */
export function copySpec(job: JobSpec): JobSpec {
  return {
    name: job.name,
    ...(job.schedule ? { schedule: job.schedule } : {}),
    ...(job.dueTime ? { dueTime: job.dueTime } : {}),
    ...(job.repeats ? { repeats: job.repeats } : {}),
    ...(job.ttl ? { ttl: job.ttl } : {}),
    data: job.data,
  };
}

/** The plan of a job a scheduler can hold, or INVALID_ARGUMENT naming what is wrong. Shared with the redis scheduler. */
export function validJobPlan(job: JobSpec, now: number): JobPlan {
  const plan = planJob(job, now);
  if (plan instanceof GatewayError) throw plan;
  if (!isSchedulableTime(plan.firstFireAt)) throw new GatewayError(Code.INVALID_ARGUMENT, "the job's first fire time cannot be held by the scheduler");
  if (typeof job.data !== "string") throw new GatewayError(Code.INVALID_ARGUMENT, "data must be a string");
  return plan;
}

/** Create the embedded scheduler. */
export function createMemoryScheduler(options: MemorySchedulerOptions = {}): MemoryScheduler {
  const clock = options.clock ?? systemClock;
  const logger = options.logger;
  const jobs = new Map<string, Entry>();
  const queue = new DueQueue();
  let handler: JobHandler | undefined;
  let timer: unknown;
  let timerAt: number | undefined;
  let closed = false;

  const disarm = (): void => {
    if (timer !== undefined) clock.clearTimer(timer);
    timer = undefined;
    timerAt = undefined;
  };

  /**
   * A job whose time cannot be held (planJob refuses those, so this is defence in depth): drop it and say so, rather
   * than keep a time that breaks the queue's order, get/list formatting, or the timer (NaN arms a 1 ms timer).
   */
  const dropInvalid = (name: string, at: unknown): void => {
    jobs.delete(name);
    queue.delete(name);
    logger?.error({ job: name, at: String(at) }, "job has a fire time the scheduler cannot hold; job removed so the others keep firing");
  };

  /** Keep exactly one timer, for the root of the queue. */
  const arm = (): void => {
    let head = queue.peek();
    while (head && !isSchedulableTime(head.at)) {
      dropInvalid(head.name, head.at);
      head = queue.peek();
    }
    if (closed || !head) return disarm();
    if (timerAt === head.at && timer !== undefined) return;
    disarm();
    timerAt = head.at;
    // A job beyond setTimeout's range gets the longest timer and re-arms on wake-up.
    timer = clock.setTimer(wake, clampTimerMs(head.at - clock.now()));
  };

  const deliver = (name: string, data: string): void => {
    if (!handler) {
      logger?.warn({ job: name }, "job fired with no handler registered; firing dropped");
      return;
    }
    let p: Promise<void>;
    try {
      p = handler(name, data);
    } catch (e) {
      p = Promise.reject(e);
    }
    p.catch((e: unknown) => logger?.warn({ job: name, err: e }, "job handler failed; the schedule continues"));
  };

  function wake(): void {
    timer = undefined;
    timerAt = undefined;
    if (closed) return;
    const now = clock.now();
    // Fire everything due; each job once per wake-up (its next time is strictly after both its due time and now).
    for (let head = queue.peek(); head && head.at <= now; head = queue.peek()) {
      const e = jobs.get(head.name);
      if (!e) {
        queue.delete(head.name);
        continue;
      }
      const firedAt = head.at;
      e.timesFired++;
      e.lastFiredAt = firedAt;
      try {
        e.nextFireAt = nextFireTime(e.plan, firedAt, now, e.timesFired);
      } catch (err) {
        // A schedule that throws ends its own job only; the loop goes on for the others.
        logger?.error({ job: head.name, err }, "job's next fire time could not be computed; job removed");
        e.nextFireAt = undefined;
      }
      if (e.nextFireAt !== undefined && (!isSchedulableTime(e.nextFireAt) || e.nextFireAt <= firedAt)) {
        logger?.error({ job: head.name, at: String(e.nextFireAt) }, "job's next fire time is invalid; job removed");
        e.nextFireAt = undefined;
      }
      if (e.nextFireAt === undefined) {
        jobs.delete(head.name);
        queue.delete(head.name);
      } else queue.set(head.name, e.nextFireAt);
      deliver(e.spec.name, e.spec.data);
    }
    arm();
  }

  const open = (): void => {
    if (closed) throw new GatewayError(Code.UNAVAILABLE, "the embedded scheduler is closed");
  };

  // Times are reported only when valid, so one bad record can never make get or list throw.
  const time = (key: string, t: number | undefined): Record<string, number> => (t !== undefined && isSchedulableTime(t) ? { [key]: t } : {});
  const record = (e: Entry): JobRecord => ({
    ...copySpec(e.spec),
    createdAt: e.createdAt,
    timesFired: e.timesFired,
    ...time("nextFireAt", e.nextFireAt),
    ...time("lastFiredAt", e.lastFiredAt),
    ...time("expiresAt", e.plan.expiresAt),
  });

  return {
    setHandler(h) {
      handler = h;
    },
    async schedule(job, signal, opts = {}) {
      checkSignal(signal);
      open();
      const now = clock.now();
      const plan = validJobPlan(job, now);
      if (jobs.has(job.name) && !opts.overwrite) {
        throw new GatewayError(Code.ALREADY_EXISTS, `a job named ${echo(job.name)} already exists; delete it first`);
      }
      jobs.set(job.name, { spec: copySpec(job), plan, createdAt: now, nextFireAt: plan.firstFireAt, lastFiredAt: undefined, timesFired: 0 });
      queue.set(job.name, plan.firstFireAt);
      arm();
    },
    async get(name, signal) {
      checkSignal(signal);
      open();
      const e = jobs.get(name);
      return e ? record(e) : undefined;
    },
    async delete(name, signal) {
      checkSignal(signal);
      open();
      if (!jobs.delete(name)) throw new GatewayError(Code.NOT_FOUND, `no job named ${echo(name)}`);
      queue.delete(name);
      arm();
    },
    async list(signal) {
      checkSignal(signal);
      open();
      return [...jobs.values()].map(record).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    },
    async count(signal) {
      checkSignal(signal);
      open();
      return jobs.size;
    },
    get size() {
      return jobs.size;
    },
    get timerArmed() {
      return timer !== undefined;
    },
    close() {
      closed = true;
      disarm();
      jobs.clear();
      queue.clear();
    },
  };
}
