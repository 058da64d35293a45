import type { OpenApiOps } from "../ops/openapi/serve.js";
import type { Route } from "../http/router.js";

/** `GET /v1/openapi.json` (every dialable backend) and `GET /v1/grpc/{service}/openapi.json` (one): docs/openapi.md. */
export function openApiRoutes(ops: OpenApiOps): Route[] {
  return [
    { method: "GET", path: "/v1/openapi.json", handler: async (req) => ({ raw: await ops.all(req.signal), contentType: "application/json" }) },
    { method: "GET", path: "/v1/grpc/{service}/openapi.json", handler: async (req) => ({ raw: await ops.one(req.params["service"], req.signal), contentType: "application/json" }) },
  ];
}
