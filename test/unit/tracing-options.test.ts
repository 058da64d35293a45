import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseCli } from "../../src/main/cli-args.js";
import { validateGatewayOptions } from "../../src/config/options.js";
import { createTracer } from "../../src/observe/tracing.js";
import { TRACING_OFF } from "../../src/observe/span.js";

describe("tracing options: flags, OTEL_* variables, validation", () => {
  it("off by default, and OTEL_EXPORTER_OTLP_ENDPOINT alone still exports metrics only", () => {
    assert.deepEqual(parseCli([], {}), {});
    assert.deepEqual(parseCli([], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }), { otlpEndpoint: "http://c:4318" });
    const o = validateGatewayOptions({});
    assert.equal(o.otlpTracesEndpoint, undefined);
    assert.equal(createTracer({ endpoint: o.otlpTracesEndpoint }), TRACING_OFF, "no provider when off");
  });

  it("OTEL_TRACES_EXPORTER=otlp exports to the generic endpoint plus /v1/traces (default localhost:4318); the traces endpoint is used as given", () => {
    assert.equal((parseCli([], { OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" }) as Record<string, unknown>)["otlpTracesEndpoint"], "http://c:4318/v1/traces");
    assert.equal((parseCli([], { OTEL_TRACES_EXPORTER: "otlp" }) as Record<string, unknown>)["otlpTracesEndpoint"], "http://localhost:4318/v1/traces");
    assert.equal((parseCli([], { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x" }) as Record<string, unknown>)["otlpTracesEndpoint"], "http://t:1/x");
    assert.equal((parseCli(["--otlp-traces-endpoint", "http://f:2/v1/traces"], { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x" }) as Record<string, unknown>)["otlpTracesEndpoint"], "http://f:2/v1/traces");
  });

  it("OTEL_TRACES_EXPORTER=none turns the variables off; the flag still wins", () => {
    assert.deepEqual(parseCli([], { OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x" }), {});
    assert.equal((parseCli(["--otlp-traces-endpoint", "http://f:2/v1/traces"], { OTEL_TRACES_EXPORTER: "none" }) as Record<string, unknown>)["otlpTracesEndpoint"], "http://f:2/v1/traces");
    assert.throws(() => parseCli([], { OTEL_TRACES_EXPORTER: "zipkin" }), /OTEL_TRACES_EXPORTER must be otlp or none \(got "zipkin"\)/);
  });

  it("protocol, sampler and its ratio, and the export delay are read only when tracing is on", () => {
    const env = {
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_BSP_MAX_QUEUE_SIZE: "4096",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "1024",
    };
    assert.deepEqual(parseCli(["--otlp-traces-endpoint", "http://c:4318/v1/traces"], env), {
      otlpTracesEndpoint: "http://c:4318/v1/traces",
      otlpTracesProtocol: "http/json",
      traceSampler: "parentbased_traceidratio",
      traceSamplerArg: 0.25,
      traceExportDelayMs: 100,
      traceMaxQueue: 4096,
      traceExportBatch: 1024,
    });
    assert.deepEqual(parseCli([], { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }), {}, "a variable meant for another process does not matter while tracing is off");
    assert.equal((parseCli(["--otlp-traces-endpoint", "http://c/v1/traces", "--otlp-traces-protocol", "http/protobuf"], env) as Record<string, unknown>)["otlpTracesProtocol"], "http/protobuf");
    assert.throws(() => parseCli(["--otlp-traces-endpoint", "http://c/v1/traces"], { OTEL_TRACES_SAMPLER_ARG: "half" }), /OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 \(got "half"\)/);
  });

  it("bad values are refused naming the option, and a bad URL is not echoed", () => {
    const o = validateGatewayOptions({ otlpTracesEndpoint: "http://c:4318/v1/traces" });
    assert.deepEqual([o.otlpTracesProtocol, o.traceSampler, o.traceSamplerArg, o.traceExportDelayMs, o.traceMaxQueue, o.traceExportBatch], ["http/protobuf", "parentbased_always_on", 1, 5000, 8192, 2048]);
    assert.throws(() => parseCli(["--otlp-traces-endpoint", "http://c/v1/traces"], { OTEL_BSP_MAX_QUEUE_SIZE: "lots" }), /OTEL_BSP_MAX_QUEUE_SIZE/);
    assert.throws(() => validateGatewayOptions({ traceExportBatch: 0 }), /option traceExportBatch must be a positive integer/);
    assert.throws(() => validateGatewayOptions({ otlpTracesEndpoint: "ftp://u:secretpw@c/" }), (e: Error) => /option otlpTracesEndpoint must be an http/.test(e.message) && !e.message.includes("secretpw"));
    assert.throws(() => validateGatewayOptions({ otlpTracesProtocol: "grpc" as never }), /option otlpTracesProtocol must be one of http\/protobuf, http\/json \(got "grpc"\)/);
    assert.throws(() => validateGatewayOptions({ traceSampler: "jaeger_remote" as never }), /option traceSampler must be one of always_on/);
    assert.throws(() => validateGatewayOptions({ traceSamplerArg: 1.5 }), /option traceSamplerArg must be a number from 0 to 1 \(got 1.5\)/);
  });
});
