import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { createBroker } from "../../src/broker/index.js";
import { createLogger } from "../../src/observe/logger.js";
import { createMemoryPubsub } from "../../src/runtime/embedded/pubsub.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { seqOfStreamId, streamIdOf, STREAM_ID_SPAN } from "../../src/shared/stream-id.js";
import { brokerUpstream } from "../../src/web/broker-upstream.js";
import { createWebHub, WebEvent } from "../../src/web/hub.js";
import { formatPosition, isOwnPosition, parsePosition, type PositionScheme } from "../../src/web/positions.js";

const ce = (id: string): CloudEvent => ({ id, source: "urn:test", spec_version: "1.0", type: "t", attributes: {}, text_data: "{}", data: "text_data" }) as CloudEvent;

describe("positions", () => {
  const epoch: PositionScheme = { kind: "epoch", epoch: "0123456789ab", marks: true };
  const stream: PositionScheme = { kind: "stream" };

  it("stream ids and numbers map one to one, in order", () => {
    const ms = 1_790_000_000_000;
    assert.equal(streamIdOf(ms * STREAM_ID_SPAN + 7), `${ms}-7`);
    assert.equal(seqOfStreamId(`${ms}-7`), ms * STREAM_ID_SPAN + 7);
    assert.ok(seqOfStreamId(`${ms}-1023`)! < seqOfStreamId(`${ms + 1}-0`)!);
    assert.equal(seqOfStreamId(`${ms}-1024`), undefined, "n past the span is no position of ours");
    assert.equal(seqOfStreamId("99999999999999999-0"), undefined, "past a safe integer");
    assert.equal(seqOfStreamId("1-2-3"), undefined);
  });

  it("each scheme reads its own form, reads the other's as foreign, and names the field on garbage", () => {
    assert.deepEqual(parsePosition(stream, "since", "1790000000000-3"), { epoch: "", seq: 1_790_000_000_000 * STREAM_ID_SPAN + 3 });
    assert.deepEqual(parsePosition(epoch, "since", "0123456789ab-42"), { epoch: "0123456789ab", seq: 42 });
    assert.deepEqual(parsePosition(epoch, "since", "0123456789ab-42-abcdefabcdef"), { epoch: "0123456789ab", seq: 42, mark: "abcdefabcdef" });
    assert.equal(parsePosition(stream, "since", "fedcba987654-42").epoch, "fedcba987654", "an epoch position on the stream scheme is foreign");
    assert.equal(parsePosition(epoch, "since", "1790000000000-3").epoch, "", "a stream position on the epoch scheme is foreign");
    assert.throws(() => parsePosition(stream, "Last-Event-ID", "x".repeat(500)), (e: unknown) => e instanceof GatewayError && /Last-Event-ID/.test(e.message) && e.message.length < 300);
    assert.equal(formatPosition(epoch, 5, "abcdefabcdef"), "0123456789ab-5-abcdefabcdef");
    assert.equal(formatPosition({ ...epoch, marks: false }, 5, "abcdefabcdef"), "0123456789ab-5");
  });

  it("an epoch of decimal digits only is still an epoch on the stream scheme: foreign, never a stream id", async () => {
    // About 0.36% of epochs are 12 decimal digits: with a small offset the text is also a well-formed stream id.
    const decimal: PositionScheme = { kind: "epoch", epoch: "123456789012", marks: false };
    const text = formatPosition(decimal, 42);
    assert.equal(text, "123456789012-42");
    const p = parsePosition(stream, "since", text);
    assert.deepEqual(p, { epoch: "123456789012", seq: 42 }, "the epoch form, as the process that issued it reads it");
    assert.equal(isOwnPosition(stream, p), false);
    assert.equal(isOwnPosition(decimal, parsePosition(decimal, "since", text)), true, "its own process still resumes it");
    assert.deepEqual(parsePosition(stream, "since", "123456789012-42-abcdefabcdef"), { epoch: "123456789012", seq: 42, mark: "abcdefabcdef" });
    // Stream ids the redis runtime issues (13-digit milliseconds, or 0-0 before any event) are unchanged.
    assert.deepEqual(parsePosition(stream, "since", "1790000000000-42"), { epoch: "", seq: 1_790_000_000_000 * STREAM_ID_SPAN + 42 });
    assert.deepEqual(parsePosition(stream, "since", "0-0"), { epoch: "", seq: 0 });

    // On a stream hub whose runtime holds every event (a backfill from the stream's start would be "complete"), a
    // resume from that position is recovered: false with nothing replayed, as docs/web-pubsub.md promises.
    const now = 1_790_000_000_000 * STREAM_ID_SPAN;
    const old = new WebEvent("s", 5, streamIdOf(5), '{"specversion":"1.0"}');
    const hub = createWebHub({
      upstream: {
        scheme: stream,
        linger: false,
        seq: () => now,
        follow: async () => ({ completeAfter: now, events: [], stop: () => undefined }),
        history: async () => ({ complete: true, events: [old] }),
      },
      historyEvents: 100,
      historyAgeMs: 60_000,
    });
    const since = hub.parsePosition("since", text);
    const backfill = await hub.acquire(["s"], undefined, since);
    assert.deepEqual(hub.resume(["s"], since, backfill), { recovered: false, events: [] });
    hub.close();
  });
});

describe("two processes' hubs on one topic, epoch positions with marks", () => {
  // Two "replicas": each its own broker and hub over one pub/sub that delivers every event to both, in one order.
  const pubsub = createMemoryPubsub();
  const logger = createLogger("error", new Writable({ write: (_c, _e, cb) => cb() }));
  const replica = () => {
    const broker = createBroker<CloudEvent>({ upstream: { subscribe: (topic, onEvent, onError) => pubsub.subscribe(topic, { onEvent, onError }) }, encode: () => new Uint8Array(0), lingerMs: 10 });
    const hub = createWebHub({ upstream: brokerUpstream(broker, logger, { marks: true }), historyEvents: 100, historyAgeMs: 60_000 });
    return { broker, hub };
  };
  const a = replica();
  const b = replica();
  after(async () => {
    a.hub.close();
    b.hub.close();
    await a.broker.close();
    await b.broker.close();
  });

  it("a position of A resumes exactly on B for one topic B followed throughout, and not otherwise", async () => {
    await a.hub.acquire(["t", "u"]);
    await b.hub.acquire(["t"]);
    const seen: string[] = [];
    a.hub.addFanout("test", { deliver: (e) => (e.topic === "t" && seen.push(e.position), 1), endTopic: () => undefined });
    for (let i = 0; i < 5; i++) await pubsub.publish("t", ce(`e${i}`));
    // The subscriber on A saw e0..e2 and went away; B must replay e3 and e4.
    const since = a.hub.parsePosition("since", seen[2]!);
    assert.notEqual(since.mark, undefined, "an event's position carries its mark");
    const onB = b.hub.resume(["t"], since);
    assert.equal(onB.recovered, true);
    assert.deepEqual(onB.events.map((e) => JSON.parse(e.cloudevent).id), ["e3", "e4"]);
    assert.equal(b.hub.resume(["t", "u"], since).recovered, false, "several topics: a mark places one topic only");
    assert.equal(b.hub.resume(["t"], a.hub.parsePosition("since", a.hub.position())).recovered, false, "a position without a mark");
    assert.equal(b.hub.resume(["t"], { ...since, mark: "000000000000" }).recovered, false, "an event B does not hold");
    a.hub.release("t");
    a.hub.release("u");
    b.hub.release("t");
  });
});
