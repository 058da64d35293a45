import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import type { StatePort } from "../../../src/runtime/state-port.js";
import { unaryHandler } from "./status.js";

/** Which stores exist and which can query. */
export interface StateRules {
  /** Store names daprd has components for; undefined = any name. */
  stores?: readonly string[];
  /** Stores without query support (e.g. Redis without RediSearch). */
  nonQueryable?: readonly string[];
}

interface StateItem {
  key: string;
  value: Uint8Array;
  etag?: { value: string } | null;
  metadata?: Record<string, string>;
}

/**
 * Dapr's state RPCs over a StatePort (the embedded store), with daprd's error codes: unknown store
 * INVALID_ARGUMENT, etag mismatch ABORTED (from the store), store without query support INTERNAL. Queries see every
 * value the embedded store can read as JSON (real Redis with RediSearch indexes only values saved with
 * `contentType: application/json`, which the adapter sets for JSON documents).
 */
export function stateHandlers(store: StatePort, rules: StateRules, token: () => string | undefined): grpc.UntypedServiceImplementation {
  const checkStore = (name: string): void => {
    if (!name) throw new GatewayError(Code.INVALID_ARGUMENT, "state store name is empty");
    if (rules.stores && !rules.stores.includes(name)) throw new GatewayError(Code.INVALID_ARGUMENT, `state store ${name} is not found`);
  };
  const text = (b: Uint8Array | undefined): string => Buffer.from(b ?? []).toString("utf8");
  const h = (fn: (req: any) => Promise<object>) => unaryHandler(token, fn);

  return {
    GetState: h(async (req: { store_name: string; key: string }) => {
      checkStore(req.store_name);
      const item = await store.get(req.store_name, req.key);
      return item ? { data: Buffer.from(item.value, "utf8"), etag: item.etag } : { data: Buffer.alloc(0), etag: "" };
    }),
    GetBulkState: h(async (req: { store_name: string; keys: string[] }) => {
      checkStore(req.store_name);
      const found = new Map((await store.getBulk(req.store_name, req.keys)).map((i) => [i.key, i]));
      return {
        items: req.keys.map((key) => {
          const i = found.get(key);
          return { key, data: i ? Buffer.from(i.value, "utf8") : Buffer.alloc(0), etag: i?.etag ?? "", error: "" };
        }),
      };
    }),
    SaveState: h(async (req: { store_name: string; states: StateItem[] }) => {
      checkStore(req.store_name);
      for (const s of req.states ?? []) {
        if (!s.key) throw new GatewayError(Code.INVALID_ARGUMENT, "state key is empty");
        const etag = s.etag?.value;
        await store.save(req.store_name, s.key, text(s.value), etag ? { etag } : {});
      }
      return {};
    }),
    DeleteState: h(async (req: { store_name: string; key: string; etag?: { value: string } | null }) => {
      checkStore(req.store_name);
      const etag = req.etag?.value;
      await store.delete(req.store_name, req.key, etag ? { etag } : {});
      return {};
    }),
    DeleteBulkState: h(async (req: { store_name: string; states: StateItem[] }) => {
      checkStore(req.store_name);
      await store.deleteBulk(req.store_name, (req.states ?? []).map((s) => s.key));
      return {};
    }),
    QueryStateAlpha1: h(async (req: { store_name: string; query: string }) => {
      checkStore(req.store_name);
      if (rules.nonQueryable?.includes(req.store_name)) throw new GatewayError(Code.INTERNAL, "state store does not support querying");
      const res = await store.query(req.store_name, req.query, 0);
      return {
        results: res.items.map((i) => ({ key: i.key, data: Buffer.from(i.value, "utf8"), etag: i.etag, error: "" })),
        token: res.token,
      };
    }),
  };
}
