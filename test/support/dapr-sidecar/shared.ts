import { createTestScheduler, type TestScheduler } from "./scheduler.js";
import type { StateTables } from "./state.js";
import { createSharedStreams, type SharedStreams } from "./streams.js";

/** Options of the backing services several test sidecars share. */
export interface SharedDaprBackendOptions {
  /** The pub/sub component's `maxLenApprox`: entries each stream keeps. Default 10,000. */
  maxLenApprox?: number;
  /** The app id of the replicas (the Scheduler's job keys). Default "platform-gateway". */
  appId?: string;
  /** The Scheduler's default retry interval, ms (see scheduler.ts). Default 1000, as daprd's. */
  jobRetryIntervalMs?: number;
}

/**
 * What the replicas of one app id share behind their daprd sidecars: one Redis (the pub/sub streams with their
 * consumer groups, and the state store's keys, so etags hold across replicas) and one Scheduler service. Pass it as
 * `startTestDaprSidecar({ shared })` to each sidecar; close it after them.
 */
export interface SharedDaprBackend {
  readonly streams: SharedStreams;
  readonly state: StateTables;
  /**
   * One Scheduler for the app id. Each sidecar connects to it (daprd's WatchJobs stream, `scheduler.connect`); each
   * firing goes to ONE connected sidecar whose app target is up, in turn (round robin), and from there through that
   * sidecar's app channel to its own replica; with none the firing is staged until one is (see scheduler.ts).
   */
  readonly scheduler: TestScheduler;
  close(): void;
}

export function createSharedDaprBackend(o: SharedDaprBackendOptions = {}): SharedDaprBackend {
  const scheduler = createTestScheduler({ ...(o.appId ? { appId: o.appId } : {}), ...(o.jobRetryIntervalMs !== undefined ? { retryIntervalMs: o.jobRetryIntervalMs } : {}) });
  return {
    streams: createSharedStreams(o.maxLenApprox ?? 10_000),
    state: new Map(),
    scheduler,
    close() {
      scheduler.close();
    },
  };
}
