/**
 * A worker thread's topic references on the main hub when thread topics die and open again while their acquires are on
 * the way: a `web.release` undoes only the acquire it belongs to, and an `end` of an older reference does not kill a
 * topic that is acquiring it again. The real main side (broker, main hub, thread-events) and the real thread side
 * (thread-upstream, hub) over a MessageChannel in one thread, with the main thread's messages to the thread held back
 * and delivered in the order each test needs.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { MessageChannel } from "node:worker_threads";
import { createBroker, type EndReason } from "../../src/broker/index.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { createMemoryPubsub } from "../../src/runtime/embedded/pubsub.js";
import { createLogger } from "../../src/observe/logger.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { createWebHub, type EventWire, type WebEvent, type WebHub } from "../../src/web/hub.js";
import { brokerUpstream } from "../../src/web/broker-upstream.js";
import { createBridge, type Bridge, type BridgeHandler } from "../../src/threads/bridge.js";
import { createThreadEvents } from "../../src/threads/thread-events.js";
import { threadUpstream, type ThreadUpstream } from "../../src/threads/thread-upstream.js";
import type { ThreadMessage } from "../../src/threads/protocol.js";
import { waitFor } from "../support/gateway.js";

const ce = (id: string): CloudEvent => ({ id, source: "urn:test", spec_version: "1.0", type: "t", attributes: {}, text_data: "{}", data: "text_data" }) as CloudEvent;
const tick = (ms = 10): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A message from the main thread to the thread that answers a `web.acquire` (a bridge reply with a snapshot). */
const isAcquireAnswer = (m: unknown): boolean => {
  const r = m as { b?: string; ok?: boolean; v?: { completeAfter?: unknown } };
  return r.b === "r" && r.ok === true && typeof r.v?.completeAfter === "number";
};
const isEnd = (m: unknown, topic: string): boolean => (m as ThreadMessage).t === "end" && (m as { topic: string }).topic === topic;

