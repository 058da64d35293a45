import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import { createMemoryScheduler, type MemoryScheduler } from "../../../src/runtime/embedded/scheduler.js";
import type { DaprJob } from "../../../src/runtime/dapr/jobs.js";
import { jobNameError, schedulerRefusal } from "./scheduler-rules.js";

/** A job's failure policy as the Scheduler applies it (common.v1 JobFailurePolicy). */
export type FailurePolicy = { kind: "drop" } | { kind: "constant"; intervalMs: number; maxRetries: number | undefined };

/** What one delivery attempt of a firing came to, as daprd reports it to the Scheduler. */
export type DeliveryResult = "ok" | "notfound" | "failed";

/** A daprd connected to the Scheduler for the app's jobs (its WatchJobs stream for the app target). */
export interface JobTarget {
  /** Hand one firing to the app through this daprd's app channel. */
  deliver(name: string, data: string, attempt: number): Promise<DeliveryResult>;
  /** Whether the app target is connected: daprd serving and the app healthy (else the firing is staged). */
  deliverable(): boolean;
}

/**
 * An error the Scheduler service returns, as a gRPC status (`code` is Go's codes.Code name): daprd's jobs API wraps it
 * ("failed to schedule job due to: rpc error: code = <code> desc = <desc>").
 */
export class SchedulerStatus extends Error {
  constructor(
    readonly code: "Unknown" | "AlreadyExists" | "NotFound",
    readonly desc: string,
  ) {
    super(`rpc error: code = ${code} desc = ${desc}`);
  }
}

/** Options of the test Scheduler. */
export interface TestSchedulerOptions {
  /** The app id the jobs belong to (their Scheduler key `app||default||<app id>||<name>`). Default "platform-gateway". */
  appId?: string;
  /**
   * Interval of the default failure policy, ms. Default 1000, as go-etcd-cron `internal/scheduler/builder.go` Parse
   * sets for a job without one (constant, 1 s, 3 retries); tests may shorten it.
   */
  retryIntervalMs?: number;
  /** Firings of one job waiting behind a firing that is being retried or staged (bound). Default 1000. */
  maxQueuedFirings?: number;
}

/**
 * Dapr's Scheduler service for the app's jobs: the jobs themselves (the embedded scheduler does the timing), the
 * Scheduler's own validation (scheduler-rules.ts) and how it triggers (go-etcd-cron `internal/counter/counter.go`,
 * `internal/engine/queue/loops/counters/counters.go`, dapr `pkg/scheduler/server/internal/pool`):
 * - one firing of a job at a time: the next one waits until the current one is done;
 * - a firing goes to ONE connected daprd whose app target is up (round robin). With none (daprd down, or the app not
 *   healthy: dapr `pkg/runtime/runtime.go` appHealthChanged -> jobsManager.StopApp) the firing is UNDELIVERABLE and is
 *   staged until one connects, without counting as an attempt;
 * - daprd answers SUCCESS for an OK and for a NotFound from the app (dapr
 *   `pkg/runtime/scheduler/internal/cluster/streamer.go` invokeApp), FAILED for anything else; a FAILED firing is
 *   tried again per the job's failure policy: `drop` never, `constant` after `interval` (counted from the previous
 *   attempt's due time) while attempts <= max_retries (unset = forever); default constant 1 s, 3 retries, i.e. four
 *   deliveries at most. Then the firing counts as done and the schedule goes on;
 * - a job whose last firing is still being retried still exists (Get, List, ALREADY_EXISTS); deleting or
 *   overwriting a job ends the retries of its firings.
 */
export interface TestScheduler {
  /** The timing (tests: `timerArmed`, `size`). */
  readonly memory: MemoryScheduler;
  schedule(job: DaprJob, overwrite: boolean): Promise<void>;
  /** The job as the Scheduler stores it (with its failure policy), or undefined. */
  get(name: string): Promise<DaprJob | undefined>;
  delete(name: string): Promise<void>;
  list(): Promise<DaprJob[]>;
  /** A daprd connects for the app's jobs; returns its disconnect. */
  connect(target: JobTarget): () => void;
  /** Firings staged (undeliverable) or waiting for a retry right now. */
  readonly pending: number;
  close(): void;
}

interface Stored {
  job: DaprJob;
  policy: FailurePolicy;
  generation: number;
}

