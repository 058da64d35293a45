import { Redis, ReplyError, type RedisOptions } from "ioredis";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { abortable, type CancelSignal } from "../../shared/signals.js";
import { backoffDelay, type BackoffPolicy } from "../../shared/backoff.js";

/** How the redis runtime reaches its server. */
export interface RedisConnectionOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://...`. Default `redis://127.0.0.1:6379`. */
  redisUrl?: string;
  /** Prefix of every key the runtime writes. Default `gw:`. */
  keyPrefix?: string;
  /** Deadline of every command, ms. Default 2000. */
  commandTimeoutMs?: number;
}

/** ioredis connection states in which an attempt is under way. */
const CONNECTING = new Set(["wait", "connecting", "connect"]);

/** ioredis reconnect backoff: 50 ms doubling to 1 s, jittered. Short because a local Redis restarts in well under a second. */
const RECONNECT: BackoffPolicy = { initialDelayMs: 50, maxDelayMs: 1000, multiplier: 2, jitter: 0.2 };

/** Where a Redis URL points, without its credentials: what logs, errors and health name. */
export function redisAddress(redisUrl: string): string {
  const u = new URL(redisUrl);
  const host = u.hostname || "127.0.0.1";
  return `${host}:${u.port || "6379"}`;
}

/**
 * The command connection shared by every port, plus the options a second (blocking) connection needs. Both fail fast
 * while Redis is down (no offline queue, one retry per request, a deadline per command) and reconnect on their own
 * with backoff, so calls fail UNAVAILABLE during an outage and work again after it without a restart.
 */
export interface RedisConnection {
  /** "host:port" (never the password). */
  readonly address: string;
  readonly prefix: string;
  readonly commandTimeoutMs: number;
  /** The command connection. */
  readonly client: Redis;
  /** A new connection with the same settings and its own command deadline (the pub/sub reader's blocking reads). */
  duplicate(commandTimeoutMs: number): Redis;
  /** Run `fn` on the command connection; errors become GatewayErrors (UNAVAILABLE naming the server when it is down). */
  run<T>(fn: (client: Redis) => Promise<T>, signal?: CancelSignal): Promise<T>;
  translate(e: unknown): GatewayError;
  close(): void;
}

/** One wait per connection and deadline, shared by every caller (no listener per call). */
const waits = new WeakMap<Redis, Map<number, Promise<void>>>();

/**
 * Resolves once `c` is ready, or after `ms` (bounded): a connection that is (re)connecting gets the chance to finish
 * before a caller counts it as down.
 */
export function settled(c: Redis, ms: number): Promise<void> {
  if (c.status === "ready") return Promise.resolve();
  let byMs = waits.get(c);
  if (!byMs) waits.set(c, (byMs = new Map()));
  const pending = byMs.get(ms);
  if (pending) return pending;
  const p = new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      c.off("ready", done);
      byMs.delete(ms);
      resolve();
    };
    const t = setTimeout(done, ms);
    c.once("ready", done);
  });
  byMs.set(ms, p);
  return p;
}

function clientOptions(commandTimeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(500, commandTimeoutMs),
    enableReadyCheck: true,
    // Keep reconnecting for as long as the runtime lives; each try waits a bounded backoff.
    retryStrategy: (times: number) => backoffDelay(RECONNECT, Math.max(0, times - 1)),
    // Reconnect when a replica turns read-only under us (failover) instead of failing every write.
    reconnectOnError: (err: Error) => err.message.startsWith("READONLY"),
  };
}

/** Create the command connection (connected by `connect()` or lazily; never blocks the caller while Redis is down). */
export function createRedisConnection(o: RedisConnectionOptions): RedisConnection {
  const url = o.redisUrl ?? "redis://127.0.0.1:6379";
  const address = redisAddress(url);
  const commandTimeoutMs = o.commandTimeoutMs ?? 2000;
  const connections = new Set<Redis>();
  let lastError: string | undefined;
  const make = (timeoutMs: number): Redis => {
    const c = new Redis(url, clientOptions(timeoutMs));
    // Errors surface on the calls; the connection's own error events (refused, reset, a refused AUTH) are expected
    // during outages. The latest one says why the connection is down (it never holds the URL or the password).
    c.on("error", (e: Error) => {
      lastError = e.message;
    });
    c.on("ready", () => {
      lastError = undefined;
    });
    c.connect().catch(() => undefined);
    connections.add(c);
    return c;
  };
  const client = make(commandTimeoutMs);

  const translate = (e: unknown): GatewayError => {
    if (e instanceof GatewayError) return e;
    const msg = e instanceof Error ? e.message : String(e);
    if (e instanceof ReplyError && !/^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)/.test(msg)) {
      return new GatewayError(Code.INTERNAL, `redis at ${address} refused a command: ${msg}`, { cause: e });
    }
    return new GatewayError(Code.UNAVAILABLE, `redis at ${address} is unreachable: ${msg}`, { cause: e });
  };

  return {
    address,
    prefix: o.keyPrefix ?? "gw:",
    commandTimeoutMs,
    client,
    duplicate: make,
    async run(fn, signal) {
      if (signal?.aborted) throw GatewayError.from(signal.reason, Code.CANCELLED);
      // A connection attempt in progress (the first one at start, or a reconnect that is dialling) takes milliseconds
      // on a reachable server: wait for it, bounded. Between attempts (reconnecting) or closed: fail at once.
      if (CONNECTING.has(client.status)) await settled(client, commandTimeoutMs);
      if (client.status !== "ready") {
        throw new GatewayError(Code.UNAVAILABLE, `redis at ${address} is unreachable: not connected (${client.status}${lastError ? `; last error: ${lastError}` : ""})`);
      }
      try {
        return await abortable(fn(client), signal, (reason) => GatewayError.from(reason, Code.CANCELLED));
      } catch (e) {
        throw translate(e);
      }
    },
    translate,
    close() {
      for (const c of connections) c.disconnect();
      connections.clear();
    },
  };
}
