import type uws from "uWebSockets.js";
import type { Broker } from "../broker/index.js";
import type { Authenticator } from "../ops/auth.js";
import type { GatewayContext } from "../ops/context.js";
import type { HealthEntry } from "../observe/health.js";
import { createDeliveryLatency, type DeliveryLatency } from "../observe/delivery-latency.js";
import { subscribeTracer, type PubsubOps } from "../ops/pubsub.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { errorBody, json, type Route } from "../http/router.js";
import { createOriginPolicy, createTokenIssuer } from "./access.js";
import { brokerUpstream } from "./broker-upstream.js";
import { createWebHub, type HubUpstream, type WebHub } from "./hub.js";
import { mountSse, type SseFront } from "./sse.js";
import { mountWebSocket, type WsFront } from "./ws.js";
import type { WebDeps, WebMetrics } from "./web-deps.js";

/** Events per web subscriber before it is closed `slow` (docs/contract.md "Limits": subscriber buffer, as for Subscribe). */
export const WEB_SUBSCRIBER_EVENTS = 1024;

/** The web pub/sub side of the pub/sub facility: WebSocket and SSE on the uWS app, browser tokens, history. */
export interface WebPubsub {
  /** `POST /v1/pubsub/tokens`. */
  routes: Route[];
  /** Mount the WebSocket and SSE routes on the uWS app (before it listens). */
  mount(app: uws.TemplatedApp): void;
  health(): Record<string, HealthEntry>;
  /** End every web stream with reason shutdown. */
  close(): void;
  /** The hub (on the main thread, the one uWS worker threads attach to). */
  readonly hub: WebHub;
  /** Open WebSocket and SSE subscribers. */
  resources(): Record<string, number>;
}

/**
 * Create the web pub/sub side over the shared broker (main thread) or, on a uWS worker thread, over the main hub
 * (`source` is then that thread's upstream: threads/thread-upstream.ts), and the publish operation. The hub is the same
 * either way (hub.ts). `latency`: the delivery latency histogram when the caller made it already (the main thread's
 * pub/sub facility, whose gRPC outlets record in it too); else it is made here on `ctx.metrics`.
 */
export function createWebPubsub(ctx: GatewayContext, source: Broker | HubUpstream, ops: PubsubOps, auth: Authenticator, latency?: DeliveryLatency): WebPubsub {
  const o = ctx.options;
  const m = ctx.metrics;
  const metrics: WebMetrics = {
    subscribers: m.gauge("platform_pubsub_web_subscribers", "Open web pub/sub subscribers, by transport (websocket, sse)", ["transport"]),
    deliveries: m.counter("platform_pubsub_web_deliveries_total", "Event deliveries to web subscribers, by transport (one event to N subscribers counts N)", ["transport"]),
    reaped: m.counter(
      "platform_pubsub_web_reaped_total",
      "Web subscribers ended by the gateway, by transport and reason: slow (past the 1024-event bound), token-expired, upstream-failed, shutdown",
      ["transport", "reason"],
    ),
    refused: m.counter("platform_pubsub_web_refused_total", "Web subscribe requests refused before streaming, by transport and status code name", ["transport", "code"]),
    latency: latency ?? createDeliveryLatency(m, ctx.tracer?.on === true),
  };
  const historyGauge = m.gauge("platform_pubsub_history_events", "Events held in the per-topic resume histories (bounded by count and age per topic)", []);
  const onDeliver = (transport: string, n: number): void => metrics.deliveries.inc({ transport }, n);
  const onThread = "follow" in source;
  const hub = createWebHub({
    upstream: onThread ? source : brokerUpstream(source, ctx.logger, { positions: ctx.runtime.pubsub.positions, marks: ctx.runtime.kind === "dapr" }),
    historyEvents: o.pubsubHistoryEvents,
    historyAgeMs: o.pubsubHistoryAgeMs,
    onDeliver,
    // A thread's history mirrors the main hub's, which the main thread reports (/metrics sums the threads' gauges).
    ...(onThread ? {} : { onHistory: (n: number) => historyGauge.set({}, n) }),
  });
  if (!o.tokenSecret) ctx.logger.warn({}, "no --token-secret (GATEWAY_TOKEN_SECRET): browser tokens are signed with a random per-process secret and die with the process");
  const tokens = createTokenIssuer(o.tokenSecret);
  const traceSubscribe = subscribeTracer(ctx.tracer);
  const deps: WebDeps = {
    hub,
    ...(traceSubscribe ? { traceSubscribe } : {}),
    auth,
    tokens,
    origins: createOriginPolicy(o.corsOrigins),
    logger: ctx.logger,
    metrics,
    boundBytes: WEB_SUBSCRIBER_EVENTS * o.pubsubEventBytes,
    boundEvents: WEB_SUBSCRIBER_EVENTS,
    maxFrameBytes: o.maxBodyBytes,
    idleTimeoutSeconds: 120,
    isClosing: ctx.isClosing,
    // Each uWS thread (the main thread with one) takes its share; the kernel spreads connections evenly over them.
    connections: { open: 0, max: Math.ceil(o.webMaxConnections / Math.max(1, o.threads)), loggedAt: 0 },
  };
  // One pair per uWS app: a TLS certificate reload mounts the routes on a new app while the old one finishes its
  // connections (rest/router.ts), and the hub fans out to each.
  const fronts: Array<{ ws: WsFront; sse: SseFront }> = [];
  const count = (pick: (f: { ws: WsFront; sse: SseFront }) => number): number => fronts.reduce((n, f) => n + pick(f), 0);
  return {
    hub,
    routes: [
      {
        method: "POST",
        path: "/v1/pubsub/tokens",
        handler: async (req) => json(tokens.issue(req.json())),
      },
      {
        // A plain GET (no Upgrade header) reaches the REST table: say what the route wants.
        method: "GET",
        path: "/v1/pubsub/ws",
        auth: false,
        handler: async () => ({
          status: 426,
          headers: { upgrade: "websocket" },
          body: errorBody(new GatewayError(Code.FAILED_PRECONDITION, "GET /v1/pubsub/ws is a WebSocket endpoint: send a WebSocket upgrade request")),
        }),
      },
    ],
    mount(app) {
      const f = { ws: mountWebSocket(app, deps, ops), sse: mountSse(app, deps) };
      fronts.push(f);
      hub.addFanout("websocket", f.ws.fanout);
      hub.addFanout("sse", f.sse.fanout);
    },
    health() {
      const h = hub.stats();
      return {
        "web-pubsub": {
          status: "Healthy",
          description: `${count((f) => f.ws.size)} WebSocket and ${count((f) => f.sse.size)} SSE subscribers on ${h.topics} topics, ${h.history} events in resume history`,
        },
      };
    },
    resources() {
      return { "pubsub.websockets": count((f) => f.ws.size), "pubsub.sse": count((f) => f.sse.size) };
    },
    close() {
      for (const f of fronts) {
        f.ws.closeAll();
        f.sse.closeAll();
      }
      hub.close();
    },
  };
}
