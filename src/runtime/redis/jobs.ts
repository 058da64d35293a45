import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { clampTimerMs } from "../../shared/timers.js";
import type { JobHandler, JobRecord, JobSpec, JobsPort } from "../jobs-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { isSchedulableTime, nextFireTime, planJob, type JobPlan } from "../schedule/index.js";
import { settled, type RedisConnection } from "./connection.js";

/** Options of the shared scheduler. */
export interface RedisJobsOptions {
  /** How long a claimed firing belongs to its claimer before another replica may fire it, ms. Default 10000. */
  leaseMs?: number;
  /** Longest wait between two looks at the due set (jobs scheduled on other replicas), ms. Default 1000. */
  pollMs?: number;
}

/** Options of one schedule call beyond the port's. */
export interface RedisScheduleOptions {
  /** Replace a job of the same name instead of failing with ALREADY_EXISTS. Default false. */
  overwrite?: boolean;
}

/** The shared scheduler plus what the runtime needs to run and stop it. */
export interface RedisJobs extends JobsPort {
  schedule(job: JobSpec, signal?: AbortSignal, options?: RedisScheduleOptions): Promise<void>;
  count(signal?: AbortSignal): Promise<number>;
  start(): void;
  /** Stop the timer; a firing in flight is not completed (its claim expires after the lease). */
  close(): void;
}

/** The stored record of a job: its spec and what the cluster knows about its firings. */
interface StoredJob {
  spec: JobSpec;
  createdAt: number;
  timesFired: number;
  lastFiredAt?: number;
}

/** Jobs claimed per look at the due set. */
const CLAIM_BATCH = 100;

/** Schedule: KEYS = jobs hash, due set, claims hash; ARGV = name, record, first fire time, overwrite (1/0). */
const SCHEDULE = `
if ARGV[4] ~= '1' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1`;

/** Delete: KEYS = jobs hash, due set, claims hash; ARGV = name. */
const DELETE = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1`;

/**
 * Claim: KEYS = jobs hash, due set, claims hash; ARGV = lease ms, owner, max. Every job due by the server's clock moves
 * to now + lease and gets a claim `owner|fire time` (a stale claim's fire time is kept: the firing it stood for is the
 * one still owed). Returns name, fire time, claim, record for each.
 */
const CLAIM = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i = 1, #due, 2 do
  local name = due[i]
  local rec = redis.call('HGET', KEYS[1], name)
  if not rec then
    redis.call('ZREM', KEYS[2], name)
  else
    local at = due[i + 1]
    local prev = redis.call('HGET', KEYS[3], name)
    if prev then at = string.match(prev, '|(.*)$') end
    local claim = ARGV[2] .. '|' .. at
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), name)
    redis.call('HSET', KEYS[3], name, claim)
    table.insert(out, name)
    table.insert(out, at)
    table.insert(out, claim)
    table.insert(out, rec)
  end
end
return out`;

/**
 * Complete: KEYS = jobs hash, due set, claims hash; ARGV = name, claim, record, next fire time ("" = finished). Stores
 * what the claimer computed, only while the claim is still its own (not expired and taken over, not rescheduled).
 */
const COMPLETE = `
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
return 1`;

interface JobScripts {
  gwJobSchedule(jobs: string, due: string, claims: string, name: string, record: string, at: number, overwrite: string): Promise<number>;
  gwJobDelete(jobs: string, due: string, claims: string, name: string): Promise<number>;
  gwJobClaim(jobs: string, due: string, claims: string, leaseMs: number, owner: string, max: number): Promise<string[]>;
  gwJobComplete(jobs: string, due: string, claims: string, name: string, claim: string, record: string, next: string): Promise<number>;
}

function checkSignal(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new GatewayError(Code.CANCELLED, "the operation was cancelled");
}

function copySpec(job: JobSpec): JobSpec {
  return {
    name: job.name,
    ...(job.schedule ? { schedule: job.schedule } : {}),
    ...(job.dueTime ? { dueTime: job.dueTime } : {}),
    ...(job.repeats ? { repeats: job.repeats } : {}),
    ...(job.ttl ? { ttl: job.ttl } : {}),
    data: job.data,
  };
}

