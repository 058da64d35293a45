import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { topicEventOf, type Envelope } from "./events.js";
import { status, tokenError } from "./status.js";

type Duplex = grpc.ServerDuplexStream<any, any>;

interface Delivery {
  env: Envelope;
  attempts: number;
}

/** One live streaming subscription. */
interface Sub {
  call: Duplex;
  pubsub: string;
  topic: string;
  /** Delivered, not yet acked, by event id. */
  pending: Map<string, Delivery>;
  closed: boolean;
}

/** What the sidecar's pub/sub does: streaming subscriptions with Dapr's protocol rules, acks and redelivery. */
export interface TestBroker {
  /** The SubscribeTopicEventsAlpha1 handler. */
  subscribe(call: Duplex): void;
  /** Deliver a published envelope to every live stream of the topic (none: dropped, like a new consumer group). */
  publish(pubsub: string, topic: string, env: Envelope): void;
  /** Live streams of a topic. */
  count(topic: string): number;
  /** Live streams by topic (GetMetadata). */
  list(): Array<{ pubsub: string; topic: string }>;
  /** Events delivered so far (acked or not). */
  readonly delivered: number;
  /** Events delivered on live streams of the topic and not acked yet. */
  unacked(topic: string): number;
  /** Events held for redelivery because their stream closed before acking them. */
  backlog(topic: string): number;
  /** End every stream (the sidecar stops) UNKNOWN "stream closed": their unacked events go back to the backlog. */
  dropAll(): void;
  /** The next `n` initial requests are answered INVALID_ARGUMENT "... subscriber is closed". */
  rejectNext(n: number): void;
}

/**
 * Dapr's streaming subscription rules (dapr-facts.md): the first message must be `initial_request` with a pubsub and
 * topic (else the stream ends); an unknown pubsub is INVALID_ARGUMENT "pubsub X is not found"; a second initial
 * request ends the stream; `initial_response` is sent once live; each event is acked with `event_processed` (SUCCESS
 * or DROP done, RETRY redelivered); events not acked when the stream closes are redelivered to the next stream of
 * the topic.
 */
export function createTestBroker(opts: { token: () => string | undefined; knownPubsub: (name: string) => boolean; redeliver?: boolean }): TestBroker {
  // pubsub.in-memory never redelivers (neither on RETRY nor for a stream that closed unacked); Redis streams do.
  const redeliver = opts.redeliver ?? true;
  let rejecting = 0;
  const subs = new Set<Sub>();
  const backlogs = new Map<string, Delivery[]>();
  let delivered = 0;
  const keyOf = (pubsub: string, topic: string): string => `${pubsub}\u0000${topic}`;

  const send = (sub: Sub, d: Delivery): void => {
    if (sub.closed) return requeue(sub, d);
    const id = String(d.env["id"] ?? "");
    d.attempts++;
    sub.pending.set(id, d);
    delivered++;
    sub.call.write({ event_message: topicEventOf(d.env, sub.topic, sub.pubsub) });
  };

  const requeue = (sub: Sub, d: Delivery): void => {
    if (!redeliver) return;
    const k = keyOf(sub.pubsub, sub.topic);
    const list = backlogs.get(k) ?? [];
    list.push(d);
    backlogs.set(k, list);
  };

  const close = (sub: Sub, error?: Partial<grpc.StatusObject>): void => {
    if (sub.closed) return;
    sub.closed = true;
    subs.delete(sub);
    for (const d of sub.pending.values()) requeue(sub, d);
    sub.pending.clear();
    try {
      if (error) sub.call.emit("error", error);
      else sub.call.end();
    } catch {
      // The call is already gone.
    }
  };

  const fail = (call: Duplex, code: Code, message: string): void => {
    try {
      call.emit("error", status(code, message));
    } catch {
      // gone
    }
  };

  return {
    get delivered() {
      return delivered;
    },
    subscribe(call) {
      const denied = tokenError(opts.token(), call.metadata);
      if (denied) {
        call.emit("error", denied);
        return;
      }
      let sub: Sub | undefined;
      call.on("data", (msg: { initial_request?: any; event_processed?: any }) => {
        if (!sub) {
          const init = msg.initial_request;
          // dapr pkg/api/grpc/subscribe.go: these come back as plain errors, so UNKNOWN; an unknown pubsub is
          // INVALID_ARGUMENT; while daprd shuts down or reloads, pkg/runtime/processor/subscriber/subscriber.go
          // answers INVALID_ARGUMENT "subscriber is closed".
          if (!init) return fail(call, Code.UNKNOWN, "initial request is required");
          if (!init.pubsub_name) return fail(call, Code.UNKNOWN, "pubsubName is required");
          if (!init.topic) return fail(call, Code.UNKNOWN, "topic is required");
          if (!opts.knownPubsub(init.pubsub_name)) return fail(call, Code.INVALID_ARGUMENT, `pubsub ${init.pubsub_name} is not found`);
          if (rejecting > 0) {
            rejecting--;
            return fail(call, Code.INVALID_ARGUMENT, "failed deserializing metadata. Error: subscriber is closed");
          }
          sub = { call, pubsub: init.pubsub_name, topic: init.topic, pending: new Map(), closed: false };
          subs.add(sub);
          call.write({ initial_response: {} });
          const k = keyOf(sub.pubsub, sub.topic);
          const backlog = backlogs.get(k);
          backlogs.delete(k);
          for (const d of backlog ?? []) send(sub, d);
          return;
        }
        if (msg.initial_request) return close(sub, status(Code.UNKNOWN, "duplicate initial request received"));
        const done = msg.event_processed;
        if (!done) return;
        const d = sub.pending.get(done.id);
        if (!d) return; // unknown or already acked: daprd ignores it
        sub.pending.delete(done.id);
        if (redeliver && done.status?.status === "RETRY" && d.attempts < 3) setImmediate(() => send(sub!, d));
      });
      const gone = (): void => {
        if (sub) close(sub);
      };
      call.on("end", gone);
      call.on("cancelled", gone);
      call.on("error", gone);
      call.on("close", gone);
    },
    publish(pubsub, topic, env) {
      for (const sub of subs) if (sub.pubsub === pubsub && sub.topic === topic) send(sub, { env, attempts: 0 });
    },
    count: (topic) => [...subs].filter((s) => s.topic === topic).length,
    list: () => [...subs].map((s) => ({ pubsub: s.pubsub, topic: s.topic })),
    unacked: (topic) => [...subs].filter((s) => s.topic === topic).reduce((n, s) => n + s.pending.size, 0),
    backlog: (topic) => [...backlogs.entries()].filter(([k]) => k.endsWith(`\u0000${topic}`)).reduce((n, [, l]) => n + l.length, 0),
    dropAll() {
      // On SIGTERM daprd ends open streams UNKNOWN "stream closed".
      for (const sub of [...subs]) close(sub, status(Code.UNKNOWN, "stream closed"));
    },
    rejectNext(n) {
      rejecting = n;
    },
  };
}
