import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../src/shared/code.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import type { GatewayOptions } from "../../src/config/options.js";
import { startTestDaprSidecar, type TestDaprSidecar } from "../support/dapr-sidecar/index.js";
import { rawDaprClient } from "../support/dapr-sidecar/raw-client.js";
import { createSharedDaprBackend, type SharedDaprBackend } from "../support/dapr-sidecar/shared.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { freePort } from "../support/ports.js";
import { rejectsWith, stateFronts } from "../support/state-fronts.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { connectWs, type WsTestClient } from "../support/web.js";

const KEY = "replica-key";
const services = [{ name: "orders", state: { storeName: "orders-store", keys: [] } }];

/** One gateway replica with its own daprd (test sidecar); browsers reach it through a TCP proxy that can cut them off. */
interface Replica {
  name: string;
  sidecar: TestDaprSidecar;
  gw: TestGateway;
  proxy: TcpProxy;
  /** The replica's HTTP address as the load balancer hands it out (through the proxy). */
  http: string;
}

type Component = NonNullable<Parameters<typeof startTestDaprSidecar>[0]>["pubsubComponent"];

/**
 * `n` gateway replicas of one app id, each on its own test sidecar, the sidecars sharing one backend (Redis streams
 * and state, the Scheduler). Like a Deployment with the Dapr injector: every sidecar has the same component config.
 */
async function startReplicas(backend: SharedDaprBackend, n: number, component: Component, extra: Partial<GatewayOptions> = {}): Promise<Replica[]> {
  const out: Replica[] = [];
  for (let i = 0; i < n; i++) {
    const grpcPort = await freePort();
    const sidecar = await startTestDaprSidecar({
      shared: backend,
      pubsubComponent: component,
      podName: `gateway-${i}`,
      appAddress: `127.0.0.1:${grpcPort}`,
      appHealthCheck: { intervalMs: 50 },
    });
    const gw = await startTestGateway({
      sidecar: "dapr",
      daprHost: "127.0.0.1",
      daprGrpcPort: sidecar.port,
      grpcPort,
      apiKeys: [KEY],
      services,
      subscriptionLingerMs: 50,
      ...extra,
    });
    const proxy = await startTcpProxy(gw.gateway.httpPort);
    out.push({ name: `gateway-${i}`, sidecar, gw, proxy, http: `http://127.0.0.1:${proxy.port}` });
  }
  return out;
}

async function stopReplicas(replicas: Replica[], clients: WsTestClient[]): Promise<void> {
  for (const c of clients) c.ws.terminate();
  for (const r of replicas) {
    r.proxy.close();
    await r.gw.close();
    await r.sidecar.close();
  }
}

function event(topic: string, n: number): CloudEvent {
  return {
    id: `${topic}-${n}`,
    source: "urn:replicas",
    spec_version: "1.0",
    type: "t",
    attributes: { datacontenttype: { ce_string: "application/json" } },
    text_data: JSON.stringify({ n }),
    data: "text_data",
  } as CloudEvent;
}

/** A WebSocket subscriber of `topics` on `r`, once the gateway says it is subscribed (its upstream stream is live). */
async function subscriber(r: Replica, topics: string[], open: WsTestClient[], since?: string): Promise<WsTestClient> {
  const c = await connectWs(r.http, { key: KEY });
  open.push(c);
  c.send({ op: "subscribe", topics, id: "s", ...(since ? { since } : {}) });
  await c.next((f) => f.op === "subscribed" || f.op === "error", "subscribed");
  const err = c.frames.find((f) => f.op === "error");
  if (err) throw new Error(`subscribe failed on ${r.name}: ${JSON.stringify(err)}`);
  return c;
}

