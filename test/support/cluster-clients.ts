import assert from "node:assert/strict";
import { createGatewayClient, type GatewayClient, type Subscription } from "../../src/client/index.js";
import { waitFor } from "./gateway.js";
import { CLUSTER_KEY, type Replica } from "./cluster.js";
import { connectSse, connectWs, type SseTestClient, type WsTestClient } from "./web.js";

/** One event as a cluster test subscriber saw it: the topic, the CloudEvent id (set by the publisher), the position. */
export interface Seen {
  topic: string;
  ceId: string;
  /** The position (WebSocket `id`, SSE `id:`); "" over gRPC, which has none. */
  position: string;
}

/** A subscriber the tests can move between replicas; every event it ever received, across its connections. */
export interface ClusterSubscriber {
  label: string;
  topics: string[];
  seen: Seen[];
  /** The CloudEvent ids received on `topic`, in arrival order. */
  ids(topic: string): string[];
  /** The last position received (event or subscribe position), what a resume passes on. */
  lastPosition: string | undefined;
  /** `recovered` of each (re)subscribe that asked to resume, in order. */
  recoveries: boolean[];
  /** Close the current connection (the recorded events stay). */
  close(): Promise<void>;
}

/** Wait until `sub` has at least `n` events on `topic` (bounded). */
export async function waitForCount(sub: ClusterSubscriber, topic: string, n: number, timeoutMs = 30_000): Promise<void> {
  await waitFor(() => sub.ids(topic).length >= n, `${sub.label}: ${n} events on ${topic} (has ${sub.ids(topic).length})`, timeoutMs);
}

function recorder(label: string, topics: string[]): Pick<ClusterSubscriber, "label" | "topics" | "seen" | "ids" | "recoveries"> {
  const seen: Seen[] = [];
  return { label, topics, seen, recoveries: [], ids: (topic) => seen.filter((s) => s.topic === topic).map((s) => s.ceId) };
}

/** A WebSocket subscriber (the `ws` package) that can resume on another replica with its last position. */
export interface WsSubscriber extends ClusterSubscriber {
  current: WsTestClient;
  /** Connect to `r` and subscribe again with `since` = the last position (or `since` given). */
  resumeOn(r: Replica, since?: string): Promise<{ recovered: boolean | undefined; position: string }>;
  /** The current socket's close, once it closed (a killed replica's sockets close 1006). */
  closedCode(): number | undefined;
}

/** Subscribe over WebSocket on `r`; resolves once the `subscribed` reply came. */
export async function wsSubscriber(label: string, r: Replica, topics: string[], since?: string): Promise<WsSubscriber> {
  const rec = recorder(label, topics);
  let current!: WsTestClient;
  const sub: WsSubscriber = {
    ...rec,
    get current() {
      return current;
    },
    lastPosition: since,
    closedCode: () => current.close?.code,
    async resumeOn(to, from = sub.lastPosition) {
      if (current && current.close === undefined) await sub.close();
      const c = await connectWs(to.http, { key: CLUSTER_KEY });
      current = c;
      c.ws.on("message", (d) => {
        const f = JSON.parse(d.toString()) as { op: string; topic: string; id: string; cloudevent: { id: string } };
        if (f.op !== "event") return;
        rec.seen.push({ topic: f.topic, ceId: f.cloudevent.id, position: f.id });
        sub.lastPosition = f.id;
      });
      c.send({ op: "subscribe", id: "s", topics, ...(from !== undefined ? { since: from } : {}) });
      const reply = await c.next((f) => f.id === "s", `${label}: the subscribe reply from ${to.name}`, 15_000);
      assert.equal(reply.op, "subscribed", `${label} on ${to.name}: ${JSON.stringify(reply)}`);
      if (from !== undefined) rec.recoveries.push(reply.recovered);
      // The subscribe position is where a subscriber that saw no event yet resumes; an event seen before it wins.
      sub.lastPosition ??= reply.position;
      return { recovered: reply.recovered, position: reply.position };
    },
    async close() {
      if (current.close !== undefined) return;
      current.ws.close();
      await current.closed(5000).catch(() => current.ws.terminate());
    },
  };
  await sub.resumeOn(r, since);
  return sub;
}

/** An SSE subscriber (streaming fetch) that resumes on another replica with `Last-Event-ID`. */
export interface SseSubscriber extends ClusterSubscriber {
  current: SseTestClient;
  resumeOn(r: Replica, since?: string): Promise<void>;
  ended(): boolean;
}

