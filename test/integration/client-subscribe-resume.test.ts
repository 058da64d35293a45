import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { Code, createGatewayClient, GatewayError, type GatewayClient, type LiveInfo, type ReconnectingInfo, type SubscriptionMessage } from "../../src/client/index.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { nextMessage, onceWithin, within } from "../support/client-helpers.js";

const KEY = "sub-resume-key";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const event = (n: number) => ({ source: "urn:test:resume", type: "t.n", data: { n } });
const n = (m: SubscriptionMessage): number => (JSON.parse(m.event.text_data!) as { n: number }).n;
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Collect `count` more messages from `it`. */
async function take(it: AsyncIterator<SubscriptionMessage>, count: number, what: string): Promise<SubscriptionMessage[]> {
  const got: SubscriptionMessage[] = [];
  for (let i = 0; i < count; i++) got.push(await nextMessage(it, `${what} #${i + 1}`));
  return got;
}

describe("client subscriptions: position is what was handed over", () => {
  let gw: TestGateway;
  let client: GatewayClient;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY] });
    client = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY });
  });
  after(async () => {
    client.close();
    await gw.close();
  });

  it("iterator: a slow consumer closes with events buffered; resuming from sub.position delivers every event exactly once", async () => {
    const topic = "resume.slow.iter";
    const sub = client.subscribe(topic, { positions: true });
    await within(sub.ready, "the subscription live");
    const it = sub[Symbol.asyncIterator]();
    for (let i = 1; i <= 40; i++) await client.publish(topic, event(i));
    const first = await take(it, 10, "a handed-over message");
    assert.equal(sub.position, first[9]!.position, "position is the last message handed over");
    // The other 30 reach the client's buffer meanwhile; the consumer never takes them.
    await sleep(300);
    assert.equal(sub.position, first[9]!.position, "buffered messages do not move the position");
    const saved = sub.position!;
    sub.close();

    const later = client.subscribe(topic, { since: saved });
    const live = onceWithin<LiveInfo>(later, "live");
    const itLater = later[Symbol.asyncIterator]();
    assert.equal((await live).recovered, true);
    const rest = await take(itLater, 30, "a resumed message");
    await sleep(200); // nothing more may come (no duplicate)
    later.close();
    const extra: SubscriptionMessage[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) extra.push(r.value);
    assert.deepEqual([...first, ...rest].map(n), range(1, 40), "every event exactly once, in order");
    for (let r = await itLater.next(); !r.done; r = await itLater.next()) extra.push(r.value);
    assert.deepEqual(extra.map(n), [], "no duplicate after the resume");
  });

  it("handler: closed while messages wait behind a slow handler; resuming from sub.position delivers every event exactly once", async () => {
    const topic = "resume.slow.handler";
    const handled: number[] = [];
    let gate!: () => void;
    const blocked = new Promise<void>((r) => (gate = r));
    const sub = client.subscribe(
      topic,
      async (m) => {
        handled.push(n(m));
        if (handled.length === 5) await blocked; // the handler stalls on the 5th message
      },
      { positions: true },
    );
    await within(sub.ready, "the subscription live");
    for (let i = 1; i <= 20; i++) await client.publish(topic, event(i));
    await waitFor(() => handled.length === 5, "five messages handled");
    await sleep(300);
    const saved = sub.position!;
    sub.close();
    gate();
    assert.deepEqual(handled, range(1, 5));

    const resumed: number[] = [];
    const later = client.subscribe(topic, (m) => void resumed.push(n(m)), { since: saved });
    await waitFor(() => resumed.length >= 15, "the other 15 after the resume");
    await sleep(200);
    later.close();
    assert.deepEqual([...handled, ...resumed], range(1, 20), "every event exactly once, in order");
  });

  it("before anything is handed over, position is where the stream went live, however much is buffered", async () => {
    const topic = "resume.mark";
    const sub = client.subscribe(topic, { positions: true });
    await within(sub.ready, "the subscription live");
    const wentLive = sub.position;
    assert.match(wentLive ?? "", /^[0-9a-f]{12}-\d+$/, "before any event: where the stream went live");
    const it = sub[Symbol.asyncIterator]();
    for (let i = 1; i <= 3; i++) await client.publish(topic, event(i));
    await sleep(200);
    assert.equal(sub.position, wentLive, "three buffered, none handed over");
    const got = await take(it, 3, "a buffered message");
    assert.equal(sub.position, got[2]!.position);
    sub.close();
  });
});

