import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { ServiceConfig, ServiceRegistry } from "../config/services.js";
import { echo } from "../shared/echo.js";
import type { ConfigService } from "../shared/config-service.js";

/** Config listing operations (README "REST API" and "gRPC API"). */
export interface ConfigOps {
  /** Every registered entry, non-dialable ones included. */
  list(): readonly ConfigService[];
  /** One entry, or undefined when not registered. */
  get(name: string): ConfigService | undefined;
  /** One entry; NOT_FOUND naming it when not registered. */
  require(name: string): ConfigService;
}

function view(s: ServiceConfig): ConfigService {
  const v: ConfigService = { name: s.name };
  if (s.grpc) v.grpc = { host: s.grpc.host, port: s.grpc.port };
  if (s.pubsub) v.pubsub = { pubsubName: s.pubsub.pubsubName };
  if (s.state) v.state = { storeName: s.state.storeName, keys: [...s.state.keys] };
  if (s.jobs) v.jobs = { crons: s.jobs.crons.map((c) => ({ name: c.name, schedule: c.schedule, targetTopic: c.targetTopic })) };
  return v;
}

export function createConfigOps(services: ServiceRegistry): ConfigOps {
  // The registry is fixed at startup: the views are made once.
  const views = new Map(services.all.map((s) => [s.name, view(s)]));
  const all = [...views.values()];
  return {
    list: () => all,
    get: (name) => views.get(name),
    require(name) {
      if (!name) throw new GatewayError(Code.INVALID_ARGUMENT, "name must not be empty");
      const s = views.get(name);
      if (!s) throw new GatewayError(Code.NOT_FOUND, `service ${echo(name)} is not registered`);
      return s;
    },
  };
}

/** The proto (snake_case) form of a ConfigService. */
export function toProtoConfigService(s: ConfigService): Record<string, unknown> {
  return {
    name: s.name,
    grpc: s.grpc ? { host: s.grpc.host, port: s.grpc.port } : null,
    pubsub: s.pubsub ? { pubsub_name: s.pubsub.pubsubName } : null,
    state: s.state ? { store_name: s.state.storeName, keys: s.state.keys } : null,
    jobs: s.jobs ? { crons: s.jobs.crons.map((c) => ({ name: c.name, schedule: c.schedule, target_topic: c.targetTopic })) } : null,
  };
}
