import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createGatewayClient, GatewayClientError, type GatewayClient } from "../../src/client/index.js";
import { assertExactly, CLUSTER_KEY, health, mustPublish, progress, publishRest, startCluster, waitHealthy, type Cluster, type Replica } from "../support/cluster.js";
import { grpcSubscriber, sseSubscriber, waitForCount, wsSubscriber, type ClusterSubscriber, type SseSubscriber, type WsSubscriber } from "../support/cluster-clients.js";

// Redis going away under three gateways, gracefully and with kill -9 (the append-only file is fsynced on every write,
// so a restart comes back with every acknowledged publish): calls fail in-band or UNAVAILABLE while it is down and
// never hang, /health says so, and afterwards every subscriber has every acknowledged event once, in order.

/** How long one call may take while Redis is down before it counts as hanging. */
const DOWN_CALL_MS = 15_000;

let cluster: Cluster;
let A: Replica, B: Replica, C: Replica;
const run = randomUUID().slice(0, 8);
const [r1, r2] = [`cl.${run}.r1`, `cl.${run}.r2`];
const acked = new Map<string, string[]>([
  [r1, []],
  [r2, []],
]);
const web: Array<WsSubscriber | SseSubscriber> = [];
const subs: ClusterSubscriber[] = [];
let grpcClients: GatewayClient[] = [];
/** A subscribe position taken before any event: a resume from it must replay every acknowledged event. */
let origin: string;

before(async () => {
  cluster = await startCluster();
  [A, B, C] = cluster.replicas as [Replica, Replica, Replica];
  const first = await wsSubscriber("origin", A, [r1, r2]);
  origin = first.lastPosition!;
  await first.close();
  web.push(await wsSubscriber("ws [r1] on A", A, [r1]), await wsSubscriber("ws [r1,r2] on B", B, [r1, r2]), await sseSubscriber("sse [r2] on C", C, [r2]));
  subs.push(...web, await grpcSubscriber("grpc [r1,r2] on C", C, [r1, r2]));
  grpcClients = [A, B, C].map((r) => createGatewayClient({ address: r.grpc, apiKey: CLUSTER_KEY }));
});
after(async () => {
  for (const c of grpcClients) c.close();
  await Promise.all(subs.map((s) => s.close()));
  await cluster?.close();
});

async function publishRound(tag: string, per: number): Promise<void> {
  for (let k = 0; k < per; k++) {
    for (const [i, t] of [r1, r2].entries()) {
      const id = `${tag}.${t.slice(-2)}.${k}`;
      await mustPublish([A, B, C][(k + i) % 3]!, t, { id });
      acked.get(t)!.push(id);
    }
  }
}

async function allSubscribersHaveEverything(): Promise<void> {
  for (const s of subs) for (const t of s.topics) await waitForCount(s, t, acked.get(t)!.length, 30_000);
  await new Promise((r) => setTimeout(r, 500));
  for (const s of subs) for (const t of s.topics) assertExactly(s.ids(t), acked.get(t)!, `${s.label} on ${t}`);
}

for (const mode of ["graceful", "kill"] as const) {
  test(`Redis restart (${mode === "kill" ? "kill -9" : "SIGTERM"}): in-band errors while down, /health follows, subscribers resume, nothing acknowledged lost`, async () => {
    await cluster.step(`publishing before the ${mode} stop`, () => publishRound(`${mode}.before`, 10));
    await allSubscribersHaveEverything();

    await cluster.step(`stopping redis-server (${mode})`, () => cluster.redis.stop(mode));
    await cluster.step("calls while Redis is down: each fails within the bound", async () => {
      for (const r of [A, B, C]) {
        const pub = await publishRest(r, r1, { id: `${mode}.down.${r.name}` }, DOWN_CALL_MS);
        assert.ok(pub.http === 503 || (pub.http === 200 && pub.status.success === false), `publish via ${r.name} while down: ${pub.http} ${JSON.stringify(pub.status)}`);
        assert.equal(pub.status.status ?? "UNAVAILABLE", "UNAVAILABLE", `publish via ${r.name} while down: ${JSON.stringify(pub.status)}`);
        const get = await fetch(`${r.http}/v1/state/platform/down-key`, { headers: { "x-api-key": CLUSTER_KEY }, signal: AbortSignal.timeout(DOWN_CALL_MS) });
        assert.equal(get.status, 503, `REST get via ${r.name} while down: ${get.status} ${await get.text()}`);
      }
      for (const [i, c] of grpcClients.entries()) {
        await assert.rejects(c.getState("platform", "down-key", { timeoutMs: DOWN_CALL_MS }), (e: unknown) => {
          assert.ok(e instanceof GatewayClientError, String(e));
          assert.equal(e.codeName, "UNAVAILABLE", `gRPC GetState via ${[A, B, C][i]!.name}: ${e.message}`);
          return true;
        });
      }
    });
    // /health reports Redis down on every replica within the bound.
    for (const r of [A, B, C]) {
      const end = Date.now() + DOWN_CALL_MS;
      let h = await health(r);
      while (h.status !== 503 && Date.now() < end) {
        await new Promise((res) => setTimeout(res, 100));
        h = await health(r);
      }
      assert.equal(h.status, 503, `/health on ${r.name} while Redis is down: ${JSON.stringify(h.body)}`);
      assert.equal(h.body.status, "Unhealthy");
    }

    // Down for a few seconds, past the client's first reconnect attempts, before it comes back.
    await new Promise((r) => setTimeout(r, 3000));
    await cluster.step("restarting redis-server", () => cluster.redis.restart());
    await cluster.step("/health healthy again on every replica", async () => {
      for (const r of [A, B, C]) await waitHealthy(r, 30_000);
    });
    // Let every connection settle: a web subscriber whose stream the gateway ended (`upstream-failed`) resumes
    // from its last position on the same replica, as the client library does.
    await new Promise((r) => setTimeout(r, 2000));
    for (const s of web) {
      const ended = "closedCode" in s ? s.closedCode() !== undefined : s.ended();
      if (!ended) continue;
      const to = cluster.replicas.find((r) => s.label.endsWith(` on ${r.name}`))!;
      await s.resumeOn(to);
      progress(`  ${s.label} resumed on ${to.name}: recovered ${s.recoveries.at(-1)}`);
      assert.equal(s.recoveries.at(-1), true, `${s.label}: recovered after the Redis restart`);
    }

    await cluster.step(`publishing after the ${mode} restart`, () => publishRound(`${mode}.after`, 10));
    await allSubscribersHaveEverything();
    // Nothing acknowledged was lost with Redis: a resume from before the first event replays all of them.
    const audit = await wsSubscriber(`audit from the origin on B (${mode})`, B, [r1, r2], origin);
    try {
      assert.deepEqual(audit.recoveries, [true], audit.label);
      for (const t of [r1, r2]) await waitForCount(audit, t, acked.get(t)!.length);
      await new Promise((r) => setTimeout(r, 300));
      for (const t of [r1, r2]) assertExactly(audit.ids(t), acked.get(t)!, `${audit.label} on ${t}`);
    } finally {
      await audit.close();
    }
  });
}