const ns = (c: WsTestClient): number[] => c.events().map((e) => e.cloudevent.data.n as number);
const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("Dapr with several gateway replicas: per-replica consumer groups (consumerID {podName}, concurrency 1)", () => {
  const backend = createSharedDaprBackend();
  const open: WsTestClient[] = [];
  let replicas: Replica[] = [];
  before(async () => {
    // A short history age: a topic nobody holds is handed back soon (the replay test needs a replica to stop following).
    replicas = await startReplicas(backend, 3, { consumerID: "{podName}", concurrency: 1 }, { pubsubHistoryAgeMs: 200 });
  });
  after(async () => {
    await stopReplicas(replicas, open);
    backend.close();
  });

  it("every subscriber on every replica gets every event once and in order, whichever replica published it", async () => {
    const subs: WsTestClient[] = [];
    for (const r of replicas) for (let k = 0; k < 2; k++) subs.push(await subscriber(r, ["orders"], open));
    // One upstream stream per replica, each its own consumer group.
    for (const r of replicas) assert.equal(r.sidecar.broker.count("orders"), 1, r.name);
    assert.deepEqual(backend.streams.groups("pubsub", "orders").sort(), ["gateway-0", "gateway-1", "gateway-2"]);
    for (let n = 0; n < 30; n++) await replicas[n % 3]!.gw.gateway.context.runtime.pubsub.publish("orders", event("orders", n));
    await waitFor(() => subs.every((c) => c.events().length >= 30), "30 events on every subscriber", 10_000);
    await pause(100);
    for (const [i, c] of subs.entries()) assert.deepEqual(ns(c), [...Array(30).keys()], `subscriber ${i}`);
  });

  it("a new consumer group starts at the start of the stream, an existing one where it stopped: a replica that starts following a topic first gets old events", async () => {
    // contrib pubsub/redis creates the group with start id 0: events published before this replica ever followed
    // the topic reach its subscriber when it subscribes.
    for (let n = 0; n < 3; n++) await replicas[0]!.gw.gateway.context.runtime.pubsub.publish("earlier", event("earlier", n));
    const c = await subscriber(replicas[1]!, ["earlier"], open);
    await waitFor(() => c.events().length >= 3, "the 3 earlier events", 5000);
    assert.deepEqual(ns(c), [0, 1, 2]);
    // The group remembers where it stopped: once the replica stopped following the topic (last subscriber gone, the
    // linger over, its stream closed), what is published meanwhile comes first when it follows the topic again.
    c.ws.close();
    await waitFor(() => replicas[1]!.sidecar.broker.count("earlier") === 0, "replica 1 closed its stream of the topic", 5000);
    for (let n = 3; n < 5; n++) await replicas[0]!.gw.gateway.context.runtime.pubsub.publish("earlier", event("earlier", n));
    const again = await subscriber(replicas[1]!, ["earlier"], open);
    await waitFor(() => again.events().length >= 2, "the 2 events of the gap", 5000);
    assert.deepEqual(ns(again), [3, 4]);
  });

  it("state: an etag taken on one replica is checked on another: one writer wins, the other is ABORTED, a stale delete deletes nothing", async () => {
    const [a, b, c] = replicas.map((r) => stateFronts(r.gw, KEY)[0]!);
    const e1 = (await a!.save({ service: "orders", key: "cart", value: "v1" })).etag;
    const e2 = (await b!.save({ service: "orders", key: "cart", value: "v2", etag: e1 })).etag;
    await rejectsWith(a!.save({ service: "orders", key: "cart", value: "stale", etag: e1 }), Code.ABORTED, /etag/);
    await rejectsWith(c!.delete({ service: "orders", key: "cart", etag: e1 }), Code.ABORTED, /etag/);
    assert.deepEqual(await c!.get("orders", "cart"), { key: "cart", value: "v2", etag: e2 });
    // Two replicas race with the same etag: exactly one wins.
    const race = await Promise.allSettled([a!.save({ service: "orders", key: "cart", value: "from-a", etag: e2 }), b!.save({ service: "orders", key: "cart", value: "from-b", etag: e2 })]);
    assert.equal(race.filter((r) => r.status === "fulfilled").length, 1, JSON.stringify(race));
    const lost = race.find((r) => r.status === "rejected") as PromiseRejectedResult;
    assert.equal(lost.reason.code, Code.ABORTED);
    const won = race.findIndex((r) => r.status === "fulfilled");
    assert.equal((await c!.get("orders", "cart"))?.value, won === 0 ? "from-a" : "from-b");
  });

  it("a trigger scheduled through one replica fires once in the cluster, through one sidecar's app channel", async () => {
    const subs: WsTestClient[] = [];
    for (const r of replicas) subs.push(await subscriber(r, ["billing.once"], open));
    const client: grpc.Client = replicas[2]!.gw.client("platform.Trigger");
    const res = await unary(client, "ScheduleTrigger", { name: "once-in-cluster", target_topic: "billing.once", due_time: "1s" }, withKey(KEY));
    assert.equal(res.status.status, "OK");
    await waitFor(() => subs.every((c) => c.events().length >= 1), "the firing on every replica's subscriber", 8000);
    await pause(1200);
    const calls = replicas.flatMap((r) => r.sidecar.jobCallbacks.filter((j) => j.name === "once-in-cluster"));
    assert.deepEqual(calls.map((j) => j.code), ["OK"], "one delivery of the firing to one replica");
    // That one replica published it once; per-replica consumer groups give it to every subscriber once.
    for (const c of subs) assert.equal(c.events().length, 1);
  });

  it("a replica dies abruptly: its WebSocket subscribers reconnect to the others and resume exactly, nothing lost or repeated", async () => {
    const victim = replicas[2]!;
    const mine = [await subscriber(victim, ["ticks"], open), await subscriber(victim, ["ticks"], open)];
    // The survivors follow the topic already (a busy topic is followed everywhere); one that did not would first
    // replay the stream to the newcomers (the test above).
    const others = [await subscriber(replicas[0]!, ["ticks"], open), await subscriber(replicas[1]!, ["ticks"], open)];
    for (let n = 0; n < 5; n++) await replicas[0]!.gw.gateway.context.runtime.pubsub.publish("ticks", event("ticks", n));
    await waitFor(() => mine.every((c) => c.events().length >= 5), "the first 5 events", 5000);
    // The pod goes away: the browsers' connections are cut and its daprd stops with it.
    victim.proxy.dropAll();
    await victim.sidecar.stop();
    for (const c of mine) assert.equal((await c.closed()).code, 1006);
    // Events keep coming while the browsers reconnect; each resumes from the last position it saw.
    for (let n = 5; n < 8; n++) await replicas[1]!.gw.gateway.context.runtime.pubsub.publish("ticks", event("ticks", n));
    await waitFor(() => others.every((c) => c.events().length >= 8), "the survivors got them", 5000);
    const moved: WsTestClient[] = [];
    for (const [i, c] of mine.entries()) moved.push(await subscriber(replicas[(i % 2) as 0 | 1]!, ["ticks"], open, c.events().at(-1)!.id));
    for (const c of moved) assert.equal(c.frames.find((f) => f.op === "subscribed").recovered, true);
    for (let n = 8; n < 10; n++) await replicas[1]!.gw.gateway.context.runtime.pubsub.publish("ticks", event("ticks", n));
    await waitFor(() => moved.every((c) => c.events().length >= 5) && others.every((c) => c.events().length >= 10), "the next 5 events after the move", 5000);
    for (const c of moved) assert.deepEqual(ns(c), [5, 6, 7, 8, 9]);
    for (const c of others) assert.deepEqual(ns(c), [...Array(10).keys()]);
  });
});

