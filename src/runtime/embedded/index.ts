import type { Runtime, RuntimeOptions } from "../runtime.js";
import { createMemoryPubsub } from "./pubsub.js";
import { createMemoryScheduler } from "./scheduler.js";
import { createMemoryStateStore } from "./state-store.js";

/** The embedded runtime: in-process state store, pub/sub and scheduler. Always healthy; nothing to connect to. */
export function createEmbeddedRuntime(_opts: RuntimeOptions): Runtime {
  const pubsub = createMemoryPubsub();
  const jobs = createMemoryScheduler({ logger: _opts.logger });
  return {
    kind: "embedded",
    state: createMemoryStateStore(),
    pubsub,
    jobs,
    async start() {},
    async health() {
      return { status: "Healthy", description: "embedded runtime (in-process state store, pub/sub and scheduler)" };
    },
    async close() {
      jobs.close();
      pubsub.close();
    },
  };
}
