/**
 * The route-by-outcome table (src/ops/outcomes.ts) against a running gateway: every route it serves has an
 * entry, every entry names a route it serves, and every failure an entry lists is driven over a real socket (gRPC,
 * HTTP, WebSocket, SSE) and must reach the caller the way the table says (status or in-band, with the code).
 */
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import WebSocket from "ws";
import { FAILURES, OUTCOMES, type Delivery, type Failure, type OutcomeRoute } from "../../src/ops/outcomes.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { Code, httpStatusOf } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { reflectionCall } from "../support/reflection.js";
import { wrapRuntime } from "../support/state-runtime.js";
import { runtimeFixtures, useGatewayOn } from "../support/runtimes.js";
import { appCallbackWithJobEvent, daprService } from "../../src/runtime/dapr/protos.js";
import { ceJson } from "../support/web.js";
import { DOC_PATH, withOutcomeTable } from "../../scripts/errors-doc.js";

const KEY = "outcomes-key";
/** What the fault-injecting runtime and backend fail with: a code no route produces on its own. */
const UPSTREAM = "FAILED_PRECONDITION";
const EVIL_ORIGIN = "http://evil.example";
const TIMEOUT_MS = 5000;

/** What a probe saw. `code` is the code name; `http` the HTTP status on HTTP-based fronts. */
interface Observed {
  via: Delivery;
  code?: string | undefined;
  http?: number | undefined;
}

const injected = (): GatewayError => new GatewayError(Code[UPSTREAM], "injected upstream failure");
/** A name that makes the wrapped runtime fail. */
const failing = (s: string | undefined): boolean => typeof s === "string" && s.includes("upstream");

/** The embedded runtime, failing every operation whose key, topic, query or job name contains "upstream". */
function faultyRuntime(base: Runtime): Runtime {
  const s = base.state;
  const p = base.pubsub;
  const wrapped = wrapRuntime(base, {
    state: {
      get: async (store, key, signal) => (failing(key) ? Promise.reject(injected()) : s.get(store, key, signal)),
      getBulk: async (store, keys, signal) => (keys.some(failing) ? Promise.reject(injected()) : s.getBulk(store, keys, signal)),
      save: async (store, key, value, opts) => (failing(key) ? Promise.reject(injected()) : s.save(store, key, value, opts)),
      delete: async (store, key, opts) => (failing(key) ? Promise.reject(injected()) : s.delete(store, key, opts)),
      deleteBulk: async (store, keys, signal) => (keys.some(failing) ? Promise.reject(injected()) : s.deleteBulk(store, keys, signal)),
      query: async (store, query, limit, signal) => (failing(query) ? Promise.reject(injected()) : s.query(store, query, limit, signal)),
    },
    pubsub: {
      publish: async (topic, event, signal) => (failing(topic) ? Promise.reject(injected()) : p.publish(topic, event, signal)),
      subscribe: async (topic, handler, signal) => (failing(topic) ? Promise.reject(injected()) : p.subscribe(topic, handler, signal)),
    },
  });
  const jobs = new Proxy(base.jobs, {
    get(target, key) {
      const v = Reflect.get(target, key) as unknown;
      if (typeof v !== "function") return v;
      const fn = v as (...args: unknown[]) => unknown;
      if (key === "schedule") return async (job: { name: string }, signal?: AbortSignal) => (failing(job.name) ? Promise.reject(injected()) : fn.call(target, job, signal));
      return fn.bind(target);
    },
  });
  return { ...wrapped, jobs };
}

/** The outcome of a unary reply: in-band when it carries `success: false` (top level or in `status`). */
function inBandOf(res: any): Observed {
  const st = res && typeof res.status === "object" && res.status !== null ? res.status : typeof res?.success === "boolean" ? res : undefined;
  if (st && st.success === false) return { via: "in-band", code: st.status };
  if (res && res.error === true) return { via: "in-band", code: res.statusCode };
  return { via: "none" };
}

function codeNameOf(n: unknown): string | undefined {
  return typeof n === "number" ? Code[n] : undefined;
}

type Probes = Record<string, Partial<Record<Failure, () => Promise<Observed>>>>;

const nameOf = (r: OutcomeRoute): string => (r.part ? `${r.route} ${r.part}` : r.route);
/** Rows served on every runtime, and the rows of Dapr's app callbacks. */
const EMBEDDED_ROWS = OUTCOMES.filter((r) => r.runtime === undefined);
const DAPR_ROWS = OUTCOMES.filter((r) => r.runtime === "dapr");

/** Every route `gw` serves has an entry among `rows`, and every one of `rows` is served. */
function checkListing(gw: TestGateway, rows: readonly OutcomeRoute[]): void {
  const served = [...gw.gateway.routes.grpc, ...gw.gateway.routes.http];
  const listed = new Set(rows.map((r) => r.route));
  const unlisted = served.filter((r) => !listed.has(r));
  assert.deepEqual(unlisted, [], `routes served without an entry in src/ops/outcomes.ts (and docs/errors.md): ${unlisted.join(", ")}`);
  const stale = [...listed].filter((r) => !served.includes(r));
  assert.deepEqual(stale, [], `entries for routes the gateway does not serve: ${stale.join(", ")}`);
  const names = OUTCOMES.map(nameOf);
  assert.equal(new Set(names).size, names.length, "each (route, part) has one entry");
}