describe("Dapr with several gateway replicas: the shared default consumerID (the app id) splits events between replicas", () => {
  const backend = createSharedDaprBackend();
  const open: WsTestClient[] = [];
  let replicas: Replica[] = [];
  before(async () => {
    replicas = await startReplicas(backend, 2, {});
  });
  after(async () => {
    await stopReplicas(replicas, open);
    backend.close();
  });

  it("each event reaches ONE replica: subscribers of the other miss it", async () => {
    const [a, b] = [await subscriber(replicas[0]!, ["orders"], open), await subscriber(replicas[1]!, ["orders"], open)];
    assert.deepEqual(backend.streams.groups("pubsub", "orders"), ["platform-gateway"]);
    for (let n = 0; n < 20; n++) await replicas[n % 2]!.gw.gateway.context.runtime.pubsub.publish("orders", event("orders", n));
    await waitFor(() => a.events().length + b.events().length >= 20, "20 events between the two", 5000);
    await pause(200);
    const seen = [...ns(a), ...ns(b)].sort((x, y) => x - y);
    assert.deepEqual(seen, [...Array(20).keys()], "every event delivered exactly once in the whole cluster");
    assert.ok(a.events().length > 0 && a.events().length < 20, `replica 0 got ${a.events().length} of 20`);
    assert.ok(b.events().length > 0 && b.events().length < 20, `replica 1 got ${b.events().length} of 20`);
  });
});

