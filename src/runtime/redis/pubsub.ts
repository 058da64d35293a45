import type { Redis } from "ioredis";
import type { CloudEvent } from "../../shared/cloudevent.js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { backoffDelay, type BackoffPolicy } from "../../shared/backoff.js";
import type { HeldEvent, PubsubPort, StreamPositions, UpstreamHandlers, UpstreamSubscription } from "../pubsub-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { settled, whileConnected, type RedisConnection } from "./connection.js";
import { decodeEvent, encodeEvent } from "./event-codec.js";
import { seqOfStreamId, STREAM_ID_SPAN, streamIdOf } from "../../shared/stream-id.js";

/** Options of the redis pub/sub. */
export interface RedisPubsubOptions {
  /** `MAXLEN ~` of every topic's stream. Default 10000. */
  streamMaxLen?: number;
  /** Entries read per stream per round. Default 500. */
  readBatch?: number;
  /** How long the reader retries a lost Redis before it ends every subscription (onError), ms. Default 30000. */
  outageMs?: number;
  /** The reader's retry backoff. Default 50 ms doubling to 2 s, jittered. */
  backoff?: BackoffPolicy;
}

/** The pub/sub port with positions, plus what the runtime needs to run and stop it. */
export interface RedisPubsub extends PubsubPort {
  readonly positions: StreamPositions;
  /** Start the reader (returns at once; it connects in the background). */
  start(): void;
  /** Stop the reader and drop every subscription. */
  close(): void;
}

/** Sequence numbers per millisecond: an entry id `ms-n` has n < SEQ_PER_MS, its position number is ms * SEQ_PER_MS + n. */
const SEQ_PER_MS = STREAM_ID_SPAN;
/** How long the wake-up read blocks when nothing arrives, ms. Also how often current() advances on idle topics. */
const BLOCK_MS = 1000;
const READER_BACKOFF: BackoffPolicy = { initialDelayMs: 50, maxDelayMs: 2000, multiplier: 2, jitter: 0.2 };

/**
 * Publish: KEYS = the topic's stream, the global cursor, the per-topic ordinals, the write journal, the history floor;
 * ARGV = MAXLEN, entry text, the write's journal number, the journal's ttl (see WriteJournal in ./connection.ts). The
 * entry gets `e` (the event) and `c` (its ordinal in the topic: 1, 2, ..., so a reader can tell events were trimmed
 * before it read them). The id is the server's time in ms unless the last id given out (on any topic) is at or past
 * it; then the next sequence number of that millisecond, moving to the next millisecond past SEQ_PER_MS - 1. So ids
 * rise strictly across every stream even when the clock steps back. Without a cursor (a fresh server, or the key was removed) the stream's own last id is the floor, and the
 * first publish records its id as the history floor (`<prefix>history-floor`): events before it may have been lost
 * with the data set (a Redis restart without persistence), so history from before it is never complete.
 */
const PUBLISH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local last = redis.call('GET', KEYS[2])
local fresh = not last
if not last then
  local tail = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if tail[1] then last = tail[1][1] end
end
local ms, n = now, 0
if last then
  local lms, ln = string.match(last, '^(%d+)-(%d+)$')
  lms = tonumber(lms)
  ln = tonumber(ln)
  if now <= lms then
    ms = lms
    n = ln + 1
    if n >= ${SEQ_PER_MS} then
      ms = lms + 1
      n = 0
    end
  end