/** `probes` covers exactly the failures `rows` list, and nothing else. */
function checkProbes(rows: readonly OutcomeRoute[], probes: Probes): void {
  for (const r of rows) {
    const listed = FAILURES.filter((f) => r.outcomes[f] !== undefined);
    const probed = FAILURES.filter((f) => probes[nameOf(r)]?.[f] !== undefined);
    assert.deepEqual(probed, listed, `${nameOf(r)}: probes for ${probed.join(", ")}, table lists ${listed.join(", ")}`);
  }
  const unknown = Object.keys(probes).filter((k) => !rows.some((r) => nameOf(r) === k));
  assert.deepEqual(unknown, [], "probes for routes not in the table");
}

/** One test per (row, failure): run its probe and compare what the caller saw with the table. */
function driveRows(rows: readonly OutcomeRoute[], probes: () => Probes): void {
  for (const r of rows) {
    for (const failure of FAILURES) {
      const expected = r.outcomes[failure];
      if (!expected) continue;
      it(`${nameOf(r)} (${r.front}): ${failure} -> ${expected.via}${expected.code ? ` ${expected.code}` : ""}`, async () => {
        const probe = probes()[nameOf(r)]?.[failure];
        assert.ok(probe, `no probe for ${nameOf(r)} ${failure}`);
        const seen = await probe();
        const what = `${nameOf(r)} ${failure}: saw ${JSON.stringify(seen)}`;
        if (failure === "unauthenticated" && expected.via === "none") {
          // An open route: whatever else the keyless request gets, it is not refused for the key.
          assert.ok(seen.code !== "UNAUTHENTICATED" && seen.http !== 401, what);
          return;
        }
        assert.equal(seen.via, expected.via, what);
        if (expected.via === "none") return;
        // An upstream failure carries the backend's or runtime's own code through unchanged.
        const code = expected.code ?? (failure === "upstream" ? UPSTREAM : undefined);
        // A bare HTTP status (no google.rpc.Status body: a CORS preflight, a console file) is checked by its status.
        if (seen.code !== undefined || seen.http === undefined) assert.equal(seen.code, code, what);
        if (seen.http !== undefined) {
          const http = expected.via === "in-band" ? 200 : (expected.http ?? httpStatusOf(Code[code as keyof typeof Code]));
          assert.equal(seen.http, http, what);
        }
      });
    }
  }
}

