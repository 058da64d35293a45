import type { Authenticator } from "../ops/auth.js";
import type { Logger } from "../observe/logger.js";
import type { Metrics } from "../observe/metrics.js";
import type { ValidatedOptions } from "../config/options.js";
import { listenSocketsPerApp, type AppHook, type DynamicRoutes, type RestServerDeps } from "./router.js";
import { createOriginPolicy } from "./origin.js";

/** What the gateway's REST server takes besides its options. */
export interface GatewayServerParts {
  auth: Authenticator;
  logger: Logger;
  metrics: Metrics;
  isClosing(): boolean;
  appHooks: readonly AppHook[];
  /** Routes decided at run time (REST transcoding). */
  dynamic?: DynamicRoutes;
}

/**
 * The gateway's REST server settings from its validated options: the same for the main thread serving HTTP alone
 * (`--threads 1`) and for every uWS worker thread, with the request metrics registered on `metrics`.
 */
export function gatewayServerDeps(opts: ValidatedOptions, parts: GatewayServerParts): RestServerDeps {
  const { metrics } = parts;
  return {
    auth: parts.auth,
    logger: parts.logger,
    maxBodyBytes: opts.maxBodyBytes,
    writeStallTimeoutMs: opts.writeStallTimeoutMs,
    maxUnreadReplyBytes: opts.maxUnreadReplyBytes,
    // Every thread's app listens on the port: together they queue --accept-backlog connections.
    listenSockets: listenSocketsPerApp(opts.acceptBacklog, opts.threads),
    isClosing: parts.isClosing,
    ...(opts.tls ? { tls: opts.tls, tlsReloadIntervalMs: opts.tlsReloadIntervalMs } : {}),
    appHooks: parts.appHooks,
    ...(parts.dynamic ? { dynamic: parts.dynamic } : {}),
    // --cors-origin, as on the web fronts; with no API key, loopback Hosts only (DNS rebinding: docs/operations.md "Security").
    origins: createOriginPolicy(opts.corsOrigins, { loopbackOnly: !parts.auth.enabled }),
    requests: metrics.counter("platform_http_requests_total", "REST requests handled, by route pattern, method and HTTP status", ["route", "method", "status"]),
    latency: metrics.histogram("platform_http_request_duration_seconds", "Latency of REST requests in seconds, by route pattern, method and HTTP status", ["route", "method", "status"]),
  };
}
