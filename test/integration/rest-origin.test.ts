/**
 * Browser Origin and Host rules on the REST front (and the Host rule on the web fronts): another site must not drive
 * the REST API through a visitor's browser. A `no-cors` fetch or a form post is a "simple" request (text/plain, no
 * preflight), so the gateway itself must refuse it: 403 before the handler runs and before the body is read, for an
 * Origin that is neither the gateway's own nor on --cors-origin. With no API key, a Host that is not loopback is
 * refused on every front (DNS rebinding: `evil.example` re-resolved to 127.0.0.1 makes the page "same origin").
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { WebSocket } from "ws";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const SERVICES = [{ name: "orders", state: { storeName: "orders-store", keys: [] } }];
const EVIL = "http://evil.example";
const ALLOWED = "http://app.example:3000";

interface Reply {
  status: number;
  body: string;
}

/** One HTTP/1.1 request with exactly these headers (Host included, which fetch cannot set). */
function call(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, method, path, headers: { ...(body !== undefined ? { "content-length": String(Buffer.byteLength(body)) } : {}), ...headers } }, (res) => {
      let data = "";
      res.on("data", (d: Buffer) => (data += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body: data }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** A save-state body sent as a no-cors fetch or a form would send it: text/plain, no preflight. */
const saveBody = (key: string, value: string): string => JSON.stringify({ service: "orders", key, value });
const TEXT = { "content-type": "text/plain;charset=UTF-8" };

/** The upgrade status of a WebSocket handshake: 101 when it opened, else the refusal's status. */
function upgradeStatus(url: string, protocols: string[], headers: Record<string, string>): Promise<number> {
  const ws = new WebSocket(url, protocols, { headers });
  return new Promise((resolve) => {
    ws.on("error", () => undefined);
    ws.on("open", () => {
      ws.close();
      resolve(101);
    });
    ws.on("unexpected-response", (req, res) => {
      res.resume();
      req.destroy();
      resolve(res.statusCode!);
    });
  });
}

describe("REST: a browser Origin not allowed is refused before anything runs (no API key)", () => {
  let gw: TestGateway;
  let port: number;
  const stored = async (key: string): Promise<number> => (await call(port, "GET", `/v1/state/orders/${key}`, { host: `127.0.0.1:${port}` })).status;

  before(async () => {
    gw = await startTestGateway({ services: SERVICES, corsOrigins: [ALLOWED] });
    port = gw.gateway.httpPort;
  });
  after(() => gw.close());

  it("a foreign Origin's simple POST is 403 naming the origin, and the write does not happen", async () => {
    const r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, origin: EVIL, ...TEXT }, saveBody("k-evil", "x"));
    assert.equal(r.status, 403);
    const body = JSON.parse(r.body) as { code: number; message: string };
    assert.equal(body.code, 7, "PERMISSION_DENIED");
    assert.match(body.message, /^origin http:\/\/evil\.example is not allowed \(same origin or --cors-origin\)$/);
    assert.equal(await stored("k-evil"), 404, "state unchanged");
  });

  it("the same on invoke, invoke-json, grpc/call, a trigger and an unknown path; a long Origin is cut in the message", async () => {
    for (const path of ["/v1/gateway/invoke", "/v1/gateway/invoke-json", "/v1/grpc/call", "/v1/trigger/t1", "/no/such/route"]) {
      const r = await call(port, "POST", path, { host: `127.0.0.1:${port}`, origin: EVIL, ...TEXT }, "{}");
      assert.equal(r.status, 403, path);
      assert.match(r.body, /origin http:\/\/evil\.example is not allowed/, path);
    }
    const long = `http://${"a".repeat(5000)}.example`;
    const r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, origin: long, ...TEXT }, saveBody("k-long", "x"));
    assert.equal(r.status, 403);
    assert.ok(r.body.length < 400, `message bounded (${r.body.length} bytes)`);
    assert.match(r.body, /more characters/);
  });

  it("'null' (a sandboxed frame or file: page) and another port of the same host are foreign origins", async () => {
    for (const origin of ["null", `http://127.0.0.1:${port + 1}`, `http://localhost:${port + 1}`]) {
      const r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, origin, ...TEXT }, saveBody("k-null", "x"));
      assert.equal(r.status, 403, origin);
    }
    assert.equal(await stored("k-null"), 404);
  });

  it("is answered before the body is read: a head announcing a body that never comes still gets its 403", async () => {
    const reply = await new Promise<string>((resolve) => {
      const sock = connect(port, "127.0.0.1");
      let data = "";
      sock.on("data", (d) => {
        data += d.toString();
        if (data.includes("\r\n\r\n") && data.includes("}")) sock.destroy();
      });
      sock.on("close", () => resolve(data));
      sock.write(`POST /v1/state/save-state HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${EVIL}\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n`);
      setTimeout(() => sock.destroy(), 3000).unref();
    });
    assert.match(reply, /^HTTP\/1\.1 403 /);
  });

  it("no Origin (curl, SDKs, server to server) passes, text/plain body included", async () => {
    const r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, ...TEXT }, saveBody("k-plain", "v"));
    assert.equal(r.status, 200, r.body);
    assert.equal(await stored("k-plain"), 200);
  });

  it("an allowed Origin (--cors-origin) and the gateway's own origin pass", async () => {
    let r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, origin: ALLOWED, ...TEXT }, saveBody("k-allowed", "v"));
    assert.equal(r.status, 200, r.body);
    r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}`, ...TEXT }, saveBody("k-same", "v"));
    assert.equal(r.status, 200, r.body);
    r = await call(port, "GET", "/health", { host: `localhost:${port}`, origin: `http://localhost:${port}` });
    assert.equal(r.status, 200, r.body);
    assert.equal(await stored("k-allowed"), 200);
    assert.equal(await stored("k-same"), 200);
  });

  it("Host evil.example:PORT is refused on every keyed route (DNS rebinding), same-origin or without Origin; loopback names pass", async () => {
    const evilHost = `evil.example:${port}`;
    const variants: Array<Record<string, string>> = [{ host: evilHost }, { host: evilHost, origin: `http://${evilHost}` }];
    for (const headers of variants) {
      const w = await call(port, "POST", "/v1/state/save-state", { ...headers, ...TEXT }, saveBody("k-rebound", "x"));
      assert.equal(w.status, 403, JSON.stringify(headers));
      assert.match(w.body, /host evil\.example:\d+ is not a loopback name/);
      const read = await call(port, "GET", "/v1/state/orders/k-plain", headers);
      assert.equal(read.status, 403, "a rebound page cannot read either");
    }
    // The rule stands in for the key: routes that need none even with keys configured answer any Host without Origin.
    assert.equal((await call(port, "GET", "/health", { host: evilHost })).status, 200);
    assert.equal((await call(port, "GET", "/metrics", { host: evilHost })).status, 200);
    assert.equal((await call(port, "GET", "/health", { host: evilHost, origin: `http://${evilHost}` })).status, 403, "a rebound name is not same-origin");
    assert.equal(await stored("k-rebound"), 404);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`, "127.0.0.1", `127.1.2.3:${port}`]) {
      assert.equal((await call(port, "GET", "/v1/state/orders/k-plain", { host })).status, 200, host);
    }
    for (const host of [`evil.example`, `127.0.0.1.evil.example:${port}`, `localhost.evil.example:${port}`, `[::2]:${port}`, `127.0.0.1:${port}@evil.example`, `0.0.0.0:${port}`]) {
      assert.equal((await call(port, "GET", "/v1/state/orders/k-plain", { host })).status, 403, host);
    }
  });

  it("the host of a --cors-origin entry is served (the operator named it)", async () => {
    assert.equal((await call(port, "GET", "/v1/state/orders/k-plain", { host: "app.example:3000" })).status, 200);
    assert.equal((await call(port, "GET", "/v1/state/orders/k-plain", { host: "app.example:3001" })).status, 403);
  });

  it("the web fronts refuse a rebound Host too: pub/sub WebSocket and SSE, invoke-ws, browser RPC", async () => {
    const evilHost = `evil.example:${port}`;
    const ws = `ws://127.0.0.1:${port}`;
    assert.equal(await upgradeStatus(`${ws}/v1/pubsub/ws`, ["pubsub.v1"], { host: evilHost, origin: `http://${evilHost}` }), 403);
    assert.equal(await upgradeStatus(`${ws}/v1/gateway/invoke-ws`, ["invoke.v1"], { host: evilHost, origin: `http://${evilHost}` }), 403);
    assert.equal(await upgradeStatus(`${ws}/v1/pubsub/ws`, ["pubsub.v1"], { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` }), 101, "loopback same-origin opens");
    const sse = await call(port, "GET", "/v1/pubsub/events?topic=t", { host: evilHost });
    assert.equal(sse.status, 403);
    assert.match(sse.body, /is not a loopback name/);
    const rpc = await call(port, "POST", "/orders.v1.Orders/Get", { host: evilHost, origin: `http://${evilHost}`, "content-type": "application/json", "connect-protocol-version": "1" }, "{}");
    assert.equal(rpc.status, 403);
  });
});

describe("REST with API keys: the Origin rule holds, the Host rule does not apply", () => {
  const KEY = "origin-key";
  let gw: TestGateway;
  let port: number;
  before(async () => {
    gw = await startTestGateway({ services: SERVICES, apiKeys: [KEY] });
    port = gw.gateway.httpPort;
  });
  after(() => gw.close());

  it("a foreign Origin is 403 even with a valid key; any Host is served with the key", async () => {
    let r = await call(port, "POST", "/v1/state/save-state", { host: `127.0.0.1:${port}`, origin: EVIL, "x-api-key": KEY, ...TEXT }, saveBody("k1", "x"));
    assert.equal(r.status, 403);
    r = await call(port, "POST", "/v1/state/save-state", { host: `gw.example.com:${port}`, origin: `http://gw.example.com:${port}`, "x-api-key": KEY, ...TEXT }, saveBody("k2", "v"));
    assert.equal(r.status, 200, "a same-origin page of a keyed gateway served under its own name (the console behind a proxy)");
    r = await call(port, "POST", "/v1/state/save-state", { host: `gw.example.com:${port}`, ...TEXT }, saveBody("k3", "v"));
    assert.equal(r.status, 401, "the key still decides");
  });
});