describe("route-by-outcome table", () => {
  let gw: TestGateway;
  let backend: OrderBackend;
  let base: Runtime;

  before(async () => {
    backend = await startOrderBackend({ admin: false });
    base = await createRuntime("embedded", { pubsubName: "pubsub", host: "127.0.0.1", grpcPort: 0, logger: { debug() {}, info() {}, warn() {}, error() {} } });
    gw = await startTestGateway(
      {
        apiKeys: [KEY],
        services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port }, pubsub: { pubsubName: "pubsub" }, state: { storeName: "orders-store", keys: ["order.*"] } }],
      },
      { runtime: faultyRuntime(base) },
    );
  });
  after(async () => {
    await gw?.close();
    backend?.close();
  });

  const md = (key: boolean): grpc.Metadata => (key ? withKey(KEY) : new grpc.Metadata());

  /** A unary gRPC call of the gateway's own services. */
  async function grpcUnary(service: string, method: string, req: object, key = true): Promise<Observed> {
    try {
      return inBandOf(await unary(gw.client(service), method, req, md(key), { deadline: Date.now() + TIMEOUT_MS }));
    } catch (e) {
      return { via: "status", code: codeNameOf((e as grpc.ServiceError).code) };
    }
  }

  /** platform.Gateway/InvokeStream with one request, half-closed. */
  function invokeStream(first: object, key = true): Promise<Observed> {
    const call = (gw.client("platform.Gateway") as unknown as { InvokeStream(md: grpc.Metadata, o: grpc.CallOptions): grpc.ClientDuplexStream<object, any> }).InvokeStream(md(key), {
      deadline: Date.now() + TIMEOUT_MS,
    });
    return new Promise((resolve) => {
      let last: any;
      call.on("data", (r: any) => (last = r.status ?? last));
      call.on("error", (e: grpc.ServiceError) => resolve({ via: "status", code: codeNameOf(e.code) }));
      call.on("status", (s: grpc.StatusObject) => {
        if (s.code === grpc.status.OK) resolve(last && last.success === false ? { via: "in-band", code: last.status } : { via: "none" });
      });
      call.write(first);
      call.end();
    });
  }

  /** io.cloudevents.v1.Pubsub/Subscribe: a status, or none once the subscription is live (headers arrived). */
  function subscribe(topics: string[], key = true): Promise<Observed> {
    const call = (gw.client("io.cloudevents.v1.Pubsub") as unknown as { Subscribe(req: object, md: grpc.Metadata, o: grpc.CallOptions): grpc.ClientReadableStream<any> }).Subscribe(
      { topics },
      md(key),
      { deadline: Date.now() + TIMEOUT_MS },
    );
    return new Promise((resolve) => {
      call.on("metadata", (m: grpc.Metadata) => {
        if (m.get("x-subscription-id").length === 0) return;
        call.cancel();
        resolve({ via: "none" });
      });
      call.on("error", (e: grpc.ServiceError) => resolve(e.code === grpc.status.CANCELLED ? { via: "none" } : { via: "status", code: codeNameOf(e.code) }));
      call.on("data", () => undefined);
    });
  }

  /** A call of a backend method through the transparent proxy (GetOrderRequest is `string order_id = 1`). */
  function proxied(method: string, orderId: string, key = true): Promise<Observed> {
    const id = Buffer.from(orderId);
    const bytes = Buffer.concat([Buffer.from([0x0a, id.length]), id]);
    const client = new grpc.Client(gw.grpcAddress, grpc.credentials.createInsecure());
    return new Promise((resolve) => {
      client.makeUnaryRequest(
        `/shop.v1.OrderService/${method}`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        md(key),
        { deadline: Date.now() + TIMEOUT_MS },
        (err) => {
          client.close();
          resolve(err ? { via: "status", code: codeNameOf(err.code) } : { via: "none" });
        },
      );
    });
  }

  async function reflection(version: "v1" | "v1alpha", key = true): Promise<Observed> {
    try {
      const res = await reflectionCall(gw.grpcAddress, version, { file_containing_symbol: "no.such.Symbol" }, md(key));
      return res.error_response ? { via: "in-band", code: codeNameOf(res.error_response.error_code) } : { via: "none" };
    } catch (e) {
      return { via: "status", code: codeNameOf((e as grpc.ServiceError).code) };
    }
  }

  /** An HTTP request; a status >= 400 is a status (code from the google.rpc.Status body), else in-band or none. */
  async function http(method: string, path: string, opts: { body?: unknown; key?: boolean; headers?: Record<string, string> } = {}): Promise<Observed> {
    const headers: Record<string, string> = { ...(opts.key === false ? {} : { "x-api-key": KEY }), ...opts.headers };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await fetch(`${gw.http}${path}`, { method, headers, body, redirect: "manual", signal: AbortSignal.timeout(TIMEOUT_MS) });
    const type = res.headers.get("content-type") ?? "";
    const text = await res.text();
    const json = (t: string): any => {
      try {
        return JSON.parse(t);
      } catch {
        return undefined;
      }
    };
    if (res.status >= 400) return { via: "status", code: codeNameOf(json(text)?.code), http: res.status };
    if (type.startsWith("application/x-ndjson")) {
      const lines = text.trim().split("\n");
      return { ...inBandOf(json(lines[lines.length - 1]!)), http: res.status };
    }
    return { ...inBandOf(json(text)), http: res.status };
  }

  /** A Connect unary JSON call: an error is its HTTP status and the Connect error JSON's code (as the gRPC name). */
  async function connectUnary(path: string, body: unknown, opts: { key?: boolean; origin?: string } = {}): Promise<Observed> {
    const headers: Record<string, string> = { "content-type": "application/json", "connect-protocol-version": "1", ...(opts.key === false ? {} : { "x-api-key": KEY }), ...(opts.origin ? { origin: opts.origin } : {}) };
    const res = await fetch(`${gw.http}${path}`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body), signal: AbortSignal.timeout(TIMEOUT_MS) });
    const answer = (await res.json()) as { code?: string };
    if (res.status === 200) return { via: "none", http: 200 };
    return { via: "status", code: answer.code === "canceled" ? "CANCELLED" : answer.code?.toUpperCase(), http: res.status };
  }

  /** A WebSocket upgrade: a refused one is a status (with the body's code), an accepted one is the open socket. */
  function upgrade(path: string, opts: { key?: boolean; origin?: string } = {}): Promise<{ observed: Observed; ws?: WebSocket; frames: any[] }> {
    const ws = new WebSocket(`${gw.http.replace(/^http/, "ws")}${path}`, [], {
      headers: opts.key === false ? {} : { "x-api-key": KEY },
      ...(opts.origin ? { origin: opts.origin } : {}),
    });
    const frames: any[] = [];
    ws.on("message", (d) => frames.push(JSON.parse(String(d))));
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`upgrade of ${path} did not settle`)), TIMEOUT_MS);
      ws.once("open", () => {
        clearTimeout(t);
        resolve({ observed: { via: "none" }, ws, frames });
      });
      ws.once("unexpected-response", (_req, res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => {
          clearTimeout(t);
          let code: string | undefined;
          try {
            code = codeNameOf(JSON.parse(text).code);
          } catch {
            code = undefined;
          }
          resolve({ observed: { via: "status", code, http: res.statusCode }, frames });
        });
      });
      ws.once("error", (e) => {
        clearTimeout(t);
        reject(e);
      });
    });
  }

  /** Wait for a frame matching `pred` (bounded). */
  async function frame(frames: any[], pred: (f: any) => boolean, what: string): Promise<any> {
    const end = Date.now() + TIMEOUT_MS;
    for (;;) {
      const f = frames.find(pred);
      if (f) return f;
      if (Date.now() > end) throw new Error(`no ${what} frame within ${TIMEOUT_MS} ms (got ${JSON.stringify(frames).slice(0, 300)})`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** One frame (an object, or raw text) on an open /v1/pubsub/ws: an error frame is a status, a reply is none. */
  async function pubsubFrame(payload: object | string): Promise<Observed> {
    const { ws, frames } = await upgrade("/v1/pubsub/ws");
    try {
      ws!.send(typeof payload === "string" ? payload : JSON.stringify({ id: "probe", ...payload }));
      const f = await frame(frames, (x) => ["error", "subscribed", "unsubscribed", "published"].includes(x.op), "reply");
      return f.op === "error" ? { via: "status", code: f.code } : { via: "none" };
    } finally {
      ws!.close();
    }
  }

  /** Frames on an open /v1/gateway/invoke-ws until the final status frame. */
  async function invokeWs(frames: Array<object | string>): Promise<Observed> {
    const { ws, frames: got } = await upgrade("/v1/gateway/invoke-ws");
    try {
      for (const f of frames) ws!.send(typeof f === "string" ? f : JSON.stringify(f));
      const st = await frame(got, (x) => x.op === "status", "status");
      return st.status.success === false ? { via: "in-band", code: st.status.status } : { via: "none" };
    } finally {
      ws!.close();
    }
  }

  const getOrder = (orderId: string) => ({ service: "orders", method: "GetOrder", requestData: { orderId } });
  const invokeReq = (service: string, orderId = "o-1") => ({ service, method: "GetOrder", request_data: JSON.stringify({ orderId }) });
  const failOrder = `fail:${UPSTREAM}:backend says no`;
  const cloudevent = { id: "e1", source: "urn:outcomes", spec_version: "1.0", type: "t", text_data: "x" };

  /** One probe per (route, failure) the table lists: it provokes that failure and reports what the caller saw. */
  const probes: Probes = {
    "platform.Gateway/Invoke": {
      unauthenticated: () => grpcUnary("platform.Gateway", "Invoke", invokeReq("orders"), false),
      invalid: () => grpcUnary("platform.Gateway", "Invoke", invokeReq("")),
      missing: () => grpcUnary("platform.Gateway", "Invoke", invokeReq("nope")),
      upstream: () => grpcUnary("platform.Gateway", "Invoke", invokeReq("orders", failOrder)),
    },
    "platform.Gateway/InvokeJson": {
      unauthenticated: () => grpcUnary("platform.Gateway", "InvokeJson", invokeReq("orders"), false),
      invalid: () => grpcUnary("platform.Gateway", "InvokeJson", { ...invokeReq("orders"), request_data: '{"nope":1}' }),
      missing: () => grpcUnary("platform.Gateway", "InvokeJson", invokeReq("nope")),
      upstream: () => grpcUnary("platform.Gateway", "InvokeJson", invokeReq("orders", failOrder)),
    },
    "platform.Gateway/InvokeStream": {
      unauthenticated: () => invokeStream(invokeReq("orders"), false),
      invalid: () => invokeStream({ ...invokeReq("orders"), method: "" }),
      missing: () => invokeStream(invokeReq("nope")),
      upstream: () => invokeStream(invokeReq("orders", failOrder)),
    },
    "platform.Gateway/ListServices": { unauthenticated: () => grpcUnary("platform.Gateway", "ListServices", {}, false) },
    "platform.Gateway/ListMethods": {
      unauthenticated: () => grpcUnary("platform.Gateway", "ListMethods", { service: "orders" }, false),
      invalid: () => grpcUnary("platform.Gateway", "ListMethods", { service: "" }),
      missing: () => grpcUnary("platform.Gateway", "ListMethods", { service: "nope" }),
    },
    "platform.Gateway/GetMethodSchema": {
      unauthenticated: () => grpcUnary("platform.Gateway", "GetMethodSchema", { service: "orders", method: "GetOrder" }, false),
      invalid: () => grpcUnary("platform.Gateway", "GetMethodSchema", { service: "orders", method: "GetOrder", type: "sideways" }),
      missing: () => grpcUnary("platform.Gateway", "GetMethodSchema", { service: "orders", method: "NoSuchMethod" }),
    },
    "GET /v1/gateway/list-services": { unauthenticated: () => http("GET", "/v1/gateway/list-services", { key: false }) },
    "GET /v1/gateway/list-methods": {
      unauthenticated: () => http("GET", "/v1/gateway/list-methods?service=orders", { key: false }),
      invalid: () => http("GET", "/v1/gateway/list-methods"),
      missing: () => http("GET", "/v1/gateway/list-methods?service=nope"),
    },
    "POST /v1/gateway/invoke": {
      unauthenticated: () => http("POST", "/v1/gateway/invoke", { body: getOrder("o-1"), key: false }),
      malformed: () => http("POST", "/v1/gateway/invoke", { body: "{" }),
      invalid: () => http("POST", "/v1/gateway/invoke", { body: { ...getOrder("o-1"), requestData: [1] } }),
      missing: () => http("POST", "/v1/gateway/invoke", { body: { ...getOrder("o-1"), service: "nope" } }),
      upstream: () => http("POST", "/v1/gateway/invoke", { body: getOrder(failOrder) }),
    },
    "POST /v1/gateway/invoke-json": {
      unauthenticated: () => http("POST", "/v1/gateway/invoke-json", { body: invokeReq("orders"), key: false }),
      malformed: () => http("POST", "/v1/gateway/invoke-json", { body: "{" }),
      invalid: () => http("POST", "/v1/gateway/invoke-json", { body: { ...invokeReq("orders"), request_data: "{" } }),
      missing: () => http("POST", "/v1/gateway/invoke-json", { body: invokeReq("nope") }),
      upstream: () => http("POST", "/v1/gateway/invoke-json", { body: invokeReq("orders", failOrder) }),
    },
    "POST /v1/gateway/invoke-stream": {
      unauthenticated: () => http("POST", "/v1/gateway/invoke-stream", { body: getOrder("o-1"), key: false }),
      malformed: () => http("POST", "/v1/gateway/invoke-stream", { body: "{" }),
      invalid: () => http("POST", "/v1/gateway/invoke-stream", { body: { ...getOrder("o-1"), requestData: "text" } }),
      missing: () => http("POST", "/v1/gateway/invoke-stream", { body: { ...getOrder("o-1"), service: "nope" } }),
      upstream: () => http("POST", "/v1/gateway/invoke-stream", { body: getOrder(failOrder) }),
    },
    "WS /v1/gateway/invoke-ws": {
      unauthenticated: async () => (await upgrade("/v1/gateway/invoke-ws", { key: false })).observed,
      malformed: () => invokeWs(["{"]),
      invalid: () => invokeWs([{ op: "start", ...getOrder("o-1"), requestData: 5 }]),
      missing: () => invokeWs([{ op: "start", ...getOrder("o-1"), service: "nope" }]),
      upstream: () => invokeWs([{ op: "start", ...getOrder(failOrder) }]),
    },
    "GET /v1/grpc/{service}/methods": {
      unauthenticated: () => http("GET", "/v1/grpc/orders/methods", { key: false }),
      invalid: () => http("GET", "/v1/grpc/orders/methods?refresh=maybe"),
      missing: () => http("GET", "/v1/grpc/nope/methods"),
    },
    "GET /v1/grpc/{service}/schema/{method+}": {
      unauthenticated: () => http("GET", "/v1/grpc/orders/schema/GetOrder", { key: false }),
      invalid: () => http("GET", "/v1/grpc/orders/schema/GetOrder?type=sideways"),
      missing: () => http("GET", "/v1/grpc/orders/schema/NoSuchMethod"),
    },
    "GET /v1/grpc/{service}/protos": {
      unauthenticated: () => http("GET", "/v1/grpc/orders/protos", { key: false }),
      missing: () => http("GET", "/v1/grpc/nope/protos"),
    },
    "GET /v1/openapi.json": {
      unauthenticated: () => http("GET", "/v1/openapi.json", { key: false }),
    },
    "GET /v1/grpc/{service}/openapi.json": {
      unauthenticated: () => http("GET", "/v1/grpc/orders/openapi.json", { key: false }),
      missing: () => http("GET", "/v1/grpc/nope/openapi.json"),
    },
    "POST /v1/grpc/call": {
      unauthenticated: () => http("POST", "/v1/grpc/call", { body: { service: "orders", method: "GetOrder", request: "{}" }, key: false }),
      malformed: () => http("POST", "/v1/grpc/call", { body: "{" }),
      invalid: () => http("POST", "/v1/grpc/call", { body: { service: "orders", method: "GetOrder", request: "{", metadata: {} } }),
      missing: () => http("POST", "/v1/grpc/call", { body: { service: "nope", method: "GetOrder", request: "{}" } }),
      upstream: () => http("POST", "/v1/grpc/call", { body: { service: "orders", method: "GetOrder", request: JSON.stringify({ orderId: failOrder }) } }),
    },
    "<backend service>/<method>": {
      unauthenticated: () => proxied("GetOrder", "o-1", false),
      missing: () => proxied("NoSuchMethod", "o-1"),
      upstream: () => proxied("GetOrder", failOrder),
    },
    "grpc.reflection.v1.ServerReflection/ServerReflectionInfo": { unauthenticated: () => reflection("v1", false), missing: () => reflection("v1") },
    "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": { unauthenticated: () => reflection("v1alpha", false), missing: () => reflection("v1alpha") },

    "platform.State/SaveState": {
      unauthenticated: () => grpcUnary("platform.State", "SaveState", { service: "orders", key: "order.1", value: "v" }, false),
      invalid: () => grpcUnary("platform.State", "SaveState", { service: "orders", key: "", value: "v" }),
      missing: () => grpcUnary("platform.State", "SaveState", { service: "nope", key: "order.1", value: "v" }),
      upstream: () => grpcUnary("platform.State", "SaveState", { service: "orders", key: "order.upstream", value: "v" }),
    },
    "platform.State/GetState": {
      unauthenticated: () => grpcUnary("platform.State", "GetState", { service: "orders", key: "order.1" }, false),
      invalid: () => grpcUnary("platform.State", "GetState", { service: "orders", key: "" }),
      missing: () => grpcUnary("platform.State", "GetState", { service: "orders", key: "order.never-stored" }),
      upstream: () => grpcUnary("platform.State", "GetState", { service: "orders", key: "order.upstream" }),
    },
    "platform.State/DeleteState": {
      unauthenticated: () => grpcUnary("platform.State", "DeleteState", { service: "orders", key: "order.1" }, false),
      invalid: () => grpcUnary("platform.State", "DeleteState", { service: "orders", key: "" }),
      missing: () => grpcUnary("platform.State", "DeleteState", { service: "orders", key: "order.never-stored" }),
      upstream: () => grpcUnary("platform.State", "DeleteState", { service: "orders", key: "order.upstream" }),
    },
    "platform.State/QueryState": {
      unauthenticated: () => grpcUnary("platform.State", "QueryState", { service: "orders", query: "{}" }, false),
      invalid: () => grpcUnary("platform.State", "QueryState", { service: "orders", query: "{}", limit: -1 }),
      upstream: () => grpcUnary("platform.State", "QueryState", { service: "orders", query: '{"filter":{"EQ":{"name":"upstream"}}}' }),
    },
    "platform.State/GetBulkState": {
      unauthenticated: () => grpcUnary("platform.State", "GetBulkState", { service: "orders", keys: ["order.1"] }, false),
      invalid: () => grpcUnary("platform.State", "GetBulkState", { service: "orders", keys: [""] }),
      missing: () => grpcUnary("platform.State", "GetBulkState", { service: "orders", keys: ["order.never-stored"] }),
      upstream: () => grpcUnary("platform.State", "GetBulkState", { service: "orders", keys: ["order.upstream"] }),
    },
    "platform.State/DeleteBulkState": {
      unauthenticated: () => grpcUnary("platform.State", "DeleteBulkState", { service: "orders", keys: ["order.1"] }, false),
      invalid: () => grpcUnary("platform.State", "DeleteBulkState", { service: "orders", keys: [""] }),
      missing: () => grpcUnary("platform.State", "DeleteBulkState", { service: "orders", keys: ["order.never-stored"] }),
      upstream: () => grpcUnary("platform.State", "DeleteBulkState", { service: "orders", keys: ["order.upstream"] }),
    },
    "POST /v1/state/save-state": {
      unauthenticated: () => http("POST", "/v1/state/save-state", { body: { service: "orders", key: "order.1", value: "v" }, key: false }),
      malformed: () => http("POST", "/v1/state/save-state", { body: "{" }),
      invalid: () => http("POST", "/v1/state/save-state", { body: { service: "orders", key: "", value: "v" } }),
      missing: () => http("POST", "/v1/state/save-state", { body: { service: "nope", key: "order.1", value: "v" } }),
      upstream: () => http("POST", "/v1/state/save-state", { body: { service: "orders", key: "order.upstream", value: "v" } }),
    },
    "GET /v1/state/{service}/{key+}": {
      unauthenticated: () => http("GET", "/v1/state/orders/order.1", { key: false }),
      missing: () => http("GET", "/v1/state/orders/order.never-stored"),
      upstream: () => http("GET", "/v1/state/orders/order.upstream"),
    },
    "DELETE /v1/state/{service}/{key+}": {
      unauthenticated: () => http("DELETE", "/v1/state/orders/order.1", { key: false }),
      invalid: () => http("DELETE", "/v1/state/orders/order.1?publish_change=maybe"),
      missing: () => http("DELETE", "/v1/state/orders/order.never-stored"),
      upstream: () => http("DELETE", "/v1/state/orders/order.upstream"),
    },
    "GET /v1/state/{service}/query": {
      unauthenticated: () => http("GET", "/v1/state/orders/query", { key: false }),
      invalid: () => http("GET", "/v1/state/orders/query?limit=-1"),
      upstream: () => http("GET", `/v1/state/orders/query?query=${encodeURIComponent('{"filter":{"EQ":{"name":"upstream"}}}')}`),
    },
    "GET /v1/state/{service}/bulk": {
      unauthenticated: () => http("GET", "/v1/state/orders/bulk?keys=order.1", { key: false }),
      invalid: () => http("GET", "/v1/state/orders/bulk"),
      missing: () => http("GET", "/v1/state/orders/bulk?keys=order.never-stored"),
      upstream: () => http("GET", "/v1/state/orders/bulk?keys=order.upstream"),
    },
    "DELETE /v1/state/{service}/bulk": {
      unauthenticated: () => http("DELETE", "/v1/state/orders/bulk?keys=order.1", { key: false }),
      invalid: () => http("DELETE", "/v1/state/orders/bulk"),
      missing: () => http("DELETE", "/v1/state/orders/bulk?keys=order.never-stored"),
      upstream: () => http("DELETE", "/v1/state/orders/bulk?keys=order.upstream"),
    },

    "platform.Config/ListServices": { unauthenticated: () => grpcUnary("platform.Config", "ListServices", {}, false) },
    "platform.Config/GetService": {
      unauthenticated: () => grpcUnary("platform.Config", "GetService", { name: "orders" }, false),
      invalid: () => grpcUnary("platform.Config", "GetService", { name: "" }),
      missing: () => grpcUnary("platform.Config", "GetService", { name: "nope" }),
    },
    "GET /v1/config/list-services": { unauthenticated: () => http("GET", "/v1/config/list-services", { key: false }) },
    "GET /v1/config/get-service": {
      unauthenticated: () => http("GET", "/v1/config/get-service?name=orders", { key: false }),
      invalid: () => http("GET", "/v1/config/get-service"),
      missing: () => http("GET", "/v1/config/get-service?name=nope"),
    },

    "platform.Trigger/ScheduleTrigger": {
      unauthenticated: () => grpcUnary("platform.Trigger", "ScheduleTrigger", { name: "t-unauth", target_topic: "tick", schedule: "@every 1h" }, false),
      invalid: () => grpcUnary("platform.Trigger", "ScheduleTrigger", { name: "t-invalid", target_topic: "tick", schedule: "not a schedule" }),
      upstream: () => grpcUnary("platform.Trigger", "ScheduleTrigger", { name: "t-upstream", target_topic: "tick", schedule: "@every 1h" }),
    },
    "platform.Trigger/GetTrigger": {
      unauthenticated: () => grpcUnary("platform.Trigger", "GetTrigger", { name: "t-none" }, false),
      missing: () => grpcUnary("platform.Trigger", "GetTrigger", { name: "t-none" }),
    },
    "platform.Trigger/DeleteTrigger": {
      unauthenticated: () => grpcUnary("platform.Trigger", "DeleteTrigger", { name: "t-none" }, false),
      missing: () => grpcUnary("platform.Trigger", "DeleteTrigger", { name: "t-none" }),
    },
    "platform.Trigger/ListTriggers": { unauthenticated: () => grpcUnary("platform.Trigger", "ListTriggers", {}, false) },
    "POST /v1/trigger/{name}": {
      unauthenticated: () => http("POST", "/v1/trigger/t-rest", { body: { target_topic: "tick", schedule: "@every 1h" }, key: false }),
      malformed: () => http("POST", "/v1/trigger/t-rest", { body: "{" }),
      invalid: () => http("POST", "/v1/trigger/t-rest", { body: { target_topic: "tick", schedule: "not a schedule" } }),
      upstream: () => http("POST", "/v1/trigger/t-upstream-rest", { body: { target_topic: "tick", schedule: "@every 1h" } }),
    },
    "GET /v1/trigger/{name}": { unauthenticated: () => http("GET", "/v1/trigger/t-none", { key: false }), missing: () => http("GET", "/v1/trigger/t-none") },
    "DELETE /v1/trigger/{name}": { unauthenticated: () => http("DELETE", "/v1/trigger/t-none", { key: false }), missing: () => http("DELETE", "/v1/trigger/t-none") },
    "GET /v1/trigger": { unauthenticated: () => http("GET", "/v1/trigger", { key: false }) },

    "io.cloudevents.v1.Pubsub/PublishEvent": {
      unauthenticated: () => grpcUnary("io.cloudevents.v1.Pubsub", "PublishEvent", { topic: "t", cloudevent }, false),
      invalid: () => grpcUnary("io.cloudevents.v1.Pubsub", "PublishEvent", { topic: "", cloudevent }),
      upstream: () => grpcUnary("io.cloudevents.v1.Pubsub", "PublishEvent", { topic: "upstream", cloudevent }),
    },
    "io.cloudevents.v1.Pubsub/Subscribe": {
      unauthenticated: () => subscribe(["t"], false),
      invalid: () => subscribe([""]),
      upstream: () => subscribe(["upstream"]),
    },
    "io.cloudevents.v1.Pubsub/Unsubscribe": {
      unauthenticated: () => grpcUnary("io.cloudevents.v1.Pubsub", "Unsubscribe", { subscription_id: "x" }, false),
      invalid: () => grpcUnary("io.cloudevents.v1.Pubsub", "Unsubscribe", { subscription_id: "" }),
      missing: () => grpcUnary("io.cloudevents.v1.Pubsub", "Unsubscribe", { subscription_id: "no-such-subscription" }),
    },
    "POST /v1/pubsub": {
      unauthenticated: () => http("POST", "/v1/pubsub", { body: ceJson(1), key: false }),
      invalid: () => http("POST", "/v1/pubsub", { body: ceJson(1) }),
    },
    "POST /v1/pubsub/{topic}": {
      unauthenticated: () => http("POST", "/v1/pubsub/t", { body: ceJson(1), headers: { "content-type": "application/cloudevents+json" }, key: false }),
      malformed: () => http("POST", "/v1/pubsub/t", { body: "{", headers: { "content-type": "application/cloudevents+json" } }),
      invalid: () => http("POST", "/v1/pubsub/t", { body: ceJson(1, { source: "" }), headers: { "content-type": "application/cloudevents+json" } }),
      upstream: () => http("POST", "/v1/pubsub/upstream", { body: ceJson(1), headers: { "content-type": "application/cloudevents+json" } }),
    },
    "POST /v1/pubsub/tokens": {
      unauthenticated: () => http("POST", "/v1/pubsub/tokens", { body: { topics: ["t"] }, key: false }),
      malformed: () => http("POST", "/v1/pubsub/tokens", { body: "{" }),
      invalid: () => http("POST", "/v1/pubsub/tokens", { body: { topics: [] } }),
    },
    "GET /v1/pubsub/ws": {
      unauthenticated: () => http("GET", "/v1/pubsub/ws", { key: false }),
      invalid: () => http("GET", "/v1/pubsub/ws"),
    },
    "WS /v1/pubsub/ws upgrade": {
      unauthenticated: async () => (await upgrade("/v1/pubsub/ws", { key: false })).observed,
      forbidden: async () => (await upgrade("/v1/pubsub/ws", { origin: EVIL_ORIGIN })).observed,
    },
    "WS /v1/pubsub/ws any frame": { malformed: () => pubsubFrame("{") },
    "WS /v1/pubsub/ws op subscribe": { invalid: () => pubsubFrame({ op: "subscribe", topics: [""] }), upstream: () => pubsubFrame({ op: "subscribe", topics: ["upstream"] }) },
    "WS /v1/pubsub/ws op unsubscribe": {
      invalid: () => pubsubFrame({ op: "unsubscribe", topics: "t" }),
      missing: () => pubsubFrame({ op: "unsubscribe", topics: ["never-subscribed"] }),
    },
    "WS /v1/pubsub/ws op publish": {
      invalid: () => pubsubFrame({ op: "publish", topic: "t" }),
      upstream: () => pubsubFrame({ op: "publish", topic: "upstream", cloudevent: ceJson(1) }),
    },
    "GET /v1/pubsub/events": {
      unauthenticated: () => http("GET", "/v1/pubsub/events?topic=t", { key: false }),
      forbidden: () => http("GET", "/v1/pubsub/events?topic=t", { headers: { origin: EVIL_ORIGIN } }),
      invalid: () => http("GET", "/v1/pubsub/events"),
      upstream: () => http("GET", "/v1/pubsub/events?topic=upstream"),
    },
    "POST /:service/:method": {
      unauthenticated: () => connectUnary("/shop.v1.OrderService/GetOrder", { orderId: "o-1" }, { key: false }),
      forbidden: () => connectUnary("/shop.v1.OrderService/GetOrder", { orderId: "o-1" }, { origin: EVIL_ORIGIN }),
      malformed: () => connectUnary("/shop.v1.OrderService/GetOrder", "{"),
      invalid: () => connectUnary("/shop.v1.OrderService/GetOrder", { noSuchField: 1 }),
      missing: () => connectUnary("/shop.v1.OrderService/NoSuchMethod", {}),
      upstream: () => connectUnary("/shop.v1.OrderService/GetOrder", { orderId: failOrder }),
    },
    "OPTIONS /:service/:method": {
      // A CORS preflight (Origin and Access-Control-Request-Method): any other OPTIONS goes on to the REST routes.
      unauthenticated: () => http("OPTIONS", "/shop.v1.OrderService/GetOrder", { key: false, headers: { origin: gw.http, "access-control-request-method": "POST" } }),
      forbidden: () => http("OPTIONS", "/shop.v1.OrderService/GetOrder", { key: false, headers: { origin: EVIL_ORIGIN, "access-control-request-method": "POST" } }),
    },
    "OPTIONS /v1/pubsub/events": {
      unauthenticated: () => http("OPTIONS", "/v1/pubsub/events", { key: false, headers: { origin: gw.http } }),
      forbidden: () => http("OPTIONS", "/v1/pubsub/events", { key: false, headers: { origin: EVIL_ORIGIN } }),
    },
    "GET /dapr/subscribe": { unauthenticated: () => http("GET", "/dapr/subscribe", { key: false }) },
    "GET /health": { unauthenticated: () => http("GET", "/health", { key: false }) },
    "GET /metrics": { unauthenticated: () => http("GET", "/metrics", { key: false }) },
    "GET /console": { unauthenticated: () => http("GET", "/console", { key: false }) },
    "GET /console/": { unauthenticated: () => http("GET", "/console/", { key: false }) },
    "GET /console/{file}": {
      unauthenticated: () => http("GET", "/console/app.js", { key: false }),
      missing: () => http("GET", "/console/nope.js", { key: false }),
    },
  };

  it("lists every route the gateway serves, and serves every route it lists", () => {
    checkListing(gw, EMBEDDED_ROWS);
  });

  it("docs/errors.md shows the table as it is (npx tsx scripts/errors-doc.ts rewrites it)", () => {
    const doc = readFileSync(DOC_PATH, "utf8");
    assert.equal(doc, withOutcomeTable(doc), "docs/errors.md is out of date: run npx tsx scripts/errors-doc.ts");
  });

  it("has a probe for exactly the failures the table lists", () => checkProbes(EMBEDDED_ROWS, probes));

  driveRows(EMBEDDED_ROWS, () => probes);
});

/** Dapr's app callbacks, served only with `--sidecar dapr` (here against the Dapr-protocol test sidecar). */
describe("route-by-outcome table: the Dapr app callbacks", () => {
  const APP_TOKEN = "outcomes-app-token";
  const fixture = runtimeFixtures.find((f) => f.name === "dapr")!;
  const gw = useGatewayOn(fixture, { apiKeys: [KEY], appApiToken: APP_TOKEN });

  /** A unary call of a Dapr callback service; `token` sends the dapr-api-token. */
  async function callback(service: "AppCallback" | "AppCallbackAlpha" | "AppCallbackHealthCheck", method: string, req: object, token: boolean): Promise<Observed> {
    const def = service === "AppCallback" ? appCallbackWithJobEvent() : daprService(service);
    const Ctor = grpc.makeGenericClientConstructor(def, service);
    const client = new Ctor(gw().grpcAddress, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    if (token) md.set("dapr-api-token", APP_TOKEN);
    try {
      return inBandOf(await unary(client, method, req, md, { deadline: Date.now() + TIMEOUT_MS }));
    } catch (e) {
      return { via: "status", code: codeNameOf((e as grpc.ServiceError).code) };
    } finally {
      client.close();
    }
  }

  const unimplemented = (service: "AppCallback" | "AppCallbackAlpha", method: string) => ({
    unauthenticated: () => callback(service, method, {}, false),
    missing: () => callback(service, method, {}, true),
  });
  const jobEvent = (service: "AppCallback" | "AppCallbackAlpha", method: string) => ({
    unauthenticated: () => callback(service, method, { name: "t-none" }, false),
    invalid: () => callback(service, method, { name: "" }, true),
  });
  const probes: Probes = {
    "dapr.proto.runtime.v1.AppCallback/OnInvoke": unimplemented("AppCallback", "OnInvoke"),
    "dapr.proto.runtime.v1.AppCallback/OnTopicEvent": unimplemented("AppCallback", "OnTopicEvent"),
    "dapr.proto.runtime.v1.AppCallback/ListInputBindings": unimplemented("AppCallback", "ListInputBindings"),
    "dapr.proto.runtime.v1.AppCallback/OnBindingEvent": unimplemented("AppCallback", "OnBindingEvent"),
    "dapr.proto.runtime.v1.AppCallback/OnBulkTopicEvent": unimplemented("AppCallback", "OnBulkTopicEvent"),
    "dapr.proto.runtime.v1.AppCallbackAlpha/OnBulkTopicEventAlpha1": unimplemented("AppCallbackAlpha", "OnBulkTopicEventAlpha1"),
    "dapr.proto.runtime.v1.AppCallback/ListTopicSubscriptions": { unauthenticated: () => callback("AppCallback", "ListTopicSubscriptions", {}, false) },
    "dapr.proto.runtime.v1.AppCallbackHealthCheck/HealthCheck": { unauthenticated: () => callback("AppCallbackHealthCheck", "HealthCheck", {}, false) },
    "dapr.proto.runtime.v1.AppCallback/OnJobEvent": jobEvent("AppCallback", "OnJobEvent"),
    "dapr.proto.runtime.v1.AppCallbackAlpha/OnJobEventAlpha1": jobEvent("AppCallbackAlpha", "OnJobEventAlpha1"),
  };

  it("lists every route the gateway serves on the Dapr adapter, callbacks included", () => checkListing(gw(), OUTCOMES));

  it("has a probe for exactly the failures the table lists", () => checkProbes(DAPR_ROWS, probes));

  driveRows(DAPR_ROWS, () => probes);
});
