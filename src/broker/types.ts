/**
 * The broker's view of the outside world. The broker is pure logic: it knows nothing of grpc-js, HTTP/2 or the
 * sidecar runtime; `src/main` adapts those to these interfaces.
 */

/** A live upstream (sidecar) subscription to one topic. */
export interface UpstreamHandle {
  /** Stop receiving. Safe to call twice. */
  close(): Promise<void>;
}

/** Where events come from: one call per topic per process, the broker fans out. */
export interface UpstreamSource<E> {
  /**
   * Subscribe to `topic`; resolve once live. `onEvent` is called for each event in arrival order (with its position
   * number when the source has cluster-wide positions); `onError` when the upstream broke for good (the broker then
   * ends that topic's subscribers with reason "upstream-failed").
   */
  subscribe(topic: string, onEvent: (event: E, seq?: number) => void, onError: (error: Error) => void): Promise<UpstreamHandle>;
}

/** Why the broker ended a subscriber. Plain values: main maps them to a stream status. */
export type EndReason =
  /** More than `capacity` events were pending: the subscriber fell behind and was reaped. */
  | { kind: "slow"; capacity: number }
  /** The health sweep found it blocked with pending events and no progress for a whole sweep interval. */
  | { kind: "stuck"; pending: number; stalledMs: number }
  /** Unsubscribe by id. */
  | { kind: "unsubscribed" }
  /** The broker is closing (gateway shutdown). */
  | { kind: "shutdown" }
  /** The upstream subscription of one of its topics broke. */
  | { kind: "upstream-failed"; topic: string; message: string };

/**
 * One subscriber's outlet (a server stream). The broker writes pre-encoded bytes while `write` returns true and
 * resumes when the owner calls `Subscriber.drain()`.
 */
export interface SubscriberSink {
  /** Hand one encoded message to the stream; false means "buffering, wait for drain". Must not throw. */
  write(bytes: Uint8Array): boolean;
  /**
   * Called once, synchronously, when the subscriber goes live and just before it can receive its first event, with
   * the minted subscription id (for gRPC: flush the response headers carrying it).
   */
  open(id: string): void;
  /**
   * Optional, read right after `open` and again whenever the subscriber has caught up after a refused write: the
   * stream `write` hands its bytes to, which the broker then writes to itself while the subscriber keeps up. A
   * delivery to thousands of subscribers pays a likely cache miss per object it reads, and this saves one (the sink)
   * per delivery. Its `write` gets the bytes the broker's `encode` made and must not throw; when it returns false the
   * broker calls `blocked()` where `write` would have started its wait for the drain, and from then on uses `write`
   * until the subscriber has caught up.
   */
  outlet?(): SinkOutlet | undefined;
  /** The outlet's write returned false: wait for the drain as `write` does after a false (a sink without it gets no outlet taken). */
  blocked?(): void;
  /** The broker ended the subscriber (never called after the owner's own `close()`). */
  end(reason: EndReason): void;
}

/** What `SubscriberSink.outlet` returns: a stream the broker writes encoded events to. */
export interface SinkOutlet {
  /** Hand one encoded message to the stream; false means "buffering, wait for drain" (or the stream is over). */
  write(bytes: Uint8Array): boolean;
}

/**
 * A per-topic fan-out outlet: gets every event of its topic once, as the broker receives it, and does its own
 * per-subscriber delivery (the web front publishes it natively through uWS). It holds one reference on the topic,
 * so the topic's one upstream subscription is shared with the broker's own subscribers.
 */
export interface FanoutSink<E> {
  /**
   * One event of the topic, in arrival order, with the upstream's position number when it has one, (tracing on) its
   * fan-out record to count deliveries in, and when the broker received it (`preciseEpochMs`, for the delivery
   * latency). Must not throw.
   */
  event(topic: string, event: E, seq: number | undefined, trace: FanoutTrace | undefined, receivedAt: number): void;
  /** The broker ended this attachment (upstream failed, shutdown); never called after the owner's own `close()`. */
  end(reason: EndReason): void;
}

/**
 * Tracing on: the record of one event's fan-out (one span per event, however many subscribers: ops/pubsub.ts
 * fanoutTracer). Each outlet adds the deliveries it made; `end` once every outlet has had the event.
 */
export interface FanoutTrace {
  /** The fan-out span's ids when it is sampled (the delivery latency's exemplar), else undefined. */
  readonly exemplar: { readonly traceId: string; readonly spanId: string } | undefined;
  count(transport: string, deliveries: number): void;
  end(): void;
}

/** The owner's handle on an attached FanoutSink. */
export interface FanoutHandle {
  /**
   * Detach and release the topic reference. Safe to call twice. `linger: false` when the caller already kept the topic
   * for a while after its last subscriber left (the web hub's history age): the upstream closes at once if this was
   * the last reference, instead of lingering a second time.
   */
  close(opts?: { linger?: boolean }): void;
}

/** Hooks the broker reports through, for metrics. All optional, all cheap to call. */
export interface BrokerObserver {
  /** Counts changed: topics with local subscribers, live subscribers, open upstream subscriptions. */
  counts?(topics: number, subscribers: number, upstreams: number): void;
  /**
   * One event arrived from upstream on a topic and was fanned out to `deliveries` subscriber slots (handed to each
   * one's stream, or queued in its ring): `receivedAt` is when it arrived (`preciseEpochMs`), `exemplar` the ids of
   * its sampled fan-out span.
   */
  fannedOut?(topic: string, deliveries: number, receivedAt: number, exemplar: FanoutTrace["exemplar"]): void;
  /** A subscriber was ended by the broker. */
  ended?(reason: EndReason["kind"]): void;
  /** After each sweep: the largest and the total number of pending events over all subscribers. */
  occupancy?(max: number, total: number): void;
}

/** Options of createBroker. */
export interface BrokerOptions<E> {
  /** Where topic subscriptions come from. */
  upstream: UpstreamSource<E>;
  /** Encode one event of `topic` into the bytes every subscriber of that topic gets (once per event per topic). */
  encode(topic: string, event: E): Uint8Array;
  /** Events a subscriber may have pending before it is reaped as slow (power of two). Default 1024. */
  capacity?: number;
  /** How long an unused upstream subscription lingers before release, ms. Default 2000. */
  lingerMs?: number;
  /**
   * Topics followed at once (each one upstream subscription): a subscribe naming a topic past it first makes room by
   * releasing lingering ones, then fails RESOURCE_EXHAUSTED. Default MAX_BROKER_TOPICS.
   */
  maxTopics?: number;
  /** Period of the stuck-subscriber sweep, ms. Default 5000. */
  sweepIntervalMs?: number;
  /** Mint subscription ids. Default crypto.randomUUID. */
  newId?: () => string;
  /** Metrics hooks. */
  observer?: BrokerObserver;
  /** Tracing on: the fan-out record of one event; absent off (nothing is made per event). */
  traceFanout?(topic: string, event: E): FanoutTrace;
  /** Called when encoding an event (the event is dropped) or closing an upstream fails: for logging. */
  onError?(what: "encode" | "upstream-close", topic: string, error: unknown): void;
}
