/** One stored entry. `etag` changes on every write. */
export interface StoredItem {
  key: string;
  value: string;
  etag: string;
}

/** Result of a query: matching items in order, and a continuation token when a page limit cut them. */
export interface QueryResult {
  items: StoredItem[];
  token: string;
}

/**
 * The state store behind the sidecar, per store name. Mirrors Dapr's state API so the Dapr adapter stays thin.
 * Errors are GatewayErrors with Dapr's codes: etag mismatch ABORTED, unknown store INVALID_ARGUMENT,
 * store without query support INTERNAL, sidecar unreachable UNAVAILABLE.
 */
export interface StatePort {
  /** The value and etag of `key`, or undefined when it is not stored. */
  get(store: string, key: string, signal?: AbortSignal): Promise<StoredItem | undefined>;
  /** Items for the keys that exist, in request order (missing keys are left out). */
  getBulk(store: string, keys: readonly string[], signal?: AbortSignal): Promise<StoredItem[]>;
  /** Store `value`; with `etag` only if it matches the stored one (first-write-wins), else last-write-wins. Returns the new etag. */
  save(store: string, key: string, value: string, opts?: { etag?: string; signal?: AbortSignal }): Promise<string>;
  /** Delete `key`; with `etag` only if it matches. Deleting a missing key (without etag) succeeds. */
  delete(store: string, key: string, opts?: { etag?: string; signal?: AbortSignal }): Promise<void>;
  /** Delete every key given (missing ones are ignored). */
  deleteBulk(store: string, keys: readonly string[], signal?: AbortSignal): Promise<void>;
  /** Run the query DSL (JSON text; "{}" matches everything). `limit` 0 = no limit. */
  query(store: string, query: string, limit: number, signal?: AbortSignal): Promise<QueryResult>;
}
