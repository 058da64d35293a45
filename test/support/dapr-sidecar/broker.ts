import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { topicEventOf, type Envelope } from "./events.js";
import { status, tokenError } from "./status.js";
import type { SharedStreams, StreamEntry } from "./streams.js";

type Duplex = grpc.ServerDuplexStream<any, any>;

interface Delivery {
  env: Envelope;
  /** The component worker waiting for the app's answer (the ack status; undefined = stream gone). */
  done?: (status: string | undefined) => void;
}

/** One live streaming subscription. */
interface Sub {
  call: Duplex;
  pubsub: string;
  topic: string;
  /** Delivered, not yet acked, by event id. */
  pending: Map<string, Delivery>;
  closed: boolean;
  /** Redis: stops this subscription's XREADGROUP and reclaim loops. */
  stop?: () => void;
}

/**
 * The Redis pub/sub component's metadata (contrib `pubsub/redis`, `common/component/redis/redis.go`
 * ParseClientFromProperties). Defaults are contrib's.
 */
export interface StreamsComponent {
  /** The Redis the component reads: the streams several sidecars share, or this sidecar's own. */
  streams: SharedStreams;
  /** The consumer group AND consumer name (contrib uses consumerID for both). daprd's default is the app id. */
  consumerID: string;
  /** Worker goroutines of the component, shared by its topics. Default 10: events of one topic are then in flight together, so order is not kept. */
  concurrency?: number;
  /** XREADGROUP COUNT and the bound of the component's queue. Default 100. */
  queueDepth?: number;
  /** An entry pending longer than this is claimed again by a reader of the group. Default 60 s. */
  processingTimeoutMs?: number;
  /** How often each subscription looks for such entries. Default 15 s. */
  redeliverIntervalMs?: number;
}

/** An event daprd took from the component and never handed to the app, or whose app answer was not a success. */
export interface Discarded {
  topic: string;
  id: string;
  /** "RETRY", an unknown status, or why daprd could not build the event (an undeliverable event). */
  reason: string;
}

/** What the sidecar's pub/sub does: streaming subscriptions with Dapr's protocol rules, acks and redelivery. */
export interface TestBroker {
  /** The SubscribeTopicEventsAlpha1 handler. */
  subscribe(call: Duplex): void;
  /** Publish an envelope: Redis appends it to the topic's stream (kept for the app's consumer group), in-memory hands it to the live streams. */
  publish(pubsub: string, topic: string, env: Envelope): void;
  /** Live streams of a topic. */
  count(topic: string): number;
  /** Live streams by topic (GetMetadata). */
  list(): Array<{ pubsub: string; topic: string }>;
  /** Events delivered so far (acked or not). */
  readonly delivered: number;
  /** Events delivered on live streams of the topic and not acked yet. */
  unacked(topic: string): number;
  /** Redis: entries of the topic pending in the app's consumer group (read, not acked: in flight, or left by a stream that closed). In-memory: 0. */
  backlog(topic: string): number;
  /** Events daprd gave up on without a success from the app (an answer other than SUCCESS/DROP, or undeliverable). */
  readonly discarded: readonly Discarded[];
  /** End every stream (the sidecar stops) UNKNOWN "stream closed": their unacked events stay pending (Redis) or are gone (in-memory). */
  dropAll(): void;
  /** The next `n` initial requests are answered INVALID_ARGUMENT "... subscriber is closed". */
  rejectNext(n: number): void;
}

/**
 * Dapr's streaming subscription rules (dapr-facts.md; dapr `pkg/api/grpc/subscribe.go`, `pkg/runtime/pubsub/
 * streamer/`): the first message must be `initial_request` with a pubsub and topic (else the stream ends); an unknown
 * pubsub is INVALID_ARGUMENT "pubsub X is not found"; a second initial request ends the stream; `initial_response` is
 * sent once live; each event is acked with `event_processed`.
 *
 * Every stream is its own subscription of the component (dapr `pkg/runtime/processor/subscriber/subscriber.go`
 * StartStreamerSubscription), so what the app gets depends on the component:
 * - Redis (`streams` given): contrib `pubsub/redis` on the app's consumer group (see streamsConsumer). The group
 *   outlives the streams: events published while the app has no stream open are kept and delivered on its next
 *   stream for the topic; two streams of one app on one topic compete (each event to one of them); an entry left
 *   unacked by a stream that closed comes back only after processingTimeout;
 * - in-memory: every live stream of the topic gets every event at once; nothing is kept or redelivered.
 * An answer other than SUCCESS or DROP (RETRY) is an error for the component, which since contrib v1.17 XACKs it
 * anyway (`pubsub/redis/redis.go` processMessage: only a cancelled context leaves an entry pending), so without a
 * resiliency policy a RETRY is NOT redelivered. Likewise an event daprd cannot build (a text/* event whose data is not
 * a string) never reaches the app. Both are listed in `discarded`.
 */
