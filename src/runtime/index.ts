import { createDaprRuntime, type DaprRuntimeOptions } from "./dapr/index.js";
import { createEmbeddedRuntime } from "./embedded/index.js";
import type { Runtime } from "./runtime.js";

export type { Runtime, RuntimeOptions, RuntimeHealth, RuntimeLogger } from "./runtime.js";
export type { DaprRuntimeOptions } from "./dapr/index.js";

/** Create the runtime named by `--sidecar` (the Dapr options are ignored by the embedded runtime). */
export async function createRuntime(kind: "embedded" | "dapr", opts: DaprRuntimeOptions): Promise<Runtime> {
  if (kind === "embedded") return createEmbeddedRuntime(opts);
  return createDaprRuntime(opts);
}
