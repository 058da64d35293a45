import type { Runtime, RuntimeHealth, RuntimeOptions } from "../runtime.js";
import { createRedisConnection, type RedisConnectionOptions } from "./connection.js";
import { createRedisJobs, type RedisJobs, type RedisJobsOptions } from "./jobs.js";
import { createRedisPubsub, type RedisPubsub, type RedisPubsubOptions } from "./pubsub.js";
import { createRedisState } from "./state.js";

export { formatPosition, parsePosition } from "./pubsub.js";
export { redisAddress } from "./connection.js";

/** Options of the redis runtime. */
export interface RedisRuntimeOptions extends RuntimeOptions, RedisConnectionOptions, RedisPubsubOptions {
  /** Lease of a claimed job firing, ms (see ./jobs.ts). Default 10000. */
  jobLeaseMs?: number;
  /** Longest wait between two looks at the due jobs, ms. Default 1000. */
  jobPollMs?: number;
  /** Keys one state query may scan. Default 10000. */
  queryMaxKeys?: number;
}

/** The redis runtime. */
export interface RedisRuntime extends Runtime {
  readonly kind: "redis";
  readonly pubsub: RedisPubsub;
  readonly jobs: RedisJobs;
  /** "host:port" of the server (never the URL: it may carry a password). */
  readonly address: string;
}

/**
 * The redis runtime: state, pub/sub with cluster-wide positions and a shared scheduler on one Redis server (see
 * docs/redis.md), so every gateway process with the same URL and key prefix is one system. start() returns at once:
 * the connections, the pub/sub reader and the scheduler reconnect in the background, and calls fail UNAVAILABLE while
 * Redis is down.
 */
export function createRedisRuntime(opts: RedisRuntimeOptions): RedisRuntime {
  const conn = createRedisConnection(opts);
  const pubsub = createRedisPubsub(conn, opts.logger, opts);
  const jobsOpts: RedisJobsOptions = {
    ...(opts.jobLeaseMs !== undefined ? { leaseMs: opts.jobLeaseMs } : {}),
    ...(opts.jobPollMs !== undefined ? { pollMs: opts.jobPollMs } : {}),
  };
  const jobs = createRedisJobs(conn, opts.logger, jobsOpts);
  let closed = false;
  return {
    kind: "redis",
    address: conn.address,
    state: createRedisState(conn, opts.queryMaxKeys),
    pubsub,
    jobs,
    async start() {
      opts.logger.info({ redis: conn.address }, "redis runtime connecting");
      pubsub.start();
      jobs.start();
    },
    async health(): Promise<RuntimeHealth> {
      try {
        const info = await conn.run(async (c) => {
          await c.ping();
          return c.info("server");
        });
        const version = /redis_version:([^\r\n]+)/.exec(info)?.[1] ?? "?";
        return { status: "Healthy", description: `redis at ${conn.address} (version ${version})` };
      } catch (e) {
        return { status: "Unhealthy", description: conn.translate(e).rawMessage };
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await jobs.close();
      pubsub.close();
      conn.close();
    },
  };
}
