import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createBroker, subscribeFailureKind, type EndReason, type SubscriberSink, type UpstreamSource } from "../../src/broker/index.js";

/** An upstream whose subscribe calls can be held open, failed, and fed events. */
function fakeUpstream() {
  const handlers = new Map<string, (e: string) => void>();
  const errors = new Map<string, (e: Error) => void>();
  const opened: string[] = [];
  const closed: string[] = [];
  let hold: Promise<void> | null = null;
  let fail: string | null = null;
  const source: UpstreamSource<string> = {
    async subscribe(topic, onEvent, onError) {
      opened.push(topic);
      if (hold) await hold;
      if (fail === topic) throw new Error(`no such topic ${topic}`);
      handlers.set(topic, onEvent);
      errors.set(topic, onError);
      return {
        async close() {
          closed.push(topic);
          handlers.delete(topic);
        },
      };
    },
  };
  return {
    source,
    opened,
    closed,
    emit: (topic: string, e: string) => handlers.get(topic)?.(e),
    breakTopic: (topic: string) => errors.get(topic)?.(new Error("sidecar went away")),
    holdOpens() {
      let release!: () => void;
      hold = new Promise((r) => (release = r));
      return () => {
        hold = null;
        release();
      };
    },
    failTopic: (t: string | null) => (fail = t),
  };
}

/** A sink recording what it got; `accept` decides what write() answers. */
function fakeSink(accept: () => boolean = () => true) {
  const got: string[] = [];
  const ends: EndReason[] = [];
  let opened = 0;
  const sink: SubscriberSink = {
    write(bytes) {
      got.push(Buffer.from(bytes).toString());
      return accept();
    },
    open() {
      opened++;
    },
    end(reason) {
      ends.push(reason);
    },
  };
  return { sink, got, ends, opened: () => opened };
}

const encode = (topic: string, e: string): Uint8Array => Buffer.from(`${topic}:${e}`);

