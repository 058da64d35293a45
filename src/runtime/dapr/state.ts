import { Code } from "../../shared/code.js";
import { echo } from "../../shared/echo.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { deadlineSignal } from "../../shared/signals.js";
import type { QueryResult, StatePort, StoredItem } from "../state-port.js";
import type { BulkStateItem__Output } from "../../gen/dapr/dapr/proto/runtime/v1/BulkStateItem.js";
import type { QueryStateItem__Output } from "../../gen/dapr/dapr/proto/runtime/v1/QueryStateItem.js";
import type { DaprConnection, DaprMethod, DaprRequest, DaprResponse } from "./connection.js";

/** An item of a bulk get or a query page, as proto-loader decodes it (generated types). */
type DaprItem = BulkStateItem__Output | QueryStateItem__Output;

/** Most pages a no-limit query follows (each page is one QueryStateAlpha1 call). */
const MAX_QUERY_PAGES = 1000;
/** Rows per page when the caller set no limit: always explicit, since RediSearch stops at 10 rows without one. */
export const QUERY_PAGE_SIZE = 100;

/** How long the read-back of a saved value's etag may take, ms (the save itself is done by then; see save()). */
export const SAVE_READBACK_TIMEOUT_MS = 2000;

/**
 * daprd's QueryStateAlpha1 error for an EMPTY page of a Redis query: contrib `state/redis/redis_query.go`
 * parseQueryResponsePost28 returns "invalid output" for an empty `results` list, which is what every empty page is when
 * the server is Redis >= 7 (contrib then uses go-redis v9, which speaks RESP3) with RediSearch >= 2.8 (FT.SEARCH
 * answers a map over RESP3); dapr `pkg/api/grpc` QueryStateAlpha1 wraps it as INTERNAL "failed query in state store
 * <store>: invalid output" (ERR_STATE_QUERY). Older servers answer an empty page with no rows.
 */
const EMPTY_REDIS_PAGE = /^failed query in state store .*: invalid output$/;

const JSON_CONTENT_TYPE = { contentType: "application/json" } as const;
const NO_METADATA = {} as const;

function isJson(value: string): boolean {
  try {
    JSON.parse(value);
    return true;
  } catch {
    return false;
  }
}

function itemOf(key: string, data: Uint8Array | undefined, etag: string): StoredItem {
  return { key, value: Buffer.from(data ?? []).toString("utf8"), etag };
}

function failedItem(store: string, item: DaprItem): GatewayError {
  return new GatewayError(Code.INTERNAL, `state store ${store} failed to read key ${echo(item.key)}: ${item.error}`);
}

/**
 * StatePort over Dapr's state API. Dapr's codes pass through (ABORTED on an etag mismatch, INVALID_ARGUMENT for a
 * malformed etag or unknown store, INTERNAL when the store cannot query); an unreachable sidecar is UNAVAILABLE.
 *
 * Two kinds of store, chosen per store name by `queryIndexes` (services config `state.queryIndexName`):
 * - plain (no index): values go as bytes with NO `contentType`, so daprd stores and returns them byte for byte (with
 *   `contentType: application/json` daprd decodes the value and the store re-encodes it: keys reordered, `<>&`
 *   escaped, integers past 2^53 rounded; dapr `pkg/api/grpc/grpc.go` SaveState).
 * - query stores (Redis Stack): every value must be JSON and every call (Save, Get, bulk Get, Delete, bulk Delete,
 *   Query) carries `contentType: application/json`, because contrib `state/redis/redis.go` keeps such values as
 *   RedisJSON documents and only reads them (and checks their etag on delete) when the same metadata comes back;
 *   Query also carries `queryIndexName` (contrib `metadata/utils.go` TryGetQueryIndexName) and an explicit
 *   `page.limit`, since RediSearch returns 10 rows and no token without one. The price: Redis re-encodes the JSON.
 */
