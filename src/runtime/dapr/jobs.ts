import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import type { JobHandler, JobRecord, JobsPort, JobSpec } from "../jobs-port.js";
import type { Job, Job__Output } from "../../gen/dapr/dapr/proto/runtime/v1/Job.js";
import type { DaprConnection, DaprMethod, DaprRequest, DaprResponse } from "./connection.js";
import { packString, unpackString } from "./struct.js";

/** `dapr.proto.runtime.v1.Job` as proto-loader decodes it (generated; `optional` fields may be absent). */
export type DaprJob = Job__Output;

/** The Dapr jobs port plus the entry point of the app callback. */
export interface DaprJobs extends JobsPort {
  /**
   * A job fired (daprd called OnJobEvent on the gateway): run the registered handler. Rejects UNAVAILABLE when no
   * handler is registered yet (daprd then applies the job's failure policy).
   */
  deliver(name: string, data: string): Promise<void>;
}

/** daprd reports a missing job as INTERNAL with "job not found" in the text (and newer versions as NOT_FOUND). */
function isJobNotFound(e: GatewayError): boolean {
  return e.code === Code.NOT_FOUND || /job not found|not found/i.test(e.rawMessage);
}

function toRecord(job: DaprJob): JobRecord {
  const rec: JobRecord = { name: job.name, data: unpackString(job.data) };
  if (job.schedule) rec.schedule = job.schedule;
  if (job.due_time) rec.dueTime = job.due_time;
  if (job.ttl) rec.ttl = job.ttl;
  if (job.repeats) rec.repeats = Number(job.repeats);
  return rec;
}

/**
 * Deadline of Scheduler calls, ms. daprd itself waits up to 30 s for a configured but unreachable Scheduler before it
 * answers; the gateway waits a little longer so it reports daprd's own error rather than a bare DEADLINE_EXCEEDED.
 */
export const SCHEDULER_CALL_TIMEOUT_MS = 35_000;

/**
 * daprd without a Scheduler answers INTERNAL "scheduler clients are disabled" (dapr `pkg/runtime/scheduler/internal/clients/clients.go` Next, wrapped by the jobs API):
 * turn it into an error that says what to fix.
 */
function schedulerError(conn: DaprConnection, e: unknown): GatewayError {
  const err = conn.translate(e);
  if (/scheduler clients are disabled/i.test(err.rawMessage)) {
    return new GatewayError(
      Code.FAILED_PRECONDITION,
      "triggers need Dapr's Scheduler, and the dapr sidecar has none configured (daprd: scheduler clients are disabled); run daprd with --scheduler-host-address, or the Scheduler service in Kubernetes",
      { cause: e },
    );
  }
  return err;
}

/** The Job field each of the Scheduler's refusals is about (go-etcd-cron `internal/scheduler/builder.go` Parse); the rest are the schedule's (dapr/kit cron). */
const REFUSAL_FIELDS: Array<[RegExp, "due_time" | "repeats" | "ttl" | "schedule"]> = [
  [/^job must have either a due time or a schedule/, "schedule"],
  [/^(job must have a schedule to repeat|defined repeats must be greater than 0)/, "repeats"],
  [/^(job must have a schedule to have a ttl|ttl format not recognized|ttl must be greater than due time)/, "ttl"],
  [/^(due time format not recognized|repeats not supported for due time)/, "due_time"],
];

/**
 * The Scheduler's refusal of a job's spec, which daprd answers INTERNAL "failed to schedule job due to: rpc error:
 * code = Unknown desc = job failed validation: <reason>" (dapr `pkg/api/errors/scheduler.go` SchedulerScheduleJob):
 * INVALID_ARGUMENT naming the field, with the Scheduler's reason, as the jobs port promises for an invalid spec. The
 * gateway refuses with the same rules before it calls (src/runtime/schedule, src/ops/trigger.ts), so this is defence
 * in depth for a gap left (a time zone the Scheduler's tzdata lacks, a newer Scheduler's rule). Else `err` as it is.
 */
function specRefusal(err: GatewayError, job: JobSpec): GatewayError {
  if (err.code !== Code.INTERNAL) return err;
  const m = /job failed validation: ([^]*)$/.exec(err.rawMessage);
  if (!m) return err;
  const reason = m[1]!;
  const field = REFUSAL_FIELDS.find(([re]) => re.test(reason))?.[1] ?? "schedule";
  const value = { schedule: job.schedule, due_time: job.dueTime, repeats: job.repeats, ttl: job.ttl }[field];
  const given = typeof value === "string" ? ` "${echo(value)}"` : value === undefined ? "" : ` ${value}`;
  return new GatewayError(Code.INVALID_ARGUMENT, `${field}${given} is refused by Dapr's Scheduler: ${echo(reason)}`, { cause: err, field });
}

/** JobsPort over Dapr's Scheduler API (ScheduleJobAlpha1 with overwrite=false, Get/Delete/ListJobsAlpha1). */
export function createDaprJobs(conn: DaprConnection): DaprJobs {
  let handler: JobHandler | undefined;
  const call = <M extends DaprMethod>(method: M, req: DaprRequest<M>, signal?: AbortSignal): Promise<DaprResponse<M>> =>
    conn.unary(method, req, { timeoutMs: SCHEDULER_CALL_TIMEOUT_MS, ...(signal ? { signal } : {}) }).catch((e: unknown) => {
      throw schedulerError(conn, e);
    });

  const get = async (name: string, signal?: AbortSignal): Promise<JobRecord | undefined> => {
    try {
      const res = await call("GetJobAlpha1", { name }, signal);
      return res.job ? toRecord(res.job) : undefined;
    } catch (e) {
      const err = conn.translate(e);
      if (err.code !== Code.UNAVAILABLE && err.code !== Code.CANCELLED && isJobNotFound(err)) return undefined;
      throw err;
    }
  };

  return {
    setHandler(h) {
      handler = h;
    },
    async schedule(job: JobSpec, signal) {
      const body: Job = { name: job.name, data: packString(job.data) };
      if (job.schedule) body.schedule = job.schedule;
      if (job.dueTime) body.due_time = job.dueTime;
      if (job.ttl) body.ttl = job.ttl;
      if (job.repeats) body.repeats = job.repeats;
      try {
        await call("ScheduleJobAlpha1", { job: body, overwrite: false }, signal);
      } catch (e) {
        throw specRefusal(conn.translate(e), job);
      }
    },
    get,
    async delete(name, signal) {
      // daprd deletes a missing job without complaint; the port reports NOT_FOUND, so look first.
      if (!(await get(name, signal))) throw new GatewayError(Code.NOT_FOUND, `job ${name} not found`);
      await call("DeleteJobAlpha1", { name }, signal);
    },
    async list(signal) {
      const res = await call("ListJobsAlpha1", {}, signal);
      return (res.jobs ?? []).map(toRecord);
    },
    async deliver(name, data) {
      if (!handler) throw new GatewayError(Code.UNAVAILABLE, `job ${name} fired before the gateway registered its job handler`);
      await handler(name, data);
    },
  };
}
