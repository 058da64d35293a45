import type { JobsPort } from "./jobs-port.js";
import type { PubsubPort } from "./pubsub-port.js";
import type { StatePort } from "./state-port.js";

/** Health of the sidecar as the `sidecar` health entry reports it. */
export interface RuntimeHealth {
  status: "Healthy" | "Degraded" | "Unhealthy";
  description: string;
}

/** The runtimes `--sidecar` names. */
export type RuntimeKind = "embedded" | "dapr" | "redis";

/**
 * The sidecar runtime: state store, pub/sub and scheduler behind one interface. Three adapters: `embedded`
 * (in-process, the default), `dapr` (Dapr's gRPC API) and `redis` (a Redis server shared by every replica). Nothing here knows about the gateway's servers.
 */
export interface Runtime {
  readonly kind: RuntimeKind;
  readonly state: StatePort;
  readonly pubsub: PubsubPort;
  readonly jobs: JobsPort;
  /** Connect / start timers. Must not hang when the sidecar is late: it retries in the background. */
  start(): Promise<void>;
  health(): Promise<RuntimeHealth>;
  /** Stop everything the runtime runs (timers, streams). Safe to call twice. */
  close(): Promise<void>;
}

/** Options every runtime takes. */
export interface RuntimeOptions {
  /** Gateway-wide pub/sub component name (default "pubsub"). */
  pubsubName: string;
  /** Structured logger (pino-compatible subset). */
  logger: RuntimeLogger;
}

/** The logging surface runtimes use. */
export interface RuntimeLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}
