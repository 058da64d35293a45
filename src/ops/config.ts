import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { ServiceConfig, ServiceRegistry } from "../config/services.js";
import { echo } from "../shared/echo.js";

/** Config listing operations (README "REST API" and "gRPC API"). Entries are returned in the config's own (camelCase) shape. */
export interface ConfigOps {
  /** Every registered entry, non-dialable ones included. */
  list(): readonly ServiceConfig[];
  /** One entry, or undefined when not registered. */
  get(name: string): ServiceConfig | undefined;
  /** One entry; NOT_FOUND naming it when not registered. */
  require(name: string): ServiceConfig;
}

export function createConfigOps(services: ServiceRegistry): ConfigOps {
  return {
    list: () => services.all,
    get: (name) => services.get(name),
    require(name) {
      if (!name) throw new GatewayError(Code.INVALID_ARGUMENT, "name must not be empty");
      const s = services.get(name);
      if (!s) throw new GatewayError(Code.NOT_FOUND, `service ${echo(name)} is not registered`);
      return s;
    },
  };
}

/** The proto (snake_case) form of a ConfigService. */
export function toProtoConfigService(s: ServiceConfig): Record<string, unknown> {
  return {
    name: s.name,
    grpc: s.grpc ? { host: s.grpc.host, port: s.grpc.port } : null,
    pubsub: s.pubsub ? { pubsub_name: s.pubsub.pubsubName } : null,
    state: s.state ? { store_name: s.state.storeName, keys: s.state.keys } : null,
    jobs: s.jobs ? { crons: s.jobs.crons.map((c) => ({ name: c.name, schedule: c.schedule, target_topic: c.targetTopic })) } : null,
  };
}
