import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { event, publish, stalledSubscribe, subscribe, type Sub } from "./pubsub-support.js";
import { createGatewayClient, type LiveInfo, type SubscriptionMessage } from "../../src/client/index.js";
import { nextMessage, onceWithin, within } from "../support/client-helpers.js";

const KEY = "k1";

/** Request metadata: the key plus the given entries. */
function md(entries: Record<string, string> = {}): grpc.Metadata {
  const m = withKey(KEY);
  for (const [k, v] of Object.entries(entries)) m.set(k, v);
  return m;
}

const header = (s: Sub, name: string): string | undefined => {
  const v = s.headers?.get(name)[0];
  return v === undefined ? undefined : String(v);
};
const positionOf = (e: any): string | undefined => e.cloudevent.attributes?.gwposition?.ce_string;
const texts = (s: Sub): string[] => s.got.map((e) => e.cloudevent.text_data);

describe("gRPC Subscribe with positions and resume (embedded runtime)", () => {
  let gw: TestGateway;
  let other: TestGateway;
  let small: TestGateway;
  let client: grpc.Client;
  const subs: Sub[] = [];
  const track = (s: Sub): Sub => (subs.push(s), s);

  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], sweepIntervalMs: 60_000 });
    other = await startTestGateway({ apiKeys: [KEY], sweepIntervalMs: 300 });
    small = await startTestGateway({ apiKeys: [KEY], pubsubHistoryEvents: 3 });
    client = gw.client("io.cloudevents.v1.Pubsub");
  });
  after(async () => {
    for (const s of subs) s.call.cancel();
    await waitFor(() => subs.every((s) => s.status !== undefined), "every test stream to end");
    await Promise.all([gw.close(), other.close(), small.close()]);
  });

  it("carries no positions unless asked: the plain stream is unchanged", async () => {
    const s = track(subscribe(client, ["plain"], md()));
    await s.ready();
    assert.equal(header(s, "x-position"), undefined);
    assert.equal(header(s, "x-recovered"), undefined);
    await publish(client, "plain", event(1, { attributes: { color: { ce_string: "red" } } }), md());
    await s.count(1);
    assert.deepEqual(Object.keys(s.got[0].cloudevent.attributes).sort(), ["color"]);
    s.call.cancel();
  });

  it("x-positions: true gives the live position header and each event's gwposition, in order", async () => {
    const s = track(subscribe(client, ["pos"], md({ "x-positions": "true" })));
    await s.ready();
    const start = header(s, "x-position");
    assert.match(start ?? "", /^[0-9a-f]{12}-\d+$/);
    assert.equal(header(s, "x-recovered"), undefined, "not a resume");
    assert.match(header(s, "x-subscription-id") ?? "", /^[0-9a-f-]{36}$/);
    for (let i = 0; i < 5; i++) await publish(client, "pos", event(i, { attributes: { color: { ce_string: "blue" } } }), md());
    await s.count(5);
    assert.deepEqual(texts(s), ["0", "1", "2", "3", "4"]);
    const positions = s.got.map(positionOf);
    for (const p of positions) assert.match(p ?? "", /^[0-9a-f]{12}-\d+$/);
    const seqs = positions.map((p) => Number(p!.split("-")[1]));
    assert.ok(seqs.every((n, i) => i === 0 || n > seqs[i - 1]!), "positions increase");
    assert.equal(s.got[0].cloudevent.attributes.color.ce_string, "blue", "the event's own attributes are kept");
    s.call.cancel();
  });

  it("resumes after a disconnect with exactly the missed events, in order, x-recovered true", async () => {
    const a = track(subscribe(client, ["r1"], md({ "x-positions": "true" })));
    await a.ready();
    for (let i = 0; i < 3; i++) await publish(client, "r1", event(`a${i}`), md());
    await a.count(3);
    const last = positionOf(a.got[2])!;
    a.call.cancel();
    await a.ended();
    for (let i = 0; i < 4; i++) await publish(client, "r1", event(`m${i}`), md());
    const b = track(subscribe(client, ["r1"], md({ "last-event-id": last })));
    await b.ready();
    assert.equal(header(b, "x-recovered"), "true");
    assert.ok(header(b, "x-position"));
    await b.count(4);
    await publish(client, "r1", event("live"), md());
    await b.count(5);
    assert.deepEqual(texts(b), ["m0", "m1", "m2", "m3", "live"]);
    assert.ok(b.got.every((e) => positionOf(e)), "a resumed stream carries positions");
    b.call.cancel();
  });

  it("resumes from the x-position header when no event came, and resumes every topic of a multi-topic stream", async () => {
    const a = track(subscribe(client, ["mx", "my"], md({ "x-positions": "true" })));
    await a.ready();
    const from = header(a, "x-position")!;
    a.call.cancel();
    await a.ended();
    await publish(client, "mx", event("x1"), md());
    await publish(client, "my", event("y1"), md());
    await publish(client, "other-topic", event("o1"), md());
    await publish(client, "mx", event("x2"), md());
    const b = track(subscribe(client, ["mx", "my"], md({ "last-event-id": from })));
    await b.ready();
    assert.equal(header(b, "x-recovered"), "true");
    await b.count(3);
    assert.deepEqual(
      b.got.map((e) => `${e.topic}:${e.cloudevent.text_data}`),
      ["mx:x1", "my:y1", "mx:x2"],
    );
    b.call.cancel();
  });

  it("a position from another gateway process resumes with x-recovered false and goes live", async () => {
    const o = other.client("io.cloudevents.v1.Pubsub");
    const a = track(subscribe(o, ["cross"], md({ "x-positions": "true" })));
    await a.ready();
    const foreign = header(a, "x-position")!;
    a.call.cancel();
    const b = track(subscribe(client, ["cross"], md({ "last-event-id": foreign })));
    await b.ready();
    assert.equal(header(b, "x-recovered"), "false");
    await publish(client, "cross", event("after"), md());
    await b.count(1);
    assert.deepEqual(texts(b), ["after"]);
    b.call.cancel();
  });

  it("a position whose events the history evicted resumes with x-recovered false", async () => {
    const c = small.client("io.cloudevents.v1.Pubsub");
    const a = track(subscribe(c, ["evict"], md({ "x-positions": "true" })));
    await a.ready();
    await publish(c, "evict", event(0), md());
    await a.count(1);
    const first = positionOf(a.got[0])!;
    a.call.cancel();
    await a.ended();
    for (let i = 1; i <= 6; i++) await publish(c, "evict", event(i), md());
    const b = track(subscribe(c, ["evict"], md({ "last-event-id": first })));
    await b.ready();
    assert.equal(header(b, "x-recovered"), "false");
    await publish(c, "evict", event("live"), md());
    await b.count(1);
    assert.deepEqual(texts(b), ["live"], "nothing replayed when the resume is not exact");
    b.call.cancel();
  });

  it("refuses a bad position with INVALID_ARGUMENT naming last-event-id, subscribing nothing", async () => {
    const s = track(subscribe(client, ["bad"], md({ "last-event-id": "not-a-position" })));
    const st = await s.ended();
    assert.equal(st.code, grpc.status.INVALID_ARGUMENT);
    assert.match(st.details, /last-event-id/);
    assert.equal(s.headers?.get("x-subscription-id")[0], undefined);
    const flag = track(subscribe(client, ["bad"], md({ "x-positions": "maybe" })));
    const st2 = await flag.ended();
    assert.equal(st2.code, grpc.status.INVALID_ARGUMENT);
    assert.match(st2.details, /x-positions/);
  });

  it("Unsubscribe ends a positioned stream with OK", async () => {
    const s = track(subscribe(client, ["unsub"], md({ "x-positions": "true" })));
    await s.ready();
    const res = await new Promise<any>((resolve, reject) =>
      (client as unknown as Record<string, Function>)["Unsubscribe"]!.call(client, { subscription_id: s.id() }, md(), (err: Error | null, r: any) =>
        err ? reject(err) : resolve(r),
      ),
    );
    assert.equal(res.status.success, true);
    const st = await s.ended();
    assert.equal(st.code, grpc.status.OK);
  });

  it("client library: positions on each message, a reconnect resumes exactly, since resumes a later subscription", async () => {
    const gc = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY, reconnect: { initialDelayMs: 300, maxDelayMs: 300 } });
    try {
      const plain = gc.subscribe("cl");
      const sub = gc.subscribe("cl", { positions: true });
      await within(Promise.all([plain.ready, sub.ready]), "both subscriptions live");
      assert.match(sub.position ?? "", /^[0-9a-f]{12}-\d+$/, "the live position before any event");
      const it = sub[Symbol.asyncIterator]();
      const itPlain = plain[Symbol.asyncIterator]();
      await publish(client, "cl", event("c0"), md());
      const first = await nextMessage(it, "c0");
      assert.match(first.position ?? "", /^[0-9a-f]{12}-\d+$/);
      const p0 = await nextMessage(itPlain, "c0 on the plain subscription");
      assert.equal(p0.position, undefined);
      assert.equal(p0.event.attributes["gwposition"], undefined);
      // The gateway ends the stream (Unsubscribe by id): the client reconnects from the last position it saw.
      const reconnected = onceWithin<LiveInfo>(sub, "reconnected");
      await new Promise((resolve, reject) =>
        (client as unknown as Record<string, Function>)["Unsubscribe"]!.call(client, { subscription_id: sub.subscriptionId }, md(), (err: Error | null, r: unknown) =>
          err ? reject(err) : resolve(r),
        ),
      );
      for (let i = 1; i <= 3; i++) await publish(client, "cl", event(`c${i}`), md());
      const info = await reconnected;
      assert.equal(info.recovered, true);
      await publish(client, "cl", event("c4"), md());
      const got: SubscriptionMessage[] = [];
      for (let i = 1; i <= 4; i++) got.push(await nextMessage(it, `c${i}`));
      assert.deepEqual(got.map((m) => m.event.text_data), ["c1", "c2", "c3", "c4"], "nothing lost or repeated across the reconnect");
      const saved = got[1]!.position!;
      sub.close();
      plain.close();
      const later = gc.subscribe("cl", { since: saved });
      const itLater = later[Symbol.asyncIterator]();
      const live = onceWithin<LiveInfo>(later, "live");
      assert.equal((await live).recovered, true);
      // A position names the last event seen: the resume replays what came after it.
      assert.deepEqual([(await nextMessage(itLater, "c3 replayed")).event.text_data, (await nextMessage(itLater, "c4 replayed")).event.text_data], ["c3", "c4"]);
      later.close();
    } finally {
      gc.close();
    }
  });

  it("a positioned stream that stops reading is dropped slow past 1024 events, RESOURCE_EXHAUSTED", async () => {
    const slow = await stalledSubscribe(gw.grpcAddress, ["p.slow"], KEY, { "x-positions": "true" });
    try {
      assert.ok(slow.headers?.["x-position"], "positions asked for");
      for (let i = 0; i < 3000 && !gw.logs.some((l) => /more than 1024 events behind/.test(String(l["msg"]))); i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => publish(client, "p.slow", event(i + j), md())));
      }
      await waitFor(() => gw.logs.some((l) => /more than 1024 events behind/.test(String(l["msg"]))), "the slow drop to be logged");
      const { trailers } = await slow.resume();
      assert.equal(String(trailers["grpc-status"]), String(grpc.status.RESOURCE_EXHAUSTED));
    } finally {
      slow.close();
    }
  });

  it("a positioned stream that makes no progress for a sweep interval is dropped stuck, RESOURCE_EXHAUSTED", async () => {
    const o = other.client("io.cloudevents.v1.Pubsub");
    const stuck = await stalledSubscribe(other.grpcAddress, ["p.stuck"], KEY, { "x-positions": "true" });
    try {
      for (let i = 0; i < 3000 && !other.logs.some((l) => /made no progress/.test(String(l["msg"]))); i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => publish(o, "p.stuck", event(i + j), md())));
        if (i >= 200) await new Promise((r) => setTimeout(r, 100));
      }
      await waitFor(() => other.logs.some((l) => /made no progress/.test(String(l["msg"]))), "the stuck drop to be logged");
      const { trailers } = await stuck.resume();
      assert.equal(String(trailers["grpc-status"]), String(grpc.status.RESOURCE_EXHAUSTED));
    } finally {
      stuck.close();
    }
  });
});
