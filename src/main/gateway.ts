import { randomBytes } from "node:crypto";
import type * as grpc from "@grpc/grpc-js";
import { GATEWAY_SERVICES, gatewayFileDescriptors, gatewayPackageDefinition } from "../shared/protos.js";
import { createRuntime, type Runtime } from "../runtime/index.js";
import { createAuthenticator } from "../ops/auth.js";
import type { GatewayContext } from "../ops/context.js";
import type { Facility } from "../facilities/facility.js";
import type { HealthEntry } from "../observe/health.js";
import { createDispatchFacility } from "../facilities/dispatch.js";
import { createWorkerSlots, slotsHeld } from "../workers/worker-slots.js";
import { configGrpc } from "../grpc/config.js";
import { addReflectionService } from "../grpc/reflection-service.js";
import { createGrpcFront, type GrpcFront } from "../grpc/front.js";
import { admit, bindService, type BindDeps } from "../grpc/server.js";
import { consoleRoutes } from "../console/index.js";
import { runHealthChecks } from "../observe/health.js";
import { createLogger, type Logger } from "../observe/logger.js";
import { createMetrics, type Metrics } from "../observe/metrics.js";
import { OPENMETRICS_CONTENT_TYPE, openMetricsText, wantsOpenMetrics } from "../observe/openmetrics.js";
import { createConfigOps } from "../ops/config.js";
import { loadRegistry, tracerOptions, validateGatewayOptions, type GatewayOptions } from "../config/options.js";
import { createTracer } from "../observe/tracing.js";
import { settleWithin } from "../shared/timers.js";
import { createPubsubFacility } from "../facilities/pubsub.js";
import { configRoutes } from "../rest/config.js";
import { isNativeUws, json, startRestServer, type RestServer, type Route } from "../http/router.js";
import { gatewayServerDeps } from "../http/server-deps.js";
import { createSidecarCallbackFacility } from "../facilities/sidecar-callback.js";
import { createStateFacility } from "../facilities/state.js";
import { createTriggerFacility } from "../facilities/trigger.js";
import { startUwsThreads, type UwsThreads } from "../threads/uws-threads.js";
import { startWarmupBackends, warmUp, type WarmupBackends } from "./warmup.js";
import { warmUpOwnPorts } from "./own-warmup.js";

/** A running gateway. */
export interface Gateway {
  /** Bound gRPC port (the real one when 0 was asked). */
  readonly grpcPort: number;
  /** Bound REST port. */
  readonly httpPort: number;
  readonly context: GatewayContext;
  /**
   * Every route served: gRPC full method names (the gateway's services, the sidecar callbacks, reflection; backend
   * methods reached through the transparent proxy are the one entry PROXIED_METHODS) and REST/WebSocket/SSE routes
   * as "METHOD /path". Each has an entry in the route-by-outcome table (src/ops/outcomes.ts, docs/errors.md).
   */
  readonly routes: { readonly grpc: readonly string[]; readonly http: readonly string[] };
  /**
   * Graceful shutdown: refuse new work (UNAVAILABLE / 503), end open streams with a status, let in-flight calls
   * finish within `shutdownTimeoutMs`, then stop. Safe to call twice (returns the same promise).
   */
  close(): Promise<void>;
  /**
   * Immediate shutdown of whatever is left. Safe to call twice. The process may exit right after it: uWS worker
   * threads still closing are made to close their sockets in the process's `exit` handler (docs/threads.md).
   */
  destroy(): void;
  /** The uWS worker threads serving HTTP (`threads` > 1); undefined when the main thread serves it. */
  readonly threads: UwsThreads | undefined;
  /**
   * Live resources by name (gRPC connections and calls in flight, REST requests in flight, each facility's
   * subscribers and open streams): read-only counters, every one zero once close() has resolved.
   */
  resources(): Record<string, number>;
}

