import { randomUUID } from "node:crypto";
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
 * Where a write script records that it ran (see `RedisConnection.runWrite`): `key` is the journal of the socket the
 * write is sent on, `n` the write's number, `ttlMs` how long the journal outlives its last write. The script ends with
 * `SET key "<n> <reply>" PX ttlMs` (after its first write, so a refused write records nothing).
 */
export interface WriteJournal {
  key: string;
  n: number;
  ttlMs: number;
}

/** What the journal says about a write whose reply was lost: it ran, with its recorded reply when it was the last one. */
export interface JournalEntry {
  /** The text after the number, when this write is the last one recorded on its socket; undefined when a later one was. */
  reply: string | undefined;
}

/**
 * The command connection shared by every port, plus the options a second (blocking) connection needs. Both fail fast
 * while Redis is down (no offline queue, one retry per request, a deadline per command) and reconnect on their own
 * with backoff, so calls fail UNAVAILABLE during an outage and work again after it without a restart. A command in
 * flight when its connection drops fails at once and is never sent again (ioredis would replay it on the next
 * connection: a write Redis already ran would run twice).
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
  /**
   * Run one write script that records itself in `journal` (see WriteJournal), and report what it did. The signal can
   * cancel the write only until it is sent; after that the caller gets the write's outcome (within the command deadline,
   * plus one more for the check below), never CANCELLED for a write that was applied. When the reply is lost (the connection dropped, or the
   * deadline passed), the journal says whether the write ran: it did → `recovered(entry)` gives the result; it did not
   * → UNAVAILABLE ("not applied"); the journal cannot be read → UNAVAILABLE saying the outcome is unknown.
   */
  runWrite<T>(send: (client: Redis, journal: WriteJournal) => Promise<T>, recovered: (entry: JournalEntry) => T, signal?: CancelSignal): Promise<T>;
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
    // A command whose connection dropped before its reply fails (see whileConnected); ioredis' default would send it
    // again on the next connection, so a publish or save that Redis had already run would run twice.
    autoResendUnfulfilledCommands: false,
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

/** Per connection: how to fail each command in flight on it (see whileConnected). */
const inFlight = new WeakMap<Redis, Set<(e: Error) => void>>();

/**
 * `p` (a command sent on `c`), failed at once when `c` closes before it settles. Without this, a command whose
 * connection dropped would wait out its whole deadline (ioredis keeps it, unsent, once resending is off).
 */
