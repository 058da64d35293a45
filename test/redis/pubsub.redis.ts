import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { formatPosition, parsePosition } from "../../src/runtime/redis/index.js";
import { encodeEvent } from "../../src/runtime/redis/event-codec.js";
import type { UpstreamSubscription } from "../../src/runtime/pubsub-port.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { captureLogger, event, replica, sleep, startRedisProxy, until } from "./support.js";
import { createRedisRuntime } from "../../src/runtime/redis/index.js";

/**
 * EVAL text publishing ARGV[2] copies of the entry ARGV[1] on KEYS = stream, cursor, ordinals, as the publish script
 * does (an ordinal per entry, ids rising past the cursor), with MAXLEN ~ ARGV[3].
 */
const RAW_PUBLISH = `for i = 1, tonumber(ARGV[2]) do
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last = redis.call('GET', KEYS[2])
  if last then
    local lms = tonumber(string.match(last, '^(%d+)-'))
    if ms <= lms then ms = lms + 1 end
  end
  local id = string.format('%.0f-0', ms)
  local c = redis.call('HINCRBY', KEYS[3], KEYS[1], 1)
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', tonumber(ARGV[3]), id, 'e', ARGV[1], 'c', c)
  redis.call('SET', KEYS[2], id)
end`;

interface Got {
  topic: string;
  id: string;
  seq: number | undefined;
  event: CloudEvent;
}

/** Subscribe `topics` on a runtime, recording every event with its topic and position. */
async function record(rt: Awaited<ReturnType<typeof replica>>, topics: string[]) {
  const got: Got[] = [];
  const subs: UpstreamSubscription[] = [];
  for (const topic of topics) subs.push(await rt.pubsub.subscribe(topic, { onEvent: (e, seq) => got.push({ topic, id: e.id, seq, event: e }) }));
  return { got, close: () => Promise.all(subs.map((s) => s.close())) };
}

