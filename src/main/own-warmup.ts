import type { ClientHttp2Session } from "node:http2";
import type { GrpcFront } from "../grpc/front.js";
import type { Logger } from "../observe/logger.js";
import { ownWarmup, ownWarmupKey, type OwnWarmupParts } from "../threads/warmup.js";
import { invokeEcho } from "./warmup-invoke.js";
import { WarmupClient } from "./warmup-client.js";

/**
 * The main thread's warm-up through the gateway's own objects (docs/warmup.md): before the gateway listens on its
 * ports, `calls` JSON invokes of the echo backend over gRPC through its own front, on a loopback listener of the same
 * server, and, given `restPort` (`--threads 1`: the main thread's REST server warming up on its loopback port), as many
 * REST invokes through it. The echo backend is the gateway's hidden backend meanwhile, and nothing of the calls is
 * left in its metrics or traces (threads/warmup.ts `ownWarmup`). Logs what it did; a failure is logged and the gateway
 * starts cold. Cleartext only: the caller does not run it with `--tls`.
 */
export async function warmUpOwnPorts(front: GrpcFront, parts: OwnWarmupParts, deps: { echoPort: number; calls: number; apiKeys: readonly string[]; logger: Logger; restPort?: number }): Promise<void> {
  const t0 = performance.now();
  const sessions: ClientHttp2Session[] = [];
  try {
    const loopback = await front.listenLoopback();
    try {
      const client = new WarmupClient(`http://127.0.0.1:${loopback.port}`, ownWarmupKey(deps.apiKeys), sessions);
      const calls = await ownWarmup(parts, deps.echoPort, () => invokeEcho(client, deps.restPort ?? 0, deps.calls, deps.restPort !== undefined));
      deps.logger.info({ calls, ms: Math.round(performance.now() - t0) }, "warmed up through its own ports");
    } finally {
      for (const s of sessions) s.destroy();
      loopback.stop();
    }
  } catch (e) {
    deps.logger.warn({ err: (e as Error).message }, "warm-up through its own ports failed: starting cold");
  }
}