/** Open an SSE stream on `r`; resolves once its first message (the position) arrived. */
export async function sseSubscriber(label: string, r: Replica, topics: string[], since?: string): Promise<SseSubscriber> {
  const rec = recorder(label, topics);
  let current!: SseTestClient;
  let taken = 0;
  let timer: NodeJS.Timeout | undefined;
  const sub: SseSubscriber = {
    ...rec,
    get current() {
      return current;
    },
    lastPosition: since,
    ended: () => current.ended,
    async resumeOn(to, from = sub.lastPosition) {
      if (current && !current.ended) await sub.close();
      const q = topics.map((t) => `topic=${encodeURIComponent(t)}`).join("&");
      const c = await connectSse(to.http, q, { "x-api-key": CLUSTER_KEY, ...(from !== undefined ? { "last-event-id": from } : {}) });
      assert.equal(c.status, 200, `${label} on ${to.name}: ${JSON.stringify(c.messages)}`);
      current = c;
      taken = 0;
      await waitFor(() => c.lastId !== undefined || c.ended, `${label}: the first SSE message from ${to.name}`, 15_000);
      const recovery = c.messages.find((m) => m.event === "recovery");
      if (from !== undefined) rec.recoveries.push(recovery ? (JSON.parse(recovery.data) as { recovered: boolean }).recovered : true);
    },
    async close() {
      current.abort();
      await waitFor(() => current.ended, `${label}: the SSE stream to end`, 5000);
    },
  };
  // The SSE test client appends parsed messages; move each new event into the record as it arrives.
  const pump = (): void => {
    if (current) {
      const msgs = current.messages;
      for (; taken < msgs.length; taken++) {
        const m = msgs[taken]!;
        if (m.event !== "message" || m.data === "") continue;
        const d = JSON.parse(m.data) as { topic: string; cloudevent: { id: string } };
        rec.seen.push({ topic: d.topic, ceId: d.cloudevent.id, position: m.id ?? "" });
      }
      if (current.lastId !== undefined) sub.lastPosition = current.lastId;
    }
    timer = setTimeout(pump, 5);
    timer.unref();
  };
  pump();
  await sub.resumeOn(r, since);
  const close = sub.close;
  sub.close = async () => {
    await close();
    pump();
    clearTimeout(timer);
  };
  return sub;
}

/** A gRPC Subscribe through the client library (it reconnects on its own, to the same replica). */
export interface GrpcSubscriber extends ClusterSubscriber {
  client: GatewayClient;
  subscription: Subscription;
  /** With positions: close this replica's stream and subscribe on `r` with `since` = the last position. */
  resumeOn(r: Replica): Promise<void>;
}

/**
 * Subscribe over gRPC on `r`; resolves once the stream is live. With `positions` each message carries its position
 * and resumeOn() moves the subscription to another replica from there.
 */
export async function grpcSubscriber(label: string, r: Replica, topics: string[], opts: { positions?: boolean } = {}): Promise<GrpcSubscriber> {
  const rec = recorder(label, topics);
  let loop: Promise<void> = Promise.resolve();
  const open = async (to: Replica, since?: string): Promise<void> => {
    const client = createGatewayClient({ address: to.grpc, apiKey: CLUSTER_KEY, reconnect: { initialDelayMs: 50, maxDelayMs: 500 } });
    const subscription = client.subscribe(topics, since !== undefined ? { since } : opts.positions ? { positions: true } : {});
    sub.client = client;
    sub.subscription = subscription;
    const live = new Promise<{ recovered?: boolean; position?: string }>((resolve) => subscription.once("live", resolve));
    loop = (async () => {
      try {
        for await (const { topic, event, position } of subscription) {
          rec.seen.push({ topic, ceId: event.id, position: position ?? "" });
          if (position !== undefined) sub.lastPosition = position;
        }
      } catch {
        // ended by close() or a final error; the test asserts on what arrived
      }
    })();
    const info = await Promise.race([live, new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`${label}: gRPC Subscribe on ${to.name} not live within 15 s`)), 15_000).unref())]);
    if (since !== undefined) rec.recoveries.push(info.recovered === true);
    sub.lastPosition ??= info.position;
  };
  const sub: GrpcSubscriber = {
    ...rec,
    client: undefined as unknown as GatewayClient,
    subscription: undefined as unknown as Subscription,
    lastPosition: undefined,
    async resumeOn(to) {
      await sub.close();
      await open(to, sub.lastPosition);
    },
    async close() {
      sub.client.close();
      await loop;
    },
  };
  await open(r);
  return sub;
}
