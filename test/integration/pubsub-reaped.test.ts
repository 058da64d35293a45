import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../src/shared/code.js";
import type { UpstreamHandlers } from "../../src/runtime/pubsub-port.js";
import { startTestGateway, unary, waitFor, withKey } from "../support/gateway.js";
import { checkPromText } from "../support/prom-text.js";
import { event, publish, stalledSubscribe, subscribe } from "./pubsub-support.js";

const KEY = "reap-key";
const md = (): grpc.Metadata => withKey(KEY);
/** The stuck sweep runs this often (and a reaped stream gets this long to take its status). */
const SWEEP_MS = 200;

/** Current value of a metric series from the gateway's registry (read in-process: it outlives close()). */
async function series(gw: { gateway: { context: { metrics: { registry: { metrics(): Promise<string> } } } } }, name: string, labels: Record<string, string> = {}): Promise<number> {
  const samples = [...checkPromText(await gw.gateway.context.metrics.registry.metrics()).families.values()].flatMap((f) => f.samples);
  const hit = samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v) && Object.keys(s.labels).length === Object.keys(labels).length);
  return hit?.value ?? 0;
}

describe("platform_pubsub_subscribers_reaped_total: every reason, each counted once", () => {
  it("counts unsubscribed, upstream-failed, slow and shutdown, each with the status its stream ends with", async () => {
    // The stuck sweep off (60 s) here, so a reader that stops is reaped as slow once 1024 events behind.
    const gw = await startTestGateway({ apiKeys: [KEY], sweepIntervalMs: 60_000, subscriptionLingerMs: 0 });
    const reaped = (reason: string): Promise<number> => series(gw, "platform_pubsub_subscribers_reaped_total", { reason });
    const client = gw.client("io.cloudevents.v1.Pubsub");
    // Keep each topic's upstream handlers, so the test can break one runtime subscription.
    const port = gw.gateway.context.runtime.pubsub;
    const handlers = new Map<string, UpstreamHandlers>();
    const original = port.subscribe.bind(port);
    port.subscribe = (topic, h, signal) => (handlers.set(topic, h), original(topic, h, signal));
    let closed = false;
    try {
      // unsubscribed: Unsubscribe by x-subscription-id ends the stream with OK.
      const u = subscribe(client, ["r.unsub"], md());
      await u.ready();
      assert.equal((await unary(client, "Unsubscribe", { subscription_id: u.id() }, md())).status.success, true);
      assert.equal((await u.ended()).code, Code.OK);
      assert.equal(await reaped("unsubscribed"), 1);

      // upstream-failed: the runtime subscription breaks; its subscribers end UNAVAILABLE naming the topic.
      const f = subscribe(client, ["r.broken"], md());
      await f.ready();
      handlers.get("r.broken")!.onError!(new Error("sidecar stream reset"));
      const fs = await f.ended();
      assert.equal(fs.code, Code.UNAVAILABLE);
      assert.match(fs.details, /topic 'r\.broken' broke: sidecar stream reset/);
      assert.equal(await reaped("upstream-failed"), 1);

      // slow: a reader more than 1024 events behind.
      const slow = await stalledSubscribe(gw.grpcAddress, ["r.slow"], KEY);
      try {
        for (let i = 0; i < 1300; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => publish(client, "r.slow", event(i + j), md())));
        await waitFor(() => gw.logs.some((l) => /more than 1024 events behind/.test(String(l["msg"]))), "the slow reap to be logged");
        assert.equal(await reaped("slow"), 1);
      } finally {
        slow.close();
      }

      // shutdown: streams still open when the gateway closes end UNAVAILABLE.
      const s = subscribe(client, ["r.bye"], md());
      await s.ready();
      closed = true;
      await gw.close();
      const ss = await s.ended();
      assert.equal(ss.code, Code.UNAVAILABLE);
      assert.match(ss.details, /gateway is shutting down/);
      assert.equal(await reaped("shutdown"), 1);
      // Every reason counted exactly once: no reap was counted under two reasons.
      for (const reason of ["unsubscribed", "upstream-failed", "slow", "shutdown"]) assert.equal(await reaped(reason), 1, reason);
      assert.equal(await reaped("stuck"), 0);
    } finally {
      port.subscribe = original;
      if (!closed) await gw.close();
    }
  });

  it("counts stuck: a reader that stops with fewer than 1024 events pending and no write progress for a sweep", async () => {
    const gw = await startTestGateway({ apiKeys: [KEY], sweepIntervalMs: SWEEP_MS });
    const reaped = (reason: string): Promise<number> => series(gw, "platform_pubsub_subscribers_reaped_total", { reason });
    try {
      const client = gw.client("io.cloudevents.v1.Pubsub");
      const stuck = await stalledSubscribe(gw.grpcAddress, ["r.stuck"], KEY);
      try {
        // 40 events of 2 KB: more than the HTTP/2 stream buffers before write() says wait, far fewer than 1024.
        const big = "x".repeat(2048);
        for (let i = 0; i < 40; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => publish(client, "r.stuck", event(i + j, { text_data: big }), md())));
        await waitFor(() => gw.logs.some((l) => /made no progress/.test(String(l["msg"]))), "the stuck reap to be logged");
        assert.equal(await reaped("stuck"), 1);
        assert.equal(await reaped("slow"), 0);
      } finally {
        stuck.close();
      }
    } finally {
      await gw.close();
    }
  });
});
