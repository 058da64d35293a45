import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { validateGatewayOptions, type GatewayOptions } from "../../src/config/options.js";
import { validateServicesConfig } from "../../src/config/services.js";
import { parseCli } from "../../src/main/cli-args.js";
import { createMetrics } from "../../src/observe/metrics.js";

/** Every option that counts or sizes something, with the smallest value it takes. */
const INTEGER_OPTIONS: Array<[keyof GatewayOptions, number]> = [
  ["grpcPort", 0],
  ["httpPort", 0],
  ["daprGrpcPort", 0],
  ["maxBodyBytes", 1],
  ["maxReplyBytes", 1],
  ["grpcMaxConcurrentStreams", 1],
  ["maxTriggers", 1],
  ["workerThresholdBytes", 0],
  ["conversionWorkers", 1],
  ["workerMaxQueue", 0],
  ["channelsPerBackend", 1],
  ["subscriptionLingerMs", 0],
  ["pubsubHistoryEvents", 0],
  ["pubsubEventBytes", 1],
  ["grpcInvokeOffload", 0],
  ["schemaRefreshIntervalMs", 0],
];

/** Durations in ms: fractions are fine (timers take them), zero and below are not. */
const DURATION_OPTIONS: Array<keyof GatewayOptions> = [
  "writeStallTimeoutMs",
  "grpcMessageTimeoutMs",
  "shutdownTimeoutMs",
  "invokeDeadlineMs",
  "sweepIntervalMs",
  "pubsubHistoryAgeMs",
];

describe("replaced options", () => {
  it("workerThreads is refused naming its replacement, conversionWorkers", () => {
    assert.throws(() => validateGatewayOptions({ workerThreads: 2 } as GatewayOptions), /option workerThreads was replaced by conversionWorkers, the bound on conversion-pool workers for the whole process/);
  });
});

describe("integer options are checked as integers", () => {
  for (const [name, min] of INTEGER_OPTIONS) {
    it(`${name}: ${min + 1.5} is refused naming the option, ${min + 2} is taken`, () => {
      assert.throws(
        () => validateGatewayOptions({ [name]: min + 1.5 }),
        (e: Error) => e.message.includes(`option ${name} must be`) && e.message.includes(`integer`) && e.message.includes(`(got ${min + 1.5})`),
      );
      assert.throws(() => validateGatewayOptions({ [name]: min - 1 }), new RegExp(`option ${name} must be`));
      assert.throws(() => validateGatewayOptions({ [name]: "4" as never }), new RegExp(`option ${name} must be`));
      assert.equal(validateGatewayOptions({ [name]: min + 2 })[name], min + 2);
    });
  }

  it("durations take fractions of a millisecond but not zero", () => {
    for (const name of DURATION_OPTIONS) {
      assert.equal(validateGatewayOptions({ [name]: 2.5 })[name], 2.5, name);
      assert.throws(() => validateGatewayOptions({ [name]: 0 }), new RegExp(`option ${name} must be a positive number`), name);
    }
  });

  it("a service's grpc.channels and port are integers", () => {
    const grpc = (g: Record<string, unknown>) => [{ name: "orders", grpc: { host: "127.0.0.1", port: 1, ...g } }];
    assert.throws(() => validateServicesConfig(grpc({ channels: 1.5 })), /service "orders".grpc.channels: must be an integer 1-64 \(got 1.5\)/);
    assert.throws(() => validateServicesConfig(grpc({ port: 80.5 })), /service "orders".grpc.port: must be an integer 1-65535 \(got 80.5\)/);
  });
});

describe("the environment is read by the CLI layer only", () => {
  const ENV = {
    DAPR_API_TOKEN: "dapr-secret",
    APP_API_TOKEN: "app-secret",
    GATEWAY_TOKEN_SECRET: "s".repeat(16),
    DAPR_GRPC_PORT: "50002",
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
    OTEL_METRIC_EXPORT_INTERVAL: "250",
    OTEL_SERVICE_NAME: "edge",
  };

  it("every documented variable becomes an option in parseCli", () => {
    assert.deepEqual(parseCli([], ENV), {
      daprApiToken: "dapr-secret",
      appApiToken: "app-secret",
      tokenSecret: "s".repeat(16),
      daprGrpcPort: 50002,
      otlpEndpoint: "http://127.0.0.1:4318",
      otlpIntervalMs: 250,
      otlpServiceName: "edge",
    });
    // An empty variable is unset; an OTLP interval that is not a positive number is ignored, as OpenTelemetry SDKs do.
    assert.deepEqual(parseCli([], { APP_API_TOKEN: "", OTEL_METRIC_EXPORT_INTERVAL: "soon" }), {});
    assert.deepEqual(parseCli([], { OTEL_METRIC_EXPORT_INTERVAL: "-5" }), {});
  });

  it("validateGatewayOptions and createMetrics take nothing from process.env", () => {
    const saved = Object.fromEntries(Object.keys(ENV).map((k) => [k, process.env[k]]));
    Object.assign(process.env, ENV);
    try {
      const o = validateGatewayOptions({});
      assert.equal(o.daprApiToken, undefined);
      assert.equal(o.appApiToken, undefined);
      assert.equal(o.tokenSecret, undefined);
      assert.equal(o.daprGrpcPort, 50001);
      assert.equal(o.otlpEndpoint, undefined);
      assert.equal(o.otlpIntervalMs, 60_000);
      assert.equal(o.otlpServiceName, "platform-gateway");
      const m = createMetrics({ processMetrics: false });
      assert.equal(m.otlp, false, "no OTLP export without an otlpEndpoint option");
      // The options the CLI builds from the same environment carry every value.
      const fromCli = validateGatewayOptions(parseCli([], ENV) as GatewayOptions);
      assert.equal(fromCli.appApiToken, "app-secret");
      assert.equal(fromCli.otlpIntervalMs, 250);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
