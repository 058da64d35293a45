import { randomUUID } from "node:crypto";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import { parseQuery, type Filter, type JsonValue } from "../../../src/runtime/embedded/query/index.js";
import { comparator, matches } from "../../../src/runtime/embedded/query/evaluate.js";
import { goJsonMarshal, jsoniterFastestMarshal } from "./go-json.js";
import { unaryHandler } from "./status.js";

/**
 * A state store component kind, as daprd loads it:
 * - `in-memory` (contrib `state/in-memory`): uuid etags, an etag on a missing key is a mismatch, no query.
 * - `redis` (contrib `state/redis`, server without RedisJSON/RediSearch): integer etags, no query.
 * - `redis-stack` (`state/redis` on Redis Stack): integer etags, values saved with `contentType: application/json`
 *   become RedisJSON documents, queries through `queryIndexes`.
 */
export type StoreKind = "in-memory" | "redis" | "redis-stack";

/** One state store component. */
export interface StoreComponent {
  kind: StoreKind;
  /** redis-stack `queryIndexes`: index name -> indexed JSON paths (e.g. "name", "tags.color"). */
  queryIndexes?: Record<string, string[]>;
}

/** Which stores exist. */
export interface StateRules {
  /** Store components by name; a name not listed gets `defaultKind` (or is unknown when `defaultKind` is absent). */
  stores?: Record<string, StoreComponent>;
  /** Kind of any store name not in `stores`; undefined = such names are unknown stores. Default "redis". */
  defaultKind?: StoreKind;
}

interface StateItem {
  key: string;
  value: Uint8Array;
  etag?: { value: string } | null;
  metadata?: Record<string, string>;
}

interface Entry {
  /** Stored bytes (plain value) or JSON text of a RedisJSON document's `data`. */
  value: string;
  /** A RedisJSON document (saved with contentType application/json on redis-stack). */
  json: boolean;
  etag: string;
}

/** RediSearch's answer without `page.limit`: 10 rows (contrib `state/redis/redis_query.go` Finalize adds no LIMIT). */
const REDISEARCH_DEFAULT_ROWS = 10;

/** A fault that the next GetState calls of one store name meet (failNextGetState). */
export interface GetStateFault {
  /** How many GetState calls meet it. Default 1. */
  times?: number;
  /** Hold each call this long before answering, ms (a slow or hung store; the caller's deadline may end it first). */
  delayMs?: number;
  /** Then fail with this code and daprd's text "fail to get <key> from state store <store>: ..." instead of reading. */
  code?: Code;
  /** Called as each faulted call arrives. */
  onCall?: () => void;
}

const getStateFaults = new Map<string, GetStateFault & { times: number }>();

/**
 * Fault injection: the next `fault.times` GetState calls naming `store` are held `delayMs` and/or fail with `code`.
 * Process-wide (every test sidecar of this process serving that store name), so tests give such stores their own
 * names. GetBulkState and the other RPCs are not affected.
 */
export function failNextGetState(store: string, fault: GetStateFault): void {
  getStateFaults.set(store, { ...fault, times: fault.times ?? 1 });
}

/** The fault the GetState call about to run meets, if any (counts it). */
function takeGetStateFault(store: string): GetStateFault | undefined {
  const f = getStateFaults.get(store);
  if (!f) return undefined;
  if (--f.times <= 0) getStateFaults.delete(store);
  return f;
}

const isJsonCt = (md: Record<string, string> | undefined): boolean => md?.["contentType"] === "application/json";

