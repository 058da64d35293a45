import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { clampTimerMs } from "../../shared/timers.js";
import { backoffDelay, type BackoffPolicy } from "../../shared/backoff.js";
import type { JobHandler, JobRecord, JobSpec, JobsPort } from "../jobs-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { isSchedulableTime, nextFireTime, planJob, type JobPlan } from "../schedule/index.js";
import { settled, type RedisConnection } from "./connection.js";
import { copySpec, validJobPlan, type ScheduleOptions } from "../embedded/scheduler.js";

/** Options of the shared scheduler. */
export interface RedisJobsOptions {
  /** How long a claimed firing belongs to its claimer before another replica may fire it, ms. Default 10000. */
  leaseMs?: number;
  /** Longest wait between two looks at the due set (jobs scheduled on other replicas), ms. Default 1000. */
  pollMs?: number;
}

/** The shared scheduler plus what the runtime needs to run and stop it. */
export interface RedisJobs extends JobsPort {
  schedule(job: JobSpec, signal?: AbortSignal, options?: ScheduleOptions): Promise<void>;
  count(signal?: AbortSignal): Promise<number>;
  start(): void;
  /**
   * Stop the timer and claim nothing more; wait (at most min(lease, 5 s)) for the firings in flight to finish and store
   * their completion. One still running after that is left to its claim, which expires after the lease.
   */
  close(): Promise<void>;
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
/** Retries of a completion that failed (until the lease ends): 50 ms doubling to 1 s, jittered. */
const COMPLETE_BACKOFF: BackoffPolicy = { initialDelayMs: 50, maxDelayMs: 1000, multiplier: 2, jitter: 0.2 };
/** Longest wait of close() for the firings in flight, ms (and never longer than the lease). */
const CLOSE_WAIT_MS = 5000;
/** Malformed records logged by name, at most (a bound on what foreign writes can make the process remember). */
const MAX_REPORTED = 1000;

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
 * one still owed). Returns the server's time, the earliest score left ("" when none), then name, fire time, claim,
 * record for each (so the caller waits by the server's clock, the one that decides what is due).
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
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
table.insert(out, 1, head[2] or '')
table.insert(out, 1, tostring(now))
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

/** Renew: KEYS = jobs hash, due set, claims hash; ARGV = name, claim, lease ms. Moves the lease on, only for its owner. */
const RENEW = `
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[3]), ARGV[1])
return 1`;

interface JobScripts {
  gwJobRenew(jobs: string, due: string, claims: string, name: string, claim: string, leaseMs: number): Promise<number>;
  gwJobSchedule(jobs: string, due: string, claims: string, name: string, record: string, at: number, overwrite: string): Promise<number>;
  gwJobDelete(jobs: string, due: string, claims: string, name: string): Promise<number>;
  gwJobClaim(jobs: string, due: string, claims: string, leaseMs: number, owner: string, max: number): Promise<string[]>;
  gwJobComplete(jobs: string, due: string, claims: string, name: string, claim: string, record: string, next: string): Promise<number>;
}

function checkSignal(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new GatewayError(Code.CANCELLED, "the operation was cancelled");
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
  client.defineCommand("gwJobRenew", { numberOfKeys: 3, lua: RENEW });
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
  let lookAgain = false;
  let downLogged = false;
  /** Set once close() has waited for the firings in flight: completions stop retrying. */
  let stopped = false;
  /** Claim renewals of the firings in flight (stopped by close(), which leaves their claims to expire). */
  const renewals = new Set<NodeJS.Timeout>();
  /** The firings in flight (handler and completion), for close(). */
  const firings = new Set<Promise<void>>();
  /** Malformed records already logged: `<what>\0<name>`. */
  const reported = new Set<string>();

  /**
   * The record, or undefined when it is not one the scheduler wrote (not JSON, or JSON of another shape: written by
   * something else). Checked field by field, so a foreign record can never make planJob or the firing throw.
   */
  const parse = (text: string): StoredJob | undefined => {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return undefined;
    }
    const isObject = (o: unknown): o is Record<string, unknown> => typeof o === "object" && o !== null && !Array.isArray(o);
    const optString = (o: unknown): boolean => o === undefined || typeof o === "string";
    const optNumber = (o: unknown): boolean => o === undefined || (typeof o === "number" && Number.isFinite(o));
    if (!isObject(v) || !isObject(v["spec"])) return undefined;
    const spec = v["spec"];
    if (typeof spec["name"] !== "string" || typeof spec["data"] !== "string") return undefined;
    if (!optString(spec["schedule"]) || !optString(spec["dueTime"]) || !optString(spec["ttl"]) || !optNumber(spec["repeats"])) return undefined;
    if (typeof v["createdAt"] !== "number" || !Number.isFinite(v["createdAt"]) || !optNumber(v["timesFired"]) || !optNumber(v["lastFiredAt"])) return undefined;
    return v as unknown as StoredJob;
  };
  const planOf = (rec: StoredJob): JobPlan | undefined => {
    try {
      const plan = planJob(rec.spec, rec.createdAt);
      return plan instanceof GatewayError ? undefined : plan;
    } catch {
      return undefined;
    }
  };
  /** Log a record that cannot be read, once per name and message. */
  const malformed = (name: string, what: string): void => {
    const key = `${what}\0${name}`;
    if (reported.has(key)) return;
    if (reported.size >= MAX_REPORTED) reported.clear();
    reported.add(key);
    logger.error({ job: name }, what);
  };
  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      t.unref?.();
    });

  const arm = (ms: number): void => {
    if (closed || !started) return;
    // A look in progress arms the timer when it ends: tell it to look again at once rather than be overridden.
    if (looking) {
      lookAgain = true;
      return;
    }
    clearTimeout(timer);
    timer = setTimeout(() => void look(), clampTimerMs(Math.min(ms, pollMs)));
    timer.unref?.();
  };

  /**
   * Store a firing's outcome under its claim. Retried while the lease lasts: a completion that failed once (the
   * connection dropped just after the publish) would otherwise leave the claim to expire and the same fire time to be
   * fired again. Safe to repeat: the script stores only while the claim is still this one (a second run finds it gone).
   */
  const complete = async (name: string, claim: string, record: string, next: string, leaseEnd: () => number): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      try {
        await conn.run(() => client.gwJobComplete(jobsKey, dueKey, claimsKey, name, claim, record, next));
        return;
      } catch (e) {
        const wait = backoffDelay(COMPLETE_BACKOFF, attempt);
        if (stopped || Date.now() + wait >= leaseEnd()) {
          // The claim stays: after the lease another replica (or this one) fires the job again.
          logger.warn({ job: name, err: conn.translate(e).rawMessage }, "job fired but its completion could not be stored; it fires again after the lease");
          return;
        }
        await pause(wait);
      }
    }
  };

  /** Fire one claimed job (claimed at `claimedAt`, local clock), then store the outcome under the claim. */
  const fire = async (name: string, at: number, claim: string, text: string, claimedAt: number): Promise<void> => {
    let leaseEnd = claimedAt + leaseMs;
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
        // While the handler runs, the claim is renewed every third of the lease: only a claimer that died (or lost
        // Redis for a whole lease) lets another replica fire the job again.
        const renew = setInterval(() => {
          const sent = Date.now();
          conn
            .run(() => client.gwJobRenew(jobsKey, dueKey, claimsKey, name, claim, leaseMs))
            .then((ok) => {
              if (ok === 1) leaseEnd = Math.max(leaseEnd, sent + leaseMs);
            })
            .catch(() => undefined);
        }, Math.max(1, Math.floor(leaseMs / 3)));
        renewals.add(renew);
        try {
          await handler(name, rec.spec.data);
        } catch (e) {
          // Not delivered (the handler's publish failed): not completed either, so the firing is not counted and a
          // one-shot job is not removed; the claim expires after the lease and the same fire time is fired again.
          logger.warn({ job: name, err: e }, "job handler failed; the firing is tried again after the lease");
          return;
        } finally {
          clearInterval(renew);
          renewals.delete(renew);
        }
      }
    } else malformed(name, "stored job record cannot be read (not a record the scheduler wrote, or an invalid spec); job removed");
    if (stopped) return;
    await complete(name, claim, rec && plan ? JSON.stringify(rec) : "", next === undefined ? "" : String(next), () => leaseEnd);
  };

  /** Claim and fire what is due, then arm the timer for the earliest score. */
  async function look(): Promise<void> {
    if (closed || looking) return;
    looking = true;
    let again = pollMs;
    try {
      await settled(client, conn.commandTimeoutMs);
      if (closed) return;
      const claimedAt = Date.now();
      const [serverNow, head, ...claimed] = await conn.run(() => client.gwJobClaim(jobsKey, dueKey, claimsKey, leaseMs, owner, CLAIM_BATCH));
      for (let i = 0; i + 3 < claimed.length; i += 4) {
        const name = claimed[i]!;
        // Registered before the handler runs (it may close the runtime in the same tick).
        let settle!: () => void;
        const firing = new Promise<void>((resolve) => (settle = resolve));
        firings.add(firing);
        fire(name, Number(claimed[i + 1]), claimed[i + 2]!, claimed[i + 3]!, claimedAt)
          .catch((err: unknown) => logger.error({ job: name, err }, "job firing failed unexpectedly; its claim expires after the lease"))
          .finally(() => {
            firings.delete(firing);
            settle();
          });
      }
      if (claimed.length / 4 >= CLAIM_BATCH) again = 0;
      // By the server's clock, which decides what is due: a local clock ahead of it would otherwise look again at once,
      // claim nothing, and spin until the server's clock caught up.
      else if (head) again = Math.max(1, Number(head) - Number(serverNow));
      if (downLogged) logger.info({ redis: conn.address }, "redis reachable again; scheduler resumed");
      downLogged = false;
    } catch (e) {
      if (!downLogged) logger.warn({ redis: conn.address, err: conn.translate(e).rawMessage }, "redis unreachable; scheduler retrying (due jobs fire once it is back)");
      downLogged = true;
    } finally {
      looking = false;
    }
    if (lookAgain) again = 0;
    lookAgain = false;
    arm(again);
  }

  /** The port's record of a stored job, from its record text, due score and claim (undefined when unreadable). */
  const jobOf = (name: string, text: string, score: string | null | undefined, claim: string | null | undefined): JobRecord | undefined => {
    const rec = parse(text);
    if (!rec) {
      malformed(name, "stored job record cannot be read (not a record the scheduler wrote); left out of get and list");
      return undefined;
    }
    const plan = planOf(rec);
    // While a firing is claimed the score is the lease's end; the job's own next time is the claimed one.
    const claimedAt = claim ? Number(claim.slice(claim.lastIndexOf("|") + 1)) : undefined;
    const next = claimedAt ?? (score === null || score === undefined ? undefined : Number(score));
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
      const plan = validJobPlan(job, now);
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
        const res = (await c.multi().hget(jobsKey, name).zscore(dueKey, name).hget(claimsKey, name).exec()) ?? [];
        for (const [err] of res) if (err) throw err;
        const [text, score, claim] = res.map(([, v]) => v as string | null);
        return text ? jobOf(name, text, score, claim) : undefined;
      }, signal),
    async delete(name, signal) {
      const n = await conn.run(() => client.gwJobDelete(jobsKey, dueKey, claimsKey, name), signal);
      if (n === 0) throw new GatewayError(Code.NOT_FOUND, `no job named ${echo(name)}`);
    },
    list: (signal) =>
      conn.run(async (c) => {
        // One snapshot of the three keys (the number of jobs is bounded by the trigger limit).
        const res = (await c.multi().hgetall(jobsKey).zrange(dueKey, 0, -1, "WITHSCORES").hgetall(claimsKey).exec()) ?? [];
        for (const [err] of res) if (err) throw err;
        const all = res[0]![1] as Record<string, string>;
        const dueFlat = res[1]![1] as string[];
        const claims = res[2]![1] as Record<string, string>;
        const scores = new Map<string, string>();
        for (let i = 0; i + 1 < dueFlat.length; i += 2) scores.set(dueFlat[i]!, dueFlat[i + 1]!);
        const out: JobRecord[] = [];
        for (const [name, text] of Object.entries(all)) {
          const r = jobOf(name, text, scores.get(name), claims[name]);
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
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      timer = undefined;
      if (firings.size > 0) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...firings]), new Promise<void>((resolve) => (t = setTimeout(resolve, Math.min(leaseMs, CLOSE_WAIT_MS))))]);
        clearTimeout(t);
      }
      stopped = true;
      for (const r of renewals) clearInterval(r);
      renewals.clear();
    },
  };
}
