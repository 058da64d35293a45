import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { logThrottle, type Logger } from "../observe/logger.js";
import type { CounterMetric, Metrics } from "../observe/metrics.js";
import type { ValidatedOptions } from "../config/options.js";
import { NativeGrpcServer } from "./native/server.js";
import type { H2ServerSession } from "../h2/types.js";
import { h2ErrorName } from "../h2/frames.js";
import { loadTls, logServing, serverTlsOptions, watchTls, type TlsWatch } from "../config/tls.js";

/** What the gateway's gRPC services are bound to (bindService, the transparent proxy, reflection). */
export type GrpcServiceHost = Pick<NativeGrpcServer, "addService" | "register" | "unregister">;

/** The gateway's gRPC endpoint. */
export interface GrpcFront {
  readonly services: GrpcServiceHost;
  /** Listen on the options' host and grpcPort and start the connection guards; resolves the bound port. */
  listen(): Promise<number>;
  /**
   * Serve the same services on a 127.0.0.1 ephemeral port too, before listen(): the gateway's own warm-up calls
   * (src/main/own-warmup.ts). Cleartext only (rejects with --tls). Resolves the port and a function that stops it.
   */
  listenLoopback(): Promise<{ port: number; stop(): void }>;
  /** Open client connections. */
  readonly sessions: { readonly size: number };
  /** Refuse new streams (GOAWAY), call `done` once the streams in flight have ended. */
  tryShutdown(done: () => void): void;
  /** End every connection and stream now. Safe to call twice, and before listen(). */
  forceShutdown(): void;
}

/** What the front is made from. */
export interface GrpcFrontDeps {
  options: ValidatedOptions;
  logger: Logger;
  metrics: Metrics;
  /** platform_grpc_requests_total: the message timeout counts its DEADLINE_EXCEEDED here. */
  requests: CounterMetric<"method" | "code">;
}

/** host:port for messages (IPv6 literals bracketed). */
function address(host: string, port: number): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
}

function listenFailure(addr: string, err: Error): GatewayError {
  return new GatewayError(Code.UNAVAILABLE, `gRPC server cannot listen on ${addr}: ${err.message}`);
}

/** The guards' counters. */
function guardMetrics(metrics: Metrics): { rotated: CounterMetric<never>; stalled: CounterMetric<never>; refused: CounterMetric<never>; connectionErrors: CounterMetric<"code"> } {
  return {
    connectionErrors: metrics.counter(
      "platform_grpc_connection_errors_total",
      "gRPC connections the gateway ended with an HTTP/2 connection error (GOAWAY), by error code: floods, protocol violations, timeouts",
      ["code"],
    ),
    refused: metrics.counter("platform_grpc_connections_refused_total", "gRPC connections closed at accept because --grpc-max-connections were open (native server)", []),
    rotated: metrics.counter("platform_grpc_connections_rotated_total", "gRPC connections closed gracefully because their client reset streams near the HTTP/2 reset-flood limit", []),
    stalled: metrics.counter("platform_grpc_streams_stalled_total", "gRPC streams reset because their client read none of a reply for the write-stall timeout", []),
  };
}

/** RST_STREAM / GOAWAY code a session is destroyed with when its client's resets use up the whole budget. */
const CANCEL = 0x8;

/** Connection errors logged per CONNECTION_ERROR_LOG_MS at most (each is counted); the next line says how many were not. */
const CONNECTION_ERROR_LOG_MS = 10_000;

/** What the gateway logs when the HTTP/2 layer closes a connection gracefully for its client's resets. */
export const ROTATED_MESSAGE = "gRPC connection closed gracefully (GOAWAY NO_ERROR): its client reset streams near the HTTP/2 reset-flood limit; new calls go to a new connection";

/**
 * The gRPC endpoint on the gateway's gRPC server (native/server.ts), with its guards:
 * - resets: the HTTP/2 layer keeps nghttp2's reset budget per connection (src/h2/server-session.ts, RESET_BUDGET),
 *   closing it gracefully at half and with ENHANCE_YOUR_CALM when it is spent; here each is counted and logged.
 * - write stalls: every stream with buffered reply bytes that have not shrunk for the write-stall timeout is reset.
 */