end
local id = string.format('%.0f-%d', ms, n)
local c = redis.call('HINCRBY', KEYS[3], KEYS[1], 1)
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], id, 'e', ARGV[2], 'c', c)
redis.call('SET', KEYS[2], id)
redis.call('SET', KEYS[4], ARGV[3] .. ' ' .. id, 'PX', ARGV[4])
if fresh then redis.call('SET', KEYS[5], id, 'NX') end
return id`;

interface PubsubScripts {
  gwPublish(stream: string, seq: string, ordinals: string, journal: string, floor: string, maxLen: number, entry: string, n: number, journalTtlMs: number): Promise<string>;
}

/** Stream entries as XREAD/XRANGE answer them. */
type Entry = [id: string, fields: string[]];
type XreadReply = [key: string, entries: Entry[]][] | null;

/** Position numbers and entry ids map one to one (src/shared/stream-id.ts: the web hub reads them the same way). */
export const formatPosition = streamIdOf;
export const parsePosition = seqOfStreamId;

interface Sub {
  topic: string;
  handlers: UpstreamHandlers;
  /** Settles subscribe() once a snapshot that read the topic was handed out. */
  pending?: { resolve(): void; reject(e: Error): void };
}

/**
 * PubsubPort on Redis Streams with cluster-wide positions. One stream per topic (`<prefix>stream:<topic>`), entries
 * `e` = the event (./event-codec.ts), ids from one publish script so they rise across all topics (`<prefix>seq` holds
 * the last). One reader per process for every subscribed topic: a blocking XREAD on its own connection only wakes it,
 * then one MULTI on the command connection reads every topic after the current position P and the cursor at once,
 * and the entries up to a cut (the cursor, or the lowest last id of a stream that filled its batch and may hold more)
 * go to onEvent in id order; then P = cut. So P rises with the cursor when topics are idle, and every event <= P on
 * every subscribed topic has been handed out and every later one will be.
 */
export function createRedisPubsub(conn: RedisConnection, logger: RuntimeLogger, opts: RedisPubsubOptions = {}): RedisPubsub {
  const client = conn.client as Redis & PubsubScripts;
  client.defineCommand("gwPublish", { numberOfKeys: 5, lua: PUBLISH });
  const maxLen = opts.streamMaxLen ?? 10_000;
  const batch = opts.readBatch ?? 500;
  const outageMs = opts.outageMs ?? 30_000;
  const backoff = opts.backoff ?? READER_BACKOFF;
  const seqKey = `${conn.prefix}seq`;
  const ordinalsKey = `${conn.prefix}topic-ordinals`;
  const floorKey = `${conn.prefix}history-floor`;
  const streamKey = (topic: string): string => `${conn.prefix}stream:${topic}`;
  // The blocking read may wait BLOCK_MS before the command deadline starts to matter.
  const blocking = conn.duplicate(BLOCK_MS + conn.commandTimeoutMs);

  const subs = new Map<string, Set<Sub>>();
  /**
   * Per subscribed topic: the ordinal of its last entry at or before P (see dispatch): read when the topic joins (the
   * snapshot that first reads it), then the last one handed out.
   */
  const ordinals = new Map<string, number>();
  let position = 0;
  let initialized = false;
  let closed = false;
  let started = false;
  let blockingId: number | undefined;
  let blockedNow = false;
  /** A stream filled the last snapshot's batch: it holds more entries after the cut. */
  let behind = false;
  /** A subscribe asked for a snapshot: the next round skips the blocking read. */
  let wakeRequested = false;
  let downSince: number | undefined;
  let idleWake: (() => void) | undefined;
  let sleepTimer: NodeJS.Timeout | undefined;

  blocking.on("close", () => {
    blockingId = undefined;
  });

  const unavailable = (detail: string): GatewayError => new GatewayError(Code.UNAVAILABLE, `redis at ${conn.address} is unreachable: ${detail}`);

  /** Wake the reader: end its blocking read (from the command connection) or its idle wait. */
  const wake = (): void => {
    wakeRequested = true;
    idleWake?.();
    if (blockedNow && blockingId !== undefined && client.status === "ready") client.client("UNBLOCK", blockingId).catch(() => undefined);
  };

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      idleWake = () => {
        clearTimeout(sleepTimer);
        idleWake = undefined;
        resolve();
      };
      sleepTimer = setTimeout(() => idleWake?.(), ms);
    });

  /**
   * The topic's stream was trimmed past this process's position before it read the events (it fell more than
   * streamMaxLen events behind on the topic, e.g. a long outage while other replicas published): end its subscriptions
   * (onError), so the broker ends its subscribers and they resume from their positions, where history says
   * `complete: false`, rather than never learning of the gap.
   */
  const endTrimmed = (topic: string): void => {
    const ended = [...(subs.get(topic) ?? [])];
    subs.delete(topic);
    ordinals.delete(topic);
    logger.warn({ topic, position: formatPosition(position), maxLen }, "topic's stream was trimmed past this process's read position; ending its subscriptions so they resume");
    const trimmed = new GatewayError(Code.UNAVAILABLE, `events of topic ${topic} were trimmed from its Redis stream (MAXLEN ~ ${maxLen}) before this gateway read them; resubscribe to resume`);
    for (const s of ended) {
      try {
        if (s.pending) s.pending.reject(trimmed);
        else s.handlers.onError?.(trimmed);
      } catch {
        // The subscriber is gone either way.
      }
    }
  };

  const dispatch = (replies: XreadReply, cut: number): void => {
    const merged: { seq: number; topic: string; text: string }[] = [];
    for (const [key, entries] of replies ?? []) {
      const topic = key.slice(conn.prefix.length + "stream:".length);
      // Unsubscribed while the snapshot was read: nothing to hand out, and no ordinal to keep (a stale one would make
      // a later subscription of the topic see a trim that never happened).
      if (!subs.has(topic)) continue;
      const held: { seq: number; topic: string; text: string }[] = [];
      let first: number | undefined;
      let last: number | undefined;
      for (const [id, fields] of entries) {
        const seq = parsePosition(id);
        if (seq === undefined || seq <= position || seq > cut) continue;
        const e = fields.indexOf("e");
        const c = fields.indexOf("c");
        if (e < 0 || e + 1 >= fields.length) continue;
        const ordinal = c >= 0 ? Number(fields[c + 1]) : NaN;
        first ??= ordinal;
        last = ordinal;
        held.push({ seq, topic, text: fields[e + 1]! });
      }
      if (held.length === 0) continue;
      // Each entry carries its topic's ordinal (`c`): the first one after P must follow the last one handed out.
      const before = ordinals.get(topic);
      if (before !== undefined && first !== undefined && Number.isSafeInteger(first) && first !== before + 1) {
        endTrimmed(topic);
        continue;
      }
      if (last !== undefined && Number.isSafeInteger(last)) ordinals.set(topic, last);
      else ordinals.delete(topic);
      merged.push(...held);
    }
    merged.sort((a, b) => a.seq - b.seq);
    for (const m of merged) {
      const set = subs.get(m.topic);
      if (!set) continue;
      let event: CloudEvent;
      try {
        event = decodeEvent(m.text);
      } catch (e) {
        logger.warn({ topic: m.topic, id: formatPosition(m.seq), err: (e as Error).message }, "stream entry is not an event the gateway wrote; skipped");
        continue;
      }
      for (const s of set) {
        try {
          s.handlers.onEvent(event, m.seq);
        } catch {
          // A subscriber's failure is its own; delivery to the others goes on (at-most-once).
        }
      }
    }
  };

  /**
   * Record the ordinal at P of topics read for the first time, so a trim before their first event is handed out is
   * seen like any other. A topic with entries after P: the one before its first entry (the read starts there). A topic
   * without: its counter as the same MULTI read it, which counts every entry up to the cursor read with it, and all of
   * them are at or before P. A topic unsubscribed meanwhile keeps nothing.
   */
  const joined = (joining: string[], counters: (string | null)[], replies: XreadReply): void => {
    const firstOrdinal = new Map<string, number>();
    for (const [key, entries] of replies ?? []) {
      const fields = entries[0]?.[1];
      const c = fields ? fields.indexOf("c") : -1;
      if (fields && c >= 0) firstOrdinal.set(key, Number(fields[c + 1]) - 1);
    }
    joining.forEach((topic, i) => {
      if (!subs.has(topic)) return;
      const key = streamKey(topic);
      const base = firstOrdinal.has(key) ? firstOrdinal.get(key)! : Number(counters[i] ?? 0);
      if (Number.isSafeInteger(base) && base >= 0) ordinals.set(topic, base);
    });
  };

  /** One atomic read of every subscribed topic after P plus the cursor; hands out entries up to the cut. */
  const snapshot = async (): Promise<void> => {
    // The first snapshot reads no topic: it only places P at the cursor (reading from 0 would replay old events).
    const topics = initialized ? [...subs.keys()] : [];
    // Topics joining (no ordinal yet): their ordinal counters, read in the same MULTI as their entries and the cursor.
    const joining = topics.filter((t) => !ordinals.has(t));
    const m = client.multi();
    if (topics.length > 0) m.xread("COUNT", batch, "STREAMS", ...topics.map(streamKey), ...topics.map(() => formatPosition(position)));
    if (joining.length > 0) m.hmget(ordinalsKey, ...joining.map(streamKey));
    m.get(seqKey);
    const res = (await whileConnected(client, m.exec())) ?? [];
    for (const [err] of res) if (err) throw err;
    const replies = (topics.length > 0 ? res[0]![1] : null) as XreadReply;
    const counters = (joining.length > 0 ? res[topics.length > 0 ? 1 : 0]![1] : []) as (string | null)[];
    const seqText = res[res.length - 1]![1] as string | null;
    if (joining.length > 0) joined(joining, counters, replies);
    let cut = seqText === null ? 0 : (parsePosition(seqText) ?? 0);
    for (const [, entries] of replies ?? []) {
      if (entries.length < batch) continue;
      const last = parsePosition(entries[entries.length - 1]![0]);
      if (last !== undefined && last < cut) cut = last;
    }
    behind = (replies ?? []).some(([, entries]) => entries.length >= batch);
    if (initialized) dispatch(replies, cut);
    // The first snapshot only places P at the cursor: a reader starts at "now", it does not replay the streams.
    initialized = true;
    if (cut > position) position = cut;
    for (const t of topics) {
      for (const s of subs.get(t) ?? []) {
        s.pending?.resolve();
        delete s.pending;
      }
    }
  };

  const recovered = (): void => {
    if (downSince === undefined) return;
    logger.info({ redis: conn.address, downMs: Date.now() - downSince }, "redis reachable again; pub/sub reader resumed");
    downSince = undefined;
  };

  const failed = (e: unknown): void => {
    const err = conn.translate(e);
    const now = Date.now();
    if (downSince === undefined) {
      downSince = now;
      logger.warn({ redis: conn.address, err: err.rawMessage }, "redis unreachable; pub/sub reader retrying (subscriptions resume where they stopped)");
    }
    for (const set of subs.values()) {
      for (const s of set) {
        if (!s.pending) continue;
        s.pending.reject(err);
        set.delete(s);
      }
    }
    if (now - downSince > outageMs && subs.size > 0) {
      logger.error({ redis: conn.address, downMs: now - downSince }, "redis unreachable for too long; ending every pub/sub subscription");
      const ended = [...subs.values()].flatMap((s) => [...s]);
      subs.clear();
      ordinals.clear();
      for (const s of ended) {
        try {
          s.handlers.onError?.(err);
        } catch {
          // The subscriber is gone either way.
        }
      }
    }
    for (const [t, set] of subs) {
      if (set.size > 0) continue;
      subs.delete(t);
      ordinals.delete(t);
    }
  };

  const loop = async (): Promise<void> => {
    let attempt = 0;
    while (!closed) {
      try {
        await Promise.all([settled(client, conn.commandTimeoutMs), settled(blocking, conn.commandTimeoutMs)]);
        if (closed) break;
        if (subs.size === 0 || !initialized) {
          if (initialized) await sleep(BLOCK_MS);
          if (closed) break;
          if (client.status !== "ready") throw unavailable(`not connected (${client.status})`);
          await snapshot();
        } else {
          if (blocking.status !== "ready") throw unavailable(`not connected (${blocking.status})`);
          blockingId ??= Number(await blocking.client("ID"));
          const topics = [...subs.keys()];
          // Behind (a stream filled its batch): read again at once. Otherwise block: the read returns at once when an
          // entry came after P in the meantime, so a snapshot that found only a few entries needs no empty one after it
          // (one round trip fewer per event at low rates, where each event wakes the reader on its own).
          if (!wakeRequested && !behind) {
            blockedNow = true;
            try {
              await whileConnected(blocking, blocking.xread("COUNT", 1, "BLOCK", BLOCK_MS, "STREAMS", ...topics.map(streamKey), ...topics.map(() => formatPosition(position))));
            } finally {
              blockedNow = false;
            }
          }
          wakeRequested = false;
          if (closed) break;
          if (client.status !== "ready") throw unavailable(`not connected (${client.status})`);
          await snapshot();
        }
        attempt = 0;
        recovered();
      } catch (e) {
        if (closed) break;
        failed(e);
        await sleep(backoffDelay(backoff, attempt++));
      }
    }
  };

  const positions: StreamPositions = {
    current: () => position,
    format: formatPosition,
    parse: parsePosition,
    history: (topic, since, limit, signal) =>
      conn.run(async (c) => {
        const key = streamKey(topic);
        const res = (await c
          .multi()
          .xrange(key, `(${formatPosition(Math.max(0, since))}`, "+", "COUNT", Math.max(0, limit) + 1)
          .xinfo("STREAM", key)
          .get(seqKey)
          .get(floorKey)
          .exec()) ?? [[null, []], [null, null], [null, null], [null, null]];
        const [rangeErr, range] = res[0]!;
        if (rangeErr) throw rangeErr;
        const [infoErr, info] = res[1]!;
        for (const [err] of res.slice(2)) if (err) throw err;
        // The data set lost what came after `since` (a Redis restart without persistence, or the keys removed): no
        // cursor although `since` is a position one gave out, or `since` before the first event of the data set.
        // Position 0 (before anything: what an empty data set gives out) is before every data set.
        const floor = res[3]![1] === null ? undefined : parsePosition(res[3]![1] as string);
        const lost = since > 0 && (res[2]![1] === null || (floor !== undefined && since < floor - 1));
        // No stream: nothing was published on the topic (in this data set).
        if (infoErr) {
          if (/no such key/i.test(infoErr.message)) return { complete: !lost, events: [] };
          throw infoErr;
        }
        const fields = info as unknown[];
        const field = (name: string): unknown => fields[fields.indexOf(name) + 1];
        const first = field("first-entry") as Entry | null;
        const firstSeq = first ? parsePosition(first[0]) : undefined;
        const neverTrimmed = Number(field("entries-added")) === Number(field("length"));
        const entries = range as Entry[];
        const events: HeldEvent[] = [];
        for (const [id, f] of entries.slice(0, Math.max(0, limit))) {
          const seq = parsePosition(id);
          const i = f.indexOf("e");
          if (seq === undefined || i < 0) continue;
          try {
            events.push({ seq, event: decodeEvent(f[i + 1]!) });
          } catch {
            // Not an entry the gateway wrote (dispatch skips and logs it the same way).
          }
        }
        const complete = !lost && (neverTrimmed || (firstSeq !== undefined && firstSeq <= since)) && entries.length <= limit;
        return { complete, events };
      }, signal),
  };

  return {
    positions,
    async publish(topic, event, signal) {
      const text = encodeEvent(event);
      // A publish whose reply was lost is reported as what it did (the journal says whether it ran), never replayed.
      await conn.runWrite(
        (c, j) => (c as Redis & PubsubScripts).gwPublish(streamKey(topic), seqKey, ordinalsKey, j.key, floorKey, maxLen, text, j.n, j.ttlMs),
        () => "",
        signal,
      );
    },
    async subscribe(topic, handlers, signal): Promise<UpstreamSubscription> {
      if (closed) throw new GatewayError(Code.UNAVAILABLE, "the redis runtime is closed");
      if (signal?.aborted) throw GatewayError.from(signal.reason, Code.CANCELLED);
      // Known down: fail at once. Otherwise the reader settles the subscription on its next round (or fails it).
      await conn.run(async () => undefined, signal);
      const sub: Sub = { topic, handlers };
      let set = subs.get(topic);
      if (!set) subs.set(topic, (set = new Set()));
      set.add(sub);
      const remove = (): void => {
        const s = subs.get(topic);
        if (!s) return;
        s.delete(sub);
        if (s.size > 0) return;
        subs.delete(topic);
        ordinals.delete(topic);
      };
      // Bounded: a snapshot follows within one blocking read plus one command deadline once the read is woken.
      const limitMs = BLOCK_MS + 2 * conn.commandTimeoutMs;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => fail(unavailable(`no read of topic within ${limitMs} ms`)), limitMs);
        const onAbortSignal = (): void => fail(GatewayError.from(signal?.reason, Code.CANCELLED));
        signal?.addEventListener("abort", onAbortSignal, { once: true });
        const done = (): void => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbortSignal);
        };
        function fail(e: Error): void {
          done();
          delete sub.pending;
          remove();
          reject(e);
        }
        sub.pending = {
          resolve: () => {
            done();
            resolve();
          },
          reject: fail,
        };
        wake();
      });
      return {
        async close() {
          remove();
        },
      };
    },
    start() {
      if (started || closed) return;
      started = true;
      void loop();
    },
    close() {
      if (closed) return;
      closed = true;
      idleWake?.();
      clearTimeout(sleepTimer);
      for (const set of subs.values()) for (const s of set) s.pending?.reject(new GatewayError(Code.UNAVAILABLE, "the redis runtime is closed"));
      subs.clear();
      ordinals.clear();
      blocking.disconnect();
    },
  };
}