describe("redis runtime: pub/sub with cluster-wide positions", () => {
  let server: TestRedisServer;
  let a: Awaited<ReturnType<typeof replica>>;
  let b: Awaited<ReturnType<typeof replica>>;
  before(async () => {
    server = await startTestRedis();
    a = await replica(server.url);
    b = await replica(server.url);
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await server?.close();
  });

  it("format and parse are inverse and refuse what is not a position", () => {
    const p = a.pubsub.positions;
    for (const seq of [0, 1, 1023, 1024, 1_764_222_000_123 * 1024 + 7]) assert.equal(p.parse(p.format(seq)), seq);
    assert.equal(formatPosition(1_700_000_000_000 * 1024 + 5), "1700000000000-5");
    for (const bad of ["", "1", "1-", "-1", "1-1024", "a-1", "1-1 ", "99999999999999999-0", "1.5-0", "+1-0"]) assert.equal(parsePosition(bad), undefined, bad);
  });

  it("delivers events of several topics once, in publish order across topics, with rising positions", async () => {
    const r = await record(a, ["t1", "t2", "t3"]);
    const before = a.pubsub.positions.current();
    const ids: string[] = [];
    const publishes: Promise<void>[] = [];
    for (let i = 0; i < 300; i++) {
      const id = `o${i}`;
      ids.push(id);
      // Publishes issued back to back on one connection reach Redis in this order.
      publishes.push(b.pubsub.publish(`t${(i % 3) + 1}`, event(id)));
    }
    await Promise.all(publishes);
    await until(() => r.got.length >= 300, 10_000, "300 events");
    assert.deepEqual(r.got.map((g) => g.id), ids);
    assert.deepEqual(r.got.map((g) => g.topic), ids.map((_, i) => `t${(i % 3) + 1}`));
    const seqs = r.got.map((g) => g.seq!);
    for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i]! > seqs[i - 1]!, `position ${i} rises`);
    assert.ok(seqs[0]! > before);
    await until(() => a.pubsub.positions.current() >= seqs[seqs.length - 1]!, 3000, "current() passes the last event");
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(r.got.length, 300, "nothing twice");
    await r.close();
  });

  it("the event read back equals the one published, for every kind of data and attribute", async () => {
    const r = await record(b, ["kinds"]);
    const events: CloudEvent[] = [
      event("json", { a: 1, nested: { b: [1, 2] } }),
      { id: "json-spaces", source: "s", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: '{ "a" : 1 }', data: "text_data" },
      { id: "text", source: "s", spec_version: "1.0", type: "t", attributes: {}, text_data: "plain ünïcode", data: "text_data" },
      { id: "bin", source: "s", spec_version: "1.0", type: "t", attributes: {}, binary_data: Buffer.from([0, 1, 2, 255]), data: "binary_data" },
      { id: "proto", source: "s", spec_version: "1.0", type: "t", attributes: {}, proto_data: { type_url: "type.googleapis.com/x.Y", value: Buffer.from([8, 1]) }, data: "proto_data" },
      { id: "none", source: "s", spec_version: "1.0", type: "t", attributes: { subject: { ce_string: "sub" }, flag: { ce_boolean: true }, n: { ce_integer: 42 } } },
      {
        id: "attrs",
        source: "s",
        spec_version: "1.0",
        type: "t",
        attributes: {
          time: { ce_timestamp: { seconds: "1700000000", nanos: 123456789 } },
          dataschema: { ce_uri: "https://example.com/s" },
          ref: { ce_uri_ref: "/a/b" },
          raw: { ce_bytes: Buffer.from("hi") },
        },
        text_data: "x",
      },
    ];
    for (const e of events) await a.pubsub.publish("kinds", e);
    await until(() => r.got.length >= events.length, 5000, "every kind");
    for (let i = 0; i < events.length; i++) assert.deepEqual(r.got[i]!.event, events[i], events[i]!.id);
    await r.close();
  });

  it("two replicas both receive every event of a topic, with the same positions", async () => {
    const ra = await record(a, ["shared"]);
    const rb = await record(b, ["shared"]);
    for (let i = 0; i < 50; i++) await (i % 2 ? a : b).pubsub.publish("shared", event(`s${i}`));
    await until(() => ra.got.length >= 50 && rb.got.length >= 50, 5000, "both replicas");
    assert.deepEqual(ra.got.map((g) => [g.id, g.seq]), rb.got.map((g) => [g.id, g.seq]));
    await ra.close();
    await rb.close();
  });

  it("publishers on two replicas, three topics: both replicas hand out the same events in the same order, positions rising", async () => {
    const topics = ["m1", "m2", "m3"];
    const ra = await record(a, topics);
    const rb = await record(b, topics);
    const publishes: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) publishes.push((i % 2 ? a : b).pubsub.publish(topics[i % 3]!, event(`m${i}`)));
    await Promise.all(publishes);
    await until(() => ra.got.length >= 200 && rb.got.length >= 200, 10_000, "both replicas");
    const seen = (r: typeof ra) => r.got.map((g) => `${g.topic}/${g.id}@${g.seq}`);
    assert.deepEqual(seen(ra), seen(rb));
    assert.equal(new Set(ra.got.map((g) => g.id)).size, 200, "each event once");
    for (let i = 1; i < ra.got.length; i++) assert.ok(ra.got[i]!.seq! > ra.got[i - 1]!.seq!);
    await ra.close();
    await rb.close();
  });

  it("current() rises while subscribed topics are idle, and a closed subscription gets nothing more", async () => {
    const r = await record(a, ["idle"]);
    const start = a.pubsub.positions.current();
    await b.pubsub.publish("elsewhere", event("e1"));
    await until(() => a.pubsub.positions.current() > start, 3000, "current() moves with another topic's publish");
    await r.close();
    await b.pubsub.publish("idle", event("after-close"));
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(r.got.length, 0);
  });

  it("history: since a position, complete while the stream holds everything, limited, empty for an unknown topic", async () => {
    const r = await record(a, ["hist"]);
    for (let i = 0; i < 10; i++) await a.pubsub.publish("hist", event(`h${i}`));
    await until(() => r.got.length >= 10, 5000, "10 events");
    const p = a.pubsub.positions;
    const all = await b.pubsub.positions.history("hist", 0, 100);
    assert.equal(all.complete, true);
    assert.deepEqual(all.events.map((h) => h.event.id), r.got.map((g) => g.id));
    assert.deepEqual(all.events.map((h) => h.seq), r.got.map((g) => g.seq));
    const tail = await p.history("hist", r.got[6]!.seq!, 100);
    assert.deepEqual(tail.events.map((h) => h.event.id), ["h7", "h8", "h9"]);
    assert.equal(tail.complete, true);
    const limited = await p.history("hist", r.got[2]!.seq!, 3);
    assert.deepEqual(limited.events.map((h) => h.event.id), ["h3", "h4", "h5"]);
    assert.equal(limited.complete, false, "more than limit follow");
    assert.deepEqual(await p.history("never-published", 0, 10), { complete: true, events: [] });
    await r.close();
  });

  it("history after MAXLEN ~ trimming: incomplete from before the first held entry, complete from it on", async () => {
    const small = await replica(server.url, { streamMaxLen: 100 });
    try {
      const ids: number[] = [];
      for (let i = 0; i < 1500; i++) await small.pubsub.publish("trimmed", event(`x${i}`));
      const raw = new Redis(server.url);
      try {
        const len = await raw.xlen("gw:stream:trimmed");
        // MAXLEN ~ trims whole nodes only: the stream keeps at least 100 and fewer than all 1500.
        assert.ok(len >= 100 && len < 1500, `length ${len}`);
        const entries = await raw.xrange("gw:stream:trimmed", "-", "+");
        for (const [id] of entries) ids.push(parsePosition(id)!);
        // Trimming removes from the head only: what is held is the newest `len` events, contiguous.
        assert.deepEqual(entries.map(([, f]) => JSON.parse(f[1]!).id), Array.from({ length: len }, (_, i) => `x${1500 - len + i}`));
      } finally {
        raw.disconnect();
      }
      const fromStart = await small.pubsub.positions.history("trimmed", 0, 5000);
      assert.equal(fromStart.complete, false, "events before the first held one were trimmed");
      assert.equal(fromStart.events.length, ids.length);
      const fromFirst = await small.pubsub.positions.history("trimmed", ids[0]!, 5000);
      assert.equal(fromFirst.complete, true, "nothing after the first held entry was trimmed");
      assert.equal(fromFirst.events.length, ids.length - 1);
      const beforeFirst = await small.pubsub.positions.history("trimmed", ids[0]! - 1, 5000);
      assert.equal(beforeFirst.complete, false, "just before the first held entry may have been trimmed");
    } finally {
      await small.close();
    }
  });

  it("history after the data set was lost (a restart without persistence): incomplete from a position before the loss", async () => {
    const rt = await replica(server.url, { keyPrefix: "wiped:" });
    const raw = new Redis(server.url);
    try {
      for (let i = 0; i < 5; i++) await rt.pubsub.publish("w", event(`w${i}`));
      const all = await rt.pubsub.positions.history("w", 0, 100);
      assert.equal(all.complete, true);
      const since = all.events[1]!.seq;
      assert.equal((await rt.pubsub.positions.history("w", since, 100)).complete, true);
      // Every key of the data set gone, as after a restart of a Redis without persistence.
      await raw.del(...(await raw.keys("wiped:*")));
      assert.deepEqual(await rt.pubsub.positions.history("w", since, 100), { complete: false, events: [] }, "no stream, no cursor");
      await rt.pubsub.publish("w", event("w-new"));
      const recreated = await rt.pubsub.positions.history("w", since, 100);
      assert.deepEqual(recreated.events.map((h) => h.event.id), ["w-new"]);
      assert.equal(recreated.complete, false, "a stream made again after the loss");
      assert.equal((await rt.pubsub.positions.history("w", recreated.events[0]!.seq - 1, 100)).complete, true, "complete from the new data set's start");
    } finally {
      raw.disconnect();
      await rt.close();
    }
  });

  it("a reader that fell further behind than the stream keeps ends the topic's subscriptions instead of skipping the gap", async () => {
    const small = { streamMaxLen: 100, readBatch: 10 };
    const sub = await replica(server.url, small);
    try {
      const got: string[] = [];
      const errors: Error[] = [];
      await sub.pubsub.subscribe("gap", { onEvent: (e) => got.push(e.id), onError: (e) => errors.push(e) });
      await sub.pubsub.publish("gap", event("first"));
      await until(() => got.length === 1, 5000, "the first event");
      // 1000 publishes while this process's event loop is blocked (redis-cli runs them synchronously): the stream keeps
      // only the newest ~100, so events after this reader's position are trimmed before it can read them.
      const text = encodeEvent(event("burst"));
      const lua = `for i = 1, 1000 do
        local last = redis.call('GET', KEYS[2])
        local ms, n = string.match(last, '^(%d+)-(%d+)$')
        local id = string.format('%.0f-%d', tonumber(ms) + 1, 0)
        local c = redis.call('HINCRBY', KEYS[3], KEYS[1], 1)
        redis.call('XADD', KEYS[1], 'MAXLEN', '~', 100, id, 'e', ARGV[1], 'c', c)
        redis.call('SET', KEYS[2], id)
      end`;
      execFileSync("redis-cli", ["-p", String(server.port), "EVAL", lua, "3", "gw:stream:gap", "gw:seq", "gw:topic-ordinals", text]);
      await until(() => errors.length === 1, 10_000, "onError for the trimmed topic");
      assert.match(errors[0]!.message, /trimmed/);
      assert.ok(got.length < 100, `the events after the gap were not handed out (${got.length})`);
      assert.ok(sub.logger.lines.some((l) => l.msg?.startsWith("topic's stream was trimmed past")));
    } finally {
      await sub.close();
    }
  });

  it("a topic subscribed before any of its events was handed out: a trim while the reader was stalled is reported, never skipped", async () => {
    const sub = await replica(server.url, { streamMaxLen: 100, readBatch: 10 });
    try {
      const got: string[] = [];
      const errors: Error[] = [];
      await sub.pubsub.subscribe("quiet", { onEvent: (e) => got.push(e.id), onError: (e) => errors.push(e) });
      // 1000 publishes while this process's event loop is blocked: the stream keeps the newest ~100, so the first
      // events after this reader's position are gone before it reads any event of the topic.
      const text = encodeEvent(event("burst"));
      execFileSync("redis-cli", ["-p", String(server.port), "EVAL", RAW_PUBLISH, "3", "gw:stream:quiet", "gw:seq", "gw:topic-ordinals", text, "1000", "100"]);
      await until(() => errors.length === 1, 10_000, "onError for the trimmed topic");
      assert.match(errors[0]!.message, /trimmed/);
      assert.equal(got.length, 0, "nothing after the gap was handed out as if it followed on");
    } finally {
      await sub.close();
    }
  });

  it("a topic with earlier events, subscribed: the events after the subscription are handed out, no false trim", async () => {
    const raw = new Redis(server.url);
    try {
      const text = encodeEvent(event("earlier"));
      await raw.eval(RAW_PUBLISH, 3, "gw:stream:busy", "gw:seq", "gw:topic-ordinals", text, 25, 10_000);
      const earlier = parsePosition((await raw.get("gw:seq"))!)!;
      await until(() => a.pubsub.positions.current() >= earlier, 5000, "the reader passes the earlier events");
      const got: string[] = [];
      const errors: Error[] = [];
      await a.pubsub.subscribe("busy", { onEvent: (e) => got.push(e.id), onError: (e) => errors.push(e) });
      for (let i = 0; i < 5; i++) await b.pubsub.publish("busy", event(`later${i}`));
      await until(() => got.length >= 5, 5000, "the five later events");
      await sleep(200);
      assert.deepEqual(got, ["later0", "later1", "later2", "later3", "later4"]);
      assert.deepEqual(errors, []);
    } finally {
      raw.disconnect();
    }
  });

  it("a topic unsubscribed while a read of it is in flight keeps no ordinal: a later subscription sees no false trim", async () => {
    const proxy = await startRedisProxy(server.port);
    const rt = await replica(proxy.url);
    const raw = new Redis(server.url);
    try {
      const first = await rt.pubsub.subscribe("flip", { onEvent: () => undefined });
      // The reader wakes on the event and reads it (MULTI); the proxy holds that read's reply while the topic is dropped.
      const hold = proxy.holdNextMulti();
      await b.pubsub.publish("flip", event("e1"));
      await Promise.race([hold.held, sleep(5000).then(() => Promise.reject(new Error("no read went through the proxy")))]);
      await first.close();
      hold.release();
      // Events while nobody on this replica holds the topic.
      for (let i = 0; i < 3; i++) await b.pubsub.publish("flip", event(`gap${i}`));
      const last = parsePosition((await raw.get("gw:seq"))!)!;
      await until(() => rt.pubsub.positions.current() >= last, 5000, "the reader passes them");
      const got: string[] = [];
      const errors: Error[] = [];
      await rt.pubsub.subscribe("flip", { onEvent: (e) => got.push(e.id), onError: (e) => errors.push(e) });
      await b.pubsub.publish("flip", event("again"));
      await until(() => got.length === 1 || errors.length > 0, 5000, "the event after the resubscribe");
      assert.deepEqual(errors, [], "no trim is reported");
      assert.deepEqual(got, ["again"]);
    } finally {
      raw.disconnect();
      await rt.close();
      await proxy.close();
    }
  });

  it("a subscription made before the reader's first read gets no event published before it", async () => {
    for (let i = 0; i < 50; i++) await b.pubsub.publish("history-first", event(`old${i}`));
    const rt = createRedisRuntime({ pubsubName: "pubsub", logger: captureLogger(), redisUrl: server.url, readBatch: 10 });
    try {
      const got: string[] = [];
      // Subscribed before start(): the reader's first read sees the topic.
      const subscribed = rt.pubsub.subscribe("history-first", { onEvent: (e) => got.push(e.id) });
      await sleep(300);
      await rt.start();
      await subscribed;
      await b.pubsub.publish("history-first", event("new"));
      await until(() => got.includes("new"), 5000, "the new event");
      await sleep(200);
      assert.deepEqual(got, ["new"]);
    } finally {
      await rt.close();
    }
  });

  it("subscribe of a cancelled signal fails CANCELLED; publish after close fails", async () => {
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(a.pubsub.subscribe("x", { onEvent: () => undefined }, ac.signal), (e) => e instanceof GatewayError && e.code === Code.CANCELLED);
  });
});
