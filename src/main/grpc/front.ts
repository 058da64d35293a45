import * as grpc from "@grpc/grpc-js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { Logger } from "../logger.js";
import type { CounterMetric, Metrics } from "../metrics.js";
import type { ValidatedOptions } from "../options.js";
import { DECOMPRESS_SHAPE, internalsProblem } from "./grpc-js-internals.js";
import { messageTimeoutInterceptor } from "./message-timeout.js";
import { countSessions, guardResetFloods, guardWriteStalls } from "./session-guards.js";
import { installStrictCompressedFlag } from "./strict-decoding.js";

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
function guardMetrics(metrics: Metrics): { rotated: CounterMetric<never>; stalled: CounterMetric<never> } {
  return {
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