export function createTestBroker(opts: { token: () => string | undefined; knownPubsub: (name: string) => boolean; streams?: StreamsComponent }): TestBroker {
  let rejecting = 0;
  const subs = new Set<Sub>();
  const discarded: Discarded[] = [];
  let delivered = 0;
  const discard = (topic: string, env: Envelope, reason: string): void => {
    discarded.push({ topic, id: typeof env["id"] === "string" ? env["id"] : "", reason });
    if (discarded.length > 10_000) discarded.shift();
  };
  const component = opts.streams ? streamsConsumer(opts.streams, (sub, d) => send(sub, d), discard) : undefined;

  /** Write one event to a stream; when daprd cannot build it (undeliverable), why. */
  const send = (sub: Sub, d: Delivery): string | undefined => {
    if (sub.closed) {
      d.done?.(undefined);
      return undefined;
    }
    const built = topicEventOf(d.env, sub.topic, sub.pubsub);
    if ("undeliverable" in built) return built.undeliverable;
    const id = (built.event as { id: string }).id;
    sub.pending.set(id, d);
    delivered++;
    sub.call.write({ event_message: built.event });
    return undefined;
  };

  const close = (sub: Sub, error?: Partial<grpc.StatusObject>): void => {
    if (sub.closed) return;
    sub.closed = true;
    subs.delete(sub);
    sub.stop?.();
    // Redis: the workers hear the stream is gone and leave the entries pending; in-memory: gone.
    for (const d of sub.pending.values()) d.done?.(undefined);
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
    discarded,
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
          component?.follow(sub);
          call.write({ initial_response: {} });
          return;
        }
        if (msg.initial_request) return close(sub, status(Code.UNKNOWN, "duplicate initial request received"));
        const done = msg.event_processed;
        if (!done) return;
        const d = sub.pending.get(done.id);
        if (!d) return; // unknown or already acked: daprd ignores it
        sub.pending.delete(done.id);
        const answer = done.status?.status ?? "SUCCESS";
        if (d.done) return d.done(answer);
        // in-memory: the component logs the handler's error; the event is gone either way.
        if (answer !== "SUCCESS" && answer !== "DROP") discard(sub.topic, d.env, String(answer));
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
      if (component) {
        component.streams.xadd(pubsub, topic, env);
        return;
      }
      for (const sub of subs) {
        if (sub.pubsub !== pubsub || sub.topic !== topic) continue;
        const undeliverable = send(sub, { env });
        if (undeliverable) discard(topic, env, undeliverable);
      }
    },
    count: (topic) => [...subs].filter((s) => s.topic === topic).length,
    list: () => [...subs].map((s) => ({ pubsub: s.pubsub, topic: s.topic })),
    unacked: (topic) => [...subs].filter((s) => s.topic === topic).reduce((n, s) => n + s.pending.size, 0),
    backlog: (topic) => (component ? component.streams.pendingCount(topic, component.consumerID) : 0),
    dropAll() {
      // On SIGTERM daprd ends open streams UNKNOWN "stream closed".
      for (const sub of [...subs]) close(sub, status(Code.UNKNOWN, "stream closed"));
    },
    rejectNext(n) {
      rejecting = n;
    },
  };
}

/** A component of the sidecar reading shared streams (see StreamsComponent). */
interface StreamsConsumer {
  readonly streams: SharedStreams;
  readonly consumerID: string;
  /** A streaming subscription went live: create the group (at `0`), start its XREADGROUP and reclaim loops. */
  follow(sub: Sub): void;
}

/**
 * contrib `pubsub/redis` for one daprd (`pubsub/redis/redis.go`): each streaming subscription is a Subscribe of the
 * component, which creates the group with start id `0` (XGROUP CREATE ... 0 MKSTREAM, BUSYGROUP ignored: a NEW group
 * first gets every entry the stream still holds, an existing one resumes after its last-delivered id, so entries
 * added while no stream was open arrive on the next one) and runs a poll loop (XREADGROUP `>` up to queueDepth
 * entries, each put on the component's bounded queue; several subscriptions of one group compete for entries) and a
 * reclaim loop (every redeliverInterval, entries pending longer than processingTimeout; both > 0 or no reclaim at
 * all). `concurrency` workers, shared by every subscription of the component, take queued entries; each hands its
 * entry to the app's stream and waits for the answer: any answer XACKs it (see createTestBroker), a closed stream or
 * processingTimeout leaves it pending. With more than one worker the entries of one topic race each other
 * (goroutine scheduling, modelled as a random number of event-loop turns before the write), so the app may see them
 * out of order; `concurrency: "1"` keeps order.
 */
