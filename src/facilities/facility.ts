import type { ServiceDefinition } from "@grpc/grpc-js";
import type { GrpcServiceHost } from "../grpc/front.js";
import type { ProxyBinding, ReflectionSource } from "../grpc/proxy.js";
import type { ServiceImpl } from "../grpc/server.js";
import type { AppHook, Route } from "../http/router.js";
import type { HealthEntry } from "../observe/health.js";

/**
 * A facility of the gateway (config, gateway, state, pubsub, trigger, sidecar callbacks): its gRPC services, its
 * REST routes, and its part in startup, health and shutdown. Created from the context by `createXFacility(ctx)`.
 */
export interface Facility {
  /** gRPC service implementations keyed by fully qualified service name, e.g. "platform.State". */
  grpc?: Record<string, ServiceImpl>;
  /** Extra gRPC services with their own definitions (e.g. Dapr app callbacks), bound with the same auth wrapper unless `auth` is false. */
  extraGrpc?: Array<{ definition: ServiceDefinition; impl: ServiceImpl; auth?: boolean }>;
  /** Given the gateway's gRPC server once its own services are bound (e.g. to register proxied backend methods). */
  bindGrpc?(server: GrpcServiceHost, binding: ProxyBinding): void;
  /** More services and files for the gateway's reflection service (read on every reflection request). */
  reflection?(): ReflectionSource;
  /** Native uWS handlers beside the REST routes (WebSocket and SSE paths), attached before the catch-all route and before the server listens. */
  appHooks?: AppHook[];
  /** REST routes. */
  routes?: Route[];
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
