/**
 * A child process of bench/invoke.ts, so the backend, the gateway and the load generator do not share one event
 * loop. `tsx bench/invoke/child.ts backend` starts the order test backend; `... gateway <backendPort>` starts a
 * gateway in front of it, with PutOrder also on an HTTP rule (`POST /v1/orders`, body `*`). Each sends
 * `{ready: {...ports}}` over IPC and exits when the parent disconnects.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { startOrderBackend } from "../../test/support/backends/order-backend.js";
import { createGateway } from "../../src/main/gateway.js";

const [role, backendPort] = process.argv.slice(2);
const send = (m: unknown): void => void process.send?.(m);

if (role === "backend") {
  const b = await startOrderBackend({ admin: false });
  send({ ready: { port: b.port } });
  process.on("disconnect", () => {
    b.close();
    process.exit(0);
  });
} else if (role === "gateway") {
  const quiet = new Writable({ write: (_c, _e, cb) => cb() });
  // The order backend has no google.api.http annotations: PutOrder gets its HTTP rule from a google.api.Service file,
  // as grpc-gateway takes it (--grpc-api-configuration), read when the services config is validated.
  const dir = mkdtempSync(join(tmpdir(), "bench-invoke-"));
  const apiConfig = join(dir, "api.yaml");
  writeFileSync(apiConfig, 'type: google.api.Service\nconfig_version: 3\nhttp:\n  rules:\n    - selector: shop.v1.OrderService.PutOrder\n      post: /v1/orders\n      body: "*"\n');
  const gw = await createGateway({
    grpcPort: 0,
    httpPort: 0,
    logLevel: "error",
    logDestination: quiet,
    services: [{ name: "orders", grpc: { host: "127.0.0.1", port: Number(backendPort) }, transcoding: { enabled: true, prefix: "", errors: "grpc-gateway", apiConfig } }],
  });
  rmSync(dir, { recursive: true, force: true });
  send({ ready: { grpcPort: gw.grpcPort, httpPort: gw.httpPort } });
  process.on("disconnect", () => {
    gw.destroy();
    process.exit(0);
  });
} else {
  console.error(`usage: tsx bench/invoke/child.ts backend | gateway <backendPort>`);
  process.exit(2);
}
