import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { gunzipSync } from "node:zlib";
import { startGatewayProcess } from "../support/cli.js";
import { waitFor } from "../support/gateway.js";

/** A bare OTLP/HTTP metrics receiver: keeps each POST /v1/metrics body. */
async function otlpReceiver(): Promise<{ url: string; bodies: Buffer[]; close(): Promise<void> }> {
  const bodies: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.method === "POST" && req.url === "/v1/metrics") bodies.push(req.headers["content-encoding"] === "gzip" ? gunzipSync(body) : body);
      res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    bodies,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe("environment variables reach the gateway through the CLI (the only place that reads them)", () => {
  it("APP_API_TOKEN guards the sidecar callbacks; OTEL_* export metrics to the endpoint, period and service name given, none of the warm-up's", async () => {
    const otlp = await otlpReceiver();
    const gw = await startGatewayProcess(["--api-key", "k"], {
      APP_API_TOKEN: "app-secret",
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_METRIC_EXPORT_INTERVAL: "100",
      OTEL_SERVICE_NAME: "cli-env-test-gateway",
      // Exports run every 100 ms through the warm-up's invokes too: none of what they record may reach the collector.
      GATEWAY_WARMUP_CALLS: "40",
    });
    try {
      const http = `http://127.0.0.1:${gw.httpPort}`;
      assert.equal((await fetch(`${http}/dapr/subscribe`)).status, 401, "APP_API_TOKEN is required");
      assert.equal((await fetch(`${http}/dapr/subscribe`, { headers: { "dapr-api-token": "app-secret" } })).status, 200);
      // Exported every 100 ms (the default period is 60 s), carrying the service name from OTEL_SERVICE_NAME.
      await waitFor(() => otlp.bodies.some((b) => b.includes("cli-env-test-gateway")), "an OTLP export naming the service", 10_000);
      assert.ok(gw.stdout.some((l) => l.includes("warmed up through its own ports")), "the gateway warmed up through its own ports");
      assert.deepEqual(otlp.bodies.filter((b) => b.includes("warmup") || b.includes("InvokeJson")), []);
    } finally {
      await gw.stop();
      await otlp.close();
    }
  });
});
