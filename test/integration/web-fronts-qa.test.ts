import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import WebSocket from "ws";
import * as grpc from "@grpc/grpc-js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";

const KEY = "qa-key";
const WS_HEAD: Array<[string, string]> = [
  ["Connection", "Upgrade"],
  ["Upgrade", "websocket"],
  ["Sec-WebSocket-Version", "13"],
  ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
];

/**
 * Send a GET with exactly these header lines (repeats included, which fetch and ws cannot send) and resolve with the
 * status line and the start of the body.
 */
function rawGet(gw: TestGateway, path: string, headers: Array<[string, string]>): Promise<{ status: number; body: string }> {
  const port = Number(new URL(gw.http).port);
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`));
    let buf = "";
    const t = setTimeout(() => (s.destroy(), reject(new Error(`no answer to GET ${path}: ${buf.slice(0, 100)}`))), 5000);
    s.on("data", (d) => {
      buf += d.toString("latin1");
      const head = buf.indexOf("\r\n\r\n");
      if (head === -1) return;
      clearTimeout(t);
      s.destroy();
      resolve({ status: Number(buf.split(" ")[1]), body: buf.slice(head + 4, head + 400) });
    });
    s.on("error", reject);
  });
}

async function token(gw: TestGateway, topics: string[]): Promise<string> {
  const r = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ topics, ttl_seconds: 60 }) });
  assert.equal(r.status, 200);
  return ((await r.json()) as { token: string }).token;
}

describe("QA of the web fronts (WebSocket, SSE, invoke-ws, invoke-stream)", () => {
  let gw: TestGateway;
  let backend: OrderBackend;
  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], tokenSecret: "qa-secret-of-some-length", services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
  });
  after(async () => {
    await gw?.close();
    backend?.close();
  });

  it("a repeated x-api-key is refused 401 on every uWS front, whichever copy comes first (as REST does)", async () => {
    const routes: Array<[string, Array<[string, string]>]> = [
      ["/v1/pubsub/ws", WS_HEAD],
      ["/v1/gateway/invoke-ws", WS_HEAD],
      ["/v1/pubsub/events?topic=a", []],
      ["/v1/gateway/list-services", []],
    ];
    for (const [path, head] of routes) {
      for (const keys of [[KEY, "wrong"], ["wrong", KEY], [KEY, KEY]]) {
        const r = await rawGet(gw, path, [...head, ...keys.map((k): [string, string] => ["x-api-key", k])]);
        assert.equal(r.status, 401, `${path} with x-api-key ${keys.join(" then ")}: ${r.body}`);
        assert.match(r.body, /x-api-key is given more than once/, path);
      }
      // One key still passes.
      const ok = await rawGet(gw, path, [...head, ["x-api-key", KEY]]);
      assert.ok(ok.status === 101 || ok.status === 200, `${path} with one key: ${ok.status}`);
    }
  });

  it("two different tokens (query and Sec-WebSocket-Protocol, or ?token= twice) are refused, not resolved by picking one", async () => {
    const ta = await token(gw, ["a"]);
    const tb = await token(gw, ["b"]);
    const ws = await rawGet(gw, `/v1/pubsub/ws?token=${ta}`, [...WS_HEAD, ["Sec-WebSocket-Protocol", `pubsub.v1, token.${tb}`]]);
    assert.equal(ws.status, 401, ws.body);
    assert.match(ws.body, /two different tokens/);
    const sse = await rawGet(gw, `/v1/pubsub/events?topic=a&token=${ta}&token=${tb}`, []);
    assert.equal(sse.status, 401, sse.body);
    assert.doesNotMatch(sse.body, new RegExp(ta.slice(-20)), "the refusal never echoes a token");
    // The same token in both places is one credential.
    const same = await rawGet(gw, `/v1/pubsub/ws?token=${ta}`, [...WS_HEAD, ["Sec-WebSocket-Protocol", `pubsub.v1, token.${ta}`]]);
    assert.equal(same.status, 101, same.body);
  });
});

describe("QA of invoke-stream: echoed input", () => {
  it("an unknown 100 KB field name in POST /v1/gateway/invoke-stream is truncated in the in-band error", async () => {
    const backend = await startOrderBackend();
    const gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    try {
      const big = "f".repeat(100_000);
      const r = await fetch(`${gw.http}/v1/gateway/invoke-stream`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ service: "orders", method: "GetOrder", [big]: 1 }) });
      const text = await r.text();
      const status = (JSON.parse(text.trim()) as { status: { status: string; message: string } }).status;
      assert.equal(status.status, "INVALID_ARGUMENT");
      assert.match(status.message, /is not a field of the invoke-stream request/);
      assert.ok(text.length < 1000, `reply is ${text.length} bytes`);
    } finally {
      await gw.close();
      backend.close();
    }
  });
});

describe("QA of invoke-ws: oversize frames", () => {
  it("a frame over --max-body-bytes gets a RESOURCE_EXHAUSTED status and a 1009 close, as /v1/pubsub/ws does, not a bare drop", async () => {
    const gw = await startTestGateway({ apiKeys: [KEY], maxBodyBytes: 1024 });
    try {
      for (const size of [1200, 1900]) {
        const ws = new WebSocket(`${gw.http.replace("http", "ws")}/v1/gateway/invoke-ws`, { headers: { "x-api-key": KEY } });
        const frames: string[] = [];
        ws.on("message", (d) => frames.push(d.toString()));
        await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
        const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));
        ws.send(JSON.stringify({ op: "start", service: "orders", method: "GetOrder", requestData: { pad: "x".repeat(size) } }));
        assert.deepEqual(await closed, { code: 1009, reason: "frame larger than 1024 bytes" }, `frame of ${size} bytes`);
        assert.equal(frames.length, 1);
        assert.equal(JSON.parse(frames[0]!).status.status, "RESOURCE_EXHAUSTED");
      }
    } finally {
      await gw.close();
    }
  });
});

describe("QA of invoke-stream: shutdown", () => {
  it("a REST invoke-stream open at shutdown ends with its UNAVAILABLE status line and a complete body (NDJSON and SSE)", async () => {
    const backend = await startOrderBackend();
    const gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    try {
      const read = async (accept: string): Promise<string> => {
        const r = await fetch(`${gw.http}/v1/gateway/invoke-stream`, {
          method: "POST",
          headers: { "x-api-key": KEY, accept },
          body: JSON.stringify({ service: "orders", method: "WatchOrders", requestData: { orderId: "forever" } }),
        });
        assert.equal(r.status, 200);
        return r.text(); // rejects ("terminated") when the body is cut short
      };
      const bodies = [read("application/x-ndjson"), read("text/event-stream")];
      await waitFor(() => backend.received.filter((c) => c.path.endsWith("WatchOrders")).length >= 2, "both watches running");
      await new Promise((r) => setTimeout(r, 100));
      const closing = gw.close();
      const [ndjson, sse] = await Promise.all(bodies);
      await closing;
      const lastNd = JSON.parse(ndjson.trim().split("\n").at(-1)!);
      assert.deepEqual(lastNd, { status: { success: false, status: "UNAVAILABLE", message: "the gateway is shutting down" } });
      assert.match(sse, /data: \{"status":\{"success":false,"status":"UNAVAILABLE"[^\n]*\n\n$/);
    } finally {
      await gw.close();
      backend.close();
    }
  });
});

describe("QA of /console", () => {
  it("a missing console file's 404, which echoes the name, carries nosniff and the CSP like the files; traversal finds nothing", async () => {
    const gw = await startTestGateway({ apiKeys: [KEY] });
    try {
      const r = await fetch(`${gw.http}/console/%3Cscript%3Ealert(1)%3C%2Fscript%3E.html`);
      assert.equal(r.status, 404);
      assert.equal(r.headers.get("x-content-type-options"), "nosniff");
      assert.match(r.headers.get("content-security-policy") ?? "", /default-src 'self'/);
      assert.match(r.headers.get("content-type") ?? "", /^text\/plain/);
      for (const p of ["..%2fpackage.json", "%2e%2e%2fpackage.json", "..%5cpackage.json", "..%2f..%2fsrc%2fmain%2fgateway.ts"]) {
        const t = await fetch(`${gw.http}/console/${p}`);
        assert.equal(t.status, 404, p);
        assert.doesNotMatch(await t.text(), /"name"|import /, p);
      }
    } finally {
      await gw.close();
    }
  });
});

describe("QA: a repeated x-api-key gets the same answer over gRPC", () => {
  it("InvokeStream with two x-api-key values (either order): UNAUTHENTICATED 'given more than once', as on REST and WebSocket", async () => {
    const gw = await startTestGateway({ apiKeys: [KEY] });
    try {
      for (const keys of [[KEY, "wrong"], ["wrong", KEY]]) {
        const md = new grpc.Metadata();
        for (const k of keys) md.add("x-api-key", k);
        const err = await new Promise<grpc.ServiceError>((resolve) => {
          const call = (gw.client("platform.Gateway") as any).InvokeStream(md) as grpc.ClientDuplexStream<object, object>;
          call.on("data", () => undefined);
          call.on("error", resolve);
          call.end();
        });
        assert.equal(err.code, grpc.status.UNAUTHENTICATED);
        assert.match(err.details, /x-api-key is given more than once/);
      }
    } finally {
      await gw.close();
    }
  });
});

describe("topic name length on every front", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY] });
  });
  after(async () => {
    await gw?.close();
  });

  it("a topic name over 1024 characters is INVALID_ARGUMENT on every front, and nothing is published or scheduled", async () => {
    const long = "t".repeat(1025);
    const ok = "t".repeat(1024);
    const event = { id: "1", source: "https://qa.example/x", type: "qa", spec_version: "1.0" };
    // REST publish
    const pub = await fetch(`${gw.http}/v1/pubsub/${long}`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/cloudevents+json" }, body: JSON.stringify({ specversion: "1.0", id: "1", source: "https://qa.example/x", type: "qa" }) });
    assert.equal(pub.status, 400);
    assert.match(((await pub.json()) as { message: string }).message, /topic must be at most 1024 characters, got 1025/);
    // gRPC publish and Subscribe
    const md = new grpc.Metadata();
    md.set("x-api-key", KEY);
    const pubsub = gw.client("io.cloudevents.v1.Pubsub") as any;
    const publishReply = await new Promise<{ success?: boolean; message?: string } | grpc.ServiceError>((resolve) =>
      pubsub.PublishEvent({ topic: long, cloudevent: event }, md, (err: grpc.ServiceError | null, res: object) => resolve(err ?? (res as object))),
    );
    assert.match(String((publishReply as { message?: string }).message), /topic must be at most 1024 characters/);
    const sub = pubsub.Subscribe({ topics: [ok, long] }, md) as grpc.ClientReadableStream<object>;
    const status = await new Promise<grpc.StatusObject>((resolve) => {
      sub.on("error", () => undefined);
      sub.on("status", resolve);
    });
    assert.equal(status.code, grpc.status.INVALID_ARGUMENT);
    assert.match(status.details, /topics\[1\] must be at most 1024 characters, got 1025/);
    // WebSocket subscribe: an error frame naming the entry
    const ws = new WebSocket(`${gw.http.replace("http", "ws")}/v1/pubsub/ws`, { headers: { "x-api-key": KEY } });
    await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
    const frame = new Promise<{ op: string; code: string; message: string }>((resolve) => ws.once("message", (d) => resolve(JSON.parse(d.toString()))));
    ws.send(JSON.stringify({ op: "subscribe", topics: [long], id: "s1" }));
    const err = await frame;
    ws.close();
    assert.equal(err.op, "error");
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.match(err.message, /topics\[0\] must be at most 1024 characters/);
    // SSE
    const sse = await fetch(`${gw.http}/v1/pubsub/events?topic=${long}`, { headers: { "x-api-key": KEY } });
    assert.equal(sse.status, 400);
    await sse.arrayBuffer();
    // Trigger target topic: refused, and no trigger is left behind
    const trig = await fetch(`${gw.http}/v1/trigger/qa-long-topic`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ target_topic: long, schedule: "@every 1h" }) });
    const trigBody = (await trig.json()) as { status?: { success: boolean; message: string }; message?: string };
    assert.match(JSON.stringify(trigBody), /target_topic must be at most 1024 characters/);
    const got = await fetch(`${gw.http}/v1/trigger/qa-long-topic`, { headers: { "x-api-key": KEY } });
    assert.equal(got.status, 404);
    assert.match(((await got.json()) as { message: string }).message, /no trigger named qa-long-topic/);
  });
  it("bad WebSocket requests get error frames naming the problem (unknown op, too many topics, non-string since); SSE without ?topic is 400", async () => {
    const ws = new WebSocket(`${gw.http.replace("http", "ws")}/v1/pubsub/ws`, { headers: { "x-api-key": KEY } });
    const frames: any[] = [];
    ws.on("message", (d) => frames.push(JSON.parse(d.toString())));
    await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
    ws.send(JSON.stringify({ op: "shout", id: "a" }));
    ws.send(JSON.stringify({ op: "subscribe", id: "b", topics: Array.from({ length: 257 }, (_, i) => `t${i}`) }));
    ws.send(JSON.stringify({ op: "subscribe", id: "c", topics: ["t"], since: 5 }));
    await waitFor(() => frames.length >= 3, "three error frames");
    ws.close();
    const byId = Object.fromEntries(frames.map((f) => [f.id, f]));
    assert.equal(byId["a"].code, "INVALID_ARGUMENT");
    assert.match(byId["a"].message, /op must be subscribe, unsubscribe or publish, got "shout"/);
    assert.equal(byId["b"].code, "INVALID_ARGUMENT");
    assert.match(byId["b"].message, /at most 256 topics/);
    assert.equal(byId["c"].code, "INVALID_ARGUMENT");
    assert.match(byId["c"].message, /since/);
    const sse = await fetch(`${gw.http}/v1/pubsub/events`, { headers: { "x-api-key": KEY } });
    assert.equal(sse.status, 400);
    assert.match(((await sse.json()) as { message: string }).message, /topic query parameter is required/);
  });
});
