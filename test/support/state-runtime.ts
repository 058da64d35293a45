import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import type { StatePort } from "../../src/runtime/state-port.js";
import type { PubsubPort } from "../../src/runtime/pubsub-port.js";
import type { RuntimeFixture } from "./runtimes.js";

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/** What a fixture's setup returns. */
type Setup = Awaited<ReturnType<RuntimeFixture["setup"]>>;

/** The runtime a fixture's gateway would use, created here so a test can wrap it (fault injection). */
export async function runtimeOf(f: Setup): Promise<Runtime> {
  if (f.overrides?.runtime) return f.overrides.runtime;
  return createRuntime(f.options.sidecar ?? "embedded", {
    pubsubName: "pubsub",
    logger: silent,
    host: f.options.daprHost ?? "127.0.0.1",
    grpcPort: f.options.daprGrpcPort ?? 50001,
    ...(f.options.daprApiToken ? { apiToken: f.options.daprApiToken } : {}),
    ...(f.options.redisUrl ? { redisUrl: f.options.redisUrl } : {}),
  });
}

/** `base` with some of its state or pubsub operations replaced. */
export function wrapRuntime(base: Runtime, replace: { state?: Partial<StatePort>; pubsub?: Partial<PubsubPort> }): Runtime {
  const s = base.state;
  const p = base.pubsub;
  return {
    kind: base.kind,
    state: {
      get: (...a) => s.get(...a),
      getBulk: (...a) => s.getBulk(...a),
      save: (...a) => s.save(...a),
      delete: (...a) => s.delete(...a),
      deleteBulk: (...a) => s.deleteBulk(...a),
      query: (...a) => s.query(...a),
      ...replace.state,
    },
    pubsub: { publish: (...a) => p.publish(...a), subscribe: (...a) => p.subscribe(...a), ...replace.pubsub },
    jobs: base.jobs,
    start: () => base.start(),
    health: () => base.health(),
    close: () => base.close(),
  };
}
