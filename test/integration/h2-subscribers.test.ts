/**
 * gRPC Subscribe streams as the native HTTP/2 server writes them (src/h2/server-writer.ts): every connection's frames
 * go into one slab the thread shares, each connection in blocks of its own, and PING ACKs ride with a later write of
 * the connection. What a subscriber must see whatever the interleaving: every event, byte for byte, on every stream, and
 * every PING answered with its payload, in order, busy or idle.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { ACK, END_HEADERS, H, Raw, block, frame, settings, u32, type RawFrame } from "../support/h2-raw-client.js";
import { ACK_HOLD_MS } from "../../src/h2/server-writer.js";
import { event, publish, subscribe, type Sub } from "./pubsub-support.js";

const KEY = "k1";
const SUBSCRIBE = "/io.cloudevents.v1.Pubsub/Subscribe";

/** A Pubsub client on a connection of its own (grpc-js shares one per target unless told otherwise). */
function ownConnection(address: string): grpc.Client {
  const Ctor = grpc.makeGenericClientConstructor(gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as grpc.ServiceDefinition, "io.cloudevents.v1.Pubsub");
  return new Ctor(address, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
}

/** A Subscribe request on stream `id` of a raw connection: headers, then the framed SubscribeRequest. */
function rawSubscribe(r: Raw, id: number, topic: string): void {
  const def = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as unknown as Record<string, { requestSerialize(v: object): Buffer }>;
  const msg = def["Subscribe"]!.requestSerialize({ topics: [topic] });
  const body = Buffer.alloc(5 + msg.length);
  body.writeUInt32BE(msg.length, 1);
  msg.copy(body, 5);
  const headers = block([
    [":method", "POST"],
    [":scheme", "http"],
    [":path", SUBSCRIBE],
    [":authority", "x"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ["x-api-key", KEY],
  ]);
  r.send(frame(H.HEADERS, END_HEADERS, id, headers), frame(H.DATA, 1, id, body));
}

/** A SubscribeResponse from its protobuf bytes. */
function decodeSubscribe(b: Buffer): any {
  const def = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as unknown as Record<string, { responseDeserialize(b: Buffer): any }>;
  return def["Subscribe"]!.responseDeserialize(b);
}

describe("gRPC subscribers on the native HTTP/2 server", () => {
  let gw: TestGateway;
  let publisher: grpc.Client;
  const clients: grpc.Client[] = [];
  const subs: Sub[] = [];

  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], sweepIntervalMs: 60_000 });
    publisher = gw.client("io.cloudevents.v1.Pubsub");
  });
  after(async () => {
    for (const s of subs) s.call.cancel();
    await waitFor(() => subs.every((s) => s.status !== undefined), "every test stream to end");
    for (const c of clients) c.close();
    await gw.close();
  });

  /**
   * A raw connection subscribed to `topic` on stream 1, once its response headers are in: streams' send window
   * `streamWindow`, the connection's window as large as it goes.
   */
  async function openSubscriber(topic: string, streamWindow: number): Promise<Raw> {
    const r = new Raw(gw.gateway.grpcPort).open(settings([0x4, streamWindow]));
    await waitFor(() => r.of(H.SETTINGS).length > 0, "the server's SETTINGS");
    r.send(frame(H.SETTINGS, ACK, 0, Buffer.alloc(0)), frame(H.WINDOW_UPDATE, 0, 0, u32(0x7fffffff - 65_535)));
    rawSubscribe(r, 1, topic);
    await waitFor(() => r.of(H.HEADERS).some((f) => f.stream === 1), "the Subscribe response headers");
    return r;
  }

  it("delivers every event intact to every stream when many connections' frames interleave in one turn", async () => {
    // 6 connections with 30 streams each and 40 connections with one: subscribed in turn, so the fan-out writes each
    // connection's frames between the others', and one event's frames (about 0.7 MB) fill several slabs.
    const conns = Array.from({ length: 46 }, () => ownConnection(gw.grpcAddress));
    clients.push(...conns);
    const mine: Sub[] = [];
    for (let round = 0; round < 30; round++) {
      for (let c = 0; c < conns.length; c++) {
        if (c >= 6 && round > 0) continue;
        mine.push(subscribe(conns[c]!, ["interleave"], withKey(KEY)));
      }
    }
    subs.push(...mine);
    await Promise.all(mine.map((s) => s.ready()));
    const texts = Array.from({ length: 4 }, (_, i) => `${i}:`.padEnd(3000, String.fromCharCode(97 + i)));
    await Promise.all(texts.map((t, i) => publish(publisher, "interleave", event(i, { text_data: t }), withKey(KEY))));
    await Promise.all(mine.map((s) => s.count(texts.length, 15_000)));
    for (const s of mine) {
      assert.deepEqual(
        s.got.map((e) => e.cloudevent.text_data),
        texts,
      );
    }
  });

  it("a reader that stops reading its socket gets every event intact once it reads again, while the others go on", async () => {
    // A raw connection with windows so large that flow control never holds the server back: what it does not read
    // piles up in the kernel, then in the server socket's queue, while a normal subscriber keeps the turns going.
    const r = await openSubscriber("stall", 0x7fffffff);
    try {
      const other = subscribe(publisher, ["stall"], withKey(KEY));
      subs.push(other);
      await other.ready();
      r.socket.pause();
      const texts = Array.from({ length: 2000 }, (_, i) => `${i}:`.padEnd(3900, String.fromCharCode(97 + (i % 26))));
      for (let i = 0; i < texts.length; i++) await publish(publisher, "stall", event(i, { text_data: texts[i] }), withKey(KEY));
      await other.count(texts.length, 15_000);
      r.socket.resume();
      const data = (): RawFrame[] => r.of(H.DATA).filter((f) => f.stream === 1);
      await waitFor(() => data().length === texts.length, `${texts.length} DATA frames on the stalled stream`, 15_000);
      const got = data().map((f) => decodeSubscribe(f.payload.subarray(5)).cloudevent.text_data as string);
      assert.equal(got.length, texts.length);
      for (let i = 0; i < texts.length; i++) assert.equal(got[i], texts[i], `event ${i}`);
      assert.equal(r.of(H.GOAWAY).length, 0, "the connection stays up");
    } finally {
      r.destroy();
    }
  });

  it("an event bigger than the socket's bound in one turn (1.5 MB, windows never closing) arrives whole, with no WINDOW_UPDATE to restart it", async () => {
    // DATA past SOCKET_HWM (1 MiB) of unflushed frames waits; once the flush hands them to a socket that took them all,
    // no 'drain' comes, and this client never sends a WINDOW_UPDATE: only the flush itself can send the rest.
    const r = await openSubscriber("whole", 0x7fffffff);
    try {
      const text = "w:".padEnd(1_500_000, "0123456789");
      await publish(publisher, "whole", event(1, { text_data: text }), withKey(KEY));
      const bytes = (): number => r.of(H.DATA).reduce((n, f) => n + (f.stream === 1 ? f.payload.length : 0), 0);
      await waitFor(() => bytes() > text.length, `the whole event (have ${bytes()} bytes)`, 5000);
      const body = Buffer.concat(r.of(H.DATA).filter((f) => f.stream === 1).map((f) => f.payload));
      assert.equal(body.readUInt32BE(1), body.length - 5, "one message, all of it");
      assert.equal(decodeSubscribe(body.subarray(5)).cloudevent.text_data, text);
    } finally {
      r.destroy();
    }
  });

  it("a publisher writing events back to back to 600 connections is answered half-way through each fan-out, and the next event shares the writes still waiting", async () => {
    const conns = await Promise.all(Array.from({ length: 600 }, () => openSubscriber("slices", 0x7fffffff)));
    try {
      const texts = Array.from({ length: 12 }, (_, i) => `${i}:`.padEnd(8000, String.fromCharCode(97 + i)));
      const answeredAt: number[] = [];
      for (let i = 0; i < texts.length; i++) {
        await publish(publisher, "slices", event(i, { text_data: texts[i] }), withKey(KEY));
        answeredAt.push(performance.now());
      }
      const data = (r: Raw): RawFrame[] => r.of(H.DATA).filter((f) => f.stream === 1);
      await waitFor(() => conns.every((r) => data(r).length === texts.length), "every event on every connection", 20_000);
      for (const r of conns) {
        assert.deepEqual(
          data(r).map((f) => decodeSubscribe(f.payload.subarray(5)).cloudevent.text_data),
          texts,
        );
      }
      // Every answer but the last was read before the last connection read its event: the gateway answered while it
      // still had writes of that fan-out to make (all in this process, so the reads follow the writes' order).
      const lastRead = texts.map((_, i) => Math.max(...conns.map((r) => data(r)[i]!.at)));
      const early = answeredAt.filter((t, i) => t < lastRead[i]!).length;
      assert.ok(early >= texts.length / 2, `${early} of ${texts.length} answers came before their event's last read`);
      // So the next event found connections still waiting for their write, and went with the one before it.
      const shared = conns.filter((r) => data(r).some((f, i, all) => i > 0 && f.at === all[i - 1]!.at)).length;
      assert.ok(shared > 0, "some connection read two events in one read");
    } finally {
      for (const r of conns) r.destroy();
    }
  });

  it("answers every PING with its payload, in order, while a stream receives events and when the connection is idle", async () => {
    const r = new Raw(gw.gateway.grpcPort).open();
    try {
      await waitFor(() => r.of(H.SETTINGS).length > 0, "the server's SETTINGS");
      r.send(frame(H.SETTINGS, ACK, 0, Buffer.alloc(0)));
      rawSubscribe(r, 1, "pings");
      await waitFor(() => r.of(H.HEADERS).some((f) => f.stream === 1), "the Subscribe response headers");
      const payloads: Buffer[] = [];
      // More PINGs than a connection holds between two writes, some sent while nothing else goes out, some right
      // before an event's DATA.
      for (let i = 0; i < 7; i++) {
        const p = Buffer.from(`ping-00${i}`);
        payloads.push(p);
        r.send(frame(H.PING, 0, 0, p));
        if (i % 2 === 1) await publish(publisher, "pings", event(i), withKey(KEY));
      }
      await waitFor(() => r.of(H.PING).filter((f) => f.flags & ACK).length === payloads.length, "an ACK for every PING");
      assert.deepEqual(
        r.of(H.PING).map((f) => f.payload.toString()),
        payloads.map((p) => p.toString()),
      );
      await waitFor(() => r.of(H.DATA).filter((f) => f.stream === 1).length === 3, "the 3 events");
      // Idle now: a PING still gets its ACK, and well within a second (held at most ACK_HOLD_MS for a write to ride).
      const sentAt = Date.now();
      r.send(frame(H.PING, 0, 0, Buffer.from("idle-png")));
      await waitFor(() => r.of(H.PING).some((f) => f.payload.toString() === "idle-png"), "the idle PING's ACK", 1000);
      assert.ok(Date.now() - sentAt < 1000);
      assert.equal(r.of(H.GOAWAY).length, 0, "the connection stays up");
    } finally {
      r.destroy();
    }
  });

  const bigEvent = (i: number): object => event(i, { text_data: `${i}:`.padEnd(8000, "x") });
  /**
   * A raw connection subscribed to `topic` on stream 1, whose streams' send window is `streamWindow`, once the first
   * DATA of an 8 KB event published on it has arrived.
   */
  async function rawSubscriber(topic: string, streamWindow: number): Promise<Raw> {
    const r = await openSubscriber(topic, streamWindow);
    await publish(publisher, topic, bigEvent(0), withKey(KEY));
    await waitFor(() => r.of(H.DATA).length === 1, "the first event's DATA");
    return r;
  }
  const ackOf = (r: Raw, p: Buffer): number => r.frames.findIndex((f) => f.type === H.PING && (f.flags & ACK) !== 0 && f.payload.equals(p));

  it("on a connection that streams events about 10 ms apart, a PING's ACK is held across several events and rides after one's DATA, within the hold", async () => {
    const r = await rawSubscriber("ride", 0x7fffffff);
    try {
      const p = Buffer.from("ride-001");
      const dataBefore = r.of(H.DATA).length;
      const sentAt = performance.now();
      r.send(frame(H.PING, 0, 0, p));
      for (let i = 1; i <= 40 && ackOf(r, p) < 0; i++) {
        await publish(publisher, "ride", event(i), withKey(KEY));
        await sleep(10);
      }
      await waitFor(() => ackOf(r, p) >= 0, "the PING's ACK");
      const at = ackOf(r, p);
      const eventsFirst = r.frames.slice(0, at).filter((f) => f.type === H.DATA).length - dataBefore;
      const waited = r.frames[at]!.at - sentAt;
      // The old rule (ride the next write) answered after one event; held for the last write before ACK_HOLD_MS runs
      // out, the ACK comes after several (about 20 here, one per ~12 ms), and a client PINGs that much less often.
      assert.ok(eventsFirst >= 2, `the ACK came after ${eventsFirst} event(s), ${waited.toFixed(1)} ms after the PING`);
      assert.equal(r.frames[at - 1]!.type, H.DATA, "the ACK follows an event's DATA");
      assert.ok(waited < ACK_HOLD_MS + 400, `the ACK waited ${waited.toFixed(1)} ms`);
    } finally {
      r.destroy();
    }
  });

  it("a PING's ACK held for a later write goes out as soon as an event's DATA starts waiting for the client's window", async () => {
    // The first 8 KB event fits the stream's window of 10,000 bytes; the second does not.
    const r = await rawSubscriber("blocks", 10_000);
    try {
      const p = Buffer.from("block-01");
      const sentAt = performance.now();
      r.send(frame(H.PING, 0, 0, p));
      await publish(publisher, "blocks", bigEvent(1), withKey(KEY));
      await waitFor(() => ackOf(r, p) >= 0, "the PING's ACK");
      const waited = r.frames[ackOf(r, p)]!.at - sentAt;
      // Held, the ACK would wait for the hold (the connection wrote moments ago, so no write is due within it).
      assert.ok(waited < ACK_HOLD_MS - 50, `the ACK waited ${waited.toFixed(1)} ms`);
      assert.ok(r.of(H.DATA).length >= 2, "part of the second event went out");
    } finally {
      r.destroy();
    }
  });

  it("while an event's DATA waits for the client's window, a PING is answered at once (the client sizes its windows by it)", async () => {
    const r = await rawSubscriber("windowbound", 100);
    try {
      const delays: number[] = [];
      for (let i = 0; i < 5; i++) {
        const p = Buffer.from(`wait-00${i}`);
        const sentAt = performance.now();
        r.send(frame(H.PING, 0, 0, p));
        await waitFor(() => ackOf(r, p) >= 0, `the ACK of PING ${i}`);
        delays.push(r.frames[ackOf(r, p)]!.at - sentAt);
      }
      assert.equal(r.of(H.DATA).length, 1, "the stream still waits for its window");
      // A held ACK waits at least ACK_HOLD_MS - 1 (249 ms), timed from the PING's write to the ACK's arrival (not to the
      // poll that saw it); the median tolerates a stall of the test's own loop.
      const median = [...delays].sort((a, b) => a - b)[2]!;
      assert.ok(median < 15, `ACK delays ${delays.map((d) => d.toFixed(1)).join(", ")} ms`);
    } finally {
      r.destroy();
    }
  });
});