async function until(pred: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 2000;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe("broker", () => {
  it("opens one upstream per topic, shares it, and encodes each event once per topic", async () => {
    const up = fakeUpstream();
    let encodes = 0;
    const b = createBroker({ upstream: up.source, encode: (t, e) => (encodes++, encode(t, e)), lingerMs: 10 });
    const a = fakeSink();
    const c = fakeSink();
    await b.subscribe(["t"], a.sink);
    await b.subscribe(["t", "u"], c.sink);
    assert.deepEqual(up.opened, ["t", "u"]);
    assert.equal(a.opened(), 1);
    assert.equal(b.refs("t"), 2);
    up.emit("t", "1");
    up.emit("u", "2");
    up.emit("t", "3");
    assert.deepEqual(a.got, ["t:1", "t:3"]);
    assert.deepEqual(c.got, ["t:1", "u:2", "t:3"]);
    assert.equal(encodes, 3);
    await b.close();
  });

  it("keeps the upstream while referenced, releases it after the linger, and re-checks the count", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 30 });
    const s1 = await b.subscribe(["t"], fakeSink().sink);
    const s2 = await b.subscribe(["t"], fakeSink().sink);
    s1.close();
    assert.equal(b.refs("t"), 1);
    assert.ok(b.hasUpstream("t"));
    s2.close();
    s2.close(); // twice is harmless
    assert.equal(b.refs("t"), 0);
    assert.ok(b.hasUpstream("t"), "lingers");
    // A subscriber that comes back within the linger reuses it: no churn.
    const s3 = await b.subscribe(["t"], fakeSink().sink);
    await new Promise((r) => setTimeout(r, 60));
    assert.ok(b.hasUpstream("t"));
    assert.deepEqual(up.opened, ["t"]);
    s3.close();
    await until(() => !b.hasUpstream("t"), "release after linger");
    assert.deepEqual(up.closed, ["t"]);
    assert.deepEqual(b.stats(), { topics: 0, subscribers: 0, upstreams: 0 });
    await b.close();
  });

  it("joins a topic that is still opening, and rolls every waiter back when the open fails", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 10 });
    await b.subscribe(["ok"], fakeSink().sink).then((s) => s.close());
    const release = up.holdOpens();
    up.failTopic("bad");
    const a = fakeSink();
    const p1 = b.subscribe(["ok", "bad"], a.sink);
    const p2 = b.subscribe(["bad"], fakeSink().sink);
    assert.equal(b.refs("bad"), 2);
    release();
    for (const p of [p1, p2]) {
      await assert.rejects(p, (e: unknown) => e instanceof GatewayError && subscribeFailureKind(e) === "upstream" && e.details?.["topic"] === "bad" && /no such topic bad/.test(e.message));
    }
    assert.deepEqual(up.opened.filter((t) => t === "bad"), ["bad"], "one upstream subscribe for both waiters");
    assert.equal(a.opened(), 0, "never went live");
    assert.equal(b.refs("bad"), 0);
    assert.equal(b.refs("ok"), 0);
    assert.equal(b.stats().subscribers, 0);
    // The failed topic is not cached: the next subscriber tries again.
    up.failTopic(null);
    await b.subscribe(["bad"], fakeSink().sink);
    assert.ok(b.hasUpstream("bad"));
    await b.close();
  });

  it("reaps a subscriber more than 1024 events behind without holding back the others", async () => {
    const up = fakeUpstream();
    const reaped: string[] = [];
    const b = createBroker({ upstream: up.source, encode, observer: { ended: (k) => reaped.push(k) } });
    const stalled = fakeSink(() => false);
    const fine = fakeSink();
    await b.subscribe(["t"], stalled.sink);
    await b.subscribe(["t"], fine.sink);
    // The first write is accepted (answering false), then 1024 wait in the ring; the next one overflows.
    for (let i = 0; i < 1025; i++) up.emit("t", String(i));
    assert.deepEqual(stalled.ends, []);
    up.emit("t", "1025");
    assert.deepEqual(stalled.ends, [{ kind: "slow", capacity: 1024 }]);
    assert.deepEqual(reaped, ["slow"]);
    for (let i = 1026; i < 1100; i++) up.emit("t", String(i));
    assert.equal(fine.got.length, 1100);
    assert.equal(stalled.got.length, 1);
    assert.equal(b.stats().subscribers, 1);
    await b.close();
  });

  it("pumps the ring in order on drain, only while write returns true", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode });
    let budget = 1;
    const s = fakeSink(() => --budget > 0);
    const sub = await b.subscribe(["t"], s.sink);
    for (let i = 0; i < 10; i++) up.emit("t", String(i));
    assert.deepEqual(s.got, ["t:0"]);
    budget = 4;
    sub.drain();
    assert.deepEqual(s.got, ["t:0", "t:1", "t:2", "t:3", "t:4"]);
    budget = 100;
    sub.drain();
    up.emit("t", "10");
    assert.deepEqual(s.got, Array.from({ length: 11 }, (_, i) => `t:${i}`));
    await b.close();
  });

  it("writes to a sink's outlet while it keeps up; a refusal goes through blocked(), the ring and write(), then back to the outlet", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode });
    const through: string[] = [];
    const direct: string[] = [];
    let blocked = 0;
    let budget = 2;
    const sink: SubscriberSink = {
      write(bytes) {
        through.push(Buffer.from(bytes).toString());
        return true;
      },
      open() {},
      end() {},
      outlet: () => ({
        write(bytes) {
          direct.push(Buffer.from(bytes).toString());
          return --budget > 0;
        },
      }),
      blocked: () => blocked++,
    };
    const sub = await b.subscribe(["t"], sink);
    for (let i = 0; i < 5; i++) up.emit("t", String(i));
    // The second write was taken but refused more: the sink was told once, the rest waited in the ring.
    assert.deepEqual(direct, ["t:0", "t:1"]);
    assert.deepEqual(through, []);
    assert.equal(blocked, 1);
    budget = 100;
    sub.drain();
    // The ring drains through the sink's write, in order; caught up, events go to the outlet again.
    assert.deepEqual(through, ["t:2", "t:3", "t:4"]);
    up.emit("t", "5");
    assert.deepEqual(direct, ["t:0", "t:1", "t:5"]);
    assert.equal(blocked, 1);
    await b.close();
  });

  it("takes no outlet from a sink without blocked(): its events go through write()", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode });
    const s = fakeSink();
    let outletWrites = 0;
    await b.subscribe(["t"], { ...s.sink, outlet: () => ({ write: () => (outletWrites++, true) }) });
    up.emit("t", "1");
    assert.deepEqual(s.got, ["t:1"]);
    assert.equal(outletWrites, 0);
    await b.close();
  });

  it("delivers twice for a duplicated topic and releases both references", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 5 });
    const s = fakeSink();
    const sub = await b.subscribe(["t", "t"], s.sink);
    assert.equal(b.refs("t"), 2);
    up.emit("t", "a");
    up.emit("t", "b");
    assert.deepEqual(s.got, ["t:a", "t:a", "t:b", "t:b"]);
    sub.close();
    assert.equal(b.refs("t"), 0);
    await until(() => up.closed.includes("t"), "release");
    await b.close();
  });

  it("unsubscribes by id, sweeps stuck subscribers, ends upstream-failed topics, and closes with shutdown", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 5 });
    const u = fakeSink();
    const sub = await b.subscribe(["t"], u.sink);
    assert.equal(b.unsubscribe("nope"), false);
    assert.equal(b.unsubscribe(sub.id), true);
    assert.deepEqual(u.ends, [{ kind: "unsubscribed" }]);
    assert.equal(b.unsubscribe(sub.id), false);

    const stuck = fakeSink(() => false);
    await b.subscribe(["t"], stuck.sink);
    up.emit("t", "1");
    up.emit("t", "2");
    b.sweep(1000); // first sighting: marked
    assert.deepEqual(stuck.ends, []);
    b.sweep(6000); // no progress since: reaped
    assert.deepEqual(stuck.ends, [{ kind: "stuck", pending: 1, stalledMs: 5000 }]);

    const broken = fakeSink();
    await b.subscribe(["x"], broken.sink);
    up.breakTopic("x");
    assert.equal(broken.ends[0]?.kind, "upstream-failed");
    assert.equal(b.hasUpstream("x"), false);

    const last = fakeSink();
    await b.subscribe(["t"], last.sink);
    await b.close();
    await b.close();
    assert.deepEqual(last.ends, [{ kind: "shutdown" }]);
    await assert.rejects(b.subscribe(["t"], fakeSink().sink), (e: unknown) => subscribeFailureKind(e) === "closed");
  });

  it("fails a subscribe whose owner went away while the upstream opened, leaving nothing behind", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 5 });
    const release = up.holdOpens();
    const ac = new AbortController();
    const s = fakeSink();
    const p = b.subscribe(["t"], s.sink, ac.signal);
    ac.abort();
    release();
    await assert.rejects(p, (e: unknown) => subscribeFailureKind(e) === "cancelled");
    assert.equal(s.opened(), 0);
    assert.equal(b.refs("t"), 0);
    await until(() => up.closed.includes("t"), "release of the upstream nobody wants");
    await b.close();
  });

  it("a fan-out sink shares the topic's one upstream and ref count with subscribers, gets each event once, and skips encoding when alone", async () => {
    const up = fakeUpstream();
    let encodes = 0;
    const b = createBroker({ upstream: up.source, encode: (t, e) => (encodes++, encode(t, e)), lingerMs: 10 });
    const seen: string[] = [];
    const ends: EndReason[] = [];
    const h = await b.attachFanout("t", { event: (t, e) => seen.push(`${t}:${e}`), end: (r) => ends.push(r) });
    assert.equal(b.refs("t"), 1);
    up.emit("t", "1");
    assert.deepEqual(seen, ["t:1"]);
    assert.equal(encodes, 0, "no subscriber: nothing encoded");
    const s = fakeSink();
    const sub = await b.subscribe(["t"], s.sink);
    assert.deepEqual(up.opened, ["t"], "one upstream for both");
    assert.equal(b.refs("t"), 2);
    up.emit("t", "2");
    assert.deepEqual(seen, ["t:1", "t:2"]);
    assert.deepEqual(s.got, ["t:2"]);
    h.close();
    h.close();
    assert.equal(b.refs("t"), 1, "close releases exactly one reference");
    sub.close();
    await until(() => up.closed.includes("t"), "release after the last reference");
    assert.deepEqual(ends, []);
    await b.close();
  });

  it("stamps each event once on arrival: fan-out sinks and the fannedOut hook get the same receipt time and the fan-out record's exemplar", async () => {
    const up = fakeUpstream();
    const reported: Array<{ n: number; at: number; exemplar: unknown }> = [];
    const traced: string[] = [];
    const exemplar = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
    const b = createBroker({
      upstream: up.source,
      encode,
      lingerMs: 10,
      observer: { fannedOut: (_t, n, at, ex) => reported.push({ n, at, exemplar: ex }) },
      traceFanout: (t, e) => ({ exemplar: e === "sampled" ? exemplar : undefined, count: (tr, n) => traced.push(`${t}:${tr}:${n}`), end: () => undefined }),
    });
    const stamps: number[] = [];
    await b.attachFanout("t", { event: (_t, _e, _seq, _trace, at) => stamps.push(at), end: () => undefined });
    const subs = [fakeSink(), fakeSink()];
    for (const s of subs) await b.subscribe(["t"], s.sink);
    const before = performance.timeOrigin + performance.now();
    up.emit("t", "sampled");
    up.emit("t", "unsampled");
    const after = performance.timeOrigin + performance.now();
    assert.equal(stamps.length, 2);
    for (const at of stamps) assert.ok(at >= before && at <= after, `${at} within [${before}, ${after}]`);
    // One report per event (not per subscriber), with the stamp its fan-out sinks got.
    assert.deepEqual(reported, [
      { n: 2, at: stamps[0], exemplar },
      { n: 2, at: stamps[1], exemplar: undefined },
    ]);
    assert.deepEqual(traced, ["t:grpc:2", "t:grpc:2"]);
    await b.close();
  });

  it("close({linger: false}) of the last reference closes the upstream at once (the web hub lingered already); otherwise the broker lingers", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 60_000 });
    const sink = () => ({ event: () => undefined, end: () => undefined });
    const kept = await b.attachFanout("k", sink());
    kept.close();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(up.closed.length, 0, "a plain close lingers (60 s here)");
    const a = await b.attachFanout("t", sink());
    const other = await b.attachFanout("t", sink());
    a.close({ linger: false });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(up.closed.length, 0, "another reference holds the topic");
    assert.equal(b.refs("t"), 1);
    other.close({ linger: false });
    await until(() => up.closed.includes("t"), "the upstream closed with no second linger");
    assert.equal(b.refs("t"), 0);
    assert.ok(!up.closed.includes("k"), "the lingering topic is untouched");
    await b.close();
  });

  it("a fan-out sink is ended when its upstream breaks and on close; a failed open leaves nothing behind", async () => {
    const up = fakeUpstream();
    const b = createBroker({ upstream: up.source, encode, lingerMs: 10 });
    const ends: EndReason[] = [];
    const h = await b.attachFanout("t", { event: () => undefined, end: (r) => ends.push(r) });
    up.breakTopic("t");
    assert.deepEqual(ends, [{ kind: "upstream-failed", topic: "t", message: "sidecar went away" }]);
    h.close();
    assert.equal(b.refs("t"), 0);
    up.failTopic("bad");
    await assert.rejects(b.attachFanout("bad", { event: () => undefined, end: () => undefined }), (e: unknown) => subscribeFailureKind(e) === "upstream");
    assert.equal(b.refs("bad"), 0);
    await b.attachFanout("u", { event: () => undefined, end: (r) => ends.push(r) });
    await b.close();
    assert.deepEqual(ends.at(-1), { kind: "shutdown" });
  });
});

