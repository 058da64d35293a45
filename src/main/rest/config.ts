import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { ConfigOps } from "../ops/config.js";
import { json, type Route } from "./router.js";

/** `/v1/config/...` routes. */
export function configRoutes(ops: ConfigOps): Route[] {
  return [
    { method: "GET", path: "/v1/config/list-services", handler: async () => json({ services: ops.list() }) },
    {
      method: "GET",
      path: "/v1/config/get-service",
      handler: async (req) => {
        const name = req.query.get("name");
        if (!name) throw new GatewayError(Code.INVALID_ARGUMENT, "query parameter name is required");
        return json(ops.get(name) ?? null);
      },
    },
  ];
}