describe("Dapr with several gateway replicas: per-replica groups with contrib's default concurrency (10)", () => {
  const backend = createSharedDaprBackend();
  const open: WsTestClient[] = [];
  let replicas: Replica[] = [];
  before(async () => {
    replicas = await startReplicas(backend, 2, { consumerID: "{uuid}" });
  });
  after(async () => {
    await stopReplicas(replicas, open);
    backend.close();
  });

  it("every replica still gets every event once, but a burst is no longer in publish order", async () => {
    const subs = [await subscriber(replicas[0]!, ["burst"], open), await subscriber(replicas[1]!, ["burst"], open)];
    assert.equal(new Set(replicas.map((r) => r.sidecar.consumerID)).size, 2, "{uuid} gives each sidecar its own group");
    const pubsub = replicas[0]!.gw.gateway.context.runtime.pubsub;
    await Promise.all([...Array(60).keys()].map((n) => pubsub.publish("burst", event("burst", n))));
    await waitFor(() => subs.every((c) => c.events().length >= 60), "60 events on each replica", 10_000);
    await pause(100);
    for (const c of subs) assert.deepEqual([...ns(c)].sort((x, y) => x - y), [...Array(60).keys()], "each event once");
    // Ten workers hand events of one topic to the app's stream at once; which goes first is up to scheduling. (In
    // runs of this test every subscriber saw dozens of inversions; both in order would take ~60 lucky draws.)
    assert.ok(
      subs.some((c) => ns(c).some((n, i, all) => i > 0 && n < all[i - 1]!)),
      "with concurrency 10 a burst arrives out of publish order (set concurrency: \"1\" to keep it)",
    );
  });
});

