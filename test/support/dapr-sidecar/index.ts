import * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import { daprService } from "../../../src/runtime/dapr/protos.js";
import { randomUUID } from "node:crypto";
import { createTestBroker, type TestBroker } from "./broker.js";
import type { SharedDaprBackend } from "./shared.js";
import { envelopeOf, type TracingSpec } from "./events.js";
import { jobHandlers, type JobCallback } from "./jobs.js";
import { createTestScheduler, type TestScheduler } from "./scheduler.js";
import { createSharedStreams } from "./streams.js";
import { appChannel } from "./app-channel.js";
import { stateHandlers, type StoreComponent, type StoreKind } from "./state.js";
import { status, unaryHandler } from "./status.js";

/** Options of the Dapr-protocol test sidecar. */
export interface TestDaprSidecarOptions {
  /** Port to listen on. Default 0 (ephemeral). */
  port?: number;
  /** App id reported by GetMetadata and used as source of wrapped events. Default "platform-gateway". */
  appId?: string;
  /** Pub/sub component names; undefined = any name is a component. */
  pubsubNames?: readonly string[];
  /** State store components by name (kind, query indexes). */
  stateStores?: Record<string, StoreComponent>;
  /** Kind of a store name not in `stateStores`; null = such a name is an unknown store. Default "redis". */
  defaultStoreKind?: StoreKind | null;
  /**
   * Pub/sub component kind. "redis" (default): contrib `pubsub/redis` on a Redis of this sidecar's own (or the
   * `shared` one): the app's consumer group keeps what is published while it has no stream open and delivers it on
   * its next stream, streams of one app on one topic compete, unacked entries come back after processingTimeout (see
   * broker.ts, `pubsubComponent`). "in-memory": every live stream gets every event, nothing is kept or redelivered.
   */
  pubsubKind?: "redis" | "in-memory";
  /** false = daprd runs without a Scheduler: every job RPC fails INTERNAL "scheduler clients are disabled". */
  scheduler?: boolean;
  /**
   * The Scheduler's default failure policy interval, ms: a failed job delivery is retried this long after the
   * previous attempt was due, 3 times (see scheduler.ts). Default 1000, as daprd's. Ignored with `shared` (the
   * backend's Scheduler has its own).
   */
  jobRetryIntervalMs?: number;
  /** daprd's tracing configuration. Default: none, which is tracing ON with sampling 1e-4; `samplingRate: "0"` is off. */
  tracing?: TracingSpec;
  /**
   * `dapr.io/enable-app-health-check`: probe the app's AppCallbackHealthCheck/HealthCheck (WITHOUT a token, like
   * daprd) every `intervalMs`, unhealthy after `threshold` failures; jobs are delivered only while it is healthy.
   * Absent: the app counts as healthy (daprd without app health checks).
   */
  appHealthCheck?: { intervalMs?: number; threshold?: number };
  /** Required `dapr-api-token` on every call (daprd's DAPR_API_TOKEN). */
  apiToken?: string;
  /** Sent as `dapr-api-token` on app callbacks (daprd's APP_API_TOKEN). */
  appApiToken?: string;
  /** App gRPC address for job callbacks, e.g. "127.0.0.1:5000", or a function resolving it late. */
  appAddress?: string | (() => string | undefined);
  /**
   * One replica's daprd among several: the pub/sub component reads the backend's shared streams like contrib
   * `pubsub/redis` (consumer groups, see ./streams.ts and `pubsubComponent`), state lives in the backend's shared
   * store, jobs in its shared Scheduler. Absent: this sidecar has its own in-process pub/sub, store and scheduler.
   */
  shared?: SharedDaprBackend;
  /**
   * The Redis pub/sub component's metadata (contrib `pubsub/redis`; its defaults unless said). Without `shared` the
   * component reads a Redis of this sidecar's own.
   */
  pubsubComponent?: {
    /**
     * The consumer group. Default the app id (daprd sets it when the component has none), so replicas compete for
     * each event. `{uuid}` and `{podName}` are replaced per sidecar, as daprd does, giving each replica its own group.
     */
    consumerID?: string;
    /**
     * contrib's default is 10 (order of one topic's events is not kept); "1" keeps it. Default here: 10 with `shared`,
     * 1 without, as `deploy/dapr/pubsub.yaml` sets for the gateway (the single-sidecar fixture stands for it).
     */
    concurrency?: number;
    /** Default 100. */
    queueDepth?: number;
    /** Default 60 s. */
    processingTimeoutMs?: number;
    /** Default 15 s. */
    redeliverIntervalMs?: number;
    /** Without `shared`: entries each stream of this sidecar's Redis keeps (`maxLenApprox`). Default 10,000 (contrib: unbounded). */
    maxLenApprox?: number;
  };
  /** This sidecar's pod name (`{podName}` in the consumerID). Default `<app id>-<random>`. */
  podName?: string;
}