describe("client subscriptions: a reconnect that missed events, while messages are buffered", () => {
  let gw: TestGateway;
  let client: GatewayClient;
  before(async () => {
    // A history of 3 events: a reconnect after 5 events published in the gap resumes recovered: false.
    gw = await startTestGateway({ apiKeys: [KEY], pubsubHistoryEvents: 3 });
    client = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY, reconnect: { initialDelayMs: 400, maxDelayMs: 400, jitter: 0 } });
  });
  after(async () => {
    client.close();
    await gw.close();
  });

  it("position reaches the new live position right after the buffered messages are handed over", async () => {
    const topic = "resume.missed";
    const sub = client.subscribe(topic, { positions: true });
    await within(sub.ready, "the subscription live");
    const it = sub[Symbol.asyncIterator]();
    for (let i = 1; i <= 4; i++) await client.publish(topic, event(i));
    await sleep(200); // buffered, none handed over
    // The gateway ends the stream (Unsubscribe by id); 5 events go by during the reconnect delay.
    const reconnected = onceWithin<LiveInfo>(sub, "reconnected", 5000);
    await unary(gw.client("io.cloudevents.v1.Pubsub"), "Unsubscribe", { subscription_id: sub.subscriptionId }, withKey(KEY));
    for (let i = 5; i <= 9; i++) await client.publish(topic, event(i));
    const live = await reconnected;
    assert.equal(live.recovered, false, "the gap is beyond the gateway's history");
    const got = await take(it, 4, "a buffered message");
    assert.deepEqual(got.map(n), [1, 2, 3, 4]);
    // Nothing before the live position comes back: resuming from it is exact, from the 4th event's is not.
    assert.equal(sub.position, live.position, "the live position, once what came before it was handed over");
    await client.publish(topic, event(10));
    const tenth = await nextMessage(it, "the event after the reconnect");
    assert.equal(n(tenth), 10);
    assert.equal(sub.position, tenth.position);
    sub.close();
  });
});

/** A TCP proxy whose open connections can be frozen: the sockets stay open and nothing more crosses (a silent peer). */
async function startFreezableProxy(target: number): Promise<{ port: number; accepted(): number; freeze(): void; close(): Promise<void> }> {
  const pairs: Array<[Socket, Socket]> = [];
  const frozen: Socket[] = [];
  let accepted = 0;
  const server = createServer((client) => {
    accepted++;
    const upstream = connect(target, "127.0.0.1");
    for (const s of [client, upstream]) s.on("error", () => undefined);
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    pairs.push([client, upstream]);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    freeze() {
      for (const [c, u] of pairs.splice(0)) {
        c.unpipe(u);
        u.unpipe(c);
        c.pause();
        u.pause();
        frozen.push(c, u); // open until close(); nothing reads or writes them any more

      }
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of [...pairs.flat(), ...frozen]) s.destroy();
        server.close(() => r());
      }),
  };
}

describe("client subscriptions: keepalive notices a connection that went silent", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY] });
  });
  after(() => gw.close());

  it("the stream fails within keepaliveTimeMs + keepaliveTimeoutMs and the subscription reconnects", async () => {
    const proxy = await startFreezableProxy(gw.gateway.grpcPort);
    const c = createGatewayClient({
      address: `127.0.0.1:${proxy.port}`,
      apiKey: KEY,
      keepaliveTimeMs: 200,
      keepaliveTimeoutMs: 300,
      reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
    });
    try {
      const sub = c.subscribe("keepalive.topic");
      await within(sub.ready, "the subscription live");
      const it = sub[Symbol.asyncIterator]();
      const down = onceWithin<ReconnectingInfo>(sub, "reconnecting", 5000);
      const frozeAt = performance.now();
      proxy.freeze();
      const info = await down;
      const noticedIn = performance.now() - frozeAt;
      assert.equal(info.error.code, Code.UNAVAILABLE);
      assert.ok(noticedIn < 200 + 300 + 1500, `noticed within the keepalive bound (${noticedIn.toFixed(0)} ms)`);
      await onceWithin<LiveInfo>(sub, "reconnected", 5000);
      assert.ok(proxy.accepted() >= 2, "a new connection");
      await c.publish("keepalive.topic", event(1));
      assert.equal(n(await nextMessage(it, "the event after the reconnect")), 1);
      sub.close();
    } finally {
      c.close();
      await proxy.close();
    }
  });

  it("refuses a bad keepalive option naming it", () => {
    for (const field of ["keepaliveTimeMs", "keepaliveTimeoutMs"] as const) {
      for (const bad of [0, -5, Infinity, Number.NaN]) {
        assert.throws(
          () => createGatewayClient({ address: "127.0.0.1:1", [field]: bad }),
          (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT && e.message.includes(field),
        );
      }
    }
  });
});