describe("Dapr with several gateway replicas: resuming on another replica (positions carry the event's mark)", () => {
  // A short stream (maxLenApprox 5) to show a new group that can no longer read the event; a short history age so
  // a replica stops following a topic soon after its last subscriber left.
  const backend = createSharedDaprBackend({ maxLenApprox: 5 });
  const open: WsTestClient[] = [];
  let replicas: Replica[] = [];
  let a: Replica;
  let b: Replica;
  before(async () => {
    replicas = await startReplicas(backend, 2, { consumerID: "{podName}", concurrency: 1 }, { pubsubHistoryAgeMs: 1000 });
    [a, b] = replicas as [Replica, Replica];
  });
  after(async () => {
    await stopReplicas(replicas, open);
    backend.close();
  });
  const publish = async (topic: string, from: number, to: number): Promise<void> => {
    for (let n = from; n < to; n++) await a.gw.gateway.context.runtime.pubsub.publish(topic, event(topic, n));
  };
  /** The position of the last event `c` received, after it received `count`. */
  const positionAfter = async (c: WsTestClient, count: number): Promise<string> => {
    await waitFor(() => c.events().length >= count, `${count} events`, 5000);
    return c.events()[count - 1]!.id as string;
  };
  const subscribed = (c: WsTestClient): any => c.frames.find((f) => f.op === "subscribed");

  it("single topic, followed by the other replica all along: exact (recovered: true), the missed events replayed, then live", async () => {
    const follower = await subscriber(b, ["r.single"], open);
    const c = await subscriber(a, ["r.single"], open);
    await publish("r.single", 0, 3);
    const since = await positionAfter(c, 3);
    assert.match(since, /^[0-9a-f]{12}-\d+-[0-9a-f]{12}$/, "an epoch position with the event's mark");
    c.ws.terminate();
    await publish("r.single", 3, 5);
    await waitFor(() => follower.events().length >= 5, "replica b got the gap", 5000);
    const moved = await subscriber(b, ["r.single"], open, since);
    assert.equal(subscribed(moved).recovered, true);
    await publish("r.single", 5, 6);
    await waitFor(() => moved.events().length >= 3, "replay and live", 5000);
    await pause(100);
    assert.deepEqual(ns(moved), [3, 4, 5]);
  });

  it("several topics: recovered: false (the replicas' interleavings of two topics differ)", async () => {
    await subscriber(b, ["r.m1", "r.m2"], open);
    const c = await subscriber(a, ["r.m1", "r.m2"], open);
    await publish("r.m1", 0, 2);
    await publish("r.m2", 0, 2);
    const since = await positionAfter(c, 4);
    c.ws.terminate();
    const moved = await subscriber(b, ["r.m1", "r.m2"], open, since);
    assert.equal(subscribed(moved).recovered, false);
  });

  it("the other replica stopped following the topic during the gap: recovered: false", async () => {
    const follower = await subscriber(b, ["r.gap"], open);
    const c = await subscriber(a, ["r.gap"], open);
    await publish("r.gap", 0, 2);
    const since = await positionAfter(c, 2);
    await waitFor(() => follower.events().length >= 2, "replica b got the events", 5000);
    follower.ws.close();
    // Past the history age replica b hands the topic back: its stream closes and the history goes.
    await waitFor(() => b.sidecar.broker.count("r.gap") === 0, "replica b stopped following", 5000);
    c.ws.terminate();
    await publish("r.gap", 2, 4);
    const moved = await subscriber(b, ["r.gap"], open, since);
    assert.equal(subscribed(moved).recovered, false);
  });

  it("the other replica starts following after the event and its new group no longer reads it (stream trimmed): recovered: false", async () => {
    const c = await subscriber(a, ["r.late"], open);
    await publish("r.late", 0, 2);
    const since = await positionAfter(c, 2);
    c.ws.terminate();
    await publish("r.late", 2, 8);
    assert.equal(backend.streams.length("pubsub", "r.late"), 5, "the stream keeps the last 5");
    const moved = await subscriber(b, ["r.late"], open, since);
    assert.equal(subscribed(moved).recovered, false);
  });
  it("the other replica starts following after the event with a new group: recovered: false, then the group's replay arrives as live events", async () => {
    const c = await subscriber(a, ["r.new"], open);
    await publish("r.new", 0, 2);
    const since = await positionAfter(c, 2);
    c.ws.terminate();
    await publish("r.new", 2, 4);
    const moved = await subscriber(b, ["r.new"], open, since);
    assert.equal(subscribed(moved).recovered, false);
    // The new group starts at the start of the stream: the two events the subscriber already had come again.
    await waitFor(() => moved.events().length >= 4, "the group's replay", 5000);
    await pause(100);
    assert.deepEqual(ns(moved), [0, 1, 2, 3]);
  });
});

describe("the shared streams behind the test sidecars: an entry left unacked goes to another reader of the group", () => {
  it("a daprd whose stream closes before the app acked leaves the entry pending; a replica of the same group claims it after processingTimeout", async () => {
    const backend = createSharedDaprBackend();
    const component = { processingTimeoutMs: 300, redeliverIntervalMs: 100 };
    const [sa, sb] = [await startTestDaprSidecar({ shared: backend, pubsubComponent: component }), await startTestDaprSidecar({ shared: backend, pubsubComponent: component })];
    const [ca, cb] = [rawDaprClient(sa.port), rawDaprClient(sb.port)];
    try {
      const held = await ca.subscribe("claims", { autoAck: false });
      await ca.unary("PublishEvent", { pubsub_name: "pubsub", topic: "claims", data: Buffer.from("one"), data_content_type: "text/plain" });
      await waitFor(() => held.events.length === 1, "the first reader got the entry", 5000);
      const other = await cb.subscribe("claims");
      held.cancel();
      await waitFor(() => sa.broker.count("claims") === 0, "the first stream closed", 5000);
      assert.equal(backend.streams.pendingCount("claims", "platform-gateway"), 1, "pending in the group, not given to the other reader at once");
      await waitFor(() => other.events.length === 1, "the claim after processingTimeout", 5000);
      assert.equal(Buffer.from(other.events[0].data).toString(), "one");
      await waitFor(() => backend.streams.pendingCount("claims", "platform-gateway") === 0, "acked by the second reader", 5000);
    } finally {
      ca.close();
      cb.close();
      await sa.close();
      await sb.close();
      backend.close();
    }
  });
});