/** A running test sidecar with fault injection. */
export interface TestDaprSidecar {
  /** Bound port (stays the same across restart()). */
  readonly port: number;
  /** Whether it is serving (false between stop() and restart()). */
  readonly running: boolean;
  /** Streaming subscriptions, publish counters, redelivery backlog. */
  readonly broker: TestBroker;
  /** Every attempt to deliver a fired job to the app. */
  readonly jobCallbacks: JobCallback[];
  /** The Scheduler this sidecar is connected to (its own, or the shared backend's). */
  readonly scheduler: TestScheduler;
  /** The pub/sub component's consumer group (with `shared`, after `{uuid}`/`{podName}` were replaced). */
  readonly consumerID: string;
  /** Events accepted by PublishEvent. */
  readonly publishedCount: number;
  /** Point job callbacks at the app (e.g. once the gateway's gRPC port is known). */
  setAppAddress(address: string | (() => string | undefined)): void;
  /** Whether daprd considers the app healthy (app health checks). */
  readonly appHealthy: boolean;
  /** Calls of ListTopicSubscriptions made to the app, with whether they succeeded. */
  readonly subscriptionListings: Array<{ ok: boolean; code?: number }>;
  /**
   * The next `n` SubscribeTopicEventsAlpha1 initial requests fail INVALID_ARGUMENT "failed deserializing metadata.
   * Error: subscriber is closed", as daprd answers while it shuts down or reloads.
   */
  rejectNextSubscribes(n: number): void;
  /** The next PublishEvent fails with INTERNAL (daprd's publish error). */
  failNextPublish(message?: string): void;
  /** Stop serving: streams break, the port closes; state, jobs and the redelivery backlog survive. */
  stop(): Promise<void>;
  /** Serve again on the same port. */
  restart(): Promise<void>;
  /** Stop for good: scheduler stopped, port closed. */
  close(): Promise<void>;
}

/**
 * Start a gRPC server speaking Dapr's runtime API (`dapr.proto.runtime.v1.Dapr`) with the behaviour of
 * `../shared/reference/dapr-facts.md`: state over the embedded store with daprd's codes, PublishEvent and streaming
 * subscriptions with the initial request/response and ack rules over a Redis-streams consumer group (or in-memory
 * fan-out), jobs in a Scheduler with its validation, failure policy and staging and callbacks to the app,
 * GetMetadata. Every other Dapr RPC answers UNIMPLEMENTED. A test fixture, not a product feature.
 */
