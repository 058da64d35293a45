import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import { Code, httpStatusOf } from "../../src/shared/code.js";
import { unary, withKey, type TestGateway } from "./gateway.js";

/** A failed call as either front end reports it: the gRPC code, and for REST the HTTP status too. */
export class CallFailed extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly httpStatus?: number,
  ) {
    super(message);
  }
}

export interface Item {
  key: string;
  value: string;
  etag: string;
}
export interface StatusBody {
  success: boolean;
  status: string;
  message: string;
}

/** The State operations over one front end; requests use the proto (snake_case) field names. */
export interface StateFront {
  name: "grpc" | "rest";
  save(req: Record<string, unknown>): Promise<{ status: StatusBody; etag: string }>;
  /** undefined when the key is not stored (gRPC: empty value and etag; REST: 404). */
  get(service: string, key: string): Promise<Item | undefined>;
  delete(req: { service: string; key: string; etag?: string; include_value?: boolean; publish_change?: boolean; change?: object }): Promise<{ status: StatusBody }>;
  getBulk(service: string, keys: string[]): Promise<Item[]>;
  deleteBulk(req: { service: string; keys: string[]; publish_change?: boolean; change?: object }): Promise<{ status: StatusBody }>;
  query(service: string, query: string, limit?: number): Promise<{ items: Item[]; token: string }>;
}

function grpcFront(gw: StateTarget, apiKey: string): StateFront {
  const c = gw.client("platform.State");
  const call = async <T>(method: string, req: object): Promise<T> => {
    try {
      return await unary<T>(c, method, req, withKey(apiKey));
    } catch (e) {
      const err = e as grpc.ServiceError;
      throw new CallFailed(err.code as number as Code, err.details);
    }
  };
  return {
    name: "grpc",
    save: (req) => call("SaveState", req),
    async get(service, key) {
      const r = await call<Item>("GetState", { service, key });
      assert.equal(r.key, key);
      if (r.value === "" && r.etag === "") return undefined;
      return r;
    },
    delete: (req) => call("DeleteState", req),
    getBulk: async (service, keys) => (await call<{ items: Item[] }>("GetBulkState", { service, keys })).items,
    deleteBulk: (req) => call("DeleteBulkState", req),
    query: (service, query, limit = 0) => call("QueryState", { service, query, limit }),
  };
}

/** Encode a key for the REST path: each `/`-separated segment percent-encoded, slashes kept. */
export function keyPath(key: string): string {
  return key.split("/").map(encodeURIComponent).join("/");
}

function restFront(gw: StateTarget, apiKey: string): StateFront {
  const call = async <T>(method: string, path: string, body?: object): Promise<T> => {
    const res = await fetch(gw.http + path, {
      method,
      headers: { "x-api-key": apiKey, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status !== 200) {
      const code = json["code"] as Code;
      assert.equal(typeof code, "number", `error body ${JSON.stringify(json)}`);
      assert.deepEqual(json["details"], []);
      assert.equal(res.status, httpStatusOf(code), `HTTP status for ${Code[code]}`);
      throw new CallFailed(code, json["message"] as string, res.status);
    }
    return json as T;
  };
  const qs = (params: Record<string, string | number | boolean | string[] | undefined>): string => {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined) continue;
      if (Array.isArray(v)) for (const x of v) u.append(k, x);
      else u.append(k, String(v));
    }
    const s = u.toString();
    return s ? `?${s}` : "";
  };
  return {
    name: "rest",
    save: (req) => call("POST", "/v1/state/save-state", req),
    async get(service, key) {
      try {
        return await call<Item>("GET", `/v1/state/${encodeURIComponent(service)}/${keyPath(key)}`);
      } catch (e) {
        if (e instanceof CallFailed && e.httpStatus === 404 && e.message.includes(`key ${key} is not stored`)) return undefined;
        throw e;
      }
    },
    delete: ({ service, key, change, ...q }) =>
      call("DELETE", `/v1/state/${encodeURIComponent(service)}/${keyPath(key)}${qs(q)}`, change ? { change } : undefined),
    getBulk: async (service, keys) => (await call<{ items: Item[] }>("GET", `/v1/state/${encodeURIComponent(service)}/bulk${qs({ keys })}`)).items,
    deleteBulk: ({ service, change, ...q }) => call("DELETE", `/v1/state/${encodeURIComponent(service)}/bulk${qs(q)}`, change ? { change } : undefined),
    query: (service, query, limit) => call("GET", `/v1/state/${encodeURIComponent(service)}/query${qs({ query, limit })}`),
  };
}

/** What the fronts need of a gateway: an in-process TestGateway, or a gateway process's address and a client factory. */
export type StateTarget = Pick<TestGateway, "http" | "client">;

/** Both front ends of a test gateway. */
export function stateFronts(gw: StateTarget, apiKey: string): StateFront[] {
  return [grpcFront(gw, apiKey), restFront(gw, apiKey)];
}

/** Assert that `p` fails with `code` and a message matching `pattern`. */
export async function rejectsWith(p: Promise<unknown>, code: Code, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof CallFailed, `expected a failed call, got ${String(e)}`);
    assert.equal(Code[e.code], Code[code], e.message);
    assert.match(e.message, pattern);
    return true;
  });
}