export function whileConnected<T>(c: Redis, p: Promise<T>): Promise<T> {
  let pending = inFlight.get(c);
  if (!pending) {
    const set = new Set<(e: Error) => void>();
    inFlight.set(c, (pending = set));
    c.on("close", () => {
      const failing = [...set];
      set.clear();
      const e = new Error("the connection closed before the reply came");
      for (const fail of failing) fail(e);
    });
  }
  const set = pending;
  return new Promise<T>((resolve, reject) => {
    set.add(reject);
    p.then(
      (v) => {
        set.delete(reject);
        resolve(v);
      },
      (e: unknown) => {
        set.delete(reject);
        reject(e);
      },
    );
  });
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
  // The write journal (runWrite): one key per socket of the command connection, so "a later write on it ran" means
  // "this one ran" (Redis runs a connection's commands in order). Long enough to outlive any check of a lost reply.
  const owner = randomUUID();
  const journalTtlMs = Math.max(60_000, 10 * commandTimeoutMs);
  const sockets = new WeakMap<object, string>();
  let socketCount = 0;
  let writeCount = 0;
  const journalKey = (): string => {
    const socket = client.stream as object;
    let key = sockets.get(socket);
    if (key === undefined) sockets.set(socket, (key = `${o.keyPrefix ?? "gw:"}journal:${owner}:${++socketCount}`));
    return key;
  };

  const translate = (e: unknown): GatewayError => {
    if (e instanceof GatewayError) return e;
    const msg = e instanceof Error ? e.message : String(e);
    if (e instanceof ReplyError && !/^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)/.test(msg)) {
      return new GatewayError(Code.INTERNAL, `redis at ${address} refused a command: ${msg}`, { cause: e });
    }
    return new GatewayError(Code.UNAVAILABLE, `redis at ${address} is unreachable: ${msg}`, { cause: e });
  };

  /** Wait (bounded) for a connection attempt under way; then the connection must be ready and the caller still there. */
  const ready = async (signal: CancelSignal | undefined): Promise<void> => {
    if (signal?.aborted) throw GatewayError.from(signal.reason, Code.CANCELLED);
    // A connection attempt in progress (the first one at start, or a reconnect that is dialling) takes milliseconds
    // on a reachable server: wait for it, bounded. Between attempts (reconnecting) or closed: fail at once.
    if (CONNECTING.has(client.status)) {
      await settled(client, commandTimeoutMs);
      // Cancelled during the wait: nothing was sent, and nothing may be.
      if (signal?.aborted) throw GatewayError.from(signal.reason, Code.CANCELLED);
    }
    if (client.status !== "ready") {
      throw new GatewayError(Code.UNAVAILABLE, `redis at ${address} is unreachable: not connected (${client.status}${lastError ? `; last error: ${lastError}` : ""})`);
    }
  };

  const run = async <T>(fn: (client: Redis) => Promise<T>, signal?: CancelSignal): Promise<T> => {
    await ready(signal);
    try {
      return await abortable(whileConnected(client, fn(client)), signal, (reason) => GatewayError.from(reason, Code.CANCELLED));
    } catch (e) {
      throw translate(e);
    }
  };

  const runWrite = async <T>(send: (client: Redis, journal: WriteJournal) => Promise<T>, recovered: (entry: JournalEntry) => T, signal?: CancelSignal): Promise<T> => {
    await ready(signal);
    const journal: WriteJournal = { key: journalKey(), n: ++writeCount, ttlMs: journalTtlMs };
    try {
      return await whileConnected(client, send(client, journal));
    } catch (e) {
      // Redis answered with an error: the write did not complete (its first write refused, e.g. OOM, or the script
      // failed). That is its outcome; nothing is sent again.
      if (e instanceof ReplyError) throw translate(e);
      return await check(journal, e, recovered);
    }
  };

  /** The reply of a write was lost (`e`): ask the journal whether it ran. */
  const check = async <T>(journal: WriteJournal, e: unknown, recovered: (entry: JournalEntry) => T): Promise<T> => {
    const cause = e instanceof Error ? e.message : String(e);
    let recorded: string | null;
    try {
      // On the same socket this read runs after the write; on a new one the old socket is gone, and with it any
      // command of it that had not run.
      if (client.status !== "end") await settled(client, commandTimeoutMs);
      if (client.status !== "ready") throw new Error(`not connected (${client.status})`);
      recorded = await whileConnected(client, client.get(journal.key));
    } catch (e2) {
      throw new GatewayError(
        Code.UNAVAILABLE,
        `redis at ${address} is unreachable: the reply of a write was lost (${cause}) and whether it was applied could not be checked (${e2 instanceof Error ? e2.message : String(e2)})`,
        { cause: e },
      );
    }
    const space = recorded === null ? -1 : recorded.indexOf(" ");
    const m = recorded === null ? 0 : Number(space < 0 ? recorded : recorded.slice(0, space));
    if (Number.isSafeInteger(m) && m >= journal.n) return recovered({ reply: m === journal.n && recorded !== null && space >= 0 ? recorded.slice(space + 1) : undefined });
    throw new GatewayError(Code.UNAVAILABLE, `redis at ${address} is unreachable: ${cause}; the write was not applied`, { cause: e });
  };

  return {
    address,
    prefix: o.keyPrefix ?? "gw:",
    commandTimeoutMs,
    client,
    duplicate: make,
    run,
    runWrite,
    translate,
    close() {
      for (const c of connections) c.disconnect();
      connections.clear();
    },
  };
}