interface Firing {
  data: string;
  /** Due time of its next attempt (go-etcd-cron's counter `next`). */
  at: number;
}

interface Chain {
  generation: number;
  firings: Firing[];
  /** Attempts of the head firing so far. */
  attempts: number;
  busy: boolean;
  staged: boolean;
  timer?: NodeJS.Timeout;
}

const STAGED_POLL_MS = 20;

/** A job's data in the embedded scheduler (which stores text). */
export function encodeData(any: { type_url?: string; value?: Uint8Array | Buffer | null } | null | undefined): string {
  return JSON.stringify({ type_url: any?.type_url ?? "", value: Buffer.from(any?.value ?? []).toString("base64") });
}

export function decodeData(data: string): { type_url: string; value: Buffer } | undefined {
  try {
    const o = JSON.parse(data) as { type_url: string; value: string };
    return o.type_url || o.value ? { type_url: o.type_url, value: Buffer.from(o.value, "base64") } : undefined;
  } catch {
    return undefined;
  }
}

function durationMs(d: { seconds?: string | number | null; nanos?: number | null } | null | undefined): number {
  return Number(d?.seconds ?? 0) * 1000 + Math.floor((d?.nanos ?? 0) / 1e6);
}

export function createTestScheduler(o: TestSchedulerOptions = {}): TestScheduler {
  const memory = createMemoryScheduler();
  const intervalMs = o.retryIntervalMs ?? 1000;
  const appId = o.appId ?? "platform-gateway";
  const maxQueued = o.maxQueuedFirings ?? 1000;
  const stored = new Map<string, Stored>();
  const chains = new Map<string, Chain>();
  const targets: JobTarget[] = [];
  let next = 0;
  let generation = 0;
  let poll: NodeJS.Timeout | undefined;
  let closed = false;

  const policyOf = (job: DaprJob): FailurePolicy => {
    const fp = job.failure_policy;
    if (fp?.policy === "drop") return { kind: "drop" };
    if (fp?.policy === "constant" && fp.constant) {
      return { kind: "constant", intervalMs: durationMs(fp.constant.interval), maxRetries: fp.constant.max_retries ?? undefined };
    }
    return { kind: "constant", intervalMs, maxRetries: 3 };
  };

  /** The stored job with its failure policy filled in, as GetJob returns it. */
  const withPolicy = (s: Stored): DaprJob => {
    const p = s.policy;
    const failure_policy =
      p.kind === "drop"
        ? { policy: "drop" as const, drop: {} }
        : {
            policy: "constant" as const,
            constant: {
              interval: { seconds: String(Math.floor(p.intervalMs / 1000)), nanos: (p.intervalMs % 1000) * 1e6 },
              ...(p.maxRetries !== undefined ? { max_retries: p.maxRetries } : {}),
            },
          };
    return { ...s.job, failure_policy } as DaprJob;
  };

  /** A job exists while the embedded scheduler holds it or one of its firings is not done yet. */
  const exists = async (name: string): Promise<boolean> => {
    if (!stored.has(name)) return false;
    if ((await memory.get(name)) || chains.has(name)) return true;
    stored.delete(name);
    return false;
  };

  const pick = (): JobTarget | undefined => {
    const live = targets.filter((t) => t.deliverable());
    return live.length === 0 ? undefined : live[next++ % live.length];
  };

  const ensurePoll = (): void => {
    if (poll || closed) return;
    poll = setInterval(() => {
      const staged = [...chains.entries()].filter(([, c]) => c.staged);
      if (staged.length === 0) {
        clearInterval(poll);
        poll = undefined;
        return;
      }
      for (const [name] of staged) run(name);
    }, STAGED_POLL_MS);
    poll.unref();
  };

  const endChain = (name: string): void => {
    const c = chains.get(name);
    if (!c) return;
    clearTimeout(c.timer);
    chains.delete(name);
  };

  /** Deliver the head firing of a job, then the next one (go-etcd-cron keeps one counter per job). */
  const run = (name: string): void => {
    const c = chains.get(name);
    if (!c || c.busy || c.timer || closed) return;
    const head = c.firings[0];
    if (!head) {
      chains.delete(name);
      return;
    }
    const target = pick();
    if (!target) {
      c.staged = true;
      ensurePoll();
      return;
    }
    c.staged = false;
    c.busy = true;
    c.attempts++;
    void target
      .deliver(name, head.data, c.attempts)
      .catch((): DeliveryResult => "failed")
      .then((result) => {
        c.busy = false;
        if (chains.get(name) !== c || closed) return; // deleted or overwritten meanwhile: the result is ignored
        // A current chain means a current job (schedule and delete end the chain of the job they replace).
        const policy = stored.get(name)?.policy ?? policyOf({} as DaprJob);
        if (result === "failed" && policy.kind === "constant" && (policy.maxRetries === undefined || policy.maxRetries >= c.attempts)) {
          head.at += policy.intervalMs;
          c.timer = setTimeout(() => {
            c.timer = undefined;
            run(name);
          }, Math.max(0, head.at - Date.now()));
          c.timer.unref();
          return;
        }
        c.firings.shift();
        c.attempts = 0;
        run(name);
      });
  };

  // The embedded scheduler fires; the Scheduler's triggering takes it from there.
  memory.setHandler(async (name, data) => {
    const s = stored.get(name);
    if (!s || closed) return;
    let c = chains.get(name);
    if (c && c.generation !== s.generation) {
      endChain(name);
      c = undefined;
    }
    if (!c) chains.set(name, (c = { generation: s.generation, firings: [], attempts: 0, busy: false, staged: false }));
    if (c.firings.length >= maxQueued) return;
    c.firings.push({ data, at: Date.now() });
    run(name);
  });

  const nameError = (name: string): void => {
    const bad = jobNameError(name, appId);
    if (bad) throw new SchedulerStatus("Unknown", bad);
  };

  return {
    memory,
    async schedule(job, overwrite) {
      nameError(job.name);
      const refusal = schedulerRefusal({
        ...(job.schedule !== undefined ? { schedule: job.schedule } : {}),
        ...(job.due_time !== undefined ? { due_time: job.due_time } : {}),
        ...(job.ttl !== undefined ? { ttl: job.ttl } : {}),
        ...(job.repeats !== undefined ? { repeats: Number(job.repeats) } : {}),
      });
      if (refusal) throw new SchedulerStatus("Unknown", refusal);
      if (!overwrite && (await exists(job.name))) throw new SchedulerStatus("AlreadyExists", `job already exists: 'app||default||${appId}||${job.name}'`);
      try {
        await memory.schedule(
          {
            name: job.name,
            ...(job.schedule ? { schedule: job.schedule } : {}),
            ...(job.due_time ? { dueTime: job.due_time } : {}),
            ...(job.ttl ? { ttl: job.ttl } : {}),
            ...(job.repeats ? { repeats: Number(job.repeats) } : {}),
            data: encodeData(job.data),
          },
          undefined,
          { overwrite: true },
        );
      } catch (e) {
        // daprd's Scheduler took the job; the embedded scheduler this fake times jobs with cannot hold it. Not a daprd
        // answer: say so rather than invent one.
        throw new GatewayError(Code.UNIMPLEMENTED, `test sidecar: daprd's Scheduler accepts job ${job.name}, but the embedded scheduler the test sidecar runs jobs on cannot: ${GatewayError.from(e).rawMessage}`);
      }
      endChain(job.name);
      const { failure_policy: _fp, ...rest } = job;
      stored.set(job.name, { job: rest as DaprJob, policy: policyOf(job), generation: ++generation });
    },
    async get(name) {
      nameError(name);
      const s = stored.get(name);
      return s && (await exists(name)) ? withPolicy(s) : undefined;
    },
    async delete(name) {
      nameError(name);
      stored.delete(name);
      endChain(name);
      try {
        await memory.delete(name);
      } catch (e) {
        if (GatewayError.from(e).code !== Code.NOT_FOUND) throw e;
      }
    },
    async list() {
      const out: DaprJob[] = [];
      for (const name of [...stored.keys()].sort()) if (await exists(name)) out.push(withPolicy(stored.get(name)!));
      return out;
    },
    connect(target) {
      targets.push(target);
      return () => {
        const i = targets.indexOf(target);
        if (i >= 0) targets.splice(i, 1);
      };
    },
    get pending() {
      return [...chains.values()].filter((c) => c.staged || c.timer !== undefined).length;
    },
    close() {
      closed = true;
      clearInterval(poll);
      poll = undefined;
      for (const name of [...chains.keys()]) endChain(name);
      stored.clear();
      targets.length = 0;
      memory.close();
    },
  };
}
