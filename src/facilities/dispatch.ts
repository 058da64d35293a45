import * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { settleWithin } from "../shared/timers.js";
import { GatewayError } from "../shared/gateway-error.js";
import { createBackendRegistry } from "../backends/registry.js";
import type { GatewayContext } from "../ops/context.js";
import type { Facility } from "./facility.js";
import { createMetadataFilter } from "../ops/forward-metadata.js";
import { gatewayGrpc } from "../grpc/gateway.js";
import { backendNamed, createDispatchOps, type DispatchOps, type InvokeOffload } from "../ops/dispatch.js";
import { invokeStreamGrpc } from "../grpc/invoke-stream.js";
import { createGrpcProxy } from "../grpc/proxy.js";
import { invokeStreamRoutes } from "../rest/invoke-stream.js";
import { invokeWsHook } from "../web/invoke-ws.js";
import { createOriginPolicy } from "../web/access.js";
import { methodLookup, rpcWebHook, type RpcTarget } from "../rpcweb/hook.js";
import { createOwnServices } from "./own-rpc.js";
import type { InvokeStreamDeps } from "../ops/invoke-stream.js";
import { gatewayRoutes } from "../rest/gateway.js";
import { grpcReflectionRoutes } from "../rest/grpc-reflection.js";
import { openApiRoutes } from "../rest/openapi.js";
import { createOpenApiOps } from "../ops/openapi/serve.js";
import { createConverter } from "../workers/converter.js";
import type { WorkerSlots } from "../workers/worker-slots.js";
import type { SchemaSource } from "../backends/backend.js";
import type { ReflectionResult } from "../backends/reflection-client.js";
import type { BackendSchema } from "../backends/schema.js";
import { createTranscodeTable, type ReservedRoute } from "../ops/transcode/table.js";
import { transcodeRoutes } from "../rest/transcode.js";
import type { DynamicRoutes } from "../http/router.js";

/** The dispatch facility, with its operations for a uWS worker thread's bridge (`dispatch.invoke`). */
export interface DispatchFacility extends Facility {
  /** The operations behind every front (invoke counted for close()). */
  readonly ops: DispatchOps;
  /** Backend schemas between the main thread, which reflects once for the process, and the uWS threads. */
  readonly schemas: {
    /**
     * The main thread's schema of `service`, for a thread's SchemaSource. `fresh`: reflect again first, unless `stale`
     * (the schema the thread missed a method in) is older than the main thread's: then that one answers.
     */
    get(service: string, fresh: boolean, signal?: AbortSignal, stale?: string): Promise<ReflectionResult>;
    /** Told whenever a backend's schema loaded or changed, to push it to the threads. */
    onChange(listener: (service: string, schema: ReflectionResult) => void): void;
    /** On a thread: take the schema the main thread pushed. */
    adopt(service: string, schema: ReflectionResult): void;
  };
  /**
   * Serve invokes of `name`, a backend on 127.0.0.1:`port` whose schema is `schema`, until the returned function drops
   * it (and its connections): in no listing, proxy route, transcoding rule, health entry or schema push. The gateway's
   * own warm-up backend (src/main/own-warmup.ts).
   */
  hideBackend(name: string, port: number, schema: ReflectionResult): () => void;
  /** Resolves once every backend's first schema load since start() has settled (loaded or failed), or after `ms`. */
  firstSchemas(ms: number): Promise<void>;
  /** The REST transcoding routes of every backend, for the REST server (docs/transcoding.md). */
  readonly transcoding: {
    readonly routes: DynamicRoutes;
    /** The gateway's own REST routes on this thread: no transcoding rule may shadow one. */
    reserve(routes: readonly ReservedRoute[]): void;
  };
}

/** What one thread's dispatch facility shares with the rest of the process. */
export interface DispatchShare {
  /** The process's conversion-pool worker slots (`--conversion-workers`, shared by every thread's converter). */
  readonly slots: WorkerSlots;
  /**
   * On a uWS worker thread: backend schemas come from the main thread (reflected once for the process) and the grpc-js
   * channels are created only when a stream needs them. Undefined on the main thread, which reflects and connects.
   */
  readonly schemaSource?: SchemaSource;
  /** The gateway's own gRPC port once it listens (browser RPC to the gateway's own services, own-rpc.ts). */
  readonly ownGrpcPort?: () => number | undefined;
}

