import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { WebSocket, type ClientOptions } from "ws";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { openFrameSocket } from "../support/web.js";

const KEY = "ws-auth-key";
const ALLOWED = "http://allowed.example";
const keyProtocol = (key: string): string => `key.${Buffer.from(key, "utf8").toString("base64url")}`;

describe("WebSocket /v1/gateway/invoke-ws: browser auth (key subprotocol) and Origin", () => {
  let backend: OrderBackend;
  let gw: TestGateway;
  let url: string;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], corsOrigins: [ALLOWED], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    url = gw.http.replace("http:", "ws:") + "/v1/gateway/invoke-ws";
  });
  after(async () => {
    await gw.close();
    backend.close();
  });

  /** Open a socket or fail; frames are collected and `closed` resolves with the close code. */
  const open = (protocols: string[], opts: ClientOptions = {}, target = url) => openFrameSocket(target, protocols, opts);

  /** The HTTP status and body of an upgrade the gateway refuses (fails if it opens). */
  function refused(protocols: string[], opts: ClientOptions = {}, target = url): Promise<{ status: number; body: string }> {
    const ws = new WebSocket(target, protocols, opts);
    return new Promise((resolve, reject) => {
      ws.on("error", () => undefined);
      ws.on("open", () => {
        ws.close();
        reject(new Error("the upgrade was accepted"));
      });
      ws.on("unexpected-response", (req, res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => {
          req.destroy();
          resolve({ status: res.statusCode!, body });
        });
      });
    });
  }

  it("takes the key from the offered subprotocols, selects invoke.v1 and calls a client-streaming method", async () => {
    const c = await open(["invoke.v1", keyProtocol(KEY)]);
    assert.equal(c.ws.protocol, "invoke.v1", "the selected subprotocol is invoke.v1, never the key");
    c.send({ op: "start", service: "orders", method: "UploadOrders" });
    c.send({ op: "send", requestData: { orderId: "s1" } });
    c.send({ op: "send", requestData: { orderId: "s2" } });
    c.send({ op: "end" });
    assert.equal(await c.closed, 1000);
    assert.deepEqual(c.frames, [
      { op: "result", result: { orders: [{ orderId: "s1" }, { orderId: "s2" }] } },
      { op: "status", status: { success: true, status: "OK", message: "" } },
    ]);
  });

  it("a wrong, missing or malformed key is 401 and the body never echoes it", async () => {
    const wrong = await refused(["invoke.v1", keyProtocol("not-the-key")]);
    assert.equal(wrong.status, 401);
    assert.match(wrong.body, /invalid API key/);
    assert.doesNotMatch(wrong.body, /not-the-key|bm90LXRoZS1rZXk/);
    const none = await refused(["invoke.v1"]);
    assert.equal(none.status, 401);
    assert.match(none.body, /key\.<base64url key>/, "the refusal tells a browser how to pass the key");
    const malformed = await refused(["invoke.v1", "key.a.b"]);
    assert.equal(malformed.status, 401);
    assert.match(malformed.body, /base64url/);
  });

  it("two credentials are refused as ambiguous: header plus subprotocol, two key subprotocols, two header values", async () => {
    const both = await refused(["invoke.v1", keyProtocol(KEY)], { headers: { "x-api-key": KEY } });
    assert.equal(both.status, 401);
    assert.match(both.body, /ambiguous/);
    const twoKeys = await refused(["invoke.v1", keyProtocol(KEY), keyProtocol("other")]);
    assert.equal(twoKeys.status, 401);
    assert.match(twoKeys.body, /more than once/);
    const twoHeaders = await refused([], { headers: { "x-api-key": `${KEY}, other` } });
    assert.equal(twoHeaders.status, 401);
    assert.match(twoHeaders.body, /more than once/);
    // The header form alone still works.
    const c = await open([], { headers: { "x-api-key": KEY } });
    c.ws.close();
  });

  it("each credential refusal is 401 with its exact google.rpc.Status body", async () => {
    const HINT = " (browsers: offer the subprotocols invoke.v1 and key.<base64url key>)";
    const cases: Array<[string, string[], ClientOptions, string]> = [
      ["no key", ["invoke.v1"], {}, `missing or invalid x-api-key${HINT}`],
      ["a wrong header key", [], { headers: { "x-api-key": "nope" } }, `missing or invalid x-api-key${HINT}`],
      ["two header keys", [], { headers: { "x-api-key": `${KEY}, other` } }, "x-api-key is given more than once; send exactly one key"],
      ["a wrong subprotocol key", ["invoke.v1", keyProtocol("nope")], {}, "missing or invalid API key (key.* subprotocol)"],
      ["a key that is not base64url", ["invoke.v1", "key.a.b"], {}, "the key.* subprotocol must carry the API key base64url-encoded (A-Z a-z 0-9 - _, no padding)"],
      ["two subprotocol keys", ["invoke.v1", keyProtocol(KEY), keyProtocol("other")], {}, "the API key is offered more than once as a key.* subprotocol (ambiguous); offer exactly one"],
      ["a header and a subprotocol", ["invoke.v1", keyProtocol(KEY)], { headers: { "x-api-key": KEY } }, "two credentials (x-api-key and a key.* subprotocol) are ambiguous; send exactly one"],
    ];
    for (const [what, protocols, opts, message] of cases) {
      const r = await refused(protocols, opts);
      assert.equal(r.status, 401, what);
      assert.deepEqual(JSON.parse(r.body), { code: 16, message, details: [] }, what);
    }
  });

  it("Origin: same-origin and --cors-origin pass, any other origin is 403 before the key is looked at", async () => {
    const same = await open(["invoke.v1", keyProtocol(KEY)], { origin: gw.http });
    same.send({ op: "start", service: "orders", method: "SyncOrders", requestData: { orderId: "o1" } });
    same.send({ op: "end" });
    await same.closed;
    assert.deepEqual(same.frames[0], { op: "result", result: { orderId: "echo:o1" } });
    const listed = await open(["invoke.v1", keyProtocol(KEY)], { origin: ALLOWED });
    listed.ws.close();
    const other = await refused(["invoke.v1", keyProtocol(KEY)], { origin: "http://evil.example" });
    assert.equal(other.status, 403);
    assert.match(other.body, /origin http:\/\/evil\.example is not allowed/);
    // Same host, other port: another origin.
    const port = Number(new URL(gw.http).port);
    assert.equal((await refused(["invoke.v1", keyProtocol(KEY)], { origin: `http://127.0.0.1:${port + 1}` })).status, 403);
    assert.equal((await refused(["invoke.v1", keyProtocol(KEY)], { origin: "null" })).status, 403);
  });

  it("the pub/sub WebSocket applies the same Origin rule: same-origin passes without a --cors-origin entry", async () => {
    const ws = gw.http.replace("http:", "ws:") + "/v1/pubsub/ws";
    const same = await open([], { origin: gw.http, headers: { "x-api-key": KEY } }, ws);
    same.ws.close();
    assert.equal((await refused([], { origin: "http://evil.example", headers: { "x-api-key": KEY } }, ws)).status, 403);
  });
});
