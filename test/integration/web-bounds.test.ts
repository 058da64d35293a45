import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRuntime } from "../../src/runtime/index.js";
import type { UpstreamHandlers } from "../../src/runtime/pubsub-port.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { wrapRuntime } from "../support/state-runtime.js";
import { connectSse, connectWs, openFrameSocket, type WsTestClient } from "../support/web.js";

const KEY = "bounds-key";
const SECRET = "a-test-secret-for-the-bounds-suite";
/** The bounds as documented (docs/web-pubsub.md; the SSE one is MAX_SSE_TOPICS in src/web/sse.ts), not read from the code under test. */
const WS_TOPICS = 256;
const SSE_TOPICS = 64;
const TOKEN_TTL_MAX = 86_400;
/** The one `--cors-origin`. */
const ALLOWED_ORIGIN = "http://app.example";

function event(n: number): CloudEvent {
  return { id: `e${n}`, source: "urn:test", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: JSON.stringify({ n }), data: "text_data" } as CloudEvent;
}

const names = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/**
 * The web front's boundaries, each checked exactly at the bound and one past it, and the topic references its
 * subscribers hold: what a one-character change to the web front (a `>` for a `>=`, a dropped check) would break.
 */
describe("web pub/sub: bounds and topic references", () => {
  let gw: TestGateway;
  /** The runtime subscriptions' error callbacks by topic: calling one breaks that topic's upstream. */
  const breakers = new Map<string, (e: Error) => void>();

  before(async () => {
    const base = await createRuntime("embedded", { pubsubName: "pubsub", host: "127.0.0.1", grpcPort: 0, logger: { debug() {}, info() {}, warn() {}, error() {} } });
    const subscribe = base.pubsub.subscribe.bind(base.pubsub);
    const runtime = wrapRuntime(base, {
      pubsub: {
        subscribe: (topic: string, handlers: UpstreamHandlers, signal?: AbortSignal) => {
          if (handlers.onError) breakers.set(topic, handlers.onError);
          return subscribe(topic, handlers, signal);
        },
      },
    });
    // A short linger and history age: a topic nobody holds is let go within a few hundred ms.
    gw = await startTestGateway({ apiKeys: [KEY], tokenSecret: SECRET, corsOrigins: [ALLOWED_ORIGIN], subscriptionLingerMs: 20, pubsubHistoryAgeMs: 100 }, { runtime });
  });
  // close() ends every socket a failed test left open.
  after(() => gw.close());

  const ws = (opts: Parameters<typeof connectWs>[1] = { key: KEY }): Promise<WsTestClient> => connectWs(gw.http, opts);
  const publish = (topic: string, n: number): Promise<void> => gw.gateway.context.runtime.pubsub.publish(topic, event(n));
  const token = async (body: object): Promise<Response> => fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify(body) });
  const tokenOf = async (body: object): Promise<string> => {
    const r = await token(body);
    assert.equal(r.status, 200, await r.clone().text());
    return ((await r.json()) as { token: string }).token;
  };
  /** Runtime subscriptions the gateway holds now (the broker's upstreams). */
  const upstreams = (): number => gw.gateway.resources()["pubsub.upstreams"] ?? -1;

  it(`a WebSocket holds exactly ${WS_TOPICS} topics, in one request or several; one more is refused`, async () => {
    const one = await ws();
    one.send({ op: "subscribe", topics: names("one-", WS_TOPICS), id: 1 });
    const all = await one.next((f) => f.id === 1, `the answer to ${WS_TOPICS} topics in one request`, 15_000);
    assert.equal(all.op, "subscribed", JSON.stringify(all));
    assert.equal(all.topics.length, WS_TOPICS);
    one.send({ op: "subscribe", topics: ["one-more"], id: 2 });
    assert.deepEqual(await one.next((f) => f.id === 2, "the refusal"), { op: "error", id: 2, code: "RESOURCE_EXHAUSTED", message: `a WebSocket may hold at most ${WS_TOPICS} topics` });
    // Topics already held do not count twice.
    one.send({ op: "subscribe", topics: ["one-0"], id: 3 });
    assert.equal((await one.next((f) => f.id === 3, "a held topic again")).op, "subscribed");

    const several = await ws();
    several.send({ op: "subscribe", topics: names("one-", WS_TOPICS - 1), id: 1 });
    assert.equal((await several.next((f) => f.id === 1, "the first request", 15_000)).op, "subscribed");
    several.send({ op: "subscribe", topics: ["last"], id: 2 });
    assert.equal((await several.next((f) => f.id === 2, `topic ${WS_TOPICS}`)).op, "subscribed");
    several.send({ op: "subscribe", topics: ["past"], id: 3 });
    assert.equal((await several.next((f) => f.id === 3, `topic ${WS_TOPICS + 1}`)).code, "RESOURCE_EXHAUSTED");
    // One request naming more than the bound is refused as a whole, before any topic is taken.
    const big = await ws();
    big.send({ op: "subscribe", topics: names("big-", WS_TOPICS + 1), id: 1 });
    const refused = await big.next((f) => f.id === 1, "the refusal of one request too many");
    assert.equal(refused.code, "INVALID_ARGUMENT");
    assert.equal(refused.message, `topics must hold at most ${WS_TOPICS} topics, got ${WS_TOPICS + 1}`);
    for (const c of [one, several, big]) c.ws.close();
  });

  it(`an SSE request names exactly ${SSE_TOPICS} topics; ${SSE_TOPICS + 1} is 400 naming the bound`, async () => {
    const query = (n: number): string => names("sse-", n).map((t) => `topic=${t}`).join("&");
    const s = await connectSse(gw.http, query(SSE_TOPICS), { "x-api-key": KEY });
    assert.equal(s.status, 200, s.messages[0]?.data);
    s.abort();
    const past = await connectSse(gw.http, query(SSE_TOPICS + 1), { "x-api-key": KEY });
    assert.equal(past.status, 400);
    assert.match(past.messages[0]!.data, new RegExp(`topic must hold at most ${SSE_TOPICS} topics, got ${SSE_TOPICS + 1}`));
  });

  it("an upstream that breaks ends only the subscribers holding that topic", async () => {
    const holder = await ws();
    const bystander = await ws();
    const idle = await ws();
    holder.send({ op: "subscribe", topics: ["fragile", "sturdy"], id: 1 });
    bystander.send({ op: "subscribe", topics: ["sturdy"], id: 1 });
    await holder.next((f) => f.id === 1 && f.op === "subscribed", "holder subscribed");
    await bystander.next((f) => f.id === 1 && f.op === "subscribed", "bystander subscribed");
    const sse = await connectSse(gw.http, "topic=sturdy", { "x-api-key": KEY });
    await waitFor(() => sse.lastId !== undefined, "SSE live");
    breakers.get("fragile")!(new Error("sidecar lost the topic"));
    assert.deepEqual(await holder.closed(), { code: 4002, reason: "upstream-failed: fragile" });
    // The others stay open and keep receiving.
    await publish("sturdy", 1);
    await bystander.next((f) => f.op === "event" && f.cloudevent.data.n === 1, "the bystander's event");
    await waitFor(() => sse.events().some((e) => e.cloudevent.data.n === 1), "the SSE event");
    idle.send({ op: "unsubscribe", topics: [], id: 2 });
    await idle.next((f) => f.id === 2, "the idle socket's answer");
    assert.equal(bystander.close, undefined);
    assert.equal(idle.close, undefined);
    assert.ok(!sse.ended && !sse.messages.some((m) => m.event === "end"), "the SSE stream was not ended");
    sse.abort();
    bystander.ws.close();
    idle.ws.close();
  });

  it("a subscriber that leaves gives its topics back: SSE disconnect, WebSocket close and unsubscribe", async () => {
    // The earlier tests' subscribers are gone: once their topics are let go, only this test's topics hold a runtime
    // subscription (one each, while someone holds it).
    await waitFor(() => upstreams() === 0, "the earlier tests' topics to be let go");
    const sse = await connectSse(gw.http, "topic=ref-sse", { "x-api-key": KEY });
    await waitFor(() => sse.lastId !== undefined, "SSE live");
    const closing = await ws();
    closing.send({ op: "subscribe", topics: ["ref-ws-close"], id: 1 });
    await closing.next((f) => f.id === 1 && f.op === "subscribed", "subscribed");
    const leaving = await ws();
    leaving.send({ op: "subscribe", topics: ["ref-ws-unsub"], id: 1 });
    await leaving.next((f) => f.id === 1 && f.op === "subscribed", "subscribed");
    assert.equal(upstreams(), 3);

    sse.abort();
    await waitFor(() => upstreams() === 2, "the SSE topic's upstream to end after the linger", 3000);
    closing.ws.close();
    await waitFor(() => upstreams() === 1, "the closed WebSocket's topic to end after the linger", 3000);
    leaving.send({ op: "unsubscribe", topics: ["ref-ws-unsub"], id: 2 });
    assert.deepEqual((await leaving.next((f) => f.id === 2, "unsubscribed")).topics, ["ref-ws-unsub"]);
    await waitFor(() => upstreams() === 0, "the unsubscribed topic's upstream to end after the linger", 3000);
    leaving.ws.close();
  });

  it("a token's prefix grant covers exactly the names starting with the prefix", async () => {
    const t = await tokenOf({ topics: ["pre.*"], ttl_seconds: 60 });
    const c = await ws({ token: t });
    c.send({ op: "subscribe", topics: ["pre.x"], id: 1 });
    assert.equal((await c.next((f) => f.id === 1, "pre.x")).op, "subscribed");
    c.send({ op: "subscribe", topics: ["pre."], id: 2 });
    assert.equal((await c.next((f) => f.id === 2, "pre.")).op, "subscribed");
    for (const [id, topic] of [[3, "pre"], [4, "prex"], [5, "pr"]] as const) {
      c.send({ op: "subscribe", topics: [topic], id });
      assert.deepEqual(await c.next((f) => f.id === id, topic), { op: "error", id, code: "PERMISSION_DENIED", message: `the token does not allow topic '${topic}'` });
    }
    const sse = await connectSse(gw.http, `topic=pre&token=${t}`);
    assert.equal(sse.status, 403);
    c.ws.close();
  });

  it(`a token may live exactly ${TOKEN_TTL_MAX} s (a day); one second more, zero or a fraction is 400 naming ttl_seconds`, async () => {
    const r = await token({ topics: ["a"], ttl_seconds: TOKEN_TTL_MAX });
    assert.equal(r.status, 200, await r.clone().text());
    const { expires_at } = (await r.json()) as { expires_at: string };
    assert.ok(Date.parse(expires_at) >= Date.now() + (TOKEN_TTL_MAX - 5) * 1000, expires_at);
    const one = await token({ topics: ["a"], ttl_seconds: 1 });
    assert.equal(one.status, 200);
    for (const ttl of [TOKEN_TTL_MAX + 1, 0, 1.5]) {
      const bad = await token({ topics: ["a"], ttl_seconds: ttl });
      assert.equal(bad.status, 400, `ttl_seconds ${ttl}`);
      assert.match(((await bad.json()) as { message: string }).message, new RegExp(`ttl_seconds must be an integer from 1 to ${TOKEN_TTL_MAX}, got ${ttl}`));
    }
  });
  it("an unsubscribed topic's events stop at once; the socket's other topics keep coming", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["unsub-a", "unsub-b"], id: 1 });
    await c.next((f) => f.id === 1 && f.op === "subscribed", "subscribed");
    c.send({ op: "unsubscribe", topics: ["unsub-a"], id: 2 });
    assert.deepEqual(await c.next((f) => f.id === 2, "unsubscribed"), { op: "unsubscribed", id: 2, topics: ["unsub-a"] });
    await publish("unsub-a", 1);
    await publish("unsub-b", 2);
    // Events reach one socket in publish order: once b's is here, a's would have been too.
    await c.next((f) => f.op === "event" && f.topic === "unsub-b", "the event of the topic still held");
    assert.deepEqual(
      c.events().map((e) => e.topic),
      ["unsub-b"],
    );
    c.ws.close();
  });

  it("Origin: the allow-listed one passes, a look-alike does not; same-origin counts the scheme's default port", async () => {
    const url = gw.http.replace("http", "ws") + "/v1/pubsub/ws";
    const port = new URL(gw.http).port;
    const attempt = async (origin: string, host?: string): Promise<string> => {
      try {
        const s = await openFrameSocket(url, [], { origin, headers: { "x-api-key": KEY, ...(host ? { host } : {}) } });
        s.ws.close();
        return "open";
      } catch (e) {
        return (e as Error).message;
      }
    };
    assert.equal(await attempt(ALLOWED_ORIGIN), "open");
    assert.match(await attempt("http://app.example.evil"), /403/);
    // Same origin: Host carries the port the client dialled; an Origin leaves out its scheme's default port.
    assert.equal(await attempt(`http://127.0.0.1:${port}`), "open");
    assert.equal(await attempt("http://gw.example", "gw.example:80"), "open");
    assert.equal(await attempt("https://gw.example", "gw.example:443"), "open");
    assert.match(await attempt("http://gw.example", "gw.example:443"), /403/);
    assert.match(await attempt("https://gw.example", "gw.example:80"), /403/);
  });
});