/**
 * A schema as it crosses to another thread: reflection's files and services. Each file is copied to a buffer of its
 * own first: structured clone copies a view's whole backing buffer, which for a decoded reflection reply is the reply.
 */
const reflected = (schema: BackendSchema, version: ReflectionResult["version"]): ReflectionResult => ({
  files: schema.set.files.map((f) => f.slice()),
  services: [...schema.services],
  version,
});

/**
 * Dynamic dispatch: `platform.Gateway` over gRPC, the `/v1/gateway` and `/v1/grpc` REST routes, per dialable backend
 * its connections and schema cache (on a uWS thread: schemas from the main thread, grpc-js channels only for streams,
 * see DispatchShare), and the JSON<->protobuf converter (its workers within the process's one bound). `offload` (the main thread with uWS
 * worker threads and `--grpc-invoke-offload`) runs invoke on those threads for calls arriving while
 * `offloadMinInflight` are in flight; with threads the main thread's invokes are the gRPC ones (the threads serve
 * REST themselves).
 */
export function createDispatchFacility(ctx: GatewayContext, share: DispatchShare, offload?: InvokeOffload, offloadMinInflight?: number): DispatchFacility {
  const { logger, options } = ctx;
  const schemaListeners: Array<(service: string, schema: ReflectionResult) => void> = [];
  const filter = createMetadataFilter(options.forwardHeaders, ctx.tracer?.on === true);
  // Rebuilt from the cached schemas whenever one loads or changes (here, or pushed from the main thread).
  const transcoding = createTranscodeTable({ services: ctx.services, logger });
  /** Backends whose channel left READY since their schema loaded: their next READY is a restart, reflected again. */
  const wentDown = new Set<string>();
  // The transparent proxy routes each backend's services as soon as its schema is known (startup or refresh).
  const proxy = createGrpcProxy({
    backends: { get: (name) => backends.get(name) },
    filter,
    logger,
    invokeDeadlineMs: options.invokeDeadlineMs,
    calls: ctx.metrics.counter("platform_grpc_proxy_calls_total", "Calls forwarded by the transparent gRPC proxy, by method kind and status code name", ["kind", "code"]),
    tracer: ctx.tracer,
  });
  const backends = createBackendRegistry(
    ctx.services.dialable.map((s) => ({ name: s.name, host: s.grpc!.host, port: s.grpc!.port, ...(s.grpc!.channels ? { channels: s.grpc!.channels } : {}), ...(s.grpc!.tls ? { tls: s.grpc!.tls } : {}) })),
    {
      channelsPerBackend: options.channelsPerBackend,
      onSchemaOf: (service, schema) => {
        proxy.sync(service, schema);
        transcoding.sync(service, schema);
        if (schemaListeners.length === 0) return;
        const r = reflected(schema, backends.get(service)!.reflectionStats().version);
        for (const l of schemaListeners) l(service, r);
      },
      maxReceiveBytes: 64 * 1024 * 1024,
      backend: {
        ...(share.schemaSource ? { schemaSource: share.schemaSource } : {}),
        onSchema: ({ schema, error, version }) => {
          if (schema) logger.info({ services: schema.services, files: schema.fileNames.length, schemaId: schema.set.id, reflection: version }, "backend schema loaded");
          else if (error) logger.warn({ code: error.codeName, error: error.rawMessage }, "backend reflection failed");
        },
      },
      onStateChange: (service, index, state) => {
        logger.debug({ service, channel: index, state: grpc.connectivityState[state] }, "backend channel state");
        // A backend that was down at startup: load its schema in the background once it answers. One that went away
        // and is back may be a new build with other methods or HTTP rules: reflect again (the routes follow).
        const b = backends.get(service);
        if (!b) return;
        if (state !== grpc.connectivityState.READY) {
          // Only the main thread reflects; a uWS thread is sent the new schema.
          if (!share.schemaSource && b.cachedSchema() && state !== grpc.connectivityState.CONNECTING) wentDown.add(service);
          return;
        }
        if (!b.cachedSchema()) b.refresh().catch(() => undefined);
        else if (wentDown.delete(service)) {
          logger.info({ service }, "backend reconnected: reflecting its schema again");
          b.refresh().catch(() => undefined);
        }
      },
    },
  );
  const converter = createConverter({
    thresholdBytes: options.workerThresholdBytes,
    threads: options.conversionWorkers,
    slots: share.slots,
    maxQueue: options.workerMaxQueue,
  });
  const invokeDeps = {
    converter,
    invokeDeadlineMs: options.invokeDeadlineMs,
    invocations: ctx.metrics.counter("platform_gateway_invocations_total", "Dynamic invocations by registered service and outcome code name", ["service", "code"]),
    // With tracing on, each bucket keeps the trace of its latest sampled call (OpenMetrics exemplars on /metrics).
    latency: ctx.metrics.histogram("platform_gateway_invoke_duration_seconds", "Latency of dynamic invocations in seconds (conversion and backend call), by service and outcome", ["service", "code"], {
      exemplars: ctx.tracer?.on === true,
    }),
  };
  const ops = createDispatchOps({
    ...invokeDeps,
    services: ctx.services,
    backends,
    ...(offload ? { offload } : {}),
    ...(offloadMinInflight !== undefined ? { offloadMinInflight } : {}),
    ...(ctx.tracer ? { tracer: ctx.tracer } : {}),
  });

  // Count in-flight invocations so close() lets them finish before the channels go.
  let inflight = 0;
  let idle: (() => void) | undefined;
  const tracked = async <R>(call: () => Promise<R>): Promise<R> => {
    inflight++;
    try {
      return await call();
    } finally {
      if (--inflight === 0) idle?.();
    }
  };
  const counted: DispatchOps = { ...ops, invoke: (input) => tracked(() => ops.invoke(input)), invokeBytes: (input) => tracked(() => ops.invokeBytes(input)) };

  const streamDeps: InvokeStreamDeps = {
    backendOf: (service) => backendNamed({ services: ctx.services, backends }, service),
    converter,
    invokeDeadlineMs: options.invokeDeadlineMs,
    invocations: ctx.metrics.counter("platform_gateway_stream_invocations_total", "Streamed invocations (InvokeStream, invoke-stream, invoke-ws) by method kind and outcome code name", ["kind", "code"]),
    duration: ctx.metrics.histogram("platform_gateway_stream_duration_seconds", "Duration of streamed invocations in seconds, by method kind and outcome code name", ["kind", "code"]),
    open: new Set(),
    ...(ctx.tracer ? { tracer: ctx.tracer } : {}),
    messages: ctx.metrics.counter("platform_gateway_stream_messages_total", "Messages moved by streamed invocations, by method kind and direction (request or response)", ["kind", "direction"]),
  };

  const own = createOwnServices(ctx, share.ownGrpcPort, invokeDeps, streamDeps, tracked);
  /** Each backend's browser RPC target, made on its first call. */
  const targets = new Map<string, RpcTarget>();
  const backendTarget = (name: string): RpcTarget => {
    let t = targets.get(name);
    if (t) return t;
    const b = backends.get(name)!;
    t = {
      backend: name,
      ops: counted,
      stream: streamDeps,
      methodOf: methodLookup(b),
      passKey: false,
    };
    targets.set(name, t);
    return t;
  };
  const openApi = createOpenApiOps({ services: ctx.services, backends, apiKey: options.apiKeys.length > 0, routes: transcoding });

  let closed: Promise<void> | undefined;
  let destroyed = false;
  let refreshTimer: NodeJS.Timeout | undefined;
  /** The first schema load of every backend, from start(). */
  let firstLoads: Promise<unknown> = Promise.resolve();
  return {
    ops: counted,
    hideBackend: (name, port, schema) => backends.hide({ name, host: "127.0.0.1", port }, async () => schema),
    firstSchemas: (ms) => settleWithin(firstLoads, ms),
    transcoding: { routes: transcodeRoutes(transcoding, counted, streamDeps, filter), reserve: (routes) => transcoding.reserve(routes) },
    schemas: {
      async get(service, fresh, signal, stale) {
        const b = backends.get(service);
        if (!b) throw new GatewayError(Code.NOT_FOUND, `service ${service} has no dialable backend`);
        // Threads that miss the same new method one after another (before the push of the first one's reflection
        // reached them) get that reflection, not one each.
        const current = b.cachedSchema();
        const newer = stale !== undefined && current !== undefined && current.set.id !== stale;
        const schema = fresh && !newer ? await b.refresh(signal) : await b.schema(signal);
        return reflected(schema, b.reflectionStats().version);
      },
      onChange: (listener) => schemaListeners.push(listener),
      adopt(service, schema) {
        try {
          backends.get(service)?.adopt(schema);
        } catch (e) {
          logger.warn({ service, err: GatewayError.from(e).rawMessage }, "backend schema from the main thread did not build");
        }
      },
    },
    grpc: { "platform.Gateway": { ...gatewayGrpc(counted, filter), InvokeStream: invokeStreamGrpc(streamDeps, filter) } },
    bindGrpc: (server, binding) => proxy.bind(server, binding),
    appHooks: [
      invokeWsHook(streamDeps, filter, createOriginPolicy(options.corsOrigins)),
      rpcWebHook({
        // The gateway's own services first: on a uWS thread the proxy does not know they are reserved.
        route(service) {
          const owner = proxy.ownerOf(service);
          return own.target(service) ?? (owner === undefined ? undefined : backendTarget(owner));
        },
        filter,
        origins: createOriginPolicy(options.corsOrigins),
        forwardHeaders: options.forwardHeaders,
        invokeDeadlineMs: options.invokeDeadlineMs,
      }),
    ],
    reflection: () => proxy.reflection(),
    routes: [...gatewayRoutes(counted, filter), ...invokeStreamRoutes(streamDeps, filter), ...grpcReflectionRoutes(counted, filter), ...openApiRoutes(openApi)],
    async start() {
      // A uWS thread dials its unary connections on first use and opens grpc-js channels only for a stream.
      if (!share.schemaSource) backends.connect();
      // --schema-refresh-interval: the main thread reflects every backend that has a schema again (a change reaches
      // the routes and the threads through onSchemaOf); failures are logged by onSchema and the old schema stays.
      if (!share.schemaSource && options.schemaRefreshIntervalMs > 0) {
        refreshTimer = setInterval(() => {
          for (const name of backends.names) {
            const b = backends.get(name)!;
            if (b.cachedSchema()) b.refresh().catch(() => undefined);
          }
        }, options.schemaRefreshIntervalMs);
        refreshTimer.unref();
      }
      // Logged by onSchema; retried on next use and when the channel becomes READY.
      firstLoads = Promise.all(backends.names.map((name) => backends.get(name)!.schema().catch(() => undefined)));
    },
    async health() {
      const conflicts = proxy.conflicts();
      return {
        "grpc-channel-pool": backends.health(),
        ...(conflicts.length > 0 ? { "grpc-proxy": { status: "Degraded" as const, description: conflicts.join("; ") } } : {}),
        ...transcoding.health(),
      };
    },
    close() {
      return (closed ??= (async () => {
        clearInterval(refreshTimer);
        // Streamed invocations may be long-lived (a watch): end them in-band now rather than wait for the timeout.
        for (const h of [...streamDeps.open!]) h.fail(new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down"));
        proxy.close();
        if (inflight > 0) await new Promise<void>((r) => (idle = r));
        await converter.close();
        backends.close();
        own.close();
      })());
    },
    resources() {
      return { "dispatch.invocations": inflight, "dispatch.streams": streamDeps.open!.size, "dispatch.proxy-streams": proxy.openStreams };
    },
    destroy() {
      if (destroyed) return;
      destroyed = true;
      clearInterval(refreshTimer);
      converter.destroy();
      backends.close();
      own.close();
    },
  };
}
