import type { ConfigOps } from "../ops/config.js";
import { json, requiredQuery, type Route } from "../http/router.js";

/** `/v1/config/...` routes. */
export function configRoutes(ops: ConfigOps): Route[] {
  return [
    { method: "GET", path: "/v1/config/list-services", handler: async () => json({ services: ops.list() }) },
    {
      method: "GET",
      path: "/v1/config/get-service",
      handler: async (req) => json(ops.get(requiredQuery(req, "name")) ?? null),
    },
  ];
}
