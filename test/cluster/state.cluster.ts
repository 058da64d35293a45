import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { Code } from "../../src/shared/code.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { CLUSTER_KEY, startCluster, type Cluster, type Replica } from "../support/cluster.js";
import { grpcSubscriber, waitForCount, wsSubscriber, type ClusterSubscriber } from "../support/cluster-clients.js";
import { CallFailed, rejectsWith, stateFronts, type StateFront } from "../support/state-fronts.js";

// State across three gateways on one Redis: etags are first-write-wins across replicas (an atomic compare in Redis,
// not a read-then-write in one process), and change notifications reach subscribers on every replica.
const SERVICE = "platform"; // config/gateway.yaml's service with a state store

let cluster: Cluster;
let A: Replica, B: Replica, C: Replica;
const clients: grpc.Client[] = [];
/** The gRPC and REST fronts of each replica, by replica name. */
const fronts = new Map<string, { grpc: StateFront; rest: StateFront }>();
const run = randomUUID().slice(0, 8);

before(async () => {
  cluster = await startCluster();
  [A, B, C] = cluster.replicas as [Replica, Replica, Replica];
  for (const r of cluster.replicas) {
    const target = {
      http: r.http,
      client(service: string): grpc.Client {
        const Ctor = grpc.makeGenericClientConstructor(gatewayPackageDefinition()[service] as grpc.ServiceDefinition, service);
        const c = new Ctor(r.grpc, grpc.credentials.createInsecure());
        clients.push(c);
        return c;
      },
    };
    const [g, rest] = stateFronts(target, CLUSTER_KEY) as [StateFront, StateFront];
    fronts.set(r.name, { grpc: g, rest });
  }
});
after(async () => {
  for (const c of clients) c.close();
  await cluster?.close();
});

const front = (r: Replica, kind: "grpc" | "rest"): StateFront => fronts.get(r.name)![kind];

test("two saves with the same etag through different replicas: exactly one wins, the other is ABORTED", async () => {
  // Every pairing of replicas and fronts, several rounds each, all at once per round: a read-compare-write in one
  // process would let both win sometimes.
  const pairs: Array<[Replica, "grpc" | "rest", Replica, "grpc" | "rest"]> = [
    [A, "grpc", B, "rest"],
    [B, "grpc", C, "grpc"],
    [C, "rest", A, "rest"],
    [A, "rest", C, "grpc"],
  ];
  for (let round = 0; round < 5; round++) {
    for (const [i, [r1, f1, r2, f2]] of pairs.entries()) {
      const key = `etag.${run}.${round}.${i}`;
      const { etag } = await front(A, "grpc").save({ service: SERVICE, key, value: "v0" });
      assert.ok(etag, "a save returns an etag");
      const attempts = [
        { who: `${r1.name}/${f1}`, value: `from-${r1.name}-${f1}`, p: front(r1, f1).save({ service: SERVICE, key, value: `from-${r1.name}-${f1}`, etag }) },
        { who: `${r2.name}/${f2}`, value: `from-${r2.name}-${f2}`, p: front(r2, f2).save({ service: SERVICE, key, value: `from-${r2.name}-${f2}`, etag }) },
      ];
      const results = await Promise.allSettled(attempts.map((a) => a.p));
      const won = results.flatMap((res, j) => (res.status === "fulfilled" ? [{ ...attempts[j]!, etag: res.value.etag }] : []));
      const lost = results.flatMap((res, j) => (res.status === "rejected" ? [{ ...attempts[j]!, err: res.reason as unknown }] : []));
      assert.equal(won.length, 1, `round ${round}, ${key}: exactly one of ${attempts.map((a) => a.who).join(" and ")} wins; won: ${won.map((w) => w.who).join(", ") || "none"}; errors: ${lost.map((l) => String(l.err)).join("; ")}`);
      const loser = lost[0]!;
      assert.ok(loser.err instanceof CallFailed, `the loser (${loser.who}) fails as a call: ${String(loser.err)}`);
      assert.equal(Code[loser.err.code], "ABORTED", `${loser.who}: ${loser.err.message}`);
      if (loser.who.endsWith("rest")) assert.equal(loser.err.httpStatus, 409, `${loser.who}: HTTP 409`);
      // Every replica reads the winner's value with the winner's etag.
      for (const r of [A, B, C]) {
        const item = await front(r, "rest").get(SERVICE, key);
        assert.deepEqual(item && { value: item.value, etag: item.etag }, { value: won[0]!.value, etag: won[0]!.etag }, `${key} read on ${r.name}`);
      }
    }
  }
});

