import type { Redis } from "ioredis";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import type { QueryResult, StatePort, StoredItem } from "../state-port.js";
import { runQuery } from "../embedded/query/index.js";
import type { RedisConnection } from "./connection.js";

/** Default bound of the keys one query may scan. */
export const DEFAULT_QUERY_MAX_KEYS = 10_000;
/** Keys read per round trip while a query scans its store. */
const SCAN_BATCH = 500;

/**
 * Save: KEYS = item hash, the store's key index, the etag counter, the write journal; ARGV = value, etag ("" = none),
 * key, journal number, journal ttl. Returns {etag} or {-1} (etag given, key not stored) or {-2, stored etag}. The etag
 * is a number from one counter for the whole state, so a key deleted and written again never gets back an etag it
 * had before. A stored write records `<n> <etag>` in the journal (see WriteJournal in ./connection.ts); a mismatch
 * writes nothing.
 */
const SAVE = `
local v = redis.call('HGET', KEYS[1], 'version')
if ARGV[2] ~= '' then
  if not v then return {-1} end
  if v ~= ARGV[2] then return {-2, v} end
end
local nv = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'version', nv)
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('SET', KEYS[4], ARGV[4] .. ' ' .. nv, 'PX', ARGV[5])
return {nv}`;

/**
 * Delete: KEYS = item hash, key index, the write journal; ARGV = etag ("" = none), key, journal number, journal ttl.
 * Returns {0}, {-1} or {-2, stored etag}; a delete that ran records `<n> 0` in the journal.
 */
const DELETE = `
if ARGV[1] ~= '' then
  local v = redis.call('HGET', KEYS[1], 'version')
  if not v then return {-1} end
  if v ~= ARGV[1] then return {-2, v} end
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], ARGV[3] .. ' 0', 'PX', ARGV[4])
return {0}`;

type ScriptReply = [number, string?];
interface StateScripts {
  gwStateSave(item: string, index: string, counter: string, journal: string, value: string, etag: string, key: string, n: number, journalTtlMs: number): Promise<ScriptReply>;
  gwStateDelete(item: string, index: string, journal: string, etag: string, key: string, n: number, journalTtlMs: number): Promise<ScriptReply>;
}

function mismatch(key: string, etag: string, reply: ScriptReply): GatewayError {
  return new GatewayError(
    Code.ABORTED,
    reply[0] === -2 ? `etag mismatch for key ${echo(key)}: given ${echo(etag)}, stored ${reply[1]}` : `etag mismatch for key ${echo(key)}: given ${echo(etag)}, but the key is not stored`,
  );
}

/**
 * StatePort on Redis, laid out like Dapr's `state/redis` component: one hash {data, version} per key at
 * `<prefix>state:<store>:<key>`, the etag being the version as text. Every etag check and the write it guards run in
 * one Lua script, so two replicas saving with the same etag cannot both win. Unlike the component, an etag given for
 * a key that is not stored is a mismatch (the port's contract), never a create. A set per store
 * (`<prefix>statekeys:<store>`), kept by the same scripts, lists its keys for the query DSL, which runs the embedded
 * evaluator over at most `queryMaxKeys` items.
 */
