import { createServiceRegistry, type ServiceConfig } from "../../src/config/services.js";
import { createConfigOps } from "../../src/ops/config.js";
import { configRoutes } from "../../src/rest/config.js";
import { json, type Route } from "../../src/http/router.js";

/** The API key both servers require (so the auth check is part of the measured path, as in production). */
export const BENCH_API_KEY = "bench-key";

/**
 * The handlers both servers run: the gateway's own `/v1/config/*` routes over a small registry (a GET whose reply is
 * built from the registry and JSON-encoded), and a POST that parses a JSON body and answers it back (the shape of
 * every gateway POST route: parse, one operation, JSON reply).
 */
export function benchRoutes(): Route[] {
  const services: ServiceConfig[] = Array.from({ length: 4 }, (_, i) => ({
    name: `svc-${i}`,
    grpc: { host: "127.0.0.1", port: 50_000 + i },
    state: { storeName: "statestore", keys: ["a", "b"] },
  }));
  return [
    ...configRoutes(createConfigOps(createServiceRegistry(services, "pubsub"))),
    {
      method: "POST",
      path: "/v1/bench/echo/{name}",
      handler: async (req) => {
        const body = req.json();
        return json({ name: req.params["name"], received: body });
      },
    },
  ];
}
