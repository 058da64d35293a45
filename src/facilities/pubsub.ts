import { createBroker, type BrokerObserver } from "../broker/index.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import { gatewayPackageDefinition } from "../shared/protos.js";
import type * as grpc from "@grpc/grpc-js";
import type { GatewayContext } from "../ops/context.js";
import type { Facility } from "./facility.js";
import { createPubsubGrpc, GRPC_MESSAGE_PREFIX, LAST_EVENT_ID_METADATA, POSITION_ATTRIBUTE, type PositionFeed } from "../grpc/pubsub.js";
import type { Metrics } from "../observe/metrics.js";
import { createDeliveryLatency, type DeliveryLatency } from "../observe/delivery-latency.js";
import { createPubsubOps, fanoutTracer, subscribeTracer, type PubsubOps } from "../ops/pubsub.js";
import type { WebEvent, WebHub } from "../web/hub.js";
import type { Logger } from "../observe/logger.js";
import { declarativeSubscriptionsRoute, pubsubRoutes } from "../rest/pubsub.js";
import { createAuthenticator } from "../ops/auth.js";
import { createWebPubsub } from "../web/index.js";

/** Capacity of each subscriber's ring (docs/contract.md "Limits": subscriber buffer). */
export const SUBSCRIBER_BUFFER = 1024;

/**
 * Encode `{topic, cloudevent}` once per event as a framed gRPC message: the 5-byte prefix (uncompressed flag, 32-bit
 * big-endian length) and the SubscribeResponse bytes, which the Subscribe streams write as is (so the serializer runs
 * once per event, not once per subscriber). proto-loader's own serializer of Subscribe: of the two libraries the
 * gateway runs it was the faster here (`bench/micro/encode.ts` against @bufbuild `toBinary`, docs/pubsub.md).
 */
function subscribeResponseEncoder(): (topic: string, event: CloudEvent) => Buffer {
  const serialize = (gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as grpc.ServiceDefinition)["Subscribe"]!.responseSerialize;
  return (topic, cloudevent) => {
    const message = serialize({ topic, cloudevent });
    const framed = Buffer.allocUnsafe(GRPC_MESSAGE_PREFIX + message.length);
    framed[0] = 0;
    framed.writeUInt32BE(message.length, 1);
    framed.set(message, GRPC_MESSAGE_PREFIX);
    return framed;
  };
}

/**
 * gRPC Subscribe with positions over the web hub (its histories, backfill and positions): each event framed once, on
 * first use, as a SubscribeResponse whose CloudEvent carries its position as the `gwposition` extension; the frame
 * is kept with the event (history replays reuse it) and shared by every positioned stream.
 */
function hubPositionFeed(hub: WebHub, encode: (topic: string, event: CloudEvent) => Buffer, logger: Logger): { feed: PositionFeed; frameOf(e: WebEvent): Buffer | undefined } {
  const frames = new WeakMap<WebEvent, Buffer>();
  const frameOf = (e: WebEvent): Buffer | undefined => {
    const cached = frames.get(e);
    if (cached) return cached;
    // Events on the main thread carry the CloudEvent as received (broker-upstream.ts).
    if (!e.event) return undefined;
    let framed: Buffer;
    try {
      framed = encode(e.topic, { ...e.event, attributes: { ...e.event.attributes, [POSITION_ATTRIBUTE]: { ce_string: e.position } } });
    } catch (err) {
      logger.error({ topic: e.topic, err }, "pub/sub event could not be encoded and was dropped");
      return undefined;
    }
    frames.set(e, framed);
    return framed;
  };
  const feed: PositionFeed = {
    checkPosition: (field, text) => void hub.parsePosition(field, text),
    async acquire(topics, signal, since) {
      const position = since === undefined ? undefined : hub.parsePosition(LAST_EVENT_ID_METADATA, since);
      const backfill = await hub.acquire(topics, signal, position);
      return {
        begin() {
          const resume = position ? hub.resume(topics, position, backfill) : undefined;
          const replay = resume?.recovered ? resume.events.map(frameOf).filter((f): f is Buffer => f !== undefined) : [];
          return { position: hub.position(), recovered: resume?.recovered, frames: replay };
        },
      };
    },
    release(topics) {
      for (const t of topics) hub.release(t);
    },
  };
  return { feed, frameOf };
}

