import type { ConfigOps } from "../ops/config.js";
import { toProtoConfigService } from "../ops/config.js";
import type { ServiceImpl } from "./server.js";

/** `platform.Config` over gRPC. */
export function configGrpc(ops: ConfigOps): ServiceImpl {
  return {
    ListServices: async () => ({ services: ops.list().map(toProtoConfigService) }),
    GetService: async (req: { name: string }) => ({ service: toProtoConfigService(ops.require(req.name)) }),
  };
}
