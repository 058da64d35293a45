import type { Runtime } from "../runtime/runtime.js";
import type { ServiceRegistry } from "./config.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import type { ValidatedOptions } from "./options.js";

/** What every facility's operations get: the process-wide parts, created once by createGateway. */
export interface GatewayContext {
  readonly options: ValidatedOptions;
  readonly services: ServiceRegistry;
  readonly runtime: Runtime;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** True once shutdown has begun: refuse new work with UNAVAILABLE. */
  isClosing(): boolean;
}

/** One health check entry. */
export interface HealthEntry {
  status: "Healthy" | "Degraded" | "Unhealthy";
  description: string;
}

/**
 * A facility of the gateway (config, gateway, state, pubsub, trigger, sidecar callbacks): its gRPC services, its
 * REST routes, and its part in startup, health and shutdown. Created from the context by `createXFacility(ctx)`.
 */
export interface Facility {
  /** gRPC service implementations keyed by fully qualified service name, e.g. "platform.State". */
  grpc?: Record<string, import("./grpc/server.js").ServiceImpl>;
  /** Extra gRPC services with their own definitions (e.g. Dapr app callbacks), bound with the same auth wrapper unless `auth` is false. */
  extraGrpc?: Array<{ definition: import("@grpc/grpc-js").ServiceDefinition; impl: import("./grpc/server.js").ServiceImpl; auth?: boolean }>;
  /** Given the gateway's gRPC server once its own services are bound (e.g. to register proxied backend methods). */
  bindGrpc?(server: import("./grpc/front.js").GrpcServiceHost, binding: import("./grpc/proxy.js").ProxyBinding): void;
  /** More services and files for the gateway's reflection service (read on every reflection request). */
  reflection?(): import("./grpc/proxy.js").ReflectionSource;
  /** Native uWS handlers beside the REST routes (WebSocket and SSE paths), attached before the catch-all route and before the server listens. */
  appHooks?: import("./rest/router.js").AppHook[];
  /** REST routes. */
  routes?: import("./rest/router.js").Route[];
  /** Called after the servers listen. */
  start?(): Promise<void>;
  /** Health entries this facility contributes, by check name. */
  health?(): Promise<Record<string, HealthEntry>>;
  /** Graceful: end streams with a clear status, finish in-flight work. Safe to call twice. */
  close?(): Promise<void>;
  /** Forceful: drop whatever is left. Safe to call twice. */
  destroy?(): void;
  /**
   * Live resources this facility holds (subscribers, open streams and sockets, calls in flight), by name: read-only
   * counters, every one zero once close() has resolved (the test gateway asserts that after each test).
   */
  resources?(): Record<string, number>;
}
