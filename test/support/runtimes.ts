import { after, before } from "node:test";
import type { GatewayOverrides } from "../../src/main/gateway.js";
import type { GatewayOptions } from "../../src/config/options.js";
import { startTestDaprSidecar, type TestDaprSidecar } from "./dapr-sidecar/index.js";
import { startTestGateway, type TestGateway } from "./gateway.js";
import { freePort } from "./ports.js";

/** A runtime the facility suites run against. Suites loop over `runtimeFixtures` so every suite covers every runtime. */
export interface RuntimeFixture {
  /** "embedded", "dapr" or "redis". */
  name: string;
  /**
   * Prepare the runtime (e.g. start the Dapr-protocol test sidecar) and say how to start a gateway on it.
   * `close()` tears down whatever was started. `sidecar` is the Dapr test sidecar (fault injection), when there is one.
   */
  setup(): Promise<FixtureSetup>;
}

/** What a fixture's `setup()` returns. */
export interface FixtureSetup {
  options: Partial<GatewayOptions>;
  overrides?: GatewayOverrides;
  /** The Dapr test sidecar (fault injection), when there is one. */
  sidecar?: TestDaprSidecar;
  close(): Promise<void>;
}

const embedded: RuntimeFixture = {
  name: "embedded",
  async setup() {
    return { options: { sidecar: "embedded" }, async close() {} };
  },
};

/** The Redis Stack store of the dapr fixture and its query index (the state suite's catalog service uses them). */
export const QUERY_STORE = "catalog-store";
export const QUERY_INDEX = "gateway-state";

/**
 * The gateway on the Dapr adapter against the Dapr-protocol test sidecar (test/support/dapr-sidecar). daprd is told
 * the app port up front (`--app-port`); here the gateway's gRPC port is picked first and handed to both, so job
 * callbacks reach the gateway.
 */
const dapr: RuntimeFixture = {
  name: "dapr",
  async setup() {
    const grpcPort = await freePort();
    const sidecar = await startTestDaprSidecar({
      appAddress: `127.0.0.1:${grpcPort}`,
      // Like deploy/dapr: app health checks on (jobs fire only once the gateway answers them, without a token),
      // Redis for every store, and a Redis Stack store with the query index the state suite's catalog names.
      appHealthCheck: { intervalMs: 50 },
      stateStores: { [QUERY_STORE]: { kind: "redis-stack", queryIndexes: { [QUERY_INDEX]: ["name", "price", "stock", "tags.color"] } } },
      defaultStoreKind: "redis",
    });
    return {
      options: { sidecar: "dapr", daprHost: "127.0.0.1", daprGrpcPort: sidecar.port, grpcPort },
      sidecar,
      close: () => sidecar.close(),
    };
  },
};

/**
 * The gateway on the redis runtime against a real redis-server of its own (test/support/redis-server.ts; needs
 * /usr/bin/redis-server or $REDIS_SERVER). The job lease is short so a lost claim is retried quickly in tests.
 */
const redis: RuntimeFixture = {
  name: "redis",
  async setup() {
    const { startTestRedis } = await import("./redis-server.js");
    const server = await startTestRedis();
    return { options: { sidecar: "redis", redisUrl: server.url, redisJobLeaseMs: 2000 }, close: () => server.close() };
  },
};

const FIXTURES: Record<string, RuntimeFixture> = { embedded, dapr, redis };

/**
 * The runtime fixtures the facility suites loop over: the embedded runtime and the Dapr adapter on the test sidecar,
 * or the comma-separated names in $GATEWAY_TEST_RUNTIMES (e.g. `embedded,dapr,redis`; redis needs a redis-server).
 */
export const runtimeFixtures: RuntimeFixture[] = (process.env["GATEWAY_TEST_RUNTIMES"] ?? "embedded,dapr")
  .split(",")
  .map((n) => n.trim())
  .filter((n) => n !== "")
  .map((n) => {
    const f = FIXTURES[n];
    if (!f) throw new Error(`GATEWAY_TEST_RUNTIMES names ${JSON.stringify(n)}; known: ${Object.keys(FIXTURES).join(", ")}`);
    return f;
  });

/**
 * Inside a `describe`: start the fixture's runtime and a gateway on it in `before()`, close both in `after()`. The
 * returned getter gives the gateway once `before()` ran. `overrides` may replace the runtime (e.g. wrap the fixture's
 * one to inject faults); it gets what `setup()` returned.
 */
export function useGatewayOn(
  fixture: RuntimeFixture,
  options: GatewayOptions,
  overrides?: (f: FixtureSetup) => Promise<GatewayOverrides>,
): () => TestGateway {
  let gw: TestGateway | undefined;
  let teardown: (() => Promise<void>) | undefined;
  before(async () => {
    const f = await fixture.setup();
    teardown = f.close;
    gw = await startTestGateway({ ...f.options, ...options }, overrides ? await overrides(f) : f.overrides);
  });
  after(async () => {
    await gw?.close();
    await teardown?.();
  });
  return () => {
    if (!gw) throw new Error(`the gateway on ${fixture.name} is not started yet (use it inside a test)`);
    return gw;
  };
}