export function createGrpcFront(deps: GrpcFrontDeps): GrpcFront {
  const { options: opts, logger } = deps;
  const m = guardMetrics(deps.metrics);
  const peer = (s: H2ServerSession): string => `${s.remoteAddress}:${s.remotePort}`;
  // The files were checked by validateGatewayOptions; read again here, as they are on every change.
  const tls = opts.tls ? loadTls(opts.tls) : undefined;
  // A client can earn a connection error per connection it opens: each is counted, at most one a period is logged.
  const errorLog = logThrottle(CONNECTION_ERROR_LOG_MS);
  let tlsWatch: TlsWatch | undefined;
  const server = new NativeGrpcServer({
    ...(tls ? { tls: serverTlsOptions(tls) } : {}),
    maxReceiveMessageLength: opts.maxBodyBytes,
    maxSendMessageLength: 64 * 1024 * 1024,
    maxConcurrentStreams: opts.grpcMaxConcurrentStreams,
    messageTimeoutMs: opts.grpcMessageTimeoutMs,
    connections: {
      idleTimeoutMs: opts.grpcIdleTimeoutMs,
      maxConnectionAgeMs: opts.grpcMaxConnectionAgeMs,
      maxConnections: opts.grpcMaxConnections,
      acceptBacklog: opts.acceptBacklog,
      onConnectionRefused: () => m.refused.inc({}),
      onResetBudget(session, what) {
        const resets = server.clientResets(session);
        if (what === "spent") {
          logger.warn({ peer: peer(session), resets }, "gRPC connection closed (GOAWAY ENHANCE_YOUR_CALM): its client reset streams past the reset-flood limit; calls in flight on it failed");
        } else {
          m.rotated.inc({});
          logger.info({ peer: peer(session), resets }, ROTATED_MESSAGE);
        }
      },
      onConnectionError(session, code, why) {
        const name = h2ErrorName(code);
        m.connectionErrors.inc({ code: name });
        const turn = errorLog.take();
        if (turn === undefined) return;
        logger.warn(
          { peer: peer(session), code: name, why: why.slice(0, 200), ...(turn.notLogged > 0 ? { notLogged: turn.notLogged } : {}) },
          "gRPC connection ended by the gateway with an HTTP/2 connection error (GOAWAY); calls in flight on it failed",
        );
      },
    },
    onMessageTimeout: (path) => deps.requests.inc({ method: path.slice(1), code: "DEADLINE_EXCEEDED" }),
    // A handler or hook that threw something other than a GatewayError (a bug): the call ended UNKNOWN.
    onError: (err, path) => logger.error({ err, method: path.slice(1) }, "gRPC handler threw"),
  });
  const watched = new WeakMap<object, { size: number; since: number }>();
  let sweep: ReturnType<typeof setInterval> | undefined;
  return {
    services: server,
    async listen() {
      const port = await server.listen(opts.host, opts.grpcPort).catch((e: Error) => {
        throw listenFailure(address(opts.host, opts.grpcPort), e);
      });
      sweep = setInterval(() => {
        const now = performance.now();
        for (const stream of server.openStreams) {
          const size = stream.bufferedBytes;
          const w = watched.get(stream);
          if (!w || size === 0 || size < w.size) {
            // New, empty or draining: the client reads.
            watched.set(stream, { size, since: now });
            continue;
          }
          w.size = size;
          if (now - w.since < opts.writeStallTimeoutMs) continue;
          watched.delete(stream);
          m.stalled.inc({});
          logger.warn({ bufferedBytes: size, stalledMs: Math.round(now - w.since) }, "gRPC stream reset: its client read none of the reply for the write-stall timeout");
          stream.reset(CANCEL);
        }
      }, Math.min(1000, Math.max(50, opts.writeStallTimeoutMs / 4)));
      sweep.unref();
      if (tls) {
        logServing(logger.child({ port: "grpc" }), tls, "gRPC port serves TLS");
        tlsWatch = watchTls(tls, (next) => server.setSecureContext(serverTlsOptions(next)), logger.child({ port: "grpc" }), opts.tlsReloadIntervalMs);
      }
      return port;
    },
    listenLoopback: () => server.listenLoopback(),
    sessions: {
      get size() {
        return server.sessionCount;
      },
    },
    tryShutdown: (done) => {
      tlsWatch?.stop();
      server.tryShutdown(() => done());
    },
    forceShutdown() {
      server.forceShutdown();
      clearInterval(sweep);
      tlsWatch?.stop();
    },
  };
}