test("three replicas racing on one etag: one winner; a stale etag then fails everywhere and changes nothing", async () => {
  const key = `race3.${run}`;
  const { etag: e0 } = await front(B, "rest").save({ service: SERVICE, key, value: "start" });
  const results = await Promise.allSettled([A, B, C].map((r, i) => front(r, i % 2 ? "rest" : "grpc").save({ service: SERVICE, key, value: `v-${r.name}`, etag: e0 })));
  const winners = results.filter((r) => r.status === "fulfilled");
  assert.equal(winners.length, 1, `one of three wins: ${results.map((r) => r.status).join(",")}`);
  for (const r of results) if (r.status === "rejected") assert.equal(Code[(r.reason as CallFailed).code], "ABORTED");
  const stored = (await front(C, "grpc").get(SERVICE, key))!;

  // e0 is stale now: a save and a delete with it fail on every replica and leave the value as it is.
  for (const r of [A, B, C]) {
    await rejectsWith(front(r, "grpc").save({ service: SERVICE, key, value: "stale", etag: e0 }), Code.ABORTED, /etag/i);
    await rejectsWith(front(r, "rest").delete({ service: SERVICE, key, etag: e0 }), Code.ABORTED, /etag/i);
    await rejectsWith(front(r, "grpc").delete({ service: SERVICE, key, etag: e0 }), Code.ABORTED, /etag/i);
  }
  for (const r of [A, B, C]) assert.deepEqual(await front(r, "grpc").get(SERVICE, key), stored, `nothing changed, read on ${r.name}`);
  // The current etag deletes, through another replica than the one that wrote it.
  await front(A, "rest").delete({ service: SERVICE, key, etag: stored.etag });
  for (const r of [A, B, C]) assert.equal(await front(r, "rest").get(SERVICE, key), undefined, `deleted, read on ${r.name}`);
  // An etag on a key that is not stored is a mismatch too, on any replica.
  await rejectsWith(front(B, "grpc").save({ service: SERVICE, key, value: "x", etag: stored.etag }), Code.ABORTED, /etag/i);
  assert.equal(await front(C, "grpc").get(SERVICE, key), undefined);
});

test("state.change notifications reach subscribers on every replica, once per successful write", async () => {
  const wsA = await wsSubscriber("ws state.change on A", A, ["state.change"]);
  const subs: ClusterSubscriber[] = [wsA];
  try {
    for (const r of [A, B, C]) {
      if (r !== A) subs.push(await wsSubscriber(`ws state.change on ${r.name}`, r, ["state.change"]));
      subs.push(await grpcSubscriber(`grpc state.change on ${r.name}`, r, ["state.change"]));
    }
    const key = `notify.${run}`;
    const { etag } = await front(B, "rest").save({ service: SERVICE, key, value: "one", publish_change: true, include_value: true });
    // A conflicting pair, both asking to notify: only the winner's write is announced.
    const pair = await Promise.allSettled([
      front(A, "grpc").save({ service: SERVICE, key, value: "two-A", etag, publish_change: true, include_value: true }),
      front(C, "rest").save({ service: SERVICE, key, value: "two-C", etag, publish_change: true, include_value: true }),
    ]);
    const winner = pair[0]!.status === "fulfilled" ? "two-A" : "two-C";
    assert.equal(pair.filter((p) => p.status === "fulfilled").length, 1, "one of the pair wins");
    await front(C, "grpc").delete({ service: SERVICE, key, publish_change: true });
    for (const s of subs) await waitForCount(s, "state.change", 3);
    await new Promise((r) => setTimeout(r, 500));
    // Other tests' writes do not notify, so the topic holds exactly these three events.
    const ids = wsA.ids("state.change");
    assert.equal(ids.length, 3, `three events: ${ids.join(",")}`);
    for (const s of subs) assert.deepEqual(s.ids("state.change"), ids, `${s.label}: the same three events in the same order`);
    // What the events say, read on A's WebSocket (CloudEvents JSON; data is the Tier 0 JSON payload).
    const data = wsA.current.events().map((f) => f.cloudevent.data as { service: string; key: string; action: string; value?: string });
    assert.deepEqual(
      data.map((d) => [d.service, d.key, d.action, d.value]),
      [
        [SERVICE, key, "save", "one"],
        [SERVICE, key, "save", winner],
        [SERVICE, key, "delete", undefined],
      ],
    );
  } finally {
    await Promise.all(subs.map((s) => s.close()));
  }
});