export async function startTestDaprSidecar(o: TestDaprSidecarOptions = {}): Promise<TestDaprSidecar> {
  const appId = o.appId ?? "platform-gateway";
  let appAddress = o.appAddress;
  const token = (): string | undefined => o.apiToken;
  const knownPubsub = (name: string): boolean => !o.pubsubNames || o.pubsubNames.includes(name);
  const shared = o.shared;
  const podName = o.podName ?? `${appId}-${randomUUID().slice(0, 8)}`;
  const consumerID = (o.pubsubComponent?.consumerID ?? appId).replaceAll("{uuid}", randomUUID()).replaceAll("{podName}", podName).replaceAll("{appID}", appId);
  // Redis: the shared one, or this sidecar's own (it outlives stop()/restart(), like a Redis beside daprd).
  const { maxLenApprox, consumerID: _c, ...component } = o.pubsubComponent ?? {};
  const redis = (o.pubsubKind ?? "redis") === "redis" ? (shared?.streams ?? createSharedStreams(maxLenApprox ?? 10_000)) : undefined;
  const broker = createTestBroker({
    token,
    knownPubsub,
    ...(redis ? { streams: { concurrency: shared ? 10 : 1, ...component, streams: redis, consumerID } } : {}),
  });
  const scheduler: TestScheduler = shared?.scheduler ?? createTestScheduler({ appId, ...(o.jobRetryIntervalMs !== undefined ? { retryIntervalMs: o.jobRetryIntervalMs } : {}) });
  let server: grpc.Server | undefined;
  let port = o.port ?? 0;
  let failNext: string | undefined;
  let published = 0;
  const app = appChannel({
    address: () => (typeof appAddress === "function" ? appAddress() : appAddress),
    running: () => server !== undefined,
    ...(o.appHealthCheck ? { healthCheck: o.appHealthCheck } : {}),
  });
  const jobs = jobHandlers(
    scheduler,
    { address: app.address, token: () => o.appApiToken, healthy: () => app.healthy },
    token,
    () => server !== undefined,
    o.scheduler !== false,
  );

  const h = (fn: (req: any, md: grpc.Metadata) => Promise<object>) => unaryHandler(token, fn);
  const impl: grpc.UntypedServiceImplementation = {
    ...stateHandlers({ ...(o.stateStores ? { stores: o.stateStores } : {}), defaultKind: o.defaultStoreKind === null ? undefined : (o.defaultStoreKind ?? "redis") }, appId, token, shared?.state),
    ...jobs.handlers,
    PublishEvent: h(async (req: { pubsub_name: string; topic: string; data: Uint8Array; data_content_type: string }, md: grpc.Metadata) => {
      if (!req.pubsub_name) throw new GatewayError(Code.INVALID_ARGUMENT, "pubsub name is empty");
      if (!knownPubsub(req.pubsub_name)) throw new GatewayError(Code.INVALID_ARGUMENT, `pubsub ${req.pubsub_name} is not found`);
      if (!req.topic) throw new GatewayError(Code.INVALID_ARGUMENT, `topic is empty in pubsub ${req.pubsub_name}`);
      const env = envelopeOf(req, appId, md.get("traceparent")[0]?.toString(), md.get("tracestate")[0]?.toString(), o.tracing);
      if (failNext !== undefined) {
        const why = failNext;
        failNext = undefined;
        throw new GatewayError(Code.INTERNAL, `error when publish to topic ${req.topic} in pubsub ${req.pubsub_name}: ${why}`);
      }
      published++;
      broker.publish(req.pubsub_name, req.topic, env);
      return {};
    }),
    SubscribeTopicEventsAlpha1: (call: grpc.ServerDuplexStream<any, any>) => broker.subscribe(call),
    GetMetadata: h(async () => ({
      id: appId,
      runtime_version: "1.17.0-test-sidecar",
      registered_components: [
        ...(o.pubsubNames ?? ["pubsub"]).map((name) => ({ name, type: redis ? "pubsub.redis" : "pubsub.in-memory", version: "v1", capabilities: [] })),
        ...Object.entries(o.stateStores ?? {}).map(([name, c]) => ({
          name,
          type: c.kind === "in-memory" ? "state.in-memory" : "state.redis",
          version: "v1",
          capabilities: c.kind === "redis-stack" ? ["ETAG", "TRANSACTIONAL", "QUERY_API"] : ["ETAG", "TRANSACTIONAL"],
        })),
      ],
      subscriptions: broker.list().map((s) => ({ pubsub_name: s.pubsub, topic: s.topic, metadata: {}, dead_letter_topic: "", type: "STREAMING" })),
      app_connection_properties: { port: 0, protocol: "grpc", channel_address: "", max_concurrency: 0 },
      extended_metadata: {},
      enabled_features: [],
    })),
  };
  // Every other Dapr RPC: UNIMPLEMENTED, like an RPC daprd does not support.
  const definition = daprService("Dapr");
  for (const [name, def] of Object.entries(definition)) {
    if (impl[name]) continue;
    impl[name] = def.requestStream || def.responseStream
      ? (call: grpc.ServerDuplexStream<any, any>) => call.emit("error", status(Code.UNIMPLEMENTED, `${name} is not supported by the test sidecar`))
      : (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(status(Code.UNIMPLEMENTED, `${name} is not supported by the test sidecar`));
  }

  const listen = async (): Promise<void> => {
    const s = new grpc.Server();
    s.addService(definition, impl);
    port = await new Promise<number>((resolve, reject) =>
      s.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
    );
    server = s;
    app.start();
  };
  const stop = async (): Promise<void> => {
    const s = server;
    if (!s) return;
    server = undefined;
    app.stop();
    broker.dropAll();
    s.forceShutdown();
  };
  await listen();

  return {
    get port() {
      return port;
    },
    get running() {
      return server !== undefined;
    },
    broker,
    consumerID,
    get appHealthy() {
      return app.healthy;
    },
    subscriptionListings: app.listings,
    rejectNextSubscribes(n) {
      broker.rejectNext(n);
    },
    jobCallbacks: jobs.callbacks,
    scheduler,
    get publishedCount() {
      return published;
    },
    setAppAddress(address) {
      appAddress = address;
    },
    failNextPublish(message = "injected publish failure") {
      failNext = message;
    },
    stop,
    async restart() {
      if (server) return;
      await listen();
    },
    async close() {
      await stop();
      // A shared Scheduler outlives each sidecar (closing it is the backend's); this sidecar disconnects from it.
      if (!shared) scheduler.close();
      jobs.close();
      app.close();
    },
  };
}
