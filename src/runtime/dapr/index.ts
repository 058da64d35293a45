import type { Runtime, RuntimeHealth, RuntimeOptions } from "../runtime.js";
import { createDaprConnection, type DaprConnectionOptions, type DaprResponse } from "./connection.js";
import { createDaprJobs, type DaprJobs } from "./jobs.js";
import { createDaprPubsub } from "./pubsub.js";
import { createDaprState } from "./state.js";
import type { BackoffOptions } from "./topic-stream.js";
import { backoffDelay, type BackoffPolicy } from "../../shared/backoff.js";

/** Options of the Dapr runtime adapter. */
export interface DaprRuntimeOptions extends RuntimeOptions, DaprConnectionOptions {
  /** Backoff of subscription streams that broke (sidecar restart). Default 50 ms doubling to 2 s, jittered +-50% (src/shared/backoff.ts). */
  resubscribeBackoff?: BackoffOptions;
  /** Deadline of the GetMetadata health probe, ms. Default 1000. */
  healthTimeoutMs?: number;
  /** Redis Stack query index per state store name (services config `state.queryIndexName`); see ./state.ts. */
  queryIndexes?: ReadonlyMap<string, string>;
}

/** The Dapr runtime: the Runtime ports over daprd's gRPC API, plus the job callback entry point. */
export interface DaprRuntime extends Runtime {
  readonly kind: "dapr";
  readonly jobs: DaprJobs;
  /** "host:port" of the sidecar. */
  readonly address: string;
}

/** Start-up reachability probe: 250 ms doubling to 5 s, no jitter (one probe per gateway, nothing to spread). */
const PROBE_BACKOFF: BackoffPolicy = { initialDelayMs: 250, maxDelayMs: 5000, multiplier: 2, jitter: 0 };

/**
 * Create the Dapr runtime. Nothing is dialled until start() or the first call; start() returns at once and keeps
 * probing in the background, so a late sidecar never blocks startup (calls fail UNAVAILABLE and health reports
 * Unhealthy meanwhile).
 */
export function createDaprRuntime(opts: DaprRuntimeOptions): DaprRuntime {
  const conn = createDaprConnection(opts);
  const pubsub = createDaprPubsub(conn, opts.pubsubName, opts.logger, opts.resubscribeBackoff);
  const jobs = createDaprJobs(conn);
  const healthTimeoutMs = opts.healthTimeoutMs ?? 1000;
  let closed = false;
  let probe: NodeJS.Timeout | undefined;

  const metadata = (): Promise<DaprResponse<"GetMetadata">> => conn.unary("GetMetadata", {}, { timeoutMs: healthTimeoutMs });

  const startProbe = (attempt: number): void => {
    metadata().then(
      (md) => {
        if (!closed) opts.logger.info({ sidecar: conn.address, appId: md.id, version: md.runtime_version }, "dapr sidecar reachable");
      },
      (e: unknown) => {
        if (closed) return;
        if (attempt === 0) opts.logger.warn({ sidecar: conn.address, err: (e as Error).message }, "dapr sidecar not reachable yet; calls fail UNAVAILABLE until it is");
        probe = setTimeout(() => startProbe(attempt + 1), backoffDelay(PROBE_BACKOFF, attempt));
        probe.unref();
      },
    );
  };

  return {
    kind: "dapr",
    address: conn.address,
    state: createDaprState(conn, opts.queryIndexes),
    pubsub,
    jobs,
    async start() {
      startProbe(0);
    },
    async health(): Promise<RuntimeHealth> {
      let md: DaprResponse<"GetMetadata">;
      try {
        await conn.ready(undefined, healthTimeoutMs);
        md = await metadata();
      } catch (e) {
        return { status: "Unhealthy", description: (e as Error).message };
      }
      const where = `dapr sidecar at ${conn.address} (app id ${md.id || "?"}, runtime ${md.runtime_version || "?"})`;
      const components = md.registered_components ?? [];
      if (components.length > 0 && !components.some((c) => c.name === opts.pubsubName && c.type.startsWith("pubsub."))) {
        return { status: "Degraded", description: `${where} has no pub/sub component named ${opts.pubsubName}` };
      }
      return { status: "Healthy", description: where };
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(probe);
      pubsub.close();
      conn.close();
    },
  };
}

/** True when `runtime` is the Dapr adapter (the app callback facility needs its job entry point). */
export function isDaprRuntime(runtime: Runtime): runtime is DaprRuntime {
  return runtime.kind === "dapr" && typeof (runtime as Partial<DaprRuntime>).jobs?.deliver === "function";
}
