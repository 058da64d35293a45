import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { createEmbeddedRuntime } from "./embedded/index.js";
import type { Runtime, RuntimeOptions } from "./runtime.js";

export type { Runtime, RuntimeOptions, RuntimeHealth, RuntimeLogger } from "./runtime.js";

/** Options of the Dapr adapter. */
export interface DaprRuntimeOptions extends RuntimeOptions {
  host: string;
  grpcPort: number;
  apiToken?: string;
}

/** Create the runtime named by `--sidecar`. */
export async function createRuntime(kind: "embedded" | "dapr", opts: DaprRuntimeOptions): Promise<Runtime> {
  if (kind === "embedded") return createEmbeddedRuntime(opts);
  throw new GatewayError(Code.UNIMPLEMENTED, "the dapr runtime is not implemented yet");
}
