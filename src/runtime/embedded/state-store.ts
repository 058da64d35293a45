import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { QueryResult, StatePort, StoredItem } from "../state-port.js";
import { runQuery } from "./query/index.js";
import { echo } from "../../shared/echo.js";

/** The in-process state store: the StatePort plus a few introspection helpers. */
export interface MemoryStateStore extends StatePort {
  /** Keys stored in `store` right now (tests, the Dapr test sidecar). */
  size(store: string): number;
  /** Names of the stores holding at least one key. */
  stores(): string[];
  /** Drop everything. */
  clear(): void;
}

interface Entry {
  value: string;
  etag: string;
}

function checkSignal(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new GatewayError(Code.CANCELLED, "the operation was cancelled");
}

function mismatch(key: string, etag: string, stored: Entry | undefined): GatewayError {
  return new GatewayError(
    Code.ABORTED,
    stored ? `etag mismatch for key ${echo(key)}: given ${echo(etag)}, stored ${stored.etag}` : `etag mismatch for key ${echo(key)}: given ${echo(etag)}, but the key is not stored`,
  );
}

/**
 * Create the in-process state store. Keyed string values per store name; stores come into being on first write
 * and disappear with their last key, so memory is proportional to the data held. Each write gets a new etag
 * (a per-process sequence number). Every check-and-write runs synchronously between two awaits, so an etag check
 * and the write it guards are atomic even with many concurrent writers on the event loop.
 */
export function createMemoryStateStore(): MemoryStateStore {
  const stores = new Map<string, Map<string, Entry>>();
  let sequence = 0;

  const storeOf = (name: string): Map<string, Entry> | undefined => stores.get(name);
  const nextEtag = (): string => String(++sequence);
  const item = (key: string, e: Entry): StoredItem => ({ key, value: e.value, etag: e.etag });

  function remove(name: string, key: string): boolean {
    const s = stores.get(name);
    if (!s || !s.delete(key)) return false;
    if (s.size === 0) stores.delete(name);
    return true;
  }

  return {
    async get(store, key, signal) {
      checkSignal(signal);
      const e = storeOf(store)?.get(key);
      return e ? item(key, e) : undefined;
    },
    async getBulk(store, keys, signal) {
      checkSignal(signal);
      const s = storeOf(store);
      const out: StoredItem[] = [];
      if (!s) return out;
      for (const k of keys) {
        const e = s.get(k);
        if (e) out.push(item(k, e));
      }
      return out;
    },
    async save(store, key, value, opts = {}) {
      checkSignal(opts.signal);
      let s = stores.get(store);
      const current = s?.get(key);
      if (opts.etag !== undefined && opts.etag !== "" && current?.etag !== opts.etag) throw mismatch(key, opts.etag, current);
      if (!s) stores.set(store, (s = new Map()));
      const etag = nextEtag();
      s.set(key, { value, etag });
      return etag;
    },
    async delete(store, key, opts = {}) {
      checkSignal(opts.signal);
      if (opts.etag !== undefined && opts.etag !== "") {
        const current = storeOf(store)?.get(key);
        if (current?.etag !== opts.etag) throw mismatch(key, opts.etag, current);
      }
      remove(store, key);
    },
    async deleteBulk(store, keys, signal) {
      checkSignal(signal);
      for (const k of keys) remove(store, k);
    },
    async query(store, query, limit, signal): Promise<QueryResult> {
      checkSignal(signal);
      const s = storeOf(store);
      const items = s ? Array.from(s, ([k, e]) => item(k, e)) : [];
      return runQuery(query, items, limit);
    },
    size: (store) => stores.get(store)?.size ?? 0,
    stores: () => [...stores.keys()],
    clear: () => {
      stores.clear();
    },
  };
}
