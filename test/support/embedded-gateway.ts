/**
 * A program that embeds the gateway (createGateway, two uWS worker threads) and ends when its parent disconnects:
 * `close` awaits close() then calls process.exit(0); `destroy` calls destroy() then process.exit(0), as
 * bench/invoke/child.ts does; `exit` only process.exit(0); `throw` dies of an uncaught error (exit 1). `tsx test/support/embedded-gateway.ts <backendPort> <apiKey> <how>` sends
 * `{ready: {httpPort}}` over IPC. For the exit tests (test/integration/threads-exit.test.ts).
 */
import { Writable } from "node:stream";
import { createGateway } from "../../src/main/gateway.js";

const [backendPort, apiKey, how] = process.argv.slice(2);
const gw = await createGateway({
  grpcPort: 0,
  httpPort: 0,
  threads: 2,
  shutdownTimeoutMs: 1500,
  apiKeys: [apiKey!],
  logLevel: "error",
  logDestination: new Writable({ write: (_c, _e, cb) => cb() }),
  services: [{ name: "orders", grpc: { host: "127.0.0.1", port: Number(backendPort) } }],
});
process.send!({ ready: { httpPort: gw.httpPort } });
process.on("disconnect", async () => {
  if (how === "close") await gw.close();
  if (how === "throw") throw new Error("a fatal error on the main thread");
  if (how === "destroy") gw.destroy();
  process.exit(0);
});