export function createRedisState(conn: RedisConnection, queryMaxKeys = DEFAULT_QUERY_MAX_KEYS): StatePort {
  const client = conn.client as Redis & StateScripts;
  client.defineCommand("gwStateSave", { numberOfKeys: 4, lua: SAVE });
  client.defineCommand("gwStateDelete", { numberOfKeys: 3, lua: DELETE });
  // The store name is URI-encoded (a plain name stays as it is), so it holds no `:` and the first one after it ends
  // it: stores `a:b` and `a` can never share a key.
  const itemKey = (store: string, key: string): string => `${conn.prefix}state:${encodeURIComponent(store)}:${key}`;
  const indexKey = (store: string): string => `${conn.prefix}statekeys:${encodeURIComponent(store)}`;
  const counterKey = `${conn.prefix}state-etag`;
  /**
   * The reply of a write with an etag was lost and a later write on the same connection ran too: the journal holds the
   * later one's reply, so whether this one was applied or refused (etag mismatch) is not known.
   */
  const lostReply = (op: string, key: string, etag: string): GatewayError =>
    new GatewayError(
      Code.UNAVAILABLE,
      `redis at ${conn.address} is unreachable: the connection dropped before the reply of the ${op} of key ${echo(key)}${etag ? " (with an etag)" : ""}; it ran, but whether it was applied is not known: read the key`,
    );

  /** HMGET data+version of every key in one pipeline; missing keys are left out, order kept. */
  const readMany = async (c: Redis, store: string, keys: readonly string[]): Promise<StoredItem[]> => {
    if (keys.length === 0) return [];
    const p = c.pipeline();
    for (const k of keys) p.hmget(itemKey(store, k), "data", "version");
    const replies = (await p.exec()) ?? [];
    const out: StoredItem[] = [];
    replies.forEach(([err, res], i) => {
      if (err) throw err;
      const [data, version] = res as [string | null, string | null];
      if (data !== null && version !== null) out.push({ key: keys[i]!, value: data, etag: version });
    });
    return out;
  };

  return {
    get: (store, key, signal) =>
      conn.run(async (c) => {
        const [data, version] = await c.hmget(itemKey(store, key), "data", "version");
        return data !== null && version !== null ? { key, value: data, etag: version } : undefined;
      }, signal),
    getBulk: (store, keys, signal) => conn.run((c) => readMany(c, store, keys), signal),
    async save(store, key, value, opts = {}) {
      const etag = opts.etag ?? "";
      // A save whose reply was lost is reported as what it did (./connection.ts runWrite), never replayed.
      const reply = await conn.runWrite(
        (c, j) => (c as Redis & StateScripts).gwStateSave(itemKey(store, key), indexKey(store), counterKey, j.key, value, etag, key, j.n, j.ttlMs),
        ({ reply: recorded }): ScriptReply => {
          if (recorded !== undefined) return [Number(recorded)];
          if (etag === "") {
            throw new GatewayError(
              Code.UNAVAILABLE,
              `redis at ${conn.address} is unreachable: the connection dropped before the reply of the save of key ${echo(key)}; the save was applied, but its new etag was lost: read the key`,
            );
          }
          throw lostReply("save", key, etag);
        },
        opts.signal,
      );
      if (reply[0] < 0) throw mismatch(key, etag, reply);
      return String(reply[0]);
    },
    async delete(store, key, opts = {}) {
      const etag = opts.etag ?? "";
      const reply = await conn.runWrite(
        (c, j) => (c as Redis & StateScripts).gwStateDelete(itemKey(store, key), indexKey(store), j.key, etag, key, j.n, j.ttlMs),
        ({ reply: recorded }): ScriptReply => {
          // Without an etag the script always deletes; with one, a later write on the connection hides which it did.
          if (recorded !== undefined || etag === "") return [0];
          throw lostReply("delete", key, etag);
        },
        opts.signal,
      );
      if (reply[0] < 0) throw mismatch(key, etag, reply);
    },
    deleteBulk: (store, keys, signal) =>
      conn.run(async (c) => {
        if (keys.length === 0) return;
        const m = c.multi();
        for (const k of keys) m.del(itemKey(store, k));
        m.srem(indexKey(store), ...keys);
        const replies = (await m.exec()) ?? [];
        for (const [err] of replies) if (err) throw err;
      }, signal),
    query: (store, query, limit, signal) =>
      conn.run(async (c): Promise<QueryResult> => {
        const index = indexKey(store);
        const total = await c.scard(index);
        if (total > queryMaxKeys) {
          throw new GatewayError(
            Code.RESOURCE_EXHAUSTED,
            `state store ${echo(store)} holds ${total} keys; a query on the redis runtime scans at most ${queryMaxKeys} keys (narrow the store or use a store with a query index)`,
          );
        }
        const keys = new Set<string>();
        let cursor = "0";
        // SSCAN visits every member present for the whole scan at least once; the Set drops repeats. The guard bounds
        // the loop even if the set grows while it is scanned.
        for (let rounds = 0; rounds <= queryMaxKeys; rounds++) {
          if (signal?.aborted) throw GatewayError.from(signal.reason, Code.CANCELLED);
          const [next, batch] = await c.sscan(index, cursor, "COUNT", SCAN_BATCH);
          for (const k of batch) keys.add(k);
          if (keys.size > queryMaxKeys) {
            throw new GatewayError(Code.RESOURCE_EXHAUSTED, `state store ${echo(store)} holds more than ${queryMaxKeys} keys; a query on the redis runtime scans at most that many`);
          }
          cursor = next;
          if (cursor === "0") break;
        }
        // Sorted, so results without a sort clause come in the same order on every replica.
        const all = [...keys].sort();
        const items: StoredItem[] = [];
        for (let i = 0; i < all.length; i += SCAN_BATCH) items.push(...(await readMany(c, store, all.slice(i, i + SCAN_BATCH))));
        return runQuery(query, items, limit);
      }, signal),
  };
}
