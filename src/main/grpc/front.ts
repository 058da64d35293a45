import * as grpc from "@grpc/grpc-js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { Logger } from "../logger.js";
import type { CounterMetric, Metrics } from "../metrics.js";
import type { ValidatedOptions } from "../options.js";
import { DECOMPRESS_SHAPE, internalsProblem } from "./grpc-js-internals.js";
import { messageTimeoutInterceptor } from "./message-timeout.js";
import { NativeGrpcServer } from "./native/server.js";
import type { H2ServerSession } from "../../h2/types.js";
import { countSessions, guardResetFloods, guardWriteStalls, NGHTTP2_RESET_BURST, ResetBudget, ROTATED_MESSAGE } from "./session-guards.js";
import { installStrictCompressedFlag } from "./strict-decoding.js";
import { loadTls, logServing, serverTlsOptions, watchTls, type TlsWatch } from "../tls.js";

/**
 * What the gateway's gRPC services are bound to (bindService, the transparent proxy, reflection): the parts of
 * grpc-js's Server they use, which the native server (native/server.ts) offers with the same signatures.
 */
export type GrpcServiceHost = Pick<grpc.Server, "addService" | "register" | "unregister">;

/** The gateway's gRPC endpoint, whichever server implements it (`grpcServer` option). */
export interface GrpcFront {
  readonly services: GrpcServiceHost;
  /** Listen on the options' host and grpcPort and start the connection guards; resolves the bound port. */
  listen(): Promise<number>;
  /** Open client connections. */
  readonly sessions: { readonly size: number };
  /** Refuse new streams (GOAWAY), call `done` once the streams in flight have ended. */
  tryShutdown(done: () => void): void;
  /** End every connection and stream now. Safe to call twice, and before listen(). */
  forceShutdown(): void;
}

/** What a front is made from. */
export interface GrpcFrontDeps {
  options: ValidatedOptions;
  logger: Logger;
  metrics: Metrics;
  /** platform_grpc_requests_total: the message timeout counts its DEADLINE_EXCEEDED here. */
  requests: CounterMetric<"method" | "code">;
}

/** The address grpc-js and net take for host:port (IPv6 literals bracketed for grpc-js). */
function address(host: string, port: number): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
}

function listenFailure(addr: string, err: Error): GatewayError {
  return new GatewayError(Code.UNAVAILABLE, `gRPC server cannot listen on ${addr}: ${err.message}`);
}

/** Guard counters shared by both fronts (the same metric names whichever server runs). */
function guardMetrics(metrics: Metrics): { rotated: CounterMetric<never>; stalled: CounterMetric<never>; refused: CounterMetric<never> } {
  return {
    refused: metrics.counter("platform_grpc_connections_refused_total", "gRPC connections closed at accept because --grpc-max-connections were open (native server)", []),
    rotated: metrics.counter("platform_grpc_connections_rotated_total", "gRPC connections closed gracefully because their client reset streams near the HTTP/2 reset-flood limit", []),
    stalled: metrics.counter("platform_grpc_streams_stalled_total", "gRPC streams reset because their client read none of a reply for the write-stall timeout", []),
  };
}

