/**
 * A program that embeds the gateway (createGateway, two uWS worker threads) and stops it the way bench/invoke/child.ts
 * does: `destroy()` then `process.exit(0)` when its parent disconnects. `tsx test/support/embedded-gateway.ts
 * <backendPort> <apiKey>` sends `{ready: {httpPort}}` over IPC. For the exit tests (test/integration/threads-exit.test.ts).
 */
import { Writable } from "node:stream";
import { createGateway } from "../../src/main/gateway.js";

const [backendPort, apiKey] = process.argv.slice(2);
const gw = await createGateway({
  grpcPort: 0,
  httpPort: 0,
  threads: 2,
  apiKeys: [apiKey!],
  logLevel: "error",
  logDestination: new Writable({ write: (_c, _e, cb) => cb() }),
  services: [{ name: "orders", grpc: { host: "127.0.0.1", port: Number(backendPort) } }],
});
process.send!({ ready: { httpPort: gw.httpPort } });
process.on("disconnect", () => {
  gw.destroy();
  process.exit(0);
});