/** Replaceable parts, for tests and embedding. */
export interface GatewayOverrides {
  /** Use this runtime instead of creating the one `sidecar` names. */
  runtime?: Runtime;
  /** Bound on web events posted to one uWS worker thread and not yet handled there (tests make it small). */
  threadEventBacklog?: number;
  /** With threads: offload gRPC invokes arriving while at least this many are in flight, whatever `grpcInvokeOffload` says (tests use 0: every call). */
  invokeOffloadMinInflight?: number;
}

/** The gRPC server reflection methods the gateway serves (v1 and v1alpha). */
export const REFLECTION_METHODS = ["grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"] as const;
/** Stands for every backend method the transparent proxy serves under its own name (Gateway.routes). */
export const PROXIED_METHODS = "<backend service>/<method>";

export { GATEWAY_SERVICES };

/**
 * How long the warm-up through the gateway's own ports waits for the backends' first schemas (a backend that is down
 * does not hold the start longer).
 */
const FIRST_SCHEMAS_MS = 1000;

/** Time close() still gives the runtime and the OTLP flush when in-flight work used up the shutdown timeout. */
const RELEASE_GRACE_MS = 1000;

/** A URL without its user info, query and fragment. */
function endpointForLog(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

/** Start a gateway: load config, create the runtime, start both servers. Rejects with a GatewayError on bad options. */
export async function createGateway(options: GatewayOptions, overrides: GatewayOverrides = {}): Promise<Gateway> {
  const opts = validateGatewayOptions(options);
  const logger: Logger = createLogger(opts.logLevel, opts.logDestination);
  if (!isNativeUws()) {
    logger.error({}, "uWebSockets.js native binary did not load: REST runs on the slow JS fallback; do not benchmark this process");
  }
  if (opts.warmupEvents > 0 || opts.warmupCalls > 0) {
    try {
      logger.info(await warmUp(opts, createGateway), "warmed up");
    } catch (e) {
      logger.warn({ err: (e as Error).message }, "warm-up failed: starting cold");
    }
  }
  const services = await loadRegistry(opts);
  const metrics: Metrics = createMetrics({
    ...(opts.otlpEndpoint ? { otlpEndpoint: opts.otlpEndpoint } : {}),
    otlpIntervalMs: opts.otlpIntervalMs,
    serviceName: opts.otlpServiceName,
  });
  const tracer = createTracer({ ...tracerOptions(opts), logger });
  // The endpoint's origin and path only: a URL may carry a credential.
  if (tracer.on) logger.info({ endpoint: endpointForLog(opts.otlpTracesEndpoint!), protocol: opts.otlpTracesProtocol, sampler: opts.traceSampler, ratio: opts.traceSamplerArg }, "exporting traces over OTLP/HTTP");
  const runtime =
    overrides.runtime ??
    (await createRuntime(opts.sidecar, {
      pubsubName: services.pubsubName,
      logger,
      host: opts.daprHost,
      grpcPort: opts.daprGrpcPort,
      ...(opts.daprApiToken ? { apiToken: opts.daprApiToken } : {}),
      queryIndexes: new Map(services.all.flatMap((s) => (s.state?.queryIndexName ? [[s.state.storeName, s.state.queryIndexName] as const] : []))),
      redisUrl: opts.redisUrl,
      streamMaxLen: opts.redisStreamMaxLen,
      jobLeaseMs: opts.redisJobLeaseMs,
    }));
  let closing = false;
  const ctx: GatewayContext = { options: opts, services, runtime, logger, metrics, tracer, isClosing: () => closing };
  if (opts.apiKeys.length === 0) logger.warn({ host: opts.host }, "no API key configured: every caller is accepted (loopback host only)");
  if (opts.forwardCredentialHeaders.length > 0) {
    logger.warn({ headers: opts.forwardCredentialHeaders }, "OVERRIDE: forwarding headers that look like credentials to backends (--forward-credential-header)");
  }
  if (opts.sidecar === "dapr" && !opts.appApiToken) {
    logger.warn({ host: opts.host }, "no APP_API_TOKEN configured: Dapr job callbacks on the gRPC port accept any caller (loopback host only)");
  }

  const configOps = createConfigOps(services);
  const pubsub = createPubsubFacility(ctx);
  /** The uWS worker threads once started (`threads` > 1); gRPC invokes may run on them from then on. */
  let threads: UwsThreads | undefined;
  /** gRPC invokes arriving while this many are in flight run on the threads (`grpcInvokeOffload`); undefined: none. */
  const offloadMin = opts.threads < 2 ? undefined : (overrides.invokeOffloadMinInflight ?? (opts.grpcInvokeOffload > 0 ? opts.grpcInvokeOffload : undefined));
  // One bound on conversion-pool workers for the process: this thread's pool and every uWS thread's share it.
  const slots = createWorkerSlots(opts.conversionWorkers, opts.threads > 1 ? opts.threads + 1 : 1);
  const conversionWorkers = metrics.gauge("platform_gateway_conversion_workers", `JSON<->protobuf conversion-pool worker threads alive or starting in the process, every thread's pool together (at most --conversion-workers)`, []);
  /** The gRPC port once it listens: browser RPC reaches the gateway's own services through it. */
  let listenedGrpcPort: number | undefined;
  const dispatch = createDispatchFacility(ctx, { slots, ownGrpcPort: () => listenedGrpcPort }, offloadMin === undefined ? undefined : (wire, signal, timeoutMs) => threads?.invoke(wire, signal, timeoutMs), offloadMin);
  const facilities: Facility[] = [
    { grpc: { "platform.Config": configGrpc(configOps) }, routes: configRoutes(configOps) },
    dispatch,
    createStateFacility(ctx),
    pubsub,
    createTriggerFacility(ctx),
    createSidecarCallbackFacility(ctx),
  ];

  // gRPC: every gateway service (unimplemented methods answer UNIMPLEMENTED), reflection, extra services.
  const auth = createAuthenticator(opts.apiKeys);
  const bindDeps: BindDeps = {
    auth,
    logger,
    isClosing: () => closing,
    requests: metrics.counter("platform_grpc_requests_total", "gRPC calls handled, by full method and status code name", ["method", "code"]),
    latency: metrics.histogram("platform_grpc_request_duration_seconds", "Latency of unary gRPC calls in seconds, by full method and status code name", ["method", "code"]),
    inflight: { count: 0 },
  };
  const front: GrpcFront = createGrpcFront({ options: opts, logger, metrics, requests: bindDeps.requests });
  const server = front.services;
  const pkg = gatewayPackageDefinition();
  const methodsOf = (d: grpc.ServiceDefinition): string[] => Object.values(d).map((m) => m.path.slice(1));
  const grpcRoutes = [
    ...GATEWAY_SERVICES.flatMap((name) => methodsOf(pkg[name] as grpc.ServiceDefinition)),
    ...facilities.flatMap((f) => (f.extraGrpc ?? []).flatMap((e) => methodsOf(e.definition))),
    ...REFLECTION_METHODS,
    PROXIED_METHODS,
  ];
  for (const name of GATEWAY_SERVICES) {
    const impl = Object.assign({}, ...facilities.map((f) => f.grpc?.[name] ?? {}));
    bindService(server, pkg[name] as grpc.ServiceDefinition, impl, bindDeps);
  }
  const noAuth = { ...bindDeps, auth: createAuthenticator([]) };
  for (const f of facilities) for (const extra of f.extraGrpc ?? []) bindService(server, extra.definition, extra.impl, extra.auth === false ? noAuth : bindDeps);
  const reserved = [...GATEWAY_SERVICES, "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];
  for (const f of facilities) f.bindGrpc?.(server, { admit: (md) => admit(bindDeps, md), reserved });
  addReflectionService(server, {
    files: gatewayFileDescriptors(),
    services: [...GATEWAY_SERVICES],
    extra: () => facilities.flatMap((f) => (f.reflection ? [f.reflection()] : [])),
    admit: (md) => admit(bindDeps, md),
  });

  // REST: facility routes plus /health and /metrics (no key needed).
  const healthChecks: Array<() => Promise<Record<string, HealthEntry>>> = [
    async () => {
      try {
        return { sidecar: await runtime.health() };
      } catch (e) {
        return { sidecar: { status: "Unhealthy", description: (e as Error).message } };
      }
    },
    ...facilities.flatMap((f) => (f.health ? [() => f.health!()] : [])),
    async () => ({
      "conversion-workers": {
        status: "Healthy",
        description: `${slotsHeld(slots)} of at most ${slots.bound} conversion workers alive in the process (shared by ${slots.shares} pool${slots.shares > 1 ? "s: the main thread's and each uWS thread's" : ""})`,
      },
    }),
  ];
  const routes: Route[] = [
    ...facilities.flatMap((f) => f.routes ?? []),
    ...consoleRoutes(),
    {
      method: "GET",
      path: "/health",
      auth: false,
      handler: async () => {
        const report = await runHealthChecks(threads ? [...healthChecks, () => threads!.health()] : healthChecks);
        report.entries["grpc-channel-pool"] ??= { status: "Healthy", description: "no dialable backends registered" };
        return json(report, report.status === "Unhealthy" ? 503 : 200);
      },
    },
    {
      method: "GET",
      path: "/metrics",
      auth: false,
      // With worker threads, their registries summed with this one (each metric's help once). A scraper that accepts
      // OpenMetrics (Prometheus does) gets it, with the exemplars of sampled calls; anyone else the Prometheus text.
      handler: async (req) => {
        // The workers of every thread's pool, read from the slots they share (the threads' own registries have no such gauge).
        conversionWorkers.set({}, slotsHeld(slots));
        if (wantsOpenMetrics(req.headers["accept"])) {
          const raw = threads ? await threads.metrics(true) : openMetricsText(await metrics.registry.getMetricsAsJSON());
          return { raw, contentType: OPENMETRICS_CONTENT_TYPE };
        }
        return { raw: threads ? await threads.metrics() : await metrics.registry.metrics(), contentType: metrics.registry.contentType };
      },
    },
  ];

  // Transcoding rules never shadow these (the threads reserve the same list).
  dispatch.transcoding.reserve(routes);
  let rest: RestServer | undefined;
  let grpcPort: number;
  // The warm-up through the gateway's own ports (docs/warmup.md): its echo backend, open until every server warmed up.
  let echo: WarmupBackends | undefined;
  try {
    await runtime.start();
    // Dispatch first: its backends connect and load their schemas while the gateway warms up through its own ports,
    // so what that loading makes V8 compile (reflection, the schemas' descriptors) is compiled before the first client.
    await dispatch.start?.();
    echo = opts.warmupCalls > 0 && !opts.tls ? await startWarmupBackends(opts).catch((e: Error) => void logger.warn({ err: e.message }, "warm-up backends did not start: starting cold")) : undefined;
    const ownWarmup = async (restPort?: number): Promise<void> => {
      await dispatch.firstSchemas(FIRST_SCHEMAS_MS);
      await warmUpOwnPorts(front, { dispatch, metrics, tracer }, { echoPort: echo!.echoPort!, calls: opts.warmupCalls, apiKeys: opts.apiKeys, logger, ...(restPort !== undefined ? { restPort } : {}) });
    };
    if (opts.threads > 1) {
      if (echo) await ownWarmup();
      grpcPort = await front.listen();
      listenedGrpcPort = grpcPort;
      threads = await startUwsThreads({
        count: opts.threads,
        // Each thread validates these again; what came from the environment or was drawn at random is fixed here,
        // so every thread signs and verifies browser tokens with the same secret.
        // The gRPC port as bound (for browser RPC to the gateway's own services), not the 0 that asked for any.
        options: { ...opts, grpcPort, logDestination: undefined, tokenSecret: opts.tokenSecret ?? randomBytes(32).toString("hex") },
        routes,
        hub: pubsub.webHub,
        pubsub: pubsub.ops,
        metrics,
        logger,
        logSink: opts.logDestination ?? process.stdout,
        conversionSlots: slots,
        schemas: dispatch.schemas,
        ...(overrides.threadEventBacklog !== undefined ? { maxBacklog: overrides.threadEventBacklog } : {}),
        // Each thread warms up through private facilities and then its own REST server (uws-thread.ts) before it listens.
        ...(echo ? { warmup: { echoPort: echo.echoPort!, calls: opts.warmupCalls, ...(echo.tracesEndpoint ? { tracesEndpoint: echo.tracesEndpoint } : {}) } } : {}),
      });
    } else {
      // REST first: its server warms up both fronts on loopback ports before either listens on the gateway's.
      const parts = { auth, logger, metrics, isClosing: () => closing, appHooks: facilities.flatMap((f) => f.appHooks ?? []), dynamic: dispatch.transcoding.routes };
      rest = await startRestServer(opts.host, opts.httpPort, routes, {
        ...gatewayServerDeps(opts, parts),
        ...(echo ? { beforeListen: (w) => ownWarmup(w.port) } : {}),
      });
      grpcPort = await front.listen();
      listenedGrpcPort = grpcPort;
    }
    for (const f of facilities) if (f !== dispatch) await f.start?.();
  } catch (e) {
    front.forceShutdown();
    rest?.stopListening();
    void threads?.destroy();
    for (const f of facilities) f.destroy?.();
    await runtime.close().catch(() => undefined);
    await Promise.all([metrics.close(), tracer.close()]);
    throw e;
  } finally {
    await echo?.close();
  }
  const httpPort = threads ? threads.port : rest!.port;
  logger.info({ grpcPort, httpPort, host: opts.host, tls: opts.tls !== undefined, httpThreads: opts.threads, conversionWorkers: opts.conversionWorkers, sidecar: runtime.kind, pubsubName: services.pubsubName, services: services.all.length }, "gateway listening");

  // The runtime and the metrics exporter are released once, whichever of close() and destroy() gets there first;
  // the runtime first, so what it counts while closing is still flushed.
  let released: Promise<void> | undefined;
  const release = (): Promise<void> =>
    (released ??= (async () => {
      await runtime.close().catch(() => undefined);
      await Promise.all([metrics.close(), tracer.close()]);
    })());

  let destroyed = false;
  const destroy = (): void => {
    if (destroyed) return;
    destroyed = true;
    closing = true;
    rest?.stopListening();
    rest?.closeInflight();
    void threads?.destroy();
    front.forceShutdown();
    for (const f of facilities) f.destroy?.();
    void release();
  };

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      closing = true;
      logger.info({}, "gateway shutting down");
      rest?.stopListening();
      const deadline = Date.now() + opts.shutdownTimeoutMs;
      // Facilities end their streams with a status and finish their work, within the bound; worker threads do the same
      // for theirs and exit (their forwarded calls are still served here meanwhile), with a little past the bound to
      // exit in. Only the threads get that: a facility still waiting at the bound (invoke calls in flight on the gRPC
      // port, ended only by the front's shutdown below) would otherwise hold close() 2.5 s past it.
      await Promise.all([
        settleWithin(threads?.close(Math.max(0, deadline - Date.now())) ?? Promise.resolve(), deadline - Date.now() + 2500),
        settleWithin(Promise.allSettled(facilities.map((f) => f.close?.())), deadline - Date.now()),
      ]);
      // Wait for in-flight unary calls and REST requests, bounded.
      while ((bindDeps.inflight.count > 0 || (rest?.inflight ?? 0) > 0) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          front.forceShutdown();
          resolve();
        }, Math.max(0, deadline - Date.now())).unref();
        front.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      });
      destroy();
      // A runtime or OTLP endpoint that does not answer must not hold the exit past the bound (plus a short grace).
      await settleWithin(release(), Math.max(deadline - Date.now(), RELEASE_GRACE_MS));
      logger.info({}, "gateway stopped");
    })());

  return {
    grpcPort,
    httpPort,
    context: ctx,
    routes: { grpc: grpcRoutes, http: rest?.routes ?? threads?.routes ?? [] },
    close,
    destroy,
    threads,
    resources: () =>
      Object.assign(
        { "grpc.sessions": front.sessions.size, "grpc.inflight": bindDeps.inflight.count, "rest.inflight": rest?.inflight ?? 0 },
        ...facilities.map((f) => f.resources?.() ?? {}),
      ),
  };
}