export function createDaprState(
  conn: DaprConnection,
  queryIndexes: ReadonlyMap<string, string> = new Map(),
  opts: { saveReadBackTimeoutMs?: number } = {},
): StatePort {
  const readBackTimeoutMs = opts.saveReadBackTimeoutMs ?? SAVE_READBACK_TIMEOUT_MS;
  const call = async <M extends DaprMethod>(method: M, req: DaprRequest<M>, signal?: AbortSignal): Promise<DaprResponse<M>> =>
    conn.unary(method, req, signal ? { signal } : {});
  const metaOf = (store: string): Record<string, string> => (queryIndexes.has(store) ? JSON_CONTENT_TYPE : NO_METADATA);

  const get = async (store: string, key: string, signal?: AbortSignal): Promise<StoredItem | undefined> => {
    const res = await call("GetState", { store_name: store, key, metadata: metaOf(store) }, signal);
    // Dapr answers a missing key with empty data and no etag.
    if ((!res.data || res.data.length === 0) && !res.etag) return undefined;
    return itemOf(key, res.data, res.etag);
  };

  return {
    get,
    async getBulk(store, keys, signal) {
      if (keys.length === 0) return [];
      const res = await call("GetBulkState", { store_name: store, keys: [...keys], parallelism: 0, metadata: metaOf(store) }, signal);
      const byKey = new Map<string, DaprItem>();
      for (const item of res.items ?? []) {
        if (item.error) throw failedItem(store, item);
        if ((item.data && item.data.length > 0) || item.etag) byKey.set(item.key, item);
      }
      const out: StoredItem[] = [];
      for (const key of keys) {
        const item = byKey.get(key);
        if (item) out.push(itemOf(key, item.data, item.etag));
      }
      return out;
    },
    async save(store, key, value, opts = {}) {
      const etag = opts.etag;
      // contrib state/redis creates a missing key whatever etag is given (its setDefaultQuery only compares with an
      // existing version); docs/state.md "Etags" says an etag on a key that is not stored is a mismatch, as the embedded store and
      // state.in-memory do. Checked here first; a delete racing between this read and the write is the one case
      // where Redis still creates the key (docs/dapr.md "State").
      if (etag !== undefined && etag !== "" && !(await get(store, key, opts.signal))) {
        throw new GatewayError(Code.ABORTED, `etag mismatch for key ${echo(key)}: given ${echo(etag)}, but the key is not stored`);
      }
      const index = queryIndexes.get(store);
      if (index !== undefined && !isJson(value)) {
        throw new GatewayError(
          Code.INVALID_ARGUMENT,
          `value must be JSON: state store ${store} is configured for query (queryIndexName ${index}) and keeps JSON documents`,
        );
      }
      await call(
        "SaveState",
        {
          store_name: store,
          states: [
            {
              key,
              value: Buffer.from(value, "utf8"),
              ...(etag !== undefined && etag !== "" ? { etag: { value: etag } } : {}),
              metadata: metaOf(store),
              options: { concurrency: etag ? "CONCURRENCY_FIRST_WRITE" : "CONCURRENCY_LAST_WRITE", consistency: "CONSISTENCY_UNSPECIFIED" },
            },
          ],
        },
        opts.signal,
      );
      // SaveState returns no etag: read it back. A concurrent writer in between would make this its etag; a later
      // first-write-wins save with it then fails ABORTED instead of overwriting, which is the safe direction.
      // The value is stored once SaveState succeeded, so the save is reported done whatever the read-back does: it
      // does not listen to the caller's signal (an abort now cannot undo the write) and has its own deadline. When
      // it fails or the key is gone again, the etag is unknown: "" (the port's etag is a string; the fronts answer
      // an empty `etag`, which a caller reads as "read the key for its etag"; docs/dapr.md "State").
      const readBack = deadlineSignal(readBackTimeoutMs);
      try {
        const saved = await get(store, key, readBack.signal);
        return saved?.etag ?? "";
      } catch {
        return "";
      } finally {
        readBack.clear();
      }
    },
    async delete(store, key, opts = {}) {
      const etag = opts.etag;
      await call(
        "DeleteState",
        {
          store_name: store,
          key,
          ...(etag ? { etag: { value: etag } } : {}),
          metadata: metaOf(store),
          options: { concurrency: etag ? "CONCURRENCY_FIRST_WRITE" : "CONCURRENCY_LAST_WRITE", consistency: "CONSISTENCY_UNSPECIFIED" },
        },
        opts.signal,
      );
    },
    async deleteBulk(store, keys, signal) {
      if (keys.length === 0) return;
      await call("DeleteBulkState", { store_name: store, states: keys.map((key) => ({ key, metadata: metaOf(store) })) }, signal);
    },
    async query(store, query, limit, signal): Promise<QueryResult> {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(query) as Record<string, unknown>;
      } catch (e) {
        throw new GatewayError(Code.INVALID_ARGUMENT, `query is not valid JSON: ${(e as Error).message}`);
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw new GatewayError(Code.INVALID_ARGUMENT, "query must be a JSON object");
      }
      const page = (typeof parsed["page"] === "object" && parsed["page"] !== null ? parsed["page"] : {}) as Record<string, unknown>;
      const cap = limit > 0 ? limit : typeof page["limit"] === "number" && page["limit"] > 0 ? (page["limit"] as number) : 0;
      const items: StoredItem[] = [];
      let token = typeof page["token"] === "string" ? (page["token"] as string) : "";
      const index = queryIndexes.get(store);
      const metadata = index !== undefined ? { ...JSON_CONTENT_TYPE, queryIndexName: index } : JSON_CONTENT_TYPE;
      for (let pages = 0; pages < MAX_QUERY_PAGES; pages++) {
        const want = cap > 0 ? cap - items.length : QUERY_PAGE_SIZE;
        const body = { ...parsed, page: { ...page, limit: want, ...(token ? { token } : {}) } };
        let res: DaprResponse<"QueryStateAlpha1">;
        try {
          res = await call("QueryStateAlpha1", { store_name: store, query: JSON.stringify(body), metadata }, signal);
        } catch (e) {
          // An empty page: on Redis 7 / RediSearch 2.8 daprd fails it "invalid output" (EMPTY_REDIS_PAGE) where it
          // means "no rows": after a token, the end; on a first page, a query that matches nothing (an empty result,
          // as on every other store, not an INTERNAL error).
          const err = conn.translate(e);
          if (err.code === Code.INTERNAL && EMPTY_REDIS_PAGE.test(err.rawMessage)) {
            token = "";
            break;
          }
          throw err;
        }
        const results = res.results ?? [];
        for (const r of results) {
          if (r.error) throw failedItem(store, r);
          items.push(itemOf(r.key, r.data, r.etag));
        }
        token = res.token ?? "";
        // With a limit the caller gets one page and its token. Without one, follow the tokens to the end: Redis
        // hands a token after every non-empty page, so a short page is the end too (and asking past it would get
        // the "invalid output" above). Only a full page needs the next request, which may be that empty page.
        if (cap > 0 || !token || results.length < want) break;
      }
      // Redis hands a token after the last page too; a page shorter than asked for is the end, so no token then.
      const more = cap > 0 && token !== "" && items.length >= cap;
      return { items: cap > 0 ? items.slice(0, cap) : items, token: more ? token : "" };
    },
  };
}