/**
 * The scheduler shared by every replica on one Redis, with the embedded scheduler's validation and semantics
 * (`planJob`, `nextFireTime`). Jobs live in `<prefix>jobs` (name -> record JSON) and `<prefix>jobs:due` (score = next
 * fire time). Each replica arms one timer for the earliest score (looked at again at least every `pollMs`), claims
 * due jobs with a script that moves them a lease ahead, fires them, and then stores the result only if the claim is
 * still its own. A claimer that dies leaves the claim: after the lease the job is due again and another replica fires
 * it. The plan is recomputed from the spec and the creation time (planJob is deterministic for a given `now`).
 */
export function createRedisJobs(conn: RedisConnection, logger: RuntimeLogger, opts: RedisJobsOptions = {}): RedisJobs {
  const client = conn.client as Redis & JobScripts;
  client.defineCommand("gwJobSchedule", { numberOfKeys: 3, lua: SCHEDULE });
  client.defineCommand("gwJobDelete", { numberOfKeys: 3, lua: DELETE });
  client.defineCommand("gwJobClaim", { numberOfKeys: 3, lua: CLAIM });
  client.defineCommand("gwJobComplete", { numberOfKeys: 3, lua: COMPLETE });
  const leaseMs = opts.leaseMs ?? 10_000;
  const pollMs = opts.pollMs ?? 1000;
  const owner = randomUUID();
  const jobsKey = `${conn.prefix}jobs`;
  const dueKey = `${conn.prefix}jobs:due`;
  const claimsKey = `${conn.prefix}jobs:claims`;
  let handler: JobHandler | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let started = false;
  let looking = false;
  let downLogged = false;

  const parse = (text: string): StoredJob | undefined => {
    try {
      return JSON.parse(text) as StoredJob;
    } catch {
      return undefined;
    }
  };
  const planOf = (rec: StoredJob): JobPlan | undefined => {
    const plan = planJob(rec.spec, rec.createdAt);
    return plan instanceof GatewayError ? undefined : plan;
  };

  const arm = (ms: number): void => {
    if (closed || !started) return;
    clearTimeout(timer);
    timer = setTimeout(() => void look(), clampTimerMs(Math.min(ms, pollMs)));
    timer.unref?.();
  };

  /** Fire one claimed job, then store the outcome under the claim. */
  const fire = async (name: string, at: number, claim: string, text: string): Promise<void> => {
    const rec = parse(text);
    const plan = rec && planOf(rec);
    let next: number | undefined;
    if (rec && plan) {
      rec.timesFired = (rec.timesFired ?? 0) + 1;
      rec.lastFiredAt = at;
      try {
        next = nextFireTime(plan, at, Date.now(), rec.timesFired);
      } catch (err) {
        logger.error({ job: name, err }, "job's next fire time could not be computed; job removed");
      }
      if (next !== undefined && (!isSchedulableTime(next) || next <= at)) {
        logger.error({ job: name, at: String(next) }, "job's next fire time is invalid; job removed");
        next = undefined;
      }
      if (!handler) logger.warn({ job: name }, "job fired with no handler registered; firing dropped");
      else {
        try {
          await handler(name, rec.spec.data);
        } catch (e) {
          logger.warn({ job: name, err: e }, "job handler failed; the schedule continues");
        }
      }
    } else logger.error({ job: name }, "stored job record cannot be read; job removed");
    if (closed) return;
    try {
      await conn.run(() => client.gwJobComplete(jobsKey, dueKey, claimsKey, name, claim, rec ? JSON.stringify(rec) : "", next === undefined ? "" : String(next)));
    } catch (e) {
      // The claim stays: after the lease another replica (or this one) fires the job again.
      logger.warn({ job: name, err: conn.translate(e).rawMessage }, "job fired but its completion could not be stored; it fires again after the lease");
    }
  };

  /** Claim and fire what is due, then arm the timer for the earliest score. */
  async function look(): Promise<void> {
    if (closed || looking) return;
    looking = true;
    let again = pollMs;
    try {
      await settled(client, conn.commandTimeoutMs);
      if (closed) return;
      const claimed = await conn.run(() => client.gwJobClaim(jobsKey, dueKey, claimsKey, leaseMs, owner, CLAIM_BATCH));
      for (let i = 0; i + 3 < claimed.length; i += 4) void fire(claimed[i]!, Number(claimed[i + 1]), claimed[i + 2]!, claimed[i + 3]!);
      if (claimed.length / 4 >= CLAIM_BATCH) again = 0;
      else {
        const head = await conn.run((c) => c.zrange(dueKey, 0, 0, "WITHSCORES"));
        if (head.length === 2) again = Math.max(0, Number(head[1]) - Date.now());
      }
      if (downLogged) logger.info({ redis: conn.address }, "redis reachable again; scheduler resumed");
      downLogged = false;
    } catch (e) {
      if (!downLogged) logger.warn({ redis: conn.address, err: conn.translate(e).rawMessage }, "redis unreachable; scheduler retrying (due jobs fire once it is back)");
      downLogged = true;
    } finally {
      looking = false;
    }
    arm(again);
  }

  const jobOf = async (c: Redis, name: string, text: string): Promise<JobRecord | undefined> => {
    const rec = parse(text);
    if (!rec) return undefined;
    const plan = planOf(rec);
    const [score, claim] = await Promise.all([c.zscore(dueKey, name), c.hget(claimsKey, name)]);
    // While a firing is claimed the score is the lease's end; the job's own next time is the claimed one.
    const claimedAt = claim ? Number(claim.slice(claim.lastIndexOf("|") + 1)) : undefined;
    const next = claimedAt ?? (score === null ? undefined : Number(score));
    const time = (key: string, t: number | undefined): Record<string, number> => (t !== undefined && isSchedulableTime(t) ? { [key]: t } : {});
    return {
      ...copySpec(rec.spec),
      createdAt: rec.createdAt,
      timesFired: rec.timesFired ?? 0,
      ...time("nextFireAt", next),
      ...time("lastFiredAt", rec.lastFiredAt),
      ...time("expiresAt", plan?.expiresAt),
    };
  };

  return {
    setHandler(h) {
      handler = h;
    },
    async schedule(job, signal, options = {}) {
      checkSignal(signal);
      if (closed) throw new GatewayError(Code.UNAVAILABLE, "the redis scheduler is closed");
      const now = Date.now();
      const plan = planJob(job, now);
      if (plan instanceof GatewayError) throw plan;
      if (!isSchedulableTime(plan.firstFireAt)) throw new GatewayError(Code.INVALID_ARGUMENT, "the job's first fire time cannot be held by the scheduler");
      if (typeof job.data !== "string") throw new GatewayError(Code.INVALID_ARGUMENT, "data must be a string");
      const rec: StoredJob = { spec: copySpec(job), createdAt: now, timesFired: 0 };
      const ok = await conn.run(
        () => client.gwJobSchedule(jobsKey, dueKey, claimsKey, job.name, JSON.stringify(rec), plan.firstFireAt, options.overwrite ? "1" : "0"),
        signal,
      );
      if (ok === 0) throw new GatewayError(Code.ALREADY_EXISTS, `a job named ${echo(job.name)} already exists; delete it first`);
      arm(plan.firstFireAt - Date.now());
    },
    get: (name, signal) =>
      conn.run(async (c) => {
        const text = await c.hget(jobsKey, name);
        return text === null ? undefined : jobOf(c, name, text);
      }, signal),
    async delete(name, signal) {
      const n = await conn.run(() => client.gwJobDelete(jobsKey, dueKey, claimsKey, name), signal);
      if (n === 0) throw new GatewayError(Code.NOT_FOUND, `no job named ${echo(name)}`);
    },
    list: (signal) =>
      conn.run(async (c) => {
        const all = await c.hgetall(jobsKey);
        const out: JobRecord[] = [];
        for (const [name, text] of Object.entries(all)) {
          const r = await jobOf(c, name, text);
          if (r) out.push(r);
        }
        return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      }, signal),
    count: (signal) => conn.run((c) => c.hlen(jobsKey), signal),
    start() {
      if (started || closed) return;
      started = true;
      arm(0);
    },
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
