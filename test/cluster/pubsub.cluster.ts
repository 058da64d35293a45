import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { assertExactly, mustPublish, progress, startCluster, type Cluster, type Replica } from "../support/cluster.js";
import { grpcSubscriber, sseSubscriber, waitForCount, wsSubscriber, type ClusterSubscriber } from "../support/cluster-clients.js";

// Three gateways on one Redis: fan-out to every subscriber on every replica, and positions that resume on any replica.
// Each stream is capped at STREAM_MAXLEN entries (approximately, MAXLEN ~), far above what the other tests publish
// to one topic and far below what the eviction test does; each replica's in-memory history per topic at
// HISTORY_EVENTS, below the cap, so the eviction test's gap is held by neither.
const STREAM_MAXLEN = 200;
const HISTORY_EVENTS = 100;

let cluster: Cluster;
let A: Replica, B: Replica, C: Replica;
const run = randomUUID().slice(0, 8);
const topic = (name: string): string => `cl.${run}.${name}`;

before(async () => {
  // C serves its HTTP port from two uWS threads: a thread's hub must give out and resume the same positions.
  cluster = await startCluster({
    gatewayArgs: ["--redis-stream-maxlen", String(STREAM_MAXLEN), "--pubsub-history-events", String(HISTORY_EVENTS)],
    replicaArgs: [[], [], ["--threads", "2"]],
  });
  [A, B, C] = cluster.replicas as [Replica, Replica, Replica];
});
after(() => cluster?.close());

/** Publish `perPublisher` events to each topic from each replica at once: one sequential publisher per (replica, topic). */
async function publishFromAll(replicas: Replica[], topics: string[], perPublisher: number, tag: string): Promise<Map<string, string[][]>> {
  const sent = new Map<string, string[][]>(topics.map((t) => [t, replicas.map(() => [])]));
  await Promise.all(
    replicas.flatMap((r, ri) =>
      topics.map(async (t) => {
        for (let k = 0; k < perPublisher; k++) {
          const id = `${tag}.${r.name}.${t}.${k}`;
          await mustPublish(r, t, { id, data: { k } });
          sent.get(t)![ri]!.push(id);
        }
      }),
    ),
  );
  return sent;
}

/** Every publisher's events on `t` appear in `got` once each, in the order that publisher sent them. */
function assertAllOnceInPublisherOrder(got: string[], perPublisher: string[][], who: string): void {
  const all = perPublisher.flat();
  assertExactly([...got].sort(), [...all].sort(), who);
  for (const seq of perPublisher) {
    const mine = new Set(seq);
    assertExactly(got.filter((g) => mine.has(g)), seq, `${who} (one publisher's order)`);
  }
}

test("every subscriber on every replica (WebSocket, SSE, gRPC; one and several topics) gets every event once, in the same order", async () => {
  const [t1, t2, t3] = [topic("fan1"), topic("fan2"), topic("fan3")];
  const subs: ClusterSubscriber[] = [];
  try {
    await cluster.step("subscribing 5 clients on each replica", async () => {
      for (const r of [A, B, C]) {
        subs.push(await wsSubscriber(`ws ${r.name} [t1]`, r, [t1]));
        subs.push(await wsSubscriber(`ws ${r.name} [t1,t2,t3]`, r, [t1, t2, t3]));
        subs.push(await sseSubscriber(`sse ${r.name} [t2,t3]`, r, [t2, t3]));
        subs.push(await grpcSubscriber(`grpc ${r.name} [t1,t3]`, r, [t1, t3]));
        subs.push(await grpcSubscriber(`grpc ${r.name} [t2]`, r, [t2]));
      }
    });
    const PER = 30;
    const sent = await cluster.step(`publishing ${PER} events per topic from each replica (${PER * 9} in all)`, () => publishFromAll([A, B, C], [t1, t2, t3], PER, "fan"));
    await cluster.step("waiting for every subscriber to have every event", async () => {
      for (const s of subs) for (const t of s.topics) await waitForCount(s, t, PER * 3);
    });
    // A moment for a duplicate or a late stray to show up before the counts are checked exactly.
    await new Promise((r) => setTimeout(r, 500));
    for (const t of [t1, t2, t3]) {
      const holders = subs.filter((s) => s.topics.includes(t));
      const reference = holders[0]!.ids(t);
      for (const s of holders) {
        assertAllOnceInPublisherOrder(s.ids(t), sent.get(t)!, `${s.label} on ${t}`);
        // One stream per topic: every replica delivers the topic's events in the stream's one order.
        assertExactly(s.ids(t), reference, `${s.label} on ${t}, against ${holders[0]!.label}`);
      }
    }
  } finally {
    await Promise.all(subs.map((s) => s.close()));
  }
});

