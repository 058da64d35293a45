import { randomUUID } from "node:crypto";
import { deadlineSignal } from "../shared/signals.js";
import { SPEC_VERSION, type CloudEvent } from "../shared/cloudevent.js";
import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import { topicProblem } from "./cloudevent-validate.js";
import type { JobRecord, JobSpec } from "../runtime/jobs-port.js";
import { isSchedulableTime, planJob } from "../runtime/schedule/index.js";
import { jobNameProblem } from "../runtime/schedule/job-name.js";
import type { GatewayContext } from "./context.js";
import { createTriggerStats } from "./trigger-stats.js";
import type { ScheduleTriggerRequest__Output } from "../gen/gateway/platform/ScheduleTriggerRequest.js";
import type { TriggerRecord__Output } from "../gen/gateway/platform/TriggerRecord.js";
import { producerSpan } from "./pubsub.js";
import type { ServerSpanInfo } from "../observe/span.js";

/** Type of the event every firing publishes (docs/triggers.md, first table). */
export const TRIGGER_EVENT_TYPE = "com.runtime.event.sent";
/** Source of the event every firing publishes. */
export const TRIGGER_EVENT_SOURCE = "urn:com.platform:api";
/** Longest trigger name accepted. */
export const MAX_TRIGGER_NAME = 200;
/**
 * Longest `schedule` accepted, in characters. Real cron expressions and `@every` durations are well under 100; 512
 * leaves room for long explicit lists (every minute of the hour, `0,1,...,59`, is 169) and a `CRON_TZ=<zone> ` prefix.
 * A bound because the schedule is stored, and returned by get and list, with every trigger.
 */
export const MAX_TRIGGER_SCHEDULE_CHARS = 512;
/**
 * Longest `due_time` or `ttl` accepted, in characters. An RFC 3339 timestamp with nanoseconds and an offset is 35;
 * the longest Go duration Go accepts as written, `2562047h47m16.854775807s`, 24.
 */
export const MAX_TRIGGER_TIME_CHARS = 128;
/** How long one firing's publish may take before it counts as failed. */
const PUBLISH_TIMEOUT_MS = 10_000;

/**
 * A trigger as ScheduleTrigger takes it: the generated request type (proto field names), `name` and `target_topic`
 * required, the rest optional as REST bodies may leave them out. `repeats` 0 or unset: unlimited.
 */
export type TriggerInput = Pick<ScheduleTriggerRequest__Output, "name" | "target_topic"> & Partial<Omit<ScheduleTriggerRequest__Output, "name" | "target_topic">>;

/**
 * A trigger as get and list report it (the generated TriggerRecord): the fields given plus what shows it working.
 * Times are RFC 3339 UTC, "" when not applicable.
 */
export type TriggerRecord = TriggerRecord__Output;

/** Trigger operations, shared by the gRPC service and the REST routes. Errors are GatewayErrors naming the field. */
export interface TriggerOps {
  /** Validate and schedule; ALREADY_EXISTS when the name is taken, RESOURCE_EXHAUSTED past `maxTriggers`. */
  schedule(input: TriggerInput, signal?: AbortSignal): Promise<void>;
  /** One trigger; NOT_FOUND when no trigger has that name. */
  get(name: string, signal?: AbortSignal): Promise<TriggerRecord>;
  /** Delete; NOT_FOUND when no trigger has that name. Future firings stop at once. */
  delete(name: string, signal?: AbortSignal): Promise<void>;
  /** Every trigger, by name. */
  list(signal?: AbortSignal): Promise<TriggerRecord[]>;
  /**
   * The job handler: publish the firing's event. A failed publish is logged and counted, then rejects (unless the
   * event is one the publish refuses as invalid, which no retry can change): the firing was not delivered, and the
   * runtime treats it as a failed delivery (redis fires the same fire time again after the lease, Dapr's Scheduler
   * retries per the job's failure policy, the embedded scheduler logs it and goes on). A job without trigger data
   * never rejects.
   */
  fire(name: string, data: string): Promise<void>;
}

/** What a trigger stores as its job's data. */
interface TriggerData {
  targetTopic: string;
}

function parseData(data: string): TriggerData | undefined {
  try {
    const v = JSON.parse(data) as unknown;
    if (typeof v === "object" && v !== null && typeof (v as TriggerData).targetTopic === "string" && (v as TriggerData).targetTopic !== "") {
      return { targetTopic: (v as TriggerData).targetTopic };
    }
  } catch {
    // not a trigger's job
  }
  return undefined;
}

