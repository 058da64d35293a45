/**
 * A child process of bench/invoke.ts, so the backend, the gateway and the load generator do not share one event
 * loop. `tsx bench/invoke/child.ts backend` starts the order test backend; `... gateway <backendPort>` starts a
 * gateway in front of it. Each sends `{ready: {...ports}}` over IPC and exits when the parent disconnects.
 */
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
  const gw = await createGateway({
    grpcPort: 0,
    httpPort: 0,
    logLevel: "error",
    logDestination: quiet,
    services: [{ name: "orders", grpc: { host: "127.0.0.1", port: Number(backendPort) } }],
  });
  send({ ready: { grpcPort: gw.grpcPort, httpPort: gw.httpPort } });
  process.on("disconnect", () => {
    gw.destroy();
    process.exit(0);
  });
} else {
  console.error(`usage: tsx bench/invoke/child.ts backend | gateway <backendPort>`);
  process.exit(2);
}