test("a position taken on one replica resumes exactly on another (WebSocket since, SSE Last-Event-ID, a subscribe position)", async () => {
  const t = topic("resume");
  const live = await wsSubscriber("live ws on A", A, [t]);
  const early = await wsSubscriber("ws on A that sees no event", A, [t]);
  const ws = await wsSubscriber("ws on A", A, [t]);
  const sse = await sseSubscriber("sse on B", B, [t]);
  const fresh: ClusterSubscriber[] = [];
  try {
    await mustPublish(C, t, { id: "r.0" });
    await waitForCount(ws, t, 1);
    await waitForCount(sse, t, 1);
    await early.close();
    await ws.close();
    await sse.close();
    const N = 25;
    const missed = Array.from({ length: N }, (_, k) => `r.${k + 1}`);
    await cluster.step(`publishing ${N} events through B and C while the subscribers are away`, async () => {
      for (const [k, id] of missed.entries()) await mustPublish(k % 2 ? B : C, t, { id });
    });
    await waitForCount(live, t, N + 1);
    const positions = live.seen.map((s) => s.position);
    assert.equal(new Set(positions).size, positions.length, `positions are distinct: ${positions.join(" ")}`);

    // The WebSocket subscriber taken on A resumes on B, the SSE one taken on B resumes on C.
    const wsResume = await ws.resumeOn(B);
    assert.equal(wsResume.recovered, true, "WebSocket resume on B: recovered");
    await sse.resumeOn(C);
    assert.deepEqual(sse.recoveries, [true], "SSE resume on C: no recovery:false message");
    // The one that saw no event resumes from its subscribe position, on C.
    const earlyResume = await early.resumeOn(C);
    assert.equal(earlyResume.recovered, true, "resume from a subscribe position on C: recovered");
    await mustPublish(A, t, { id: "r.live" });
    for (const s of [ws, sse]) {
      await waitForCount(s, t, N + 2);
      await new Promise((r) => setTimeout(r, 300));
      assertExactly(s.ids(t), ["r.0", ...missed, "r.live"], s.label);
    }
    await waitForCount(early, t, N + 2);
    assertExactly(early.ids(t), ["r.0", ...missed, "r.live"], early.label);
    // The replayed events carry the same positions on every replica.
    await waitForCount(live, t, N + 2);
    assert.deepEqual(ws.seen.map((s) => s.position), live.seen.map((s) => s.position), "positions seen on B equal those on A");
    assert.deepEqual(sse.seen.map((s) => s.position), live.seen.map((s) => s.position), "SSE ids on C equal the WebSocket positions on A");

    // Any position of the stream resumes from exactly there, on every replica.
    for (const [i, r] of [A, B, C].entries()) {
      const from = 5 + i * 7;
      const s = await wsSubscriber(`ws resuming on ${r.name} after event ${from}`, r, [t], live.seen[from]!.position);
      fresh.push(s);
      assert.deepEqual(s.recoveries, [true], s.label);
      await waitForCount(s, t, N - from);
      await new Promise((res) => setTimeout(res, 200));
      assertExactly(s.ids(t), live.ids(t).slice(from + 1), s.label);
    }
  } finally {
    await Promise.all([live, early, ws, sse, ...fresh].map((s) => s.close()));
  }
});