/** Check a trigger name: required, at most MAX_TRIGGER_NAME characters, no whitespace, control characters or "/". */
export function checkTriggerName(name: unknown): string {
  if (typeof name !== "string" || name === "") throw invalidArgument("name", "is required");
  if (name.length > MAX_TRIGGER_NAME) throw invalidArgument("name", `is ${name.length} characters long; the limit is ${MAX_TRIGGER_NAME}`);
  if (/[\s\u0000-\u001f\u007f/]/.test(name)) throw invalidArgument("name", `"${echo(name)}" must not contain whitespace, control characters or "/"`);
  const problem = jobNameProblem(name);
  if (problem) throw invalidArgument("name", problem);
  return name;
}

/** Refuse a free-text trigger field longer than `max` characters, naming the field and the limit. */
function checkLength(field: string, value: string | null | undefined, max: number): void {
  if (typeof value === "string" && value.length > max) throw invalidArgument(field, `is ${value.length} characters long; the limit is ${max}`);
}

/** Validate a trigger with the scheduler's rules and turn it into the job the runtime schedules. */
export function toJobSpec(input: TriggerInput, now = Date.now()): JobSpec {
  const name = checkTriggerName(input.name);
  if (typeof input.target_topic !== "string" || input.target_topic === "") throw invalidArgument("target_topic", "is required");
  const topicProblemText = topicProblem(input.target_topic);
  if (topicProblemText) throw invalidArgument("target_topic", topicProblemText);
  // Before any parsing: a longer value is refused whole, never parsed, stored or echoed.
  checkLength("schedule", input.schedule, MAX_TRIGGER_SCHEDULE_CHARS);
  checkLength("due_time", input.due_time, MAX_TRIGGER_TIME_CHARS);
  checkLength("ttl", input.ttl, MAX_TRIGGER_TIME_CHARS);
  const spec: JobSpec = {
    name,
    ...(input.schedule ? { schedule: input.schedule } : {}),
    ...(input.due_time ? { dueTime: input.due_time } : {}),
    ...(input.repeats ? { repeats: input.repeats } : {}),
    ...(input.ttl ? { ttl: input.ttl } : {}),
    data: JSON.stringify({ targetTopic: input.target_topic } satisfies TriggerData),
  };
  // Validate here too, so every runtime (not only the embedded one) reports the same field-naming errors and refuses
  // up front whatever Dapr's Scheduler would refuse (src/runtime/schedule: its cron, duration and time rules).
  const plan = planJob(spec, now);
  if (plan instanceof GatewayError) throw plan;
  return spec;
}

/** RFC 3339 UTC, or "" when absent or not a valid time (a bad record must never make get or list fail). */
const iso = (ms: number | undefined): string => (ms === undefined || !isSchedulableTime(ms) ? "" : new Date(ms).toISOString());

/** Largest value of an `int32` wire field (repeats, times_fired in platform/trigger.proto). */
const INT32_MAX = 2_147_483_647;

/** The record of a trigger's job, or undefined when the job is not a trigger's. */
export function toTriggerRecord(job: JobRecord): TriggerRecord | undefined {
  const data = parseData(job.data);
  if (!data) return undefined;
  return {
    name: job.name,
    target_topic: data.targetTopic,
    schedule: job.schedule ?? "",
    due_time: job.dueTime ?? "",
    repeats: job.repeats ?? 0,
    ttl: job.ttl ?? "",
    created_at: iso(job.createdAt),
    next_fire_time: iso(job.nextFireAt),
    last_fire_time: iso(job.lastFiredAt),
    expires_at: iso(job.expiresAt),
    // int32 on the wire: saturate rather than wrap negative.
    times_fired: Math.min(job.timesFired ?? 0, INT32_MAX),
  };
}

/** The empty event a firing publishes: no data, fresh id, the trigger type and source. */
export function triggerEvent(now = Date.now()): CloudEvent {
  return {
    id: randomUUID(),
    source: TRIGGER_EVENT_SOURCE,
    spec_version: SPEC_VERSION,
    type: TRIGGER_EVENT_TYPE,
    attributes: { time: { ce_timestamp: { seconds: Math.floor(now / 1000), nanos: (now % 1000) * 1e6 }, attr: "ce_timestamp" } },
  };
}

/** The span of one firing: a trace of its own (a timer has no caller), naming the trigger and the job that fired. */
function firingSpan(name: string, topic: string): ServerSpanInfo {
  // The runtime's job carries the trigger's name: the job id and the trigger name are the same string.
  return { name: "trigger fire", kind: "internal", attributes: { "gateway.trigger.name": name, "gateway.job.id": name, "messaging.destination.name": topic } };
}

