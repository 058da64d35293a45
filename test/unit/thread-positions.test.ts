/**
 * A worker thread's position while events are still on its port. The thread is posted only the events of its topics,
 * and reads the main hub's sequence from shared memory: a position it hands out must not count an event still on the
 * port (it would be delivered live and then replayed again on a resume), and a resume from a position the main hub
 * issued but the thread has not handled yet must wait for the port, then be exact. Deterministic here: the real main
 * side (broker, main hub, thread-events) and the real thread side (thread-upstream, hub) over a MessageChannel in one
 * thread, so the test decides when the port is drained.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { MessageChannel } from "node:worker_threads";
import { createBroker } from "../../src/broker/index.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { createMemoryPubsub } from "../../src/runtime/embedded/pubsub.js";
import { createLogger } from "../../src/observe/logger.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { createWebHub, type WebHub } from "../../src/web/hub.js";
import { brokerUpstream } from "../../src/web/broker-upstream.js";
import { createBridge, type Bridge } from "../../src/threads/bridge.js";
import { createThreadEvents } from "../../src/threads/thread-events.js";
import { threadUpstream } from "../../src/threads/thread-upstream.js";
import type { EventWire } from "../../src/web/hub.js";
import type { ThreadMessage } from "../../src/threads/protocol.js";

const ce = (id: string): CloudEvent => ({ id, source: "urn:test", spec_version: "1.0", type: "t", attributes: {}, text_data: "{}", data: "text_data" }) as CloudEvent;

describe("a worker thread's positions with events still on its port", () => {
  const pubsub = createMemoryPubsub();
  const logger = createLogger("error", new Writable({ write: (_c, _e, cb) => cb() }));
  const broker = createBroker<CloudEvent>({ upstream: { subscribe: (topic, onEvent, onError) => pubsub.subscribe(topic, { onEvent, onError }) }, encode: () => new Uint8Array(0), lingerMs: 10 });
  const main = createWebHub({ upstream: brokerUpstream(broker, logger, { marks: false }), historyEvents: 100, historyAgeMs: 60_000 });
  const metrics = createMetrics({ processMetrics: false });
  const events = createThreadEvents({ hub: main, logger, maxBacklog: 1_000, posted: metrics.counter("test_posted_total", "posted", ["thread"]) });
  const { port1, port2 } = new MessageChannel();
  let mainBridge: Bridge;
  let threadBridge: Bridge;
  let thread: WebHub;

  before(() => {
    const stream = events.open(1, (m) => port1.postMessage(m));
    mainBridge = createBridge(port1, events.handlers(stream), { timeoutMs: 5_000, maxPending: 100, peer: "the thread" });
    port1.on("message", (m: unknown) => {
      if (mainBridge.receive(m)) return;
      const msg = m as ThreadMessage;
      if (msg.t === "ack") events.ack(stream, msg.n);
    });
    threadBridge = createBridge(port2, {}, { timeoutMs: 5_000, maxPending: 100, peer: "the main thread" });
    const upstream = threadUpstream({ scheme: main.scheme, bridge: threadBridge, clock: stream.clock });
    port2.on("message", (m: unknown) => {
      if (threadBridge.receive(m)) return;
      const msg = m as ThreadMessage;
      if (msg.t === "ev") upstream.event(msg.e as EventWire);
    });
    thread = createWebHub({ upstream, historyEvents: 100, historyAgeMs: 60_000 });
  });
  after(async () => {
    thread.close();
    main.close();
    mainBridge.close("done");
    threadBridge.close("done");
    port1.close();
    port2.close();
    await broker.close();
  });

  const epochOf = (hub: WebHub): string => (hub.scheme.kind === "epoch" ? hub.scheme.epoch : "");

  it("hands out only positions it is complete up to, and a resume from a newer one waits for the port, then is exact", async () => {
    await thread.acquire(["q"]);
    const before = thread.position();
    assert.equal(before, main.position(), "nothing in flight: the thread's position is the main hub's");
    // Three events, published and posted to the thread's port in this synchronous step: none is handled yet.
    for (let i = 0; i < 3; i++) void pubsub.publish("q", ce(`e${i}`));
    const current = main.position();
    assert.notEqual(current, before);
    assert.equal(thread.position(), before, "events on the port: the position stays where the thread is complete");
    const since = main.parsePosition("since", current);
    assert.equal(thread.resume(["q"], since).recovered, false, "not handled up to it yet: replaying nothing and going live would deliver the three again");
    // The subscribe path: acquire with the position waits until the thread has handled the port up to it.
    await thread.acquire(["q"], undefined, since);
    assert.equal(thread.position(), current);
    assert.deepEqual(thread.resume(["q"], since), { recovered: true, events: [] });
    const replay = thread.resume(["q"], main.parsePosition("since", before));
    assert.equal(replay.recovered, true);
    assert.deepEqual(replay.events.map((e) => e.position), [1, 2, 3].map((n) => `${epochOf(main)}-${Number(before.split("-")[1]) + n}`));
    // A position the main thread never issued resumes not exactly.
    await thread.acquire(["q"], undefined, { epoch: epochOf(main), seq: since.seq + 1_000 });
    assert.equal(thread.resume(["q"], { epoch: epochOf(main), seq: since.seq + 1_000 }).recovered, false);
    for (let i = 0; i < 3; i++) thread.release("q");
  });
});