/** The broker's metrics on ctx.metrics; its own subscribers (plain gRPC Subscribe streams) record in `latency`. */
function brokerObserver(metrics: Metrics, latency: DeliveryLatency): BrokerObserver {
  const topics = metrics.gauge("platform_pubsub_topics", "Topics in the broker's table (with local subscribers, opening, or lingering before release)", []);
  const subscribers = metrics.gauge("platform_pubsub_subscribers", "Live Subscribe streams attached to the broker", []);
  const upstreams = metrics.gauge("platform_pubsub_upstream_subscriptions", "Open runtime (sidecar) subscriptions: one per topic per process", []);
  const received = metrics.counter("platform_pubsub_events_received_total", "Events received from the runtime on subscribed topics", []);
  const delivered = metrics.counter("platform_pubsub_events_delivered_total", "Event deliveries to subscribers (one event to N subscribers counts N)", []);
  const reaped = metrics.counter(
    "platform_pubsub_subscribers_reaped_total",
    "Subscribe streams ended by the broker, by reason: slow (over 1024 pending), stuck (no progress for a sweep interval), upstream-failed, unsubscribed, shutdown",
    ["reason"],
  );
  const maxPending = metrics.gauge("platform_pubsub_ring_occupancy_max", "Largest number of events pending in one subscriber's ring at the last sweep (reaped past 1024)", []);
  const totalPending = metrics.gauge("platform_pubsub_ring_pending_events", "Events pending in all subscriber rings at the last sweep", []);
  return {
    counts(t, s, u) {
      topics.set({}, t);
      subscribers.set({}, s);
      upstreams.set({}, u);
    },
    fannedOut(_topic, n, receivedAt, exemplar) {
      received.inc();
      if (n === 0) return;
      delivered.inc({}, n);
      latency.observe("grpc", receivedAt, exemplar);
    },
    ended: (reason) => reaped.inc({ reason }),
    occupancy(max, total) {
      maxPending.set({}, max);
      totalPending.set({}, total);
    },
  };
}

/** The pub/sub facility, with what uWS worker threads reach on the main thread. */
export interface PubsubFacility extends Facility {
  /** The web hub the worker threads' hubs attach to. */
  readonly webHub: WebHub;
  /** Publish, for a worker thread's WebSocket publish. */
  readonly ops: PubsubOps;
}

/**
 * Pub/sub facility: the broker over the runtime's pub/sub port, `io.cloudevents.v1.Pubsub` over gRPC and
 * `POST /v1/pubsub/{topic}` over REST. `close()` ends every open stream with UNAVAILABLE "gateway is shutting down";
 * `destroy()` resets whatever is still open.
 */
export function createPubsubFacility(ctx: GatewayContext): PubsubFacility {
  const port = ctx.runtime.pubsub;
  const encode = subscribeResponseEncoder();
  // One span per event as the broker receives it (tracing on): every outlet, the worker threads included, counts in it.
  const traceFanout = fanoutTracer(ctx.tracer);
  // Every outlet of this thread records in it: the broker's, the web transports' and the positioned gRPC streams'.
  const latency = createDeliveryLatency(ctx.metrics, ctx.tracer?.on === true);
  const broker = createBroker<CloudEvent>({
    upstream: {
      // Looked up at call time, so a runtime whose port is wrapped later (tests) is honoured.
      subscribe: (topic, onEvent, onError) => port.subscribe(topic, { onEvent, onError }),
    },
    encode,
    capacity: SUBSCRIBER_BUFFER,
    lingerMs: ctx.options.subscriptionLingerMs,
    sweepIntervalMs: ctx.options.sweepIntervalMs,
    observer: brokerObserver(ctx.metrics, latency),
    ...(traceFanout ? { traceFanout } : {}),
    onError: (what, topic, err) =>
      ctx.logger.error({ topic, err }, what === "encode" ? "pub/sub event could not be encoded and was dropped" : "releasing the runtime subscription failed"),
  });
  const ops = createPubsubOps(ctx, broker);
  const web = createWebPubsub(ctx, broker, ops, createAuthenticator(ctx.options.apiKeys), latency);
  const positions = hubPositionFeed(web.hub, encode, ctx.logger);
  const traceSubscribe = subscribeTracer(ctx.tracer);
  const grpcSide = createPubsubGrpc({
    ops,
    broker,
    logger: ctx.logger,
    reapGraceMs: ctx.options.sweepIntervalMs,
    sweepIntervalMs: ctx.options.sweepIntervalMs,
    feed: positions.feed,
    ...(traceSubscribe ? { traceSubscribe } : {}),
  });
  web.hub.addFanout("grpc", {
    deliver: (e) => {
      const n = grpcSide.outlet.deliver(e.topic, () => positions.frameOf(e));
      if (n > 0) latency.observe("grpc", e.receivedAt, e.exemplar);
      return n;
    },
    endTopic: (topic, reason) => grpcSide.outlet.endTopic(topic, reason),
  });
  return {
    webHub: web.hub,
    ops,
    grpc: { "io.cloudevents.v1.Pubsub": grpcSide.impl },
    routes: [...pubsubRoutes(ops), ...web.routes, declarativeSubscriptionsRoute(ctx.options.appApiToken)],
    appHooks: [(app) => web.mount(app)],
    async start() {
      broker.start();
    },
    async health() {
      const s = broker.stats();
      return {
        broker: { status: "Healthy", description: `${s.subscribers} subscribers on ${s.topics} topics, ${s.upstreams} runtime subscriptions` },
        ...web.health(),
      };
    },
    async close() {
      grpcSide.streams.endAll();
      web.close();
      await broker.close();
    },
    resources() {
      const s = broker.stats();
      return { "pubsub.subscribers": s.subscribers, "pubsub.upstreams": s.upstreams, "pubsub.grpc-streams": grpcSide.streams.size, ...web.resources() };
    },
    destroy() {
      web.close();
      void broker.close();
      grpcSide.streams.dropAll();
    },
  };
}
