import type { ConfigOps } from "../ops/config.js";
import { toProtoConfigService } from "../ops/config.js";
import type { ConfigHandlers } from "../gen/gateway/platform/Config.js";
import type { GrpcImpl } from "./server.js";

/** `platform.Config` over gRPC. */
export function configGrpc(ops: ConfigOps): GrpcImpl<ConfigHandlers> {
  return {
    ListServices: async () => ({ services: ops.list().map(toProtoConfigService) }),
    GetService: async (req) => ({ service: toProtoConfigService(ops.require(req.name)) }),
  };
}
