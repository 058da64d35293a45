import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import { createMemoryScheduler, type MemoryScheduler } from "../../../src/runtime/embedded/scheduler.js";
import type { JobDeliver } from "./jobs.js";
import type { StateTables } from "./state.js";
import { createSharedStreams, type SharedStreams } from "./streams.js";

/** Options of the backing services several test sidecars share. */
export interface SharedDaprBackendOptions {
  /** The pub/sub component's `maxLenApprox`: entries each stream keeps. Default 10,000. */
  maxLenApprox?: number;
}

/** A sidecar that can take a job's firing: its delivery through its app channel, and whether it is serving. */
interface JobTarget {
  deliver: JobDeliver;
  running(): boolean;
}

/**
 * What the replicas of one app id share behind their daprd sidecars: one Redis (the pub/sub streams with their
 * consumer groups, and the state store's keys, so etags hold across replicas) and one Scheduler service. Pass it as
 * `startTestDaprSidecar({ shared })` to each sidecar; close it after them.
 */
export interface SharedDaprBackend {
  readonly streams: SharedStreams;
  readonly state: StateTables;
  readonly scheduler: MemoryScheduler;
  /**
   * A sidecar connects to the Scheduler for its app id (daprd's WatchJobs stream); returns its disconnect. Each
   * firing goes to ONE connected sidecar that is serving, in turn (round robin), and from there through that
   * sidecar's app channel to its own replica; with none serving the firing fails UNAVAILABLE.
   */
  connectJobs(target: JobTarget): () => void;
  close(): void;
}

export function createSharedDaprBackend(o: SharedDaprBackendOptions = {}): SharedDaprBackend {
  const scheduler = createMemoryScheduler();
  const targets: JobTarget[] = [];
  let next = 0;
  scheduler.setHandler(async (name, data) => {
    const live = targets.filter((t) => t.running());
    if (live.length === 0) throw new GatewayError(Code.UNAVAILABLE, `no sidecar of the app is connected to the scheduler to take job ${name}`);
    const t = live[next++ % live.length]!;
    await t.deliver(name, data);
  });
  return {
    streams: createSharedStreams(o.maxLenApprox ?? 10_000),
    state: new Map(),
    scheduler,
    connectJobs(target) {
      targets.push(target);
      return () => {
        const i = targets.indexOf(target);
        if (i >= 0) targets.splice(i, 1);
      };
    },
    close() {
      scheduler.close();
      targets.length = 0;
    },
  };
}