/** The gRPC endpoint on grpc-js (node:http2), with the gateway's guards around grpc-js's sessions. */
export function grpcJsFront(deps: GrpcFrontDeps): GrpcFront {
  const { options: opts, logger } = deps;
  // channelz stays on for the server: grpc-js (1.14) tracks a server's sessions only in its channelz handler, so with
  // channelz off tryShutdown() never sends GOAWAY to connected clients (close() then always waits the full timeout)
  // and forceShutdown() leaves their sessions and in-flight calls open forever.
  if (!installStrictCompressedFlag()) logger.warn({}, `compressed-flag messages without grpc-encoding are not refused: ${internalsProblem(DECOMPRESS_SHAPE)}`);
  const server = new grpc.Server({
    "grpc.max_receive_message_length": opts.maxBodyBytes,
    "grpc.max_send_message_length": 64 * 1024 * 1024,
    // grpc-js advertises no limit (2^32-1) unless told; each stream holds buffers and a handler.
    "grpc.max_concurrent_streams": opts.grpcMaxConcurrentStreams,
    interceptors: [messageTimeoutInterceptor(opts.grpcMessageTimeoutMs, deps.requests)],
  });
  let sessions: { readonly size: number } = { size: 0 };
  let stopStallGuard = (): void => undefined;
  return {
    services: server,
    async listen() {
      if (opts.tls) throw new GatewayError(Code.FAILED_PRECONDITION, "TLS on the gRPC port is served by --grpc-server native only");
      const addr = address(opts.host, opts.grpcPort);
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(listenFailure(addr, err)) : resolve(bound))),
      );
      const m = guardMetrics(deps.metrics);
      guardResetFloods(server, { logger, rotated: m.rotated });
      sessions = countSessions(server, logger);
      stopStallGuard = guardWriteStalls(server, { logger, stallTimeoutMs: opts.writeStallTimeoutMs, stalled: m.stalled });
      return port;
    },
    get sessions() {
      return sessions;
    },
    tryShutdown: (done) => server.tryShutdown(() => done()),
    forceShutdown() {
      server.forceShutdown();
      stopStallGuard();
    },
  };
}

/** RST_STREAM / GOAWAY code a session is destroyed with when its client's resets use up the whole budget. */
const ENHANCE_YOUR_CALM = 0xb;
const CANCEL = 0x8;

/**
 * The gRPC endpoint on the gateway's native server (native/server.ts), with the same guards as the grpc-js front,
 * built on the server's own hooks instead of grpc-js's private sessions:
 * - resets: the budget the grpc-js front mirrors from nghttp2 (a token bucket of NGHTTP2_RESET_BURST client resets,
 *   refilled NGHTTP2_RESET_RATE a second). At half of it the connection is closed gracefully (GOAWAY NO_ERROR: calls in
 *   flight finish, the client reconnects with a full budget); a client that keeps resetting on the old connection until
 *   the budget is gone has it destroyed (GOAWAY ENHANCE_YOUR_CALM), as nghttp2 would.
 * - write stalls: every stream with buffered reply bytes that have not shrunk for the write-stall timeout is reset.
 */
export function nativeGrpcFront(deps: GrpcFrontDeps): GrpcFront {
  const { options: opts, logger } = deps;
  const m = guardMetrics(deps.metrics);
  const budgets = new WeakMap<H2ServerSession, ResetBudget>();
  const peer = (s: H2ServerSession): string => `${s.remoteAddress}:${s.remotePort}`;
  // The files were checked by validateGatewayOptions; read again here, as they are on every change.
  const tls = opts.tls ? loadTls(opts.tls) : undefined;
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
      onConnectionRefused: () => m.refused.inc({}),
    },
    onMessageTimeout: (path) => deps.requests.inc({ method: path.slice(1), code: "DEADLINE_EXCEEDED" }),
    // A listener or hook that threw: the call ended UNKNOWN; grpc-js would have let it crash the process.
    onError: (err, path) => logger.error({ err, method: path.slice(1) }, "gRPC handler threw"),
    onStreamClose({ session, byClient }) {
      if (!byClient) return;
      let b = budgets.get(session);
      if (!b) budgets.set(session, (b = new ResetBudget()));
      const left = b.take();
      const resets = server.clientResets(session);
      if (left <= 0) {
        logger.warn({ peer: peer(session), resets }, "gRPC connection closed (GOAWAY ENHANCE_YOUR_CALM): its client reset streams past the reset-flood limit; calls in flight on it failed");
        session.destroy(ENHANCE_YOUR_CALM);
      } else if (!b.rotated && b.used >= NGHTTP2_RESET_BURST / 2) {
        b.rotated = true;
        m.rotated.inc({});
        logger.info({ peer: peer(session), resets, budgetLeft: left }, ROTATED_MESSAGE);
        session.close();
      }
    },
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
