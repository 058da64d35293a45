import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { callDeadlines } from "../../src/shared/deadline-queue.js";
import { ceJson, connectSse, connectWs, type WsTestClient } from "../support/web.js";
import { metric } from "./pubsub-support.js";

const KEY = "web-key";
const ORIGIN = "http://127.0.0.1:1";
const SECRET = "a-test-secret-of-some-length";

function event(n: number, extra: Partial<CloudEvent> = {}): CloudEvent {
  return { id: `e${n}`, source: "urn:test", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: JSON.stringify({ n }), data: "text_data", ...extra } as CloudEvent;
}

async function token(gw: TestGateway, body: object): Promise<string> {
  const r = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify(body) });
  assert.equal(r.status, 200, await r.clone().text());
  return ((await r.json()) as { token: string }).token;
}

describe("web pub/sub: WebSocket and SSE on the uWS port", () => {
  let gw: TestGateway;
  const open: WsTestClient[] = [];
  const publish = (topic: string, n: number): Promise<void> => gw.gateway.context.runtime.pubsub.publish(topic, event(n));

  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], corsOrigins: [ORIGIN], tokenSecret: SECRET, subscriptionLingerMs: 50 });
  });
  after(async () => {
    for (const c of open) c.ws.terminate();
    await gw.close();
  });
  const ws = async (opts: Parameters<typeof connectWs>[1] = { key: KEY }): Promise<WsTestClient> => {
    const c = await connectWs(gw.http, opts);
    open.push(c);
    return c;
  };

  it("WebSocket: subscribe, events in order, publish through the socket with the PublishEvent checks, bad frames get errors", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["order"], id: "s1" });
    const sub = await c.next((f) => f.op === "subscribed", "subscribed");
    assert.deepEqual(sub.topics, ["order"]);
    assert.equal(sub.id, "s1");
    for (let i = 0; i < 50; i++) await publish("order", i);
    c.send({ op: "publish", topic: "order", cloudevent: ceJson(50), id: 7 });
    await c.next((f) => f.op === "published" && f.id === 7, "published");
    await waitFor(() => c.events().length === 51, "51 events");
    assert.deepEqual(c.events().map((e) => e.cloudevent.data.n), [...Array(51).keys()]);
    const ids = c.events().map((e) => Number(e.id.split("-")[1]));
    assert.ok(ids.every((v, i) => i === 0 || v === ids[i - 1]! + 1), "positions increase by one");
    c.send({ op: "publish", topic: "order", cloudevent: { type: "t" }, id: 8 });
    const bad = await c.next((f) => f.op === "error" && f.id === 8, "error for a missing source");
    assert.equal(bad.code, "INVALID_ARGUMENT");
    assert.match(bad.message, /cloudevent\.source/);
    c.ws.send("{nope");
    assert.match((await c.next((f) => f.op === "error" && /not valid JSON/.test(f.message), "JSON error")).code, /INVALID_ARGUMENT/);
    c.send({ op: "subscribe", topics: [""], id: 9 });
    assert.match((await c.next((f) => f.op === "error" && f.id === 9, "topic error")).message, /topics\[0\]/);
  });

  it("a plain GET of the WebSocket route is 426; SSE without a topic is 400 naming it", async () => {
    const r = await fetch(`${gw.http}/v1/pubsub/ws`);
    assert.equal(r.status, 426);
    assert.match(((await r.json()) as any).message, /WebSocket upgrade/);
    const s = await connectSse(gw.http, "", { "x-api-key": KEY });
    assert.equal(s.status, 400);
    assert.match(s.messages[0]!.data, /topic/);
  });

  it("WebSocket: an oversize frame closes the socket with 1009", async () => {
    const small = await startTestGateway({ apiKeys: [KEY], maxBodyBytes: 1024 });
    try {
      const c = await connectWs(small.http, { key: KEY });
      c.ws.send("x".repeat(1500));
      assert.deepEqual(await c.closed(), { code: 1009, reason: "frame larger than 1024 bytes" });
    } finally {
      await small.close();
    }
  });

  it("SSE: id and one data line per event, in order, with a retry hint", async () => {
    const s = await connectSse(gw.http, "topic=sse1&topic=sse2", { "x-api-key": KEY });
    assert.equal(s.status, 200);
    await waitFor(() => s.lastId !== undefined, "the initial position");
    for (let i = 0; i < 20; i++) await publish(i % 2 ? "sse2" : "sse1", i);
    await waitFor(() => s.events().length === 20, "20 SSE events");
    assert.deepEqual(s.events().map((e) => e.cloudevent.data.n), [...Array(20).keys()]);
    assert.deepEqual(s.events().map((e) => e.topic).slice(0, 2), ["sse1", "sse2"]);
    s.abort();
  });

  it("resume: WebSocket since and SSE Last-Event-ID replay what was missed, then live, no gap and no duplicate", async () => {
    const a = await ws();
    a.send({ op: "subscribe", topics: ["res"] });
    await a.next((f) => f.op === "subscribed", "subscribed");
    for (let i = 0; i < 5; i++) await publish("res", i);
    await waitFor(() => a.events().length === 5, "5 events");
    const last = a.events()[4].id;
    a.ws.terminate();
    for (let i = 5; i < 10; i++) await publish("res", i);
    const b = await ws();
    b.send({ op: "subscribe", topics: ["res"], since: last });
    const sub = await b.next((f) => f.op === "subscribed", "subscribed");
    assert.equal(sub.recovered, true);
    for (let i = 10; i < 13; i++) await publish("res", i);
    await waitFor(() => b.events().length === 8, "5 replayed + 3 live");
    assert.deepEqual(b.events().map((e) => e.cloudevent.data.n), [5, 6, 7, 8, 9, 10, 11, 12]);

    const s = await connectSse(gw.http, "topic=res", { "x-api-key": KEY, "last-event-id": last });
    await publish("res", 13);
    await waitFor(() => s.events().length === 9, "SSE replay + live");
    assert.deepEqual(s.events().map((e) => e.cloudevent.data.n), [5, 6, 7, 8, 9, 10, 11, 12, 13]);
    s.abort();
  });

  it("resume: a position from another epoch or past the history is not recovered (WS recovered:false, SSE event: recovery)", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["res"], since: "000000000000-3" });
    const sub = await c.next((f) => f.op === "subscribed", "subscribed");
    assert.equal(sub.recovered, false);
    const s = await connectSse(gw.http, "topic=res&lastEventId=000000000000-3", { "x-api-key": KEY });
    await waitFor(() => s.messages.some((m) => m.event === "recovery"), "recovery message");
    assert.deepEqual(JSON.parse(s.messages.find((m) => m.event === "recovery")!.data), { recovered: false });
    s.abort();
    c.send({ op: "subscribe", topics: ["x"], since: "garbage", id: 1 });
    assert.match((await c.next((f) => f.op === "error" && f.id === 1, "bad since")).message, /since/);
  });

  it("WebSocket: topic and since in the upgrade URL subscribe as the socket opens and resume exactly, with no frame sent", async () => {
    const a = await ws({ key: KEY, query: [["topic", "url1"], ["topic", "url2"]] });
    const sub = await a.next((f) => f.op === "subscribed", "subscribed without a frame");
    assert.deepEqual(sub.topics, ["url1", "url2"]);
    assert.equal(sub.recovered, undefined, "no since: no recovered field");
    assert.equal(typeof sub.position, "string");
    for (let i = 0; i < 4; i++) await publish(i % 2 === 0 ? "url1" : "url2", i);
    await waitFor(() => a.events().length === 4, "4 events");
    const last = a.events()[3].id;
    a.ws.terminate();
    for (let i = 4; i < 8; i++) await publish(i % 2 === 0 ? "url1" : "url2", i);
    const b = await ws({ key: KEY, query: [["topic", "url1"], ["topic", "url2"], ["since", last]] });
    const resumed = await b.next((f) => f.op === "subscribed", "subscribed");
    assert.equal(resumed.recovered, true);
    assert.equal(b.frames.indexOf(resumed), 0, "the subscribe reply is the first frame, before the replay");
    await publish("url1", 8);
    await waitFor(() => b.events().length === 5, "4 replayed + 1 live");
    assert.deepEqual(b.events().map((e) => e.cloudevent.data.n), [4, 5, 6, 7, 8]);
    // The socket takes frames as usual after it: a second topic by frame, one delivery per event per topic.
    b.send({ op: "subscribe", topics: ["url3", "url1"], id: "more" });
    assert.deepEqual((await b.next((f) => f.op === "subscribed" && f.id === "more", "second subscribe")).topics, ["url3", "url1"]);
    await publish("url3", 9);
    await publish("url1", 10);
    await waitFor(() => b.events().length === 7, "two more");
    assert.deepEqual(b.events().map((e) => e.cloudevent.data.n), [4, 5, 6, 7, 8, 9, 10]);
    // A position the history no longer holds answers recovered: false, as a frame's since does.
    const c = await ws({ key: KEY, query: [["topic", "url1"], ["since", "000000000000-3"]] });
    assert.equal((await c.next((f) => f.op === "subscribed", "subscribed")).recovered, false);
  });

  it("WebSocket: a bad topic or since in the upgrade URL is refused 400 naming it, a token's scope 403, and nothing is subscribed", async () => {
    const refused = async (query: Array<[string, string]>, opts: { key?: string; token?: string } = { key: KEY }): Promise<{ status: number; message: string }> => {
      const e: any = await connectWs(gw.http, { ...opts, query }).then(
        (c) => {
          c.ws.terminate();
          assert.fail(`upgrade with ${JSON.stringify(query)} was accepted`);
        },
        (err: unknown) => err,
      );
      return { status: e.status, message: JSON.parse(e.body).message };
    };
    const openSockets = (): Promise<number | undefined> => metric(gw.http, "platform_pubsub_web_subscribers", '{transport="websocket"}');
    const invalid = (): Promise<number | undefined> => metric(gw.http, "platform_pubsub_web_refused_total", '{transport="websocket",code="INVALID_ARGUMENT"}');
    const [socketsBefore, invalidBefore] = [await openSockets(), (await invalid()) ?? 0];
    let r = await refused([["topic", ""]]);
    assert.equal(r.status, 400);
    assert.match(r.message, /topic\[0\].*non-empty/);
    r = await refused([["topic", "ok"], ["topic", "t".repeat(2000)]]);
    assert.equal(r.status, 400);
    assert.match(r.message, /topic\[1\] must be at most 1024 characters/);
    r = await refused([["since", "x-1"]]);
    assert.equal(r.status, 400);
    assert.match(r.message, /since.*topic/);
    r = await refused([["topic", "ok"], ["since", "garbage"]]);
    assert.equal(r.status, 400);
    assert.match(r.message, /since/);
    r = await refused(Array.from({ length: 257 }, (_, i): [string, string] => ["topic", `t${i}`]));
    assert.equal(r.status, 400);
    assert.match(r.message, /at most 256 topics/);
    const t = await token(gw, { topics: ["only-a"], ttl_seconds: 60 });
    r = await refused([["topic", "only-b"]], { token: t });
    assert.equal(r.status, 403);
    assert.match(r.message, /only-b/);
    assert.equal((await refused([["topic", "only-a"]], {})).status, 401, "no credentials: 401 before the topics are looked at");
    assert.equal(await openSockets(), socketsBefore, "no refused upgrade opened a socket");
    assert.equal(await invalid(), invalidBefore + 5, "each 400 counted as refused");
    const ok = await ws({ token: t, query: [["topic", "only-a"]] });
    assert.deepEqual((await ok.next((f) => f.op === "subscribed", "subscribed")).topics, ["only-a"]);
  });

  it("history is bounded by count: resuming from before the oldest held event is not recovered", async () => {
    const small = await startTestGateway({ apiKeys: [KEY], pubsubHistoryEvents: 3 });
    try {
      const c = await connectWs(small.http, { key: KEY });
      c.send({ op: "subscribe", topics: ["h"] });
      const first = await c.next((f) => f.op === "subscribed", "subscribed");
      for (let i = 0; i < 6; i++) await small.gateway.context.runtime.pubsub.publish("h", event(i));
      await waitFor(() => c.events().length === 6, "6 events");
      const d = await connectWs(small.http, { key: KEY });
      d.send({ op: "subscribe", topics: ["h"], since: first.position });
      assert.equal((await d.next((f) => f.op === "subscribed", "subscribed")).recovered, false);
      const e = await connectWs(small.http, { key: KEY });
      e.send({ op: "subscribe", topics: ["h"], since: c.events()[2].id });
      assert.equal((await e.next((f) => f.op === "subscribed", "subscribed")).recovered, true);
      await waitFor(() => e.events().length === 3, "3 replayed");
      for (const x of [c, d, e]) x.ws.terminate();
    } finally {
      await small.close();
    }
  });

  it("one upstream subscription per topic is shared by gRPC, WebSocket and SSE subscribers", async () => {
    const broker = gw.gateway.context;
    const c = await ws();
    c.send({ op: "subscribe", topics: ["shared"] });
    await c.next((f) => f.op === "subscribed", "subscribed");
    const s = await connectSse(gw.http, "topic=shared", { "x-api-key": KEY });
    await waitFor(() => s.lastId !== undefined, "SSE live");
    const up = await metric(gw.http, "platform_pubsub_upstream_subscriptions");
    assert.ok(up !== undefined && up >= 1);
    await publish("shared", 1);
    await waitFor(() => c.events().length === 1 && s.events().length === 1, "both got it");
    const h = (await (await fetch(`${gw.http}/health`)).json()) as any;
    assert.match(h.entries["web-pubsub"].description, /WebSocket and \d+ SSE subscribers/);
    assert.ok(broker);
    s.abort();
  });

  it("auth: no key and no token is 401; a token for topic a cannot read b; a publish needs the publish flag", async () => {
    await assert.rejects(connectWs(gw.http, {}), (e: any) => e.status === 401);
    const noKey = await connectSse(gw.http, "topic=a");
    assert.equal(noKey.status, 401);
    const t = await token(gw, { topics: ["a", "pre.*"], ttl_seconds: 60 });
    const c = await ws({ token: t });
    c.send({ op: "subscribe", topics: ["b"], id: 1 });
    assert.equal((await c.next((f) => f.id === 1, "refusal")).code, "PERMISSION_DENIED");
    c.send({ op: "subscribe", topics: ["a", "pre.x"], id: 2 });
    assert.equal((await c.next((f) => f.id === 2, "subscribed")).op, "subscribed");
    c.send({ op: "publish", topic: "a", cloudevent: ceJson(1), id: 3 });
    assert.equal((await c.next((f) => f.id === 3, "publish refusal")).code, "PERMISSION_DENIED");
    const sseB = await connectSse(gw.http, `topic=b&token=${t}`);
    assert.equal(sseB.status, 403);
    const viaProtocol = await ws({ protocols: ["pubsub.v1", `token.${t}`] });
    assert.equal(viaProtocol.ws.protocol, "pubsub.v1");
    const bad = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ topics: ["a*b"], ttl_seconds: 5 }) });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as any).message, /topics\[0\]/);
    const noAuth = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", body: JSON.stringify({ topics: ["a"], ttl_seconds: 5 }) });
    assert.equal(noAuth.status, 401);
    assert.ok(!JSON.stringify(gw.logs).includes(t), "the token never reaches a log");
    assert.ok(!JSON.stringify(gw.logs).includes(KEY), "the key never reaches a log");
  });

  it("a token lives at least ttl_seconds: expires_at is no earlier than issue time + ttl", async () => {
    for (let i = 0; i < 5; i++) {
      const before = Date.now();
      const r = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ topics: ["t"], ttl_seconds: 1 }) });
      assert.equal(r.status, 200);
      const { expires_at } = (await r.json()) as { expires_at: string };
      assert.ok(Date.parse(expires_at) >= before + 1000, `expires_at ${expires_at} is less than 1 s after ${new Date(before).toISOString()}`);
      assert.ok(Date.parse(expires_at) <= Date.now() + 2000, "and at most a second more");
      await new Promise((res) => setTimeout(res, 170));
    }
  });

  it("token expiry ends a WebSocket (4001 token-expired) and an SSE stream (event: end), and an expired token is refused", async () => {
    const t = await token(gw, { topics: ["exp"], ttl_seconds: 1 });
    const c = await ws({ token: t });
    const s = await connectSse(gw.http, `topic=exp&token=${t}`);
    assert.equal(s.status, 200);
    const closed = await c.closed(4000);
    assert.deepEqual(closed, { code: 4001, reason: "token-expired" });
    await waitFor(() => s.messages.some((m) => m.event === "end"), "SSE end", 4000);
    assert.deepEqual(JSON.parse(s.messages.find((m) => m.event === "end")!.data), { reason: "token-expired" });
    await assert.rejects(connectWs(gw.http, { token: t }), (e: any) => e.status === 401);
    const again = await connectSse(gw.http, `topic=exp&token=${t}`);
    assert.equal(again.status, 401);
    assert.match(again.messages[0]!.data, /token expired/);
  });

  it("token expiry is per socket with one shared timer: a socket that left early is forgotten, later expiries still fire, an earlier one added later re-arms", async () => {
    // Expiries are whole seconds (JWT exp): ttl 3 and ttl 1 fall in different groups, added in that order so the
    // later-added earlier group must re-arm the shared timer.
    const late = await ws({ token: await token(gw, { topics: ["wheel"], ttl_seconds: 3 }) });
    const t1 = await token(gw, { topics: ["wheel"], ttl_seconds: 1 });
    const early = await ws({ token: t1 });
    const leaves = await ws({ token: t1 });
    leaves.ws.close(1000, "bye");
    assert.equal((await leaves.closed(2000)).code, 1000);
    const started = Date.now();
    assert.deepEqual(await early.closed(3000), { code: 4001, reason: "token-expired" });
    assert.equal(late.close, undefined, "the ttl-3 socket is still open when the ttl-1 one expires");
    late.send({ op: "subscribe", topics: ["wheel"], id: "w" });
    await late.next((f) => f.op === "subscribed", "still usable");
    assert.deepEqual(await late.closed(4000), { code: 4001, reason: "token-expired" });
    assert.ok(Date.now() - started >= 900, "the ttl-3 socket expired after the ttl-1 one, not with it");
  });

  it("a WebSocket and an SSE stream that close before their tokens expire leave nothing in the deadline queue", async () => {
    // The gateway runs in this process (one HTTP thread), so its deadline queue is this one. Earlier tests' sockets
    // with 60 s tokens are still open: their groups stay; a 120 s token falls in a group of its own.
    const before = callDeadlines.size;
    const t = await token(gw, { topics: ["gone"], ttl_seconds: 120 });
    const w = await ws({ token: t });
    const s = await connectSse(gw.http, `topic=gone&token=${t}`);
    assert.equal(s.status, 200);
    // The socket's group and the stream: two entries.
    await waitFor(() => callDeadlines.size === before + 2, "both queued", 2000);
    w.ws.close(1000, "bye");
    assert.equal((await w.closed(2000)).code, 1000);
    s.abort();
    await waitFor(() => callDeadlines.size === before, "both left the queue", 2000);
  });

  it("CORS: an allowed Origin gets Access-Control-Allow-Origin; another is refused 403 on SSE and on the WebSocket upgrade", async () => {
    const ok = await connectSse(gw.http, "topic=c", { "x-api-key": KEY, origin: ORIGIN });
    assert.equal(ok.status, 200);
    ok.abort();
    const no = await connectSse(gw.http, "topic=c", { "x-api-key": KEY, origin: "http://evil.example" });
    assert.equal(no.status, 403);
    await assert.rejects(connectWs(gw.http, { key: KEY, origin: "http://evil.example" }), (e: any) => e.status === 403);
    const w = await ws({ key: KEY, origin: ORIGIN });
    w.ws.terminate();
  });

  it("metrics by transport: subscribers, deliveries, history size", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["m"] });
    await c.next((f) => f.op === "subscribed", "subscribed");
    const s = await connectSse(gw.http, "topic=m", { "x-api-key": KEY });
    await waitFor(() => s.lastId !== undefined, "SSE live");
    const wsBefore = (await metric(gw.http, "platform_pubsub_web_deliveries_total", '{transport="websocket"}')) ?? 0;
    const sseBefore = (await metric(gw.http, "platform_pubsub_web_deliveries_total", '{transport="sse"}')) ?? 0;
    await publish("m", 1);
    await waitFor(() => c.events().length === 1 && s.events().length === 1, "delivered");
    assert.equal(await metric(gw.http, "platform_pubsub_web_deliveries_total", '{transport="websocket"}'), wsBefore + 1);
    assert.equal(await metric(gw.http, "platform_pubsub_web_deliveries_total", '{transport="sse"}'), sseBefore + 1);
    assert.ok(((await metric(gw.http, "platform_pubsub_web_subscribers", '{transport="websocket"}')) ?? 0) >= 1);
    assert.ok(((await metric(gw.http, "platform_pubsub_web_subscribers", '{transport="sse"}')) ?? 0) >= 1);
    assert.ok(((await metric(gw.http, "platform_pubsub_history_events")) ?? 0) >= 1);
    s.abort();
  });

  it("shutdown ends WebSockets with 1001 shutdown and SSE streams with event: end, and close() does not wait on them", async () => {
    const g = await startTestGateway({ apiKeys: [KEY] });
    const c = await connectWs(g.http, { key: KEY });
    c.send({ op: "subscribe", topics: ["bye"] });
    await c.next((f) => f.op === "subscribed", "subscribed");
    const s = await connectSse(g.http, "topic=bye", { "x-api-key": KEY });
    await waitFor(() => s.lastId !== undefined, "SSE live");
    const started = Date.now();
    await g.close();
    assert.ok(Date.now() - started < 3000, `closed in ${Date.now() - started} ms`);
    assert.deepEqual(await c.closed(), { code: 1001, reason: "shutdown" });
    await waitFor(() => s.messages.some((m) => m.event === "end"), "SSE end");
    assert.deepEqual(JSON.parse(s.messages.find((m) => m.event === "end")!.data), { reason: "shutdown" });
  });

  it("a runtime that refuses a topic gives an UNAVAILABLE error frame / 503; an upstream that breaks ends web subscribers with upstream-failed", async () => {
    const g = await startTestGateway({ apiKeys: [KEY] });
    const port = g.gateway.context.runtime.pubsub;
    const original = port.subscribe.bind(port);
    const breakers = new Map<string, (e: Error) => void>();
    port.subscribe = async (topic, handlers, signal) => {
      if (topic === "refused") throw new Error("no such topic here");
      if (handlers.onError) breakers.set(topic, handlers.onError);
      return original(topic, handlers, signal);
    };
    try {
      const c = await connectWs(g.http, { key: KEY });
      c.send({ op: "subscribe", topics: ["refused"], id: 1 });
      const err = await c.next((f) => f.id === 1, "refusal");
      assert.equal(err.code, "UNAVAILABLE");
      assert.match(err.message, /refused/);
      // The same refusal for a subscribe named in the upgrade URL: the socket opens (the topic was well-formed) and
      // its first frame is the error.
      const byUrl = await connectWs(g.http, { key: KEY, query: [["topic", "refused"]] });
      const urlErr = await byUrl.next((f) => f.op === "error", "refusal of the URL's subscribe");
      assert.equal(urlErr.code, "UNAVAILABLE");
      assert.match(urlErr.message, /refused/);
      assert.equal(byUrl.frames.indexOf(urlErr), 0);
      byUrl.ws.terminate();
      const s = await connectSse(g.http, "topic=refused", { "x-api-key": KEY });
      assert.equal(s.status, 503);
      c.send({ op: "subscribe", topics: ["breaks"], id: 2 });
      await c.next((f) => f.id === 2 && f.op === "subscribed", "subscribed");
      const s2 = await connectSse(g.http, "topic=breaks", { "x-api-key": KEY });
      await waitFor(() => s2.lastId !== undefined, "SSE live");
      breakers.get("breaks")!(new Error("sidecar went away"));
      assert.deepEqual(await c.closed(), { code: 4002, reason: "upstream-failed: breaks" });
      await waitFor(() => s2.messages.some((m) => m.event === "end"), "SSE end");
      assert.deepEqual(JSON.parse(s2.messages.find((m) => m.event === "end")!.data), { reason: "upstream-failed: breaks" });
    } finally {
      await g.close();
    }
  });
});
