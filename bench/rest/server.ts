/**
 * Child process of the REST benchmark: serves `benchRoutes()` with uWS (`--kind uws`, the gateway's router) or
 * node:http (`--kind node`) on a loopback port, prints `{"port": N}` on stdout, and answers IPC "cpu" with its
 * `process.cpuUsage()` so the parent can charge CPU to the server alone. Exits when the parent disconnects.
 */
import { createAuthenticator } from "../../src/ops/auth.js";
import { createLogger } from "../../src/observe/logger.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { isNativeUws, startRestServer, type RestServerDeps } from "../../src/http/router.js";
import { startNodeHttpServer } from "./node-server.js";
import { BENCH_API_KEY, benchRoutes } from "./routes.js";

const kind = process.argv[process.argv.indexOf("--kind") + 1];
if (kind !== "uws" && kind !== "node") {
  process.stderr.write("usage: server.ts --kind uws|node\n");
  process.exit(2);
}
const metrics = createMetrics({ processMetrics: false });
const deps: RestServerDeps = {
  auth: createAuthenticator([BENCH_API_KEY]),
  logger: createLogger("silent"),
  maxBodyBytes: 4 * 1024 * 1024,
  isClosing: () => false,
  requests: metrics.counter("bench_http_requests_total", "REST requests handled", ["route", "method", "status"]),
  latency: metrics.histogram("bench_http_request_duration_seconds", "REST latency in seconds", ["route", "method", "status"]),
};
const port = kind === "uws" ? (await startRestServer("127.0.0.1", 0, benchRoutes(), deps)).port : (await startNodeHttpServer("127.0.0.1", 0, benchRoutes(), deps)).port;
process.on("message", (m) => {
  if (m === "cpu") process.send?.({ cpu: process.cpuUsage() });
});
process.on("disconnect", () => process.exit(0));
process.stdout.write(JSON.stringify({ port, native: kind === "uws" ? isNativeUws() : true }) + "\n");