test("a multi-topic subscription resumes every topic exactly on another replica", async () => {
  const topics = [topic("m1"), topic("m2"), topic("m3")];
  const ws = await wsSubscriber("ws [m1,m2,m3] on A", A, topics);
  const sse = await sseSubscriber("sse [m1,m2,m3] on A", A, topics);
  try {
    for (const [i, t] of topics.entries()) await mustPublish(B, t, { id: `m.before.${i}` });
    for (const t of topics) {
      await waitForCount(ws, t, 1);
      await waitForCount(sse, t, 1);
    }
    await ws.close();
    await sse.close();
    // Interleaved over the topics and the replicas, so a resume that took one topic's position for another's shows.
    const sent = new Map<string, string[]>(topics.map((t, i) => [t, [`m.before.${i}`]]));
    await cluster.step("publishing 60 events over 3 topics through A, B and C", async () => {
      for (let k = 0; k < 60; k++) {
        const t = topics[(k * 7) % 3]!;
        const id = `m.${k}`;
        await mustPublish([A, B, C][k % 3]!, t, { id });
        sent.get(t)!.push(id);
      }
    });
    assert.equal((await ws.resumeOn(C)).recovered, true, "WebSocket multi-topic resume on C: recovered");
    await sse.resumeOn(B);
    assert.deepEqual(sse.recoveries, [true], "SSE multi-topic resume on B: recovered");
    for (const s of [ws, sse]) {
      for (const t of topics) await waitForCount(s, t, sent.get(t)!.length);
    }
    await new Promise((r) => setTimeout(r, 300));
    for (const s of [ws, sse]) for (const t of topics) assertExactly(s.ids(t), sent.get(t)!, `${s.label} on ${t}`);
  } finally {
    await Promise.all([ws.close(), sse.close()]);
  }
});

test("a position older than the stream holds resumes with recovered: false and goes live", async () => {
  const t = topic("evicted");
  const live = await wsSubscriber("live ws on A", A, [t]);
  const old = await wsSubscriber("ws on A that leaves", A, [t]);
  const subs: ClusterSubscriber[] = [live, old];
  try {
    await mustPublish(A, t, { id: "ev.first" });
    await waitForCount(old, t, 1);
    await old.close();
    // Five times the cap: MAXLEN ~ trims whole stream nodes, so the stream is then well past the first event.
    const TOTAL = STREAM_MAXLEN * 5;
    await cluster.step(`publishing ${TOTAL} events (the stream keeps about ${STREAM_MAXLEN})`, async () => {
      const batch = 20;
      for (let k = 0; k < TOTAL; k += batch) {
        await Promise.all(Array.from({ length: batch }, (_, j) => mustPublish([A, B, C][(k + j) % 3]!, t, { id: `ev.${k + j}` })));
        if ((k + batch) % 200 === 0) progress(`  ${k + batch}/${TOTAL}`);
      }
    });
    await waitForCount(live, t, TOTAL + 1);
    // On a replica that never followed the topic, and on the one that did (its history holds the last HISTORY_EVENTS
    // only): neither the stream nor a history holds the gap.
    for (const r of [B, A]) {
      const s = await wsSubscriber(`ws resuming the evicted position on ${r.name}`, r, [t], old.lastPosition);
      subs.push(s);
      assert.deepEqual(s.recoveries, [false], `${s.label}: recovered false`);
      await new Promise((res) => setTimeout(res, 300));
      assert.deepEqual(s.ids(t), [], `${s.label}: nothing replayed after recovered: false`);
    }
    // A position the stream still holds resumes exactly: on C, which never followed the topic (served from the
    // stream), and on A (its history).
    const nears: ClusterSubscriber[] = [];
    for (const [r, back] of [[C, 60], [A, 10]] as const) {
      const from = TOTAL - back;
      const near = await wsSubscriber(`ws resuming ${back} events back on ${r.name}`, r, [t], live.seen[from]!.position);
      subs.push(near);
      nears.push(near);
      assert.deepEqual(near.recoveries, [true], near.label);
    }
    await mustPublish(B, t, { id: "ev.after" });
    for (const s of subs.slice(2)) await waitForCount(s, t, 1);
    for (const [i, back] of [60, 10].entries()) {
      await waitForCount(nears[i]!, t, back + 1);
      await new Promise((res) => setTimeout(res, 300));
      assertExactly(nears[i]!.ids(t), [...live.ids(t).slice(TOTAL - back + 1, TOTAL + 1), "ev.after"], nears[i]!.label);
    }
    for (const s of subs.slice(2, 4)) assertExactly(s.ids(t), ["ev.after"], `${s.label}: live after recovered: false`);
  } finally {
    await Promise.all(subs.map((s) => s.close()));
  }
});
