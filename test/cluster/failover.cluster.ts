import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { waitFor } from "../support/gateway.js";
import { assertExactly, mustPublish, progress, startCluster, type Cluster, type Replica } from "../support/cluster.js";
import { grpcSubscriber, sseSubscriber, waitForCount, wsSubscriber, type ClusterSubscriber, type GrpcSubscriber, type SseSubscriber, type WsSubscriber } from "../support/cluster-clients.js";

// kill -9 of one replica of three while events flow: its WebSocket, SSE and positioned gRPC subscribers reconnect to
// the others with their last position and miss nothing, see nothing twice, and keep the order (the positions are the
// streams' ids, the same on every replica).

let cluster: Cluster;
let A: Replica, B: Replica, C: Replica;
const run = randomUUID().slice(0, 8);

before(async () => {
  cluster = await startCluster();
  [A, B, C] = cluster.replicas as [Replica, Replica, Replica];
});
after(() => cluster?.close());

test("kill -9 of a replica mid-stream: its subscribers resume on the others with every event once, in order", async () => {
  const [f1, f2] = [`cl.${run}.f1`, `cl.${run}.f2`];
  const onC: Array<WsSubscriber | SseSubscriber | GrpcSubscriber> = [];
  const others: ClusterSubscriber[] = [];
  const acked = new Map<string, string[]>([
    [f1, []],
    [f2, []],
  ]);
  let stop = false;
  let publisher: Promise<void> = Promise.resolve();
  try {
    onC.push(
      await wsSubscriber("ws [f1] on C", C, [f1]),
      await wsSubscriber("ws [f1,f2] on C", C, [f1, f2]),
      await wsSubscriber("ws [f2] on C", C, [f2]),
      await sseSubscriber("sse [f1,f2] on C", C, [f1, f2]),
      await sseSubscriber("sse [f1] on C", C, [f1]),
      await grpcSubscriber("grpc with positions [f1,f2] on C", C, [f1, f2], { positions: true }),
    );
    others.push(await wsSubscriber("ws [f1,f2] on A", A, [f1, f2]), await grpcSubscriber("grpc [f1,f2] on B", B, [f1, f2]));

    // One publisher, one event at a time through A and B (never C): every acknowledged event has one place in its
    // topic's order, and no publish is lost with the killed replica.
    publisher = (async () => {
      for (let k = 0; !stop && k < 100_000; k++) {
        const t = Math.floor(k / 3) % 2 ? f2 : f1;
        const id = `f.${k}`;
        await mustPublish(k % 2 ? B : A, t, { id, data: { k } });
        acked.get(t)!.push(id);
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    const total = (): number => acked.get(f1)!.length + acked.get(f2)!.length;
    await cluster.step("publishing until 100 events are acknowledged", () => waitFor(() => total() >= 100, "100 acknowledged publishes", 30_000));
    for (const s of onC) assert.ok(s.seen.length > 0, `${s.label} received events before the kill`);

    await cluster.kill(2);
    const atKill = total();
    await cluster.step("reconnecting C's subscribers to A and B with their last positions", async () => {
      for (const [i, s] of onC.entries()) {
        // (The gRPC client would retry the dead address for ever; it is moved as soon as the replica is gone.)
        if (!("client" in s)) await waitFor(() => ("closedCode" in s ? s.closedCode() !== undefined : s.ended()), `${s.label}: its connection to end with the replica`, 10_000);
        const to = i % 2 ? A : B;
        await s.resumeOn(to);
        progress(`  ${s.label} resumed on ${to.name} after ${s.seen.length} events`);
      }
    });
    for (const s of onC) assert.deepEqual(s.recoveries, [true], `${s.label}: recovered`);

    await cluster.step("publishing 150 more events", () => waitFor(() => total() >= atKill + 150, "150 more acknowledged publishes", 60_000));
    stop = true;
    await publisher;
    progress(`acknowledged: ${acked.get(f1)!.length} on f1, ${acked.get(f2)!.length} on f2 (${atKill} before the kill)`);
    await cluster.step("waiting for every subscriber to have every acknowledged event", async () => {
      for (const s of [...onC, ...others]) for (const t of s.topics) await waitForCount(s, t, acked.get(t)!.length, 30_000);
    });
    await new Promise((r) => setTimeout(r, 500));
    for (const s of [...onC, ...others]) for (const t of s.topics) assertExactly(s.ids(t), acked.get(t)!, `${s.label} on ${t}`);
  } finally {
    stop = true;
    await publisher.catch(() => undefined);
    await Promise.all([...onC, ...others].map((s) => s.close()));
  }
});

test("the killed replica restarts and serves the same positions: a subscriber resumes on it exactly", async () => {
  const t = `cl.${run}.back`;
  const live = await wsSubscriber("live ws on A", A, [t]);
  const subs: ClusterSubscriber[] = [live];
  try {
    for (let k = 0; k < 10; k++) await mustPublish(B, t, { id: `b.${k}` });
    await waitForCount(live, t, 10);
    const C2 = await cluster.restartReplica(2);
    const s = await wsSubscriber("ws resuming on the restarted C", C2, [t], live.seen[3]!.position);
    subs.push(s);
    assert.deepEqual(s.recoveries, [true], s.label);
    await mustPublish(C2, t, { id: "b.after" });
    await waitForCount(s, t, 7);
    await waitForCount(live, t, 11);
    await new Promise((r) => setTimeout(r, 300));
    assertExactly(s.ids(t), live.ids(t).slice(4), s.label);
  } finally {
    await Promise.all(subs.map((x) => x.close()));
  }
});
