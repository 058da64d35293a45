import { STATUS_CODES } from "node:http";
import type uws from "uWebSockets.js";
import { httpStatusOf } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { Authenticator } from "../auth.js";
import type { Logger } from "../logger.js";
import type { CounterMetric, GaugeMetric } from "../metrics.js";
import { errorBody } from "../rest/router.js";
import type { OriginPolicy, TokenIssuer } from "./access.js";
import type { WebHub } from "./hub.js";

/** The web pub/sub metrics, labelled by transport ("websocket", "sse"). */
export interface WebMetrics {
  subscribers: GaugeMetric<"transport">;
  deliveries: CounterMetric<"transport">;
  reaped: CounterMetric<"transport" | "reason">;
  refused: CounterMetric<"transport" | "code">;
}

/** What the WebSocket and SSE fronts share. */
export interface WebDeps {
  hub: WebHub;
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
}

/** Answer a refused upgrade or SSE request with the REST error body (never echoing a token or key). */
export function refuse(res: uws.HttpResponse, e: unknown, headers: Record<string, string> = {}): void {
  const err = GatewayError.from(e);
  const status = httpStatusOf(err.code);
  res.cork(() => {
    res.writeStatus(`${status} ${STATUS_CODES[status] ?? ""}`);
    res.writeHeader("content-type", "application/json");
    for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
    res.end(JSON.stringify(errorBody(err)));
  });
}
