/**
 * WebSocket requests that overlap: an `unsubscribe` checked and bounded like a subscribe, an unsubscribe of a topic
 * whose subscribe is still in flight, a resume (`since`) of topics the socket holds or is subscribing, and a subscribe
 * of a topic another subscribe in flight is acquiring. Over real sockets; the runtime's subscribe of some topics is
 * held open (and failed) by the test, so a subscribe stays in flight as long as it needs.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRuntime } from "../../src/runtime/index.js";
import type { UpstreamHandlers } from "../../src/runtime/pubsub-port.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { wrapRuntime } from "../support/state-runtime.js";
import { connectWs, type WsTestClient } from "../support/web.js";

const KEY = "requests-key";
/** The bound of one subscribe, as documented (docs/web-pubsub.md). */
const WS_TOPICS = 256;

function event(n: number): CloudEvent {
  return { id: `e${n}`, source: "urn:test", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: JSON.stringify({ n }), data: "text_data" } as CloudEvent;
}
const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A runtime subscribe held open until the test lets it go on (`open`) or fail (`fail`). */
interface Gate {
  /** The runtime subscribe was called (the gateway is acquiring the topic). */
  reached: boolean;
  open(): void;
  fail(e: Error): void;
}

describe("web pub/sub: overlapping WebSocket requests", () => {
  let gw: TestGateway;
  const open: WsTestClient[] = [];
  /** Topics whose runtime subscribe waits for the test. */
  const gates = new Map<string, Gate>();
  let n = 0;

  before(async () => {
    const base = await createRuntime("embedded", { pubsubName: "pubsub", host: "127.0.0.1", grpcPort: 0, logger: { debug() {}, info() {}, warn() {}, error() {} } });
    const subscribe = base.pubsub.subscribe.bind(base.pubsub);
    const runtime = wrapRuntime(base, {
      pubsub: {
        subscribe: async (topic: string, handlers: UpstreamHandlers, signal?: AbortSignal) => {
          const gate = gates.get(topic);
          if (gate) {
            gates.delete(topic);
            await new Promise<void>((resolve, reject) => {
              gate.open = resolve;
              gate.fail = reject;
              gate.reached = true;
            });
          }
          return subscribe(topic, handlers, signal);
        },
      },
    });
    // A short linger and history age: a topic nobody holds lets its runtime subscription go within a few hundred ms.
    gw = await startTestGateway({ apiKeys: [KEY], subscriptionLingerMs: 20, pubsubHistoryAgeMs: 100 }, { runtime });
  });
  after(async () => {
    for (const c of open) c.ws.terminate();
    await gw.close();
  });

  const ws = async (): Promise<WsTestClient> => {
    const c = await connectWs(gw.http, { key: KEY });
    open.push(c);
    return c;
  };
  const publish = (topic: string): Promise<void> => gw.gateway.context.runtime.pubsub.publish(topic, event(++n));
  /** Hold the next runtime subscribe of `topic`. */
  const gate = (topic: string): Gate => {
    const g: Gate = { reached: false, open: () => undefined, fail: () => undefined };
    gates.set(topic, g);
    return g;
  };
  const reached = (g: Gate, what: string): Promise<void> => waitFor(() => g.reached, what, 3_000);
  /** Runtime subscriptions the gateway holds now. */
  const upstreams = (): number => gw.gateway.resources()["pubsub.upstreams"] ?? -1;
  const topicsOf = (c: WsTestClient): string[] => c.events().map((e) => e.topic as string);
  /**
   * Whether `c` gets events of `topic`: publish to it, then to `probe` (a topic `c` holds), and wait for the probe's
   * event; the socket's frames arrive in publish order, so an event of `topic` would be there by then.
   */
  const receives = async (c: WsTestClient, topic: string, probe: string): Promise<boolean> => {
    await publish(topic);
    const mark = n + 1;
    await publish(probe);
    await c.next((f) => f.op === "event" && f.topic === probe && f.cloudevent.data.n === mark, `the probe event on ${probe}`);
    return c.events().some((e) => e.topic === topic);
  };

  it("unsubscribe is checked and bounded like subscribe: the field named, nothing changed", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["u-held"], id: 1 });
    await c.next((f) => f.id === 1 && f.op === "subscribed", "subscribed");
    const cases: Array<[unknown, RegExp]> = [
      [["u-held", 5], /^topics\[1\] must be a non-empty string$/],
      [["u-held", ""], /^topics\[1\] must be a non-empty string$/],
      [[null], /^topics\[0\] must be a non-empty string$/],
      ["u-held", /^topics must be an array of topic names$/],
      [{ 0: "u-held" }, /^topics must be an array of topic names$/],
      [Array.from({ length: WS_TOPICS + 1 }, () => "u-held"), new RegExp(`^topics must hold at most ${WS_TOPICS} topics, got ${WS_TOPICS + 1}$`)],
      // A frame of many entries is refused by its length, before any entry is looked at.
      [Array.from({ length: 200_000 }, () => "u-held"), /^topics must hold at most \d+ topics, got 200000$/],
    ];
    let id = 10;
    for (const [topics, message] of cases) {
      c.send({ op: "unsubscribe", topics, id: ++id });
      const reply = await c.next((f) => f.id === id, `the answer to unsubscribe ${JSON.stringify(topics).slice(0, 40)}`);
      assert.equal(reply.op, "error", JSON.stringify(reply));
      assert.equal(reply.code, "INVALID_ARGUMENT");
      assert.match(reply.message, message);
    }
    // Nothing changed: the topic named in the refused requests is still held.
    assert.equal(await receives(c, "u-held", "u-held"), true);
    // A good one: repeated names count once, and a topic the socket does not hold is left out of the reply.
    c.send({ op: "unsubscribe", topics: ["u-held", "never", "u-held"], id: 2 });
    assert.deepEqual(await c.next((f) => f.id === 2, "unsubscribed"), { op: "unsubscribed", id: 2, topics: ["u-held"] });
    // An empty list unsubscribes nothing.
    c.send({ op: "unsubscribe", topics: [], id: 3 });
    assert.deepEqual(await c.next((f) => f.id === 3, "unsubscribed"), { op: "unsubscribed", id: 3, topics: [] });
  });

  it("unsubscribe of a topic whose subscribe is in flight takes effect: never subscribed, its reference given back", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["p-probe"], id: 1 });
    await c.next((f) => f.id === 1 && f.op === "subscribed", "the probe subscribed");
    await waitFor(() => upstreams() === 1, "only the probe's runtime subscription (the earlier tests' let go)");
    const g = gate("p-slow");
    c.send({ op: "subscribe", topics: ["p-slow", "p-probe"], id: 2 });
    await reached(g, "the runtime subscribe of p-slow");
    c.send({ op: "unsubscribe", topics: ["p-slow"], id: 3 });
    assert.deepEqual(await c.next((f) => f.id === 3, "unsubscribed"), { op: "unsubscribed", id: 3, topics: ["p-slow"] });
    assert.equal(c.frames.find((f) => f.id === 2), undefined, "the subscribe is still in flight");
    g.open();
    const sub = await c.next((f) => f.id === 2, "the subscribe's answer");
    assert.equal(sub.op, "subscribed", JSON.stringify(sub));
    assert.deepEqual(sub.topics, ["p-probe"], "the subscribe's reply leaves out the topic unsubscribed meanwhile");
    assert.ok(c.frames.indexOf(sub) > c.frames.findIndex((f) => f.id === 3), "unsubscribed first, then subscribed");
    assert.equal(await receives(c, "p-slow", "p-probe"), false, "no event of the unsubscribed topic");
    // The socket holds no reference on p-slow: its runtime subscription goes after the linger.
    await waitFor(() => upstreams() === 1, "p-slow's runtime subscription to be let go", 3_000);
    // Subscribing it again works as usual.
    c.send({ op: "subscribe", topics: ["p-slow"], id: 4 });
    assert.deepEqual((await c.next((f) => f.id === 4, "subscribed again")).topics, ["p-slow"]);
    assert.equal(await receives(c, "p-slow", "p-probe"), true);
  });

  it("a resume (since) of a topic the socket holds or is subscribing is refused naming it, and changes nothing", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["r-held"], id: 1 });
    const first = await c.next((f) => f.id === 1 && f.op === "subscribed", "subscribed");
    const since = first.position as string;
    await publish("r-held");
    await c.next((f) => f.op === "event" && f.topic === "r-held", "an event after the position");
    c.send({ op: "subscribe", topics: ["r-new", "r-held"], since, id: 2 });
    const refused = await c.next((f) => f.id === 2, "the resume's answer");
    assert.equal(refused.op, "error", `no recovered claim for a topic the socket holds: ${JSON.stringify(refused)}`);
    assert.equal(refused.code, "INVALID_ARGUMENT");
    assert.match(refused.message, /^topics\[1\] 'r-held' is subscribed on this socket already/);
    // Every topic held: nothing would be replayed, so no reply may claim `recovered: true`.
    c.send({ op: "subscribe", topics: ["r-held"], since, id: 6 });
    const all = await c.next((f) => f.id === 6, "the resume's answer");
    assert.equal(all.code, "INVALID_ARGUMENT", JSON.stringify(all));
    assert.match(all.message, /^topics\[0\] 'r-held' is subscribed on this socket already/);
    assert.equal(await receives(c, "r-new", "r-held"), false, "r-new was not subscribed");
    assert.equal(topicsOf(c).filter((t) => t === "r-held").length, 2, "no replay, no duplicate of r-held's events");

    // A topic whose subscribe is still in flight: the same.
    const g = gate("r-slow");
    c.send({ op: "subscribe", topics: ["r-slow"], id: 3 });
    await reached(g, "the runtime subscribe of r-slow");
    c.send({ op: "subscribe", topics: ["r-slow"], since, id: 4 });
    const pending = await c.next((f) => f.id === 4, "the resume's answer");
    assert.equal(pending.code, "INVALID_ARGUMENT", JSON.stringify(pending));
    assert.match(pending.message, /^topics\[0\] 'r-slow' is subscribed on this socket already/);
    g.open();
    assert.equal((await c.next((f) => f.id === 3, "the first subscribe's answer")).op, "subscribed");
    // Without since, a held topic is still a no-op (one delivery per event).
    c.send({ op: "subscribe", topics: ["r-held"], id: 5 });
    assert.deepEqual((await c.next((f) => f.id === 5, "subscribed")).topics, ["r-held"]);
    const before = topicsOf(c).filter((t) => t === "r-held").length;
    assert.equal(await receives(c, "r-slow", "r-held"), true);
    assert.equal(topicsOf(c).filter((t) => t === "r-held").length, before + 1);
  });

  it("a subscribe of a topic another subscribe is acquiring answers after it, with its outcome: a failure", async () => {
    const c = await ws();
    c.send({ op: "subscribe", topics: ["d-probe"], id: 1 });
    await c.next((f) => f.id === 1 && f.op === "subscribed", "the probe subscribed");
    const g = gate("d-doomed");
    c.send({ op: "subscribe", topics: ["d-doomed"], id: 2 });
    await reached(g, "the runtime subscribe of d-doomed");
    c.send({ op: "subscribe", topics: ["d-doomed", "d-other"], id: 3 });
    await tick(100);
    assert.equal(c.frames.find((f) => f.id === 3), undefined, "no answer while the first subscribe of d-doomed is in flight");
    g.fail(new GatewayError(Code.NOT_FOUND, "no such topic d-doomed"));
    const a = await c.next((f) => f.id === 2, "the first subscribe's answer");
    const b = await c.next((f) => f.id === 3, "the second subscribe's answer");
    assert.equal(a.op, "error", JSON.stringify(a));
    assert.deepEqual({ op: b.op, code: b.code, message: b.message }, { op: "error", code: a.code, message: a.message }, "the second fails as the first did");
    assert.ok(c.frames.indexOf(a) < c.frames.indexOf(b));
    // The second changed nothing either: d-other is not subscribed.
    assert.equal(await receives(c, "d-other", "d-probe"), false);
  });

  it("a subscribe of a topic another subscribe is acquiring answers after it, with its outcome: live once", async () => {
    const c = await ws();
    const g = gate("l-later");
    c.send({ op: "subscribe", topics: ["l-later"], id: 1 });
    await reached(g, "the runtime subscribe of l-later");
    c.send({ op: "subscribe", topics: ["l-later", "l-extra"], id: 2 });
    await tick(100);
    assert.equal(c.frames.find((f) => f.id === 2), undefined, "no answer while the first subscribe of l-later is in flight");
    g.open();
    const a = await c.next((f) => f.id === 1, "the first subscribe's answer");
    const b = await c.next((f) => f.id === 2, "the second subscribe's answer");
    assert.deepEqual([a.op, a.topics], ["subscribed", ["l-later"]]);
    assert.deepEqual([b.op, b.topics], ["subscribed", ["l-later", "l-extra"]]);
    assert.ok(c.frames.indexOf(a) < c.frames.indexOf(b));
    assert.equal(await receives(c, "l-later", "l-extra"), true);
    assert.equal(topicsOf(c).filter((t) => t === "l-later").length, 1, "one delivery per event");
  });
});
