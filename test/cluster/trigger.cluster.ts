import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { CLUSTER_KEY, progress, startCluster, type Cluster, type Replica } from "../support/cluster.js";
import { grpcSubscriber, waitForCount, wsSubscriber, type ClusterSubscriber } from "../support/cluster-clients.js";

// Triggers on three gateways sharing one Redis scheduler: a firing happens once in the cluster (not once per
// replica), the record's counters are the cluster's, and a replica killed while it holds a firing delays that
// firing by at most the lease.
const LEASE_MS = 3000;

let cluster: Cluster;
let A: Replica, B: Replica, C: Replica;
const run = randomUUID().slice(0, 8);

before(async () => {
  cluster = await startCluster({ gatewayArgs: ["--redis-job-lease-ms", String(LEASE_MS)] });
  [A, B, C] = cluster.replicas as [Replica, Replica, Replica];
});
after(() => cluster?.close());

interface TriggerRecord {
  name: string;
  times_fired: number;
  last_fire_time: string;
  next_fire_time: string;
}

async function rest(r: Replica, method: string, path: string, body?: object): Promise<{ http: number; json: any }> {
  const res = await fetch(`${r.http}${path}`, {
    method,
    headers: { "x-api-key": CLUSTER_KEY, ...(body ? { "content-type": "application/json" } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  return { http: res.status, json: await res.json() };
}

async function schedule(r: Replica, name: string, body: object): Promise<void> {
  const { http, json } = await rest(r, "POST", `/v1/trigger/${name}`, body);
  assert.equal(http, 200, `schedule ${name} via ${r.name}: ${JSON.stringify(json)}`);
  assert.equal(json.status.success, true, JSON.stringify(json));
}

/** The record as each replica reads it; retried while a firing lands between the reads (bounded). */
async function sameRecordEverywhere(name: string): Promise<TriggerRecord> {
  let last = "";
  for (let attempt = 0; attempt < 5; attempt++) {
    const reads = await Promise.all([A, B, C].map((r) => rest(r, "GET", `/v1/trigger/${name}`)));
    for (const [i, x] of reads.entries()) assert.equal(x.http, 200, `get ${name} via ${[A, B, C][i]!.name}: ${JSON.stringify(x.json)}`);
    const recs = reads.map((x) => x.json.trigger as TriggerRecord);
    const view = recs.map((rec) => `${rec.times_fired}@${rec.last_fire_time}`);
    if (view.every((v) => v === view[0])) return recs[0]!;
    last = view.join(" / ");
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.fail(`times_fired/last_fire_time differ between A, B and C on five reads: ${last}`);
}

test("a trigger scheduled through one replica fires once per period in the cluster; its record reads the same everywhere", async () => {
  const name = `tick-${run}`;
  const topic = `cl.${run}.ticks`;
  const REPEATS = 5;
  const subs: ClusterSubscriber[] = [];
  try {
    subs.push(await wsSubscriber("ws on B", B, [topic]), await wsSubscriber("ws on C", C, [topic]), await grpcSubscriber("grpc on A", A, [topic]));
    await schedule(A, name, { target_topic: topic, schedule: "@every 1s", repeats: REPEATS });
    await cluster.step("waiting for the second firing", () => waitForCount(subs[0]!, topic, 2, 15_000));
    const mid = await sameRecordEverywhere(name);
    assert.ok(mid.times_fired >= 2 && mid.times_fired < REPEATS, `times_fired after two firings: ${mid.times_fired}`);
    assert.notEqual(mid.last_fire_time, "", "last_fire_time is set");
    await cluster.step(`waiting for all ${REPEATS} firings`, async () => {
      for (const s of subs) await waitForCount(s, topic, REPEATS, 20_000);
    });
    // Past two more periods: a replica firing on its own, or a firing done twice, would show up here.
    await new Promise((r) => setTimeout(r, 2500));
    const ids = subs[0]!.ids(topic);
    assert.equal(ids.length, REPEATS, `${REPEATS} firings in the cluster, not one per replica: ${ids.length}`);
    assert.equal(new Set(ids).size, REPEATS, "each firing is its own event");
    for (const s of subs) assert.deepEqual(s.ids(topic), ids, `${s.label}: the same firings`);
    // After its last firing the trigger is removed, on every replica.
    for (const r of [A, B, C]) assert.equal((await rest(r, "GET", `/v1/trigger/${name}`)).http, 404, `removed, read on ${r.name}`);
  } finally {
    await Promise.all(subs.map((s) => s.close()));
  }
});

test("a trigger deleted through another replica stops firing everywhere", async () => {
  const name = `stop-${run}`;
  const topic = `cl.${run}.stop`;
  const sub = await wsSubscriber("ws on A", A, [topic]);
  try {
    await schedule(B, name, { target_topic: topic, schedule: "@every 1s" });
    await waitForCount(sub, topic, 2, 15_000);
    const { http, json } = await rest(C, "DELETE", `/v1/trigger/${name}`);
    assert.equal(http, 200, JSON.stringify(json));
    const atDelete = sub.ids(topic).length;
    await new Promise((r) => setTimeout(r, 3000));
    // A firing already claimed when the delete ran may still land; nothing after it.
    assert.ok(sub.ids(topic).length <= atDelete + 1, `no firing after the delete: ${atDelete} then ${sub.ids(topic).length}`);
    for (const r of [A, B, C]) assert.equal((await rest(r, "GET", `/v1/trigger/${name}`)).http, 404, `deleted, read on ${r.name}`);
  } finally {
    await sub.close();
  }
});

test("kill -9 of replicas while the trigger fires: no firing is lost, none is later than the lease", async () => {
  const name = `survive-${run}`;
  const topic = `cl.${run}.survive`;
  const REPEATS = 8;
  const subs = [await wsSubscriber("ws on C", C, [topic]), await grpcSubscriber("grpc on C", C, [topic])];
  const arrivals: number[] = [];
  const watch = setInterval(() => {
    while (arrivals.length < subs[0]!.ids(topic).length) arrivals.push(Date.now());
  }, 5);
  try {
    await schedule(A, name, { target_topic: topic, schedule: "@every 1s", repeats: REPEATS });
    // Which replica holds a given firing is up to the claim race, so two of the three die at different firings:
    // whichever held the firing in flight, its claim must expire and another replica must fire it.
    await waitForCount(subs[0]!, topic, 2, 15_000);
    await cluster.kill(0);
    await waitForCount(subs[0]!, topic, 4, 15_000 + LEASE_MS);
    await cluster.kill(1);
    await cluster.step(`waiting for all ${REPEATS} firings on the last replica`, async () => {
      for (const s of subs) await waitForCount(s, topic, REPEATS, 30_000 + 2 * LEASE_MS);
    });
    await new Promise((r) => setTimeout(r, 2500));
    const ids = subs[0]!.ids(topic);
    progress(`firings seen: ${ids.length}; gaps ms: ${arrivals.slice(1).map((t, i) => t - arrivals[i]!).join(",")}`);
    // A replica killed after publishing a firing but before storing it leaves a claim that fires again after the
    // lease: at most one extra event per kill, never one less.
    assert.ok(ids.length >= REPEATS && ids.length <= REPEATS + 2, `${REPEATS} firings (up to 2 repeated by the kills): ${ids.length}`);
    assert.equal(new Set(ids).size, ids.length, "distinct events");
    assert.deepEqual(subs[1]!.ids(topic), ids, "the gRPC subscriber saw the same firings");
    const worst = Math.max(...arrivals.slice(1).map((t, i) => t - arrivals[i]!));
    // One period plus one lease, plus room for the event loop of a loaded 2-core machine.
    assert.ok(worst <= 1000 + LEASE_MS + 3000, `largest gap between firings ${worst} ms (period 1000 ms, lease ${LEASE_MS} ms)`);
    assert.equal((await rest(C, "GET", `/v1/trigger/${name}`)).http, 404, "removed after the last firing");
  } finally {
    clearInterval(watch);
    await Promise.all(subs.map((s) => s.close()));
  }
});
