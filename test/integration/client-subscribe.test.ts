import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createGatewayClient, GatewayClientError, type GatewayClient, type LiveInfo, type ReconnectingInfo, type SubscriptionMessage } from "../../src/client/index.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";
import { nextMessage, onceWithin, within } from "../support/client-helpers.js";
import { freePort } from "../support/ports.js";

const KEY = "sub-key";
const event = (type: string, data?: unknown) => ({ source: "urn:test:subscribe", type, ...(data !== undefined ? { data } : {}) });

for (const fixture of runtimeFixtures) {
  describe(`client subscriptions (${fixture.name} runtime)`, () => {
    let gw: TestGateway;
    let client: GatewayClient;
    let rt: Awaited<ReturnType<typeof fixture.setup>>;

    before(async () => {
      rt = await fixture.setup();
      gw = await startTestGateway({ ...rt.options, apiKeys: [KEY] }, rt.overrides);
      client = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY });
    });
    after(async () => {
      client.close();
      await gw.close();
      await rt.close();
    });

    it("by topic list: one stream delivers every listed topic, with the topic named", async () => {
      const sub = client.subscribe(["sub.a", "sub.b"]);
      await sub.ready;
      assert.equal(sub.live, true);
      await client.publish("sub.a", event("t.a", { n: 1 }));
      await client.publish("sub.b", event("t.b", { n: 2 }));
      await client.publish("sub.other", event("t.other"));
      const it = sub[Symbol.asyncIterator]();
      const got = [await nextMessage(it, "sub.a event"), await nextMessage(it, "sub.b event")];
      assert.deepEqual(got.map((m) => [m.topic, m.event.type]).sort(), [["sub.a", "t.a"], ["sub.b", "t.b"]]);
      sub.close();
      assert.equal(await sub.done, undefined);
    });

    it("by single topic with for-await; aborting the signal ends the loop normally", async () => {
      const ac = new AbortController();
      const sub = client.subscribe("sub.single", { signal: ac.signal });
      await sub.ready;
      const seen: SubscriptionMessage[] = [];
      const loop = (async () => {
        for await (const m of sub) {
          seen.push(m);
          if (seen.length === 2) ac.abort();
        }
      })();
      for (let i = 0; i < 3; i++) await client.publish("sub.single", event("t.single", { i }));
      await loop; // ends without throwing
      assert.equal(seen.length, 2);
      assert.deepEqual(seen.map((m) => JSON.parse(m.event.text_data!)), [{ i: 0 }, { i: 1 }]);
      assert.equal(sub.ended, true);
      assert.equal(await sub.done, undefined);
    });

    it("breaking out of for-await closes the subscription", async () => {
      const sub = client.subscribe("sub.break");
      await sub.ready;
      await client.publish("sub.break", event("t.break"));
      for await (const m of sub) {
        assert.equal(m.event.type, "t.break");
        break;
      }
      assert.equal(sub.ended, true);
    });

    it("with a handler callback, one message at a time; a throwing handler does not end it", async () => {
      const got: string[] = [];
      const handlerErrors: unknown[] = [];
      const sub = client.subscribe(
        "sub.handler",
        async (m) => {
          got.push(m.event.type);
          if (m.event.type === "t.boom") throw new Error("boom");
        },
        { onHandlerError: (e) => handlerErrors.push(e) },
      );
      await sub.ready;
      for (const t of ["t.1", "t.boom", "t.2"]) await client.publish("sub.handler", event(t));
      await waitFor(() => got.length === 3, "three handled messages");
      assert.deepEqual(got, ["t.1", "t.boom", "t.2"]);
      assert.equal(handlerErrors.length, 1);
      assert.equal(sub.ended, false);
      sub.close();
    });

    it("unsubscribe() ends the stream through the gateway with its x-subscription-id", async () => {
      const sub = client.subscribe("sub.unsub");
      await sub.ready;
      assert.ok(sub.subscriptionId, "the gateway sent x-subscription-id");
      const confirmed = await sub.unsubscribe();
      assert.equal(confirmed, true);
      assert.equal(sub.ended, true);
      assert.equal(await sub.done, undefined);
      // Nothing more arrives, and publishing still works.
      await client.publish("sub.unsub", event("t.after"));
      const it = sub[Symbol.asyncIterator]();
      assert.deepEqual(await it.next(), { value: undefined, done: true });
    });

    it("a bad key ends the subscription with UNAUTHENTICATED instead of reconnecting", async () => {
      const bad = createGatewayClient({ address: gw.grpcAddress, apiKey: "wrong" });
      try {
        const reconnects: ReconnectingInfo[] = [];
        const sub = bad.subscribe("sub.denied", { onReconnecting: (i) => reconnects.push(i) });
        await assert.rejects(within(sub.ready, "the refused subscription's ready to reject"), (e: unknown) => e instanceof GatewayClientError && e.codeName === "UNAUTHENTICATED");
        const err = await within(sub.done, "the refused subscription to end (not reconnect)");
        assert.equal(err?.codeName, "UNAUTHENTICATED");
        await assert.rejects(within(sub[Symbol.asyncIterator]().next(), "the refused subscription's iterator to throw"), (e: unknown) => e instanceof GatewayClientError && e.codeName === "UNAUTHENTICATED");
        assert.equal(reconnects.length, 0);
      } finally {
        bad.close();
      }
    });

    it("leaves no subscriber behind on the gateway once closed, unsubscribed, aborted or broken out of", async () => {
      const subscribers = async (): Promise<number> => {
        const text = await (await fetch(`${gw.http}/metrics`)).text();
        const line = text.split("\n").find((l) => l.startsWith("platform_pubsub_subscribers "));
        return line ? Number(line.split(" ")[1]) : NaN;
      };
      const end = Date.now() + 5000;
      let n = await subscribers();
      while (n !== 0 && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 20));
        n = await subscribers();
      }
      assert.equal(n, 0);
    });

    it("keeps reconnecting when the caller's reconnect callbacks and listeners throw (no crash)", async () => {
      const port = await freePort();
      let g = await startTestGateway({ ...rt.options, apiKeys: [KEY], grpcPort: port }, rt.overrides);
      const c = createGatewayClient({ address: `127.0.0.1:${port}`, apiKey: KEY, reconnect: { initialDelayMs: 20, maxDelayMs: 300 } });
      const warnings: Error[] = [];
      const onWarning = (w: Error): void => void warnings.push(w);
      process.on("warning", onWarning);
      try {
        const boom = (): never => {
          throw new Error("caller bug");
        };
        const sub = c.subscribe("sub.throwing", { onReconnecting: boom, onReconnected: boom });
        sub.on("reconnecting", boom);
        sub.on("reconnected", boom);
        await sub.ready;
        const it = sub[Symbol.asyncIterator]();
        const down = onceWithin<ReconnectingInfo>(sub, "reconnecting");
        await g.close();
        await down;
        const up = onceWithin<LiveInfo>(sub, "reconnected", 15000);
        g = await startTestGateway({ ...rt.options, apiKeys: [KEY], grpcPort: port }, rt.overrides);
        await up;
        await c.publish("sub.throwing", event("t.after"));
        assert.equal((await nextMessage(it, "the event after the restart")).event.type, "t.after");
        await waitFor(() => warnings.some((w) => /caller bug/.test(w.message)), "the throwing callbacks to be reported as warnings");
        sub.close();
        assert.equal(await sub.done, undefined);
      } finally {
        process.off("warning", onWarning);
        c.close();
        await g.close();
      }
    });

    it("resumes after a gateway restart on the same port, telling the caller", async () => {
      const port = await freePort();
      let g = await startTestGateway({ ...rt.options, apiKeys: [KEY], grpcPort: port }, rt.overrides);
      const c = createGatewayClient({ address: `127.0.0.1:${port}`, apiKey: KEY, reconnect: { initialDelayMs: 20, maxDelayMs: 300 } });
      try {
        const reconnecting: ReconnectingInfo[] = [];
        const reconnected: LiveInfo[] = [];
        const sub = c.subscribe("sub.restart", { onReconnecting: (i) => reconnecting.push(i), onReconnected: (i) => reconnected.push(i) });
        await sub.ready;
        const firstId = sub.subscriptionId;
        const it = sub[Symbol.asyncIterator]();
        await c.publish("sub.restart", event("t.before"));
        assert.equal((await nextMessage(it, "the event before the restart")).event.type, "t.before");

        const down = onceWithin<ReconnectingInfo>(sub, "reconnecting");
        await g.close();
        const info = await down;
        assert.ok(info.delayMs <= 300, `bounded delay, got ${info.delayMs}`);
        assert.equal(sub.live, false);

        const up = onceWithin<LiveInfo>(sub, "reconnected", 15000);
        g = await startTestGateway({ ...rt.options, apiKeys: [KEY], grpcPort: port }, rt.overrides);
        const live = await up;
        assert.equal(live.reconnected, true);
        assert.ok(reconnecting.length >= 1);
        assert.equal(reconnected.length, 1);
        assert.notEqual(sub.subscriptionId, undefined);
        assert.notEqual(sub.subscriptionId, firstId);

        await c.publish("sub.restart", event("t.after"));
        assert.equal((await nextMessage(it, "the event after the restart")).event.type, "t.after");
        sub.close();
        assert.equal(await sub.done, undefined);
      } finally {
        c.close();
        await g.close();
      }
    });
  });
}