describe("broker: the bound on topics followed at once", () => {
  it("refuses a subscribe naming a new topic past maxTopics RESOURCE_EXHAUSTED, first releasing lingering topics to make room", async () => {
    const up = fakeUpstream();
    const broker = createBroker({ upstream: up.source, encode, maxTopics: 3, lingerMs: 60_000 });
    try {
      const a = await broker.subscribe(["t1", "t2"], fakeSink().sink);
      const b = await broker.subscribe(["t3"], fakeSink().sink);
      await assert.rejects(broker.subscribe(["t3", "t4"], fakeSink().sink), (e: unknown) => {
        assert.ok(e instanceof GatewayError);
        assert.equal(e.code, 8, "RESOURCE_EXHAUSTED");
        assert.match(e.message, /follows 3 topics already/);
        return true;
      });
      assert.deepEqual(up.opened, ["t1", "t2", "t3"], "the refused subscribe opened nothing");
      // A topic already followed needs no room.
      const again = await broker.subscribe(["t1", "t3"], fakeSink().sink);
      again.close();
      // t3's last subscriber leaves: it lingers, and the next new topic takes its place.
      b.close();
      const c = await broker.subscribe(["t4"], fakeSink().sink);
      await until(() => up.closed.includes("t3"), "t3 released for room");
      assert.equal(broker.stats().topics, 3);
      a.close();
      c.close();
    } finally {
      await broker.close();
    }
  });
});