/**
 * Dapr's state RPCs with daprd's behaviour per store kind (see StoreKind), including its awkward parts:
 * - keys are stored as `<app id>||<key>`; a key containing `||` is INVALID_ARGUMENT (dapr `pkg/components/state`
 *   GetModifiedStateKey);
 * - with `contentType: application/json` daprd decodes the value (dapr `pkg/api/grpc/grpc.go` SaveState; a value
 *   that is not JSON fails with the raw decode error, so UNKNOWN) and the store re-encodes it: in-memory with
 *   encoding/json, redis with json-iterator's fastest mode;
 * - etag errors: mismatch ABORTED, malformed INVALID_ARGUMENT (contrib `state/errors.go` ETagMismatch/ETagInvalid
 *   mapped by daprd); redis: an etag on a missing key CREATES it (`setDefaultQuery` Lua), any delete error is ABORTED
 *   (`redis.go` Delete);
 * - redis-stack: a JSON document read without the contentType metadata, or a plain value read with it, fails
 *   WRONGTYPE (INTERNAL); a delete without it skips the document's etag check (`redis.go` Get/getJSON/Delete);
 * - Query: INTERNAL "state store does not support querying" on stores that cannot; on redis-stack metadata
 *   `queryIndexName` must name one of the `queryIndexes` (`redis.go` Query, contrib `metadata/utils.go`
 *   TryGetQueryIndexName), filter and sort keys must be indexed, one sort key only, comparisons are numeric, and
 *   without `page.limit` the answer is the first 10 rows and no token; with one, a token (the next offset) comes
 *   after every non-empty page, even a short last one (`redis_query.go` Finalize/execute), and an EMPTY page (past
 *   the last row, or a query matching nothing) fails INTERNAL "failed query in state store <store>: invalid output",
 *   as on Redis >= 7 with RediSearch >= 2.8 (contrib's go-redis v9 speaks RESP3 and parseQueryResponsePost28 rejects
 *   an empty `results` map entry; Redis < 7, go-redis v8 and RESP2, answers no rows). Filter semantics reuse the embedded evaluator
 *   (RediSearch TEXT fields would also tokenize: contrib builds a string EQ as the full-text match `@field:(value)`).
 */
/** The stored data of every state store, by store name then stored key (one Redis that several sidecars may share). */
export type StateTables = Map<string, Map<string, StoredValue>>;
/** One stored value (opaque outside this file). */
export type StoredValue = Entry;