/** Create the trigger operations on the context's runtime. */
export function createTriggerOps(ctx: GatewayContext): TriggerOps {
  const jobs = ctx.runtime.jobs;
  const publishes = ctx.metrics.counter("platform_trigger_publishes_total", "Trigger firings whose event the gateway tried to publish to the target topic", []);
  const failures = ctx.metrics.counter(
    "platform_trigger_publish_failures_total",
    "Trigger firings whose event could not be published (publish error, or a job without trigger data); the schedule continues",
    [],
  );

  const tracer = ctx.tracer;
  const tracing = tracer?.on === true;
  const maxTriggers = ctx.options.maxTriggers;
  let pending = 0;

  // Completes records from runtimes that report only the job spec (Dapr).
  const stats = createTriggerStats();

  const find = async (name: string, signal?: AbortSignal): Promise<TriggerRecord> => {
    checkTriggerName(name);
    const job = await jobs.get(name, signal);
    const rec = job && toTriggerRecord(stats.complete(job, Date.now()));
    if (!rec) throw new GatewayError(Code.NOT_FOUND, `no trigger named ${echo(name)}`);
    return rec;
  };

  return {
    async schedule(input, signal) {
      const spec = toJobSpec(input);
      // Counted before scheduling, with the schedules still in flight, so concurrent callers cannot overshoot.
      pending++;
      try {
        const stored = jobs.count ? await jobs.count(signal) : (await jobs.list(signal)).length;
        if (stored + pending > maxTriggers) {
          throw new GatewayError(
            Code.RESOURCE_EXHAUSTED,
            `trigger limit reached: ${stored} triggers exist and at most ${maxTriggers} may (--max-triggers); delete some first`,
          );
        }
        await jobs.schedule(spec, signal);
      } finally {
        pending--;
      }
    },
    get: find,
    async delete(name, signal) {
      await find(name, signal);
      try {
        await jobs.delete(name, signal);
        stats.forget(name);
      } catch (e) {
        const err = GatewayError.from(e);
        // Fired its last time between the look-up and the delete: gone either way.
        if (err.code === Code.NOT_FOUND) throw new GatewayError(Code.NOT_FOUND, `no trigger named ${echo(name)}`);
        throw err;
      }
    },
    async list(signal) {
      const all = await jobs.list(signal);
      stats.retain(new Set(all.map((j) => j.name)));
      const now = Date.now();
      return all.flatMap((j) => toTriggerRecord(stats.complete(j, now)) ?? []).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    },
    async fire(name, data) {
      publishes.inc();
      const firedAt = Date.now();
      const target = parseData(data);
      if (!target) {
        stats.fired(name, firedAt);
        failures.inc();
        ctx.logger.error({ trigger: name }, "a job fired without trigger data (no targetTopic); nothing published");
        return;
      }
      // A timer cleared as soon as the publish settles, not AbortSignal.timeout: that one lives its full 10 s, so
      // 30,000 `@every 1s` triggers held 300,000 live timers (~250 MiB of heap, and their expiry kept burning CPU
      // for 10 s after every trigger was deleted).
      const deadline = deadlineSignal(PUBLISH_TIMEOUT_MS, () => new DOMException("trigger publish timed out", "TimeoutError"));
      // Tracing on: the firing is a trace of its own, its publish a producer span whose context the event carries.
      const span = tracing ? tracer!.start({ traceparent: undefined, tracestate: undefined, server: firingSpan(name, target.targetTopic) }) : undefined;
      const producer = span ? producerSpan(span, target.targetTopic, triggerEvent()) : undefined;
      try {
        await ctx.runtime.pubsub.publish(target.targetTopic, producer ? producer.event : triggerEvent(), deadline.signal);
        producer?.span.end();
        span?.end();
        // Counted once published: a firing whose event never went out is not one (runtimes that retry it call again).
        stats.fired(name, firedAt);
      } catch (e) {
        const err = GatewayError.from(e);
        producer?.span.end(err.code, err.rawMessage);
        span?.end(err.code, err.rawMessage);
        failures.inc();
        ctx.logger.error({ trigger: name, topic: target.targetTopic, err }, "trigger firing could not be published; the schedule continues");
        // A transient or runtime failure (sidecar or Redis down, Redis out of memory, a timeout): report it, so the
        // runtime does not count the firing as done. An event the publish refuses as invalid would fail every retry.
        if (err.code !== Code.INVALID_ARGUMENT) throw err;
      } finally {
        deadline.clear();
      }
    },
  };
}
