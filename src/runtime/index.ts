import { createDaprRuntime, type DaprRuntimeOptions } from "./dapr/index.js";
import { createEmbeddedRuntime } from "./embedded/index.js";
import { createRedisRuntime, type RedisRuntimeOptions } from "./redis/index.js";
import type { Runtime, RuntimeKind } from "./runtime.js";

export type { Runtime, RuntimeOptions, RuntimeHealth, RuntimeLogger } from "./runtime.js";
export type { DaprRuntimeOptions } from "./dapr/index.js";
export type { RedisRuntimeOptions } from "./redis/index.js";

/** Create the runtime named by `--sidecar` (each runtime ignores the other runtimes' options). */
export async function createRuntime(kind: RuntimeKind, opts: DaprRuntimeOptions & Omit<RedisRuntimeOptions, keyof DaprRuntimeOptions>): Promise<Runtime> {
  if (kind === "embedded") return createEmbeddedRuntime(opts);
  if (kind === "redis") return createRedisRuntime(opts);
  return createDaprRuntime(opts);
}