export function stateHandlers(rules: StateRules, appId: string, token: () => string | undefined, data: StateTables = new Map()): grpc.UntypedServiceImplementation {
  const defaultKind = "defaultKind" in rules ? rules.defaultKind : "redis";

  const component = (name: string): StoreComponent => {
    if (!name) throw new GatewayError(Code.INVALID_ARGUMENT, "state store name is empty");
    const c = rules.stores?.[name] ?? (defaultKind ? { kind: defaultKind } : undefined);
    if (!c) throw new GatewayError(Code.INVALID_ARGUMENT, `state store ${name} is not found`);
    return c;
  };
  const table = (name: string): Map<string, Entry> => {
    let t = data.get(name);
    if (!t) data.set(name, (t = new Map()));
    return t;
  };
  const storedKey = (key: string): string => {
    if (!key) throw new GatewayError(Code.INVALID_ARGUMENT, "state key is empty");
    if (key.includes("||")) throw new GatewayError(Code.INVALID_ARGUMENT, `input key/keyPrefix '${key}' can't contain '||'`);
    return `${appId}||${key}`;
  };
  const wrongType = (): GatewayError => new GatewayError(Code.INTERNAL, "fail to get state: WRONGTYPE Operation against a key holding the wrong kind of value");
  const mismatch = (why: string): GatewayError => new GatewayError(Code.ABORTED, `possible etag mismatch. error from state store: ${why}`);

  /** What GetState answers for one stored key (throws WRONGTYPE like redis-stack). */
  const read = (c: StoreComponent, e: Entry | undefined, md: Record<string, string> | undefined): { data: Buffer; etag: string } => {
    if (c.kind === "redis-stack" && e && e.json !== isJsonCt(md)) throw wrongType();
    if (c.kind === "redis-stack" && !e && isJsonCt(md)) return { data: Buffer.alloc(0), etag: "" };
    return e ? { data: Buffer.from(e.value, "utf8"), etag: e.etag } : { data: Buffer.alloc(0), etag: "" };
  };

  const save = (store: string, c: StoreComponent, s: StateItem): void => {
    const key = storedKey(s.key);
    const t = table(store);
    const raw = Buffer.from(s.value ?? []).toString("utf8");
    let value = raw;
    const jsonCt = isJsonCt(s.metadata);
    if (jsonCt) {
      try {
        // SaveState json.Unmarshal of the value; its error is returned as is (gRPC UNKNOWN).
        JSON.parse(raw);
      } catch (e) {
        throw new GatewayError(Code.UNKNOWN, (e as Error).message);
      }
      value = c.kind === "in-memory" ? goJsonMarshal(raw) : jsoniterFastestMarshal(raw);
    }
    const etag = s.etag?.value;
    const current = t.get(key);
    if (c.kind === "in-memory") {
      if (etag !== undefined && etag !== "" && (!current || current.etag !== etag)) throw mismatch(`etag ${etag} does not match`);
      t.set(key, { value, json: false, etag: randomUUID() });
      return;
    }
    // redis / redis-stack: integer versions.
    if (etag !== undefined && etag !== "" && !/^-?\d+$/.test(etag)) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `invalid etag value: strconv.Atoi: parsing "${etag}": invalid syntax`);
    }
    if (etag && current && current.etag !== etag) throw mismatch(`failed to set key ${key}: ERR Error running script: version mismatch`);
    const json = c.kind === "redis-stack" && jsonCt;
    t.set(key, { value, json, etag: String(current ? Number(current.etag) + 1 : 1) });
  };

  const del = (store: string, c: StoreComponent, key: string, etag: string | undefined, md: Record<string, string> | undefined): void => {
    const k = storedKey(key);
    const t = table(store);
    const current = t.get(k);
    if (c.kind === "in-memory") {
      if (etag && (!current || current.etag !== etag)) throw mismatch(`etag ${etag} does not match`);
      t.delete(k);
      return;
    }
    if (etag && !/^-?\d+$/.test(etag)) throw mismatch(`ERR Error running script: invalid etag ${etag}`);
    // delDefaultQuery reads the hash's version; on a RedisJSON document that read fails and the script deletes
    // anyway: without the contentType metadata the document's etag is NOT checked.
    const checked = current && !(c.kind === "redis-stack" && current.json && !isJsonCt(md));
    if (etag && checked && current.etag !== etag) throw mismatch("ERR Error running script: version mismatch");
    t.delete(k);
  };

  const query = (store: string, c: StoreComponent, text: string, md: Record<string, string> | undefined): { results: object[]; token: string } => {
    if (c.kind !== "redis-stack") {
      throw new GatewayError(Code.INTERNAL, c.kind === "redis" ? `failed query in state store ${store}: redis-json server support is required for query capability` : "state store does not support querying");
    }
    const index = md?.["queryIndexName"];
    if (!index) throw new GatewayError(Code.INTERNAL, `failed query in state store ${store}: query index not found`);
    const paths = c.queryIndexes?.[index];
    if (!paths) throw new GatewayError(Code.INTERNAL, `failed query in state store ${store}: query index schema "${index}" not found`);
    let raw: { page?: { limit?: number; token?: string } } & Record<string, unknown>;
    try {
      raw = JSON.parse(text) as typeof raw;
    } catch (e) {
      throw new GatewayError(Code.INTERNAL, `failed query in state store ${store}: ${(e as Error).message}`);
    }
    const { page: rawPage, ...rest } = raw;
    const q = parseQuery(JSON.stringify(rest));
    const fail = (why: string): GatewayError => new GatewayError(Code.INTERNAL, `failed query in state store ${store}: ${why}`);
    const indexed = (path: string[]): void => {
      if (!paths.includes(path.join("."))) throw fail(`JSON path "${path.join(".")}" is not indexed`);
    };
    const visit = (f: Filter): void => {
      if ("filters" in f) return f.filters.forEach(visit);
      indexed(f.path);
      if ("value" in f && ["GT", "GTE", "LT", "LTE"].includes(f.op) && typeof f.value === "string") {
        throw fail(`unsupported type of value ${f.value}; string type not permitted`);
      }
    };
    if (q.filter) visit(q.filter);
    if (q.sort.length > 1) throw fail("multiple SORTBY steps are not allowed. Sort multiple fields in a single step");
    for (const k of q.sort) indexed(k.path);
    const prefix = `${appId}||`;
    const rows: Array<{ key: string; json: JsonValue; item: Entry }> = [];
    for (const [k, e] of table(store)) {
      // FT.SEARCH sees RedisJSON documents only.
      if (!e.json || !k.startsWith(prefix)) continue;
      const json = JSON.parse(e.value) as JsonValue;
      if (!q.filter || matches(q.filter, json)) rows.push({ key: k.slice(prefix.length), json, item: e });
    }
    rows.sort(comparator(q.sort));
    const limit = typeof rawPage?.limit === "number" ? rawPage.limit : 0;
    let offset = 0;
    if (limit > 0 && rawPage?.token) {
      if (!/^\d+$/.test(rawPage.token)) throw fail(`strconv.ParseInt: parsing "${rawPage.token}": invalid syntax`);
      offset = Number(rawPage.token);
    }
    const page = rows.slice(offset, offset + (limit > 0 ? limit : REDISEARCH_DEFAULT_ROWS));
    // RESP3 FT.SEARCH answer with no rows: contrib parseQueryResponsePost28 fails `len(arr) == 0` as "invalid output".
    if (page.length === 0) throw fail("invalid output");
    return {
      results: page.map((r) => ({ key: r.key, data: Buffer.from(r.item.value, "utf8"), etag: r.item.etag, error: "" })),
      token: limit > 0 && page.length > 0 ? String(offset + page.length) : "",
    };
  };

  const h = (fn: (req: any) => Promise<object>) => unaryHandler(token, fn);
  return {
    GetState: h(async (req: { store_name: string; key: string; metadata?: Record<string, string> }) => {
      const fault = takeGetStateFault(req.store_name);
      if (fault) {
        fault.onCall?.();
        if (fault.delayMs) await new Promise((resolve) => setTimeout(resolve, fault.delayMs).unref());
        if (fault.code !== undefined) throw new GatewayError(fault.code, `fail to get ${req.key} from state store ${req.store_name}: injected failure`);
      }
      const c = component(req.store_name);
      return read(c, table(req.store_name).get(storedKey(req.key)), req.metadata);
    }),
    GetBulkState: h(async (req: { store_name: string; keys: string[]; metadata?: Record<string, string> }) => {
      const c = component(req.store_name);
      return {
        items: (req.keys ?? []).map((key) => {
          try {
            return { key, ...read(c, table(req.store_name).get(storedKey(key)), req.metadata), error: "" };
          } catch (e) {
            return { key, data: Buffer.alloc(0), etag: "", error: (e as Error).message };
          }
        }),
      };
    }),
    SaveState: h(async (req: { store_name: string; states: StateItem[] }) => {
      const c = component(req.store_name);
      for (const s of req.states ?? []) save(req.store_name, c, s);
      return {};
    }),
    DeleteState: h(async (req: { store_name: string; key: string; etag?: { value: string } | null; metadata?: Record<string, string> }) => {
      const c = component(req.store_name);
      del(req.store_name, c, req.key, req.etag?.value, req.metadata);
      return {};
    }),
    DeleteBulkState: h(async (req: { store_name: string; states: StateItem[] }) => {
      const c = component(req.store_name);
      for (const s of req.states ?? []) del(req.store_name, c, s.key, s.etag?.value, s.metadata);
      return {};
    }),
    QueryStateAlpha1: h(async (req: { store_name: string; query: string; metadata?: Record<string, string> }) => {
      const c = component(req.store_name);
      return query(req.store_name, c, req.query, req.metadata);
    }),
  };
}
