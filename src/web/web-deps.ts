import { STATUS_CODES } from "node:http";
import type uws from "uWebSockets.js";
import { Code, httpStatusOf } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { Authenticator } from "../ops/auth.js";
import type { Logger } from "../observe/logger.js";
import type { CounterMetric, GaugeMetric } from "../observe/metrics.js";
import type { DeliveryLatency } from "../observe/delivery-latency.js";
import { errorBody } from "../http/router.js";
import type { OriginPolicy, TokenIssuer } from "./access.js";
import type { WebHub } from "./hub.js";
import type { TraceIncoming, TraceSpan } from "../observe/span.js";

/** The web pub/sub metrics, labelled by transport ("websocket", "sse"). */
export interface WebMetrics {
  subscribers: GaugeMetric<"transport">;
  deliveries: CounterMetric<"transport">;
  reaped: CounterMetric<"transport" | "reason">;
  refused: CounterMetric<"transport" | "code">;
  /** Delivery latency: each outlet records it once per event, when it has written the event to all its subscribers. */
  latency: DeliveryLatency;
}

/** What the WebSocket and SSE fronts share. */
export interface WebDeps {
  hub: WebHub;
  /** Tracing on: the span of one subscription's start (ops/pubsub.ts subscribeTracer); absent off. */
  traceSubscribe?: (trace: TraceIncoming, topics: number) => TraceSpan;
  auth: Authenticator;
  tokens: TokenIssuer;
  origins: OriginPolicy;
  logger: Logger;
  metrics: WebMetrics;
  /** Per-subscriber bound in bytes of queued frames (1024 events of the nominal event size). */
  boundBytes: number;
  /** Per-subscriber bound in events (SSE counts events). */
  boundEvents: number;
  /** Largest WebSocket frame a client may send (1009 past it). */
  maxFrameBytes: number;
  idleTimeoutSeconds: number;
  isClosing(): boolean;
  /** Web subscribers (WebSocket and SSE) open on this thread, and the most it takes. */
  connections: WebConnections;
}

/**
 * The web subscribers a thread holds and its share of `--web-max-connections`. The bound keeps the process below its
 * open-files limit: past that limit uSockets cannot accept, its listening socket stays readable and the thread spins a
 * core until connections close. A subscriber past the bound is refused 503 at once instead.
 */
export interface WebConnections {
  open: number;
  readonly max: number;
  /** When the last refusal was logged (one warning per 10 s at most). */
  loggedAt: number;
}

/** The refusal of one more web subscriber when the thread holds its most (503 UNAVAILABLE), else undefined. */
export function overConnectionBound(deps: WebDeps, transport: "websocket" | "sse"): GatewayError | undefined {
  const c = deps.connections;
  if (c.open < c.max) return undefined;
  const now = Date.now();
  if (now - c.loggedAt >= 10_000) {
    c.loggedAt = now;
    deps.logger.warn({ transport, open: c.open, max: c.max }, "web subscriber refused: this thread holds its share of --web-max-connections");
  }
  return new GatewayError(Code.UNAVAILABLE, `the gateway holds its most web subscribers (${c.max} on this thread, --web-max-connections); retry later or on another replica`);
}

/** The least uWS's own frame limit (uwsFrameLimit) is, whatever our limit: 16 MiB. */
export const UWS_FRAME_LIMIT_FLOOR_BYTES = 16 * 1024 * 1024;

/**
 * uWS's `maxPayloadLength` for a WebSocket route whose own frame limit is `maxFrameBytes`: twice it, at least 16 MiB.
 * Past its limit uWS closes the TCP connection the moment it reads the frame header (no close frame: the client sees
 * 1006 and, with the rest of the frame unread, usually a reset), and this uWS build has no way to send 1009 instead.
 * Below it uWS buffers the frame whole and the route's message handler answers a frame over `maxFrameBytes` with a
 * 1009 close and a reason. So a frame over our limit gets the documented 1009 up to this size, and what one connection
 * can make the gateway buffer is this size (only while that client is sending that many bytes).
 */
export function uwsFrameLimit(maxFrameBytes: number): number {
  return Math.max(2 * maxFrameBytes, UWS_FRAME_LIMIT_FLOOR_BYTES);
}

/**
 * Answer a refused upgrade or SSE request with the REST error body (never echoing a token or key). A 503 (shutting
 * down, or the subscriber bound reached) also closes the connection: a kept-alive one would hold the descriptor the
 * bound is there to save.
 */
export function refuse(res: uws.HttpResponse, e: unknown, headers: Record<string, string> = {}): void {
  const err = GatewayError.from(e);
  const status = httpStatusOf(err.code);
  res.cork(() => {
    res.writeStatus(`${status} ${STATUS_CODES[status] ?? ""}`);
    res.writeHeader("content-type", "application/json");
    for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
    res.end(JSON.stringify(errorBody(err)), err.code === Code.UNAVAILABLE);
  });
}
