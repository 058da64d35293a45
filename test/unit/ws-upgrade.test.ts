import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type uws from "uWebSockets.js";
import { createAuthenticator } from "../../src/ops/auth.js";
import type { PubsubOps } from "../../src/ops/pubsub.js";
import { createOriginPolicy, createTokenIssuer, type Grant } from "../../src/web/access.js";
import type { WebDeps } from "../../src/web/web-deps.js";
import { mountWebSocket } from "../../src/web/ws.js";

const KEY = "unit-key";
const tokens = createTokenIssuer("unit-test-token-secret");

/** What the upgrade handler did to the response, in order, and the grant it upgraded with. */
interface Trace {
  calls: string[];
  grant?: Grant;
  status?: string;
  body?: string;
}

/**
 * The /v1/pubsub/ws upgrade handler, taken from mountWebSocket over a recording app (no sockets: this pins down what the
 * handler does before it returns, which a real connection cannot observe).
 */
function upgradeHandler(): NonNullable<uws.WebSocketBehavior<unknown>["upgrade"]> {
  let behavior: uws.WebSocketBehavior<unknown> | undefined;
  const app = { ws: (_pattern: string, b: uws.WebSocketBehavior<unknown>) => ((behavior = b), app) } as unknown as uws.TemplatedApp;
  const noop = { inc() {}, dec() {} };
  const deps = {
    auth: createAuthenticator([KEY]),
    tokens,
    origins: createOriginPolicy([]),
    metrics: { subscribers: noop, deliveries: noop, reaped: noop, refused: noop },
    hub: {},
    logger: {},
    boundBytes: 1 << 20,
    boundEvents: 1024,
    maxFrameBytes: 65536,
    idleTimeoutSeconds: 60,
    isClosing: () => false,
    connections: { open: 0, max: 100, loggedAt: 0 },
  } as unknown as WebDeps;
  mountWebSocket(app, deps, {} as PubsubOps);
  return behavior!.upgrade!;
}

/** Run the handler on a request with these headers and query; returns the trace once the handler has returned. */
function upgrade(headers: Record<string, string>, query = ""): Trace {
  const t: Trace = { calls: [] };
  const res = {
    upgrade(data: { grant: Grant }) {
      t.calls.push("upgrade");
      t.grant = data.grant;
    },
    onAborted() {
      t.calls.push("onAborted");
      return res;
    },
    cork(f: () => void) {
      t.calls.push("cork");
      f();
      return res;
    },
    writeStatus(s: string) {
      t.status = s;
      return res;
    },
    writeHeader() {
      return res;
    },
    end(body: string) {
      t.body = body;
      return res;
    },
  };
  const req = {
    forEach(cb: (k: string, v: string) => void) {
      for (const [k, v] of Object.entries({ "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", ...headers })) cb(k, v);
    },
    getQuery: () => query,
  };
  upgradeHandler()(res as unknown as uws.HttpResponse, req as unknown as uws.HttpRequest, {} as uws.us_socket_context_t);
  return t;
}

describe("/v1/pubsub/ws upgrade: decided inside uWS's upgrade handler", () => {
  // An upgrade done after an await went through res.cork(), which in the uWS we ship sometimes dropped the socket right
  // after open on a worker thread (docs/web-pubsub.md, "Browser tokens"). The handler must upgrade before it returns.
  it("a token (query or subprotocol) upgrades before the handler returns: no abort handler, no cork", async () => {
    const { token } = tokens.issue({ topics: ["a*"], ttl_seconds: 60 });
    for (const t of [upgrade({}, `token=${encodeURIComponent(token)}`), upgrade({ "sec-websocket-protocol": `pubsub.v1, token.${token}` })]) {
      assert.deepEqual(t.calls, ["upgrade"]);
      assert.deepEqual(t.grant?.topics, ["a*"]);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(t.calls, ["upgrade"], "nothing happens later");
    }
  });

  it("an x-api-key upgrades the same way", () => {
    const t = upgrade({ "x-api-key": KEY });
    assert.deepEqual(t.calls, ["upgrade"]);
    assert.equal(t.grant?.topics, null);
  });

  it("a bad or expired token is refused 401 before the handler returns, without echoing the token", () => {
    const { token } = tokens.issue({ topics: ["a"], ttl_seconds: 60 });
    const tampered = token.slice(0, -3) + (token.endsWith("AAA") ? "BBB" : "AAA");
    const t = upgrade({}, `token=${tampered}`);
    assert.deepEqual(t.calls, ["cork"]);
    assert.equal(t.status, "401 Unauthorized");
    assert.match(t.body!, /token is not valid/);
    assert.ok(!t.body!.includes(tampered.split(".")[1]!), "the body never echoes the token");
    const none = upgrade({}, "token=e30.e30.");
    assert.deepEqual([none.calls, none.status], [["cork"], "401 Unauthorized"]);
  });
});