function streamsConsumer(c: StreamsComponent, send: (sub: Sub, d: Delivery) => string | undefined, discard: (topic: string, env: Envelope, reason: string) => void): StreamsConsumer {
  const concurrency = Math.max(1, c.concurrency ?? 10);
  const queueDepth = Math.max(1, c.queueDepth ?? 100);
  const processingTimeoutMs = c.processingTimeoutMs ?? 60_000;
  const redeliverIntervalMs = c.redeliverIntervalMs ?? 15_000;
  const queue: Array<{ sub: Sub; entry: StreamEntry }> = [];
  const space: Array<() => void> = [];
  let busy = 0;

  const turns = (n: number): Promise<void> => (n <= 0 ? Promise.resolve() : new Promise((r) => setImmediate(() => void turns(n - 1).then(r))));

  const process = async (sub: Sub, entry: StreamEntry): Promise<void> => {
    if (concurrency > 1) await turns(Math.floor(Math.random() * 4));
    if (sub.closed) return; // the handler fails: the entry stays pending
    let undeliverable: string | undefined;
    const answer = await new Promise<string | undefined>((resolve) => {
      // contrib bounds the handler by processingTimeout only while redelivery is on; the stream's own end bounds it otherwise.
      const t = processingTimeoutMs > 0 && redeliverIntervalMs > 0 ? setTimeout(() => resolve(undefined), processingTimeoutMs) : undefined;
      t?.unref();
      undeliverable = send(sub, {
        env: entry.env,
        done: (s) => {
          clearTimeout(t);
          resolve(s);
        },
      });
      if (undeliverable) {
        clearTimeout(t);
        resolve(undeliverable);
      }
    });
    // No answer (the stream closed, or processingTimeout passed): the context is cancelled and the entry stays
    // pending. Any answer is XACKed: SUCCESS and DROP are done, and since contrib v1.17 a handler error with a live
    // context (RETRY, an undeliverable event) is acked too, after daprd's resiliency retries (none by default).
    if (answer === undefined) return;
    if (answer !== "SUCCESS" && answer !== "DROP") discard(sub.topic, entry.env, answer);
    c.streams.ack(sub.pubsub, sub.topic, c.consumerID, entry.seq);
  };

  const pump = (): void => {
    while (busy < concurrency && queue.length > 0) {
      const { sub, entry } = queue.shift()!;
      space.shift()?.();
      busy++;
      void process(sub, entry).finally(() => {
        busy--;
        pump();
      });
    }
  };

  /** Put an entry on the component's queue, waiting (bounded by the subscription's life) while it is full. */
  const enqueue = async (sub: Sub, entry: StreamEntry, signal: AbortSignal): Promise<boolean> => {
    while (queue.length >= queueDepth) {
      if (signal.aborted) return false;
      await new Promise<void>((r) => {
        // Woken by a dequeue (pump shifts it) or by the subscription's end (then it leaves the line itself).
        const wake = (): void => {
          signal.removeEventListener("abort", wake);
          const i = space.indexOf(wake);
          if (i >= 0) space.splice(i, 1);
          r();
        };
        space.push(wake);
        signal.addEventListener("abort", wake, { once: true });
      });
    }
    if (signal.aborted) return false;
    queue.push({ sub, entry });
    pump();
    return true;
  };

  return {
    streams: c.streams,
    consumerID: c.consumerID,
    follow(sub) {
      c.streams.createGroup(sub.pubsub, sub.topic, c.consumerID);
      const stop = new AbortController();
      const reclaim = (): void => {
        for (const entry of c.streams.claim(sub.pubsub, sub.topic, c.consumerID, processingTimeoutMs, queueDepth)) void enqueue(sub, entry, stop.signal);
      };
      // contrib: processingTimeout or redeliverInterval 0 turns redelivery off (no reclaim loop at all).
      const redelivers = processingTimeoutMs > 0 && redeliverIntervalMs > 0;
      const timer = redelivers ? setInterval(reclaim, redeliverIntervalMs) : undefined;
      timer?.unref();
      sub.stop = () => {
        clearInterval(timer);
        stop.abort();
      };
      if (redelivers) reclaim();
      void (async () => {
        // Entries read but not queued when the subscription ends stay pending: reclaimed later, like contrib.
        while (!stop.signal.aborted) {
          const batch = await c.streams.readGroup(sub.pubsub, sub.topic, c.consumerID, queueDepth, stop.signal);
          for (const entry of batch) if (!(await enqueue(sub, entry, stop.signal))) break;
        }
      })().catch(() => undefined); // readGroup fails only without the group, which follow() created first
    },
  };
}
