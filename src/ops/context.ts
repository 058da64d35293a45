import type { Runtime } from "../runtime/runtime.js";
import type { ServiceRegistry } from "../config/services.js";
import type { Logger } from "../observe/logger.js";
import type { Metrics } from "../observe/metrics.js";
import type { ValidatedOptions } from "../config/options.js";
import type { Tracer } from "../observe/span.js";

/** What every facility's operations get: the process-wide parts, created once by createGateway. */
export interface GatewayContext {
  readonly options: ValidatedOptions;
  readonly services: ServiceRegistry;
  readonly runtime: Runtime;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** This thread's tracer (src/observe/tracing.ts); absent: tracing off. */
  readonly tracer?: Tracer;
  /** True once shutdown has begun: refuse new work with UNAVAILABLE. */
  isClosing(): boolean;
}