describe("a worker thread's topic references across a topic that dies while acquiring", () => {
  const pubsub = createMemoryPubsub();
  /** The runtime subscriptions' error callbacks by topic: calling one breaks that topic's upstream on the main thread. */
  const breakers = new Map<string, (e: Error) => void>();
  const logger = createLogger("error", new Writable({ write: (_c, _e, cb) => cb() }));
  const broker = createBroker<CloudEvent>({
    upstream: {
      subscribe: (topic, onEvent, onError) => {
        breakers.set(topic, onError);
        return pubsub.subscribe(topic, { onEvent, onError });
      },
    },
    encode: () => new Uint8Array(0),
    lingerMs: 10,
  });
  const main = createWebHub({ upstream: brokerUpstream(broker, logger, { marks: false }), historyEvents: 100, historyAgeMs: 60_000 });
  const metrics = createMetrics({ processMetrics: false });
  const events = createThreadEvents({ hub: main, logger, maxBacklog: 1_000, posted: metrics.counter("test_posted_total", "posted", ["thread"]) });
  const { port1, port2 } = new MessageChannel();
  let mainBridge: Bridge;
  let threadBridge: Bridge;
  let upstream: ThreadUpstream;
  let thread: WebHub;
  /** `web.acquire` calls the main thread is serving. */
  let acquiring = 0;
  /** The main thread's messages to the thread, held back while `holding`. */
  let holding = false;
  const held: unknown[] = [];
  /** What the thread hub's outlet got: events and ended topics. */
  const delivered: WebEvent[] = [];
  const ended: Array<{ topic: string; reason: EndReason }> = [];

  const toThread = (m: unknown): void => {
    if (threadBridge.receive(m)) return;
    const msg = m as ThreadMessage;
    if (msg.t === "ev") upstream.event(msg.e as EventWire);
    else if (msg.t === "end") upstream.end(msg.topic, msg.reason as EndReason);
  };
  /** Hand the thread the held messages `pick` selects, in order; the rest stay held. */
  const deliver = (pick: (m: unknown) => boolean): void => {
    for (let i = 0; i < held.length; ) {
      if (pick(held[i])) toThread(held.splice(i, 1)[0]);
      else i++;
    }
  };
  const release = (): void => {
    holding = false;
    deliver(() => true);
  };
  /** Until the main thread serves no acquire (the port delivers in a later turn: wait for one first). */
  const mainIdle = async (): Promise<void> => {
    await tick();
    await waitFor(() => acquiring === 0, "the main thread's acquires to finish", 2_000);
  };

  before(() => {
    const stream = events.open(1, (m) => port1.postMessage(m));
    const handlers: Record<string, BridgeHandler> = { ...events.handlers(stream) };
    const acquire = handlers["web.acquire"]!;
    handlers["web.acquire"] = async (p, signal) => {
      acquiring++;
      try {
        return await acquire(p, signal);
      } finally {
        acquiring--;
      }
    };
    mainBridge = createBridge(port1, handlers, { timeoutMs: 5_000, maxPending: 100, peer: "the thread" });
    port1.on("message", (m: unknown) => {
      if (mainBridge.receive(m)) return;
      const msg = m as ThreadMessage;
      if (msg.t === "ack") events.ack(stream, msg.n);
    });
    threadBridge = createBridge(port2, {}, { timeoutMs: 5_000, maxPending: 100, peer: "the main thread" });
    upstream = threadUpstream({ scheme: main.scheme, bridge: threadBridge, clock: stream.clock });
    port2.on("message", (m: unknown) => {
      if (holding) held.push(m);
      else toThread(m);
    });
    thread = createWebHub({ upstream, historyEvents: 100, historyAgeMs: 60_000 });
    thread.addFanout("test", {
      deliver: (e) => (delivered.push(e), 1),
      endTopic: (topic, reason) => void ended.push({ topic, reason }),
    });
  });
  after(async () => {
    release();
    thread.close();
    main.close();
    mainBridge.close("done");
    threadBridge.close("done");
    port1.close();
    port2.close();
    await broker.close();
  });

  const idsOf = (topic: string): string[] => delivered.filter((e) => e.topic === topic).map((e) => JSON.parse(e.cloudevent).id as string);

  it("two acquires of one topic: releasing the first leaves the second's reference, and its events keep coming", async () => {
    const first = { got: [] as string[], ends: 0 };
    const second = { got: [] as string[], ends: 0 };
    const sink = (r: typeof first) => ({ event: (e: WebEvent) => void r.got.push(JSON.parse(e.cloudevent).id), end: () => void r.ends++ });
    // What the thread hub does when a topic died while acquiring and its successor acquires it again.
    const a = await upstream.follow("two", sink(first));
    const b = await upstream.follow("two", sink(second));
    a.stop();
    // The release reaches the main thread before the event does (one port, in order; the publish waits for it).
    await tick();
    await pubsub.publish("two", ce("after-release"));
    await waitFor(() => second.got.length === 1, "the second acquire's event: the first's release ended its reference", 1_000);
    assert.deepEqual(second.got, ["after-release"]);
    assert.equal(second.ends, 0);
    b.stop();
    await tick();
  });

  it("the interleaving of a stale end, a dying acquire and its successor: the thread's subscribers still get events", async () => {
    await thread.acquire(["t"]);
    await pubsub.publish("t", ce("t0"));
    await waitFor(() => idsOf("t").length === 1, "the first event");
    holding = true;
    // The main thread's topic fails: it ends the thread's reference (an `end` on the way to the thread).
    breakers.get("t")!(new Error("the sidecar lost the topic"));
    await waitFor(() => held.some((m) => isEnd(m, "t")), "the main thread's end of t");
    // Meanwhile on the thread: the last subscriber leaves (web.release of T0), a new one subscribes (T1 acquires).
    thread.release("t");
    const first = thread.acquire(["t"]);
    first.catch(() => undefined);
    await mainIdle();
    assert.ok(held.some(isAcquireAnswer), "the main thread answered T1's acquire (held back)");
    // The end (of T0's reference) reaches the thread while T1 is opening; T1's answer is still on the way.
    deliver((m) => !isAcquireAnswer(m));
    // Another subscriber of t (T2 acquires again if T1 died).
    const second = thread.acquire(["t"]);
    second.catch(() => undefined);
    await mainIdle();
    // Now the answers: T1's first (a dead T1 releases what it took), then any other.
    release();
    await second;
    const firstOutcome = await first.then(
      () => "subscribed",
      (e: unknown) => `failed: ${(e as Error).message}`,
    );
    await mainIdle();
    // Whatever the thread holds now must bring the events of t.
    await pubsub.publish("t", ce("t1"));
    await waitFor(() => idsOf("t").includes("t1"), "t's event after the interleaving (the main thread still posts t here)", 1_000);
    assert.equal(firstOutcome, "subscribed", "an end of the older reference does not fail the subscribe acquiring t again");
    assert.deepEqual(
      ended.filter((e) => e.topic === "t"),
      [],
      "no subscriber of t was ended: the end was of a reference no subscriber held any more",
    );
    thread.release("t");
    thread.release("t");
  });

  it("an end of the acquire's own reference that overtakes its answer ends the topic on the thread", async () => {
    holding = true;
    const acquiring = thread.acquire(["u"]);
    acquiring.catch(() => undefined);
    await mainIdle();
    assert.ok(held.some(isAcquireAnswer), "the main thread took the reference and answered");
    breakers.get("u")!(new Error("the sidecar lost the topic"));
    await waitFor(() => held.some((m) => isEnd(m, "u")), "the main thread's end of u");
    // The end first (it may overtake the answer: the bridge posts the answer a few microtasks after the reference is taken).
    deliver((m) => isEnd(m, "u"));
    release();
    await assert.rejects(acquiring, "the topic ended there after the reference was taken: the subscribe cannot go live");
    assert.deepEqual(
      ended.filter((e) => e.topic === "u").map((e) => e.reason.kind),
      ["upstream-failed"],
      "the thread's subscribers of u are ended as the main thread's are",
    );
  });
});
