import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HELP, parseCli } from "../../src/main/cli-args.js";
import { MAX_WARMUP_CALLS, MAX_WARMUP_EVENTS, validateGatewayOptions } from "../../src/config/options.js";
import { CLI_WARMUP_CALLS, CLI_WARMUP_EVENTS } from "../../src/main/warmup.js";

describe("command line and environment", () => {
  it("a flag wins over its environment variable", () => {
    assert.deepEqual(parseCli(["--grpc-port", "7000"], { GATEWAY_GRPC_PORT: "6000", GATEWAY_HTTP_PORT: "6001" }), { grpcPort: 7000, httpPort: 6001 });
  });

  it("an empty environment variable counts as unset (it does not bind an ephemeral port)", () => {
    assert.deepEqual(parseCli([], { GATEWAY_GRPC_PORT: "", GATEWAY_HOST: "", GATEWAY_API_KEYS: "" }), {});
  });

  it("a bad number names the flag or the variable it came from", () => {
    assert.throws(() => parseCli(["--grpc-port", "abc"], {}), /--grpc-port must be an integer \(got "abc"\)/);
    assert.throws(() => parseCli(["--http-port", ""], {}), /--http-port must be an integer \(got ""\)/);
    assert.throws(() => parseCli([], { GATEWAY_GRPC_PORT: "12x" }), /GATEWAY_GRPC_PORT must be an integer \(got "12x"\)/);
    assert.throws(() => parseCli([], { GATEWAY_SHUTDOWN_TIMEOUT_MS: "1.5" }), /GATEWAY_SHUTDOWN_TIMEOUT_MS must be an integer/);
  });

  it("lists come from repeated flags or comma-separated variables", () => {
    assert.deepEqual(parseCli(["--api-key", "a", "--api-key", "b"], { GATEWAY_API_KEYS: "x" }).valueOf(), { apiKeys: ["a", "b"] });
    assert.deepEqual(parseCli([], { GATEWAY_API_KEYS: " a , ,b " }), { apiKeys: ["a", "b"] });
  });

  it("--sidecar redis with --redis-url / --redis-stream-maxlen / --redis-job-lease-ms and their variables; a bad URL is refused without echoing it", () => {
    assert.deepEqual(
      parseCli(["--sidecar", "redis", "--redis-url", "redis://:pw@10.0.0.5:6380/2", "--redis-stream-maxlen", "500"], { GATEWAY_REDIS_JOB_LEASE_MS: "3000", GATEWAY_REDIS_URL: "redis://other" }),
      { sidecar: "redis", redisUrl: "redis://:pw@10.0.0.5:6380/2", redisStreamMaxLen: 500, redisJobLeaseMs: 3000 },
    );
    const o = validateGatewayOptions({ sidecar: "redis" });
    assert.deepEqual([o.sidecar, o.redisUrl, o.redisStreamMaxLen, o.redisJobLeaseMs], ["redis", "redis://127.0.0.1:6379", 10_000, 10_000]);
    for (const url of ["http://u:secretpw@h:6379", "not a url secretpw", "redis://:secretpw@/"]) {
      assert.throws(
        () => validateGatewayOptions({ redisUrl: url }),
        (e: Error) => /option redisUrl must be a URL redis:\/\//.test(e.message) && !e.message.includes("secretpw"),
        url,
      );
    }
    assert.throws(() => validateGatewayOptions({ redisUrl: "redis://:secretpw@h:70000" }), (e: Error) => !e.message.includes("secretpw"));
    assert.throws(() => validateGatewayOptions({ redisStreamMaxLen: 0 }), /redisStreamMaxLen/);
    assert.throws(() => validateGatewayOptions({ redisJobLeaseMs: 0 }), /redisJobLeaseMs/);
    assert.throws(() => validateGatewayOptions({ sidecar: "memcached" as "redis" }), /must be embedded, dapr or redis/);
    assert.match(HELP, /--redis-url <url>/);
  });

  it("--help is reported, unknown flags throw", () => {
    assert.equal(parseCli(["--help"], {}), "help");
    assert.throws(() => parseCli(["--nope"], {}), /nope/);
  });

  it("--max-triggers / GATEWAY_MAX_TRIGGERS cap the triggers; default 10000; must be positive", () => {
    assert.deepEqual(parseCli(["--max-triggers", "50"], { GATEWAY_MAX_TRIGGERS: "7" }), { maxTriggers: 50 });
    assert.deepEqual(parseCli([], { GATEWAY_MAX_TRIGGERS: "7" }), { maxTriggers: 7 });
    assert.equal(validateGatewayOptions({}).maxTriggers, 10_000);
    assert.throws(() => validateGatewayOptions({ maxTriggers: 0 }), /maxTriggers/);
    assert.throws(() => validateGatewayOptions({ maxTriggers: 1.5 }), /maxTriggers/);
    // A string where a list belongs is named, not a TypeError from inside the check.
    assert.throws(() => validateGatewayOptions({ forwardCredentialHeaders: "x-token" as unknown as string[] }), /forwardCredentialHeaders .*must be a list of header names/);
    assert.throws(() => validateGatewayOptions({ pubsubEventBytes: 1.5 }), /pubsubEventBytes/);
    assert.match(HELP, /--max-triggers <n> .* GATEWAY_MAX_TRIGGERS \(default 10000\)/);
  });

  it("web pub/sub flags and variables: token secret, CORS origins, history bounds, nominal event size", () => {
    assert.deepEqual(
      parseCli(["--token-secret", "s".repeat(16), "--cors-origin", "https://a.example", "--cors-origin", "http://127.0.0.1:3000", "--pubsub-history-events", "50", "--pubsub-history-age", "1000", "--pubsub-event-bytes", "256"], {}),
      { tokenSecret: "s".repeat(16), corsOrigins: ["https://a.example", "http://127.0.0.1:3000"], pubsubHistoryEvents: 50, pubsubHistoryAgeMs: 1000, pubsubEventBytes: 256 },
    );
    assert.deepEqual(parseCli([], { GATEWAY_CORS_ORIGINS: "https://a.example, *", GATEWAY_TOKEN_SECRET: "t".repeat(20), GATEWAY_PUBSUB_HISTORY_AGE_MS: "5" }), {
      corsOrigins: ["https://a.example", "*"],
      tokenSecret: "t".repeat(20),
      pubsubHistoryAgeMs: 5,
    });
    assert.throws(() => parseCli(["--pubsub-history-events", "many"], {}), /--pubsub-history-events must be an integer/);
  });

  it("--grpc-invoke-offload / GATEWAY_GRPC_INVOKE_OFFLOAD: gRPC invokes on the threads from n in flight; default 0 (never)", () => {
    assert.deepEqual(parseCli(["--grpc-invoke-offload", "2"], { GATEWAY_GRPC_INVOKE_OFFLOAD: "5" }), { grpcInvokeOffload: 2 });
    assert.deepEqual(parseCli([], { GATEWAY_GRPC_INVOKE_OFFLOAD: "1" }), { grpcInvokeOffload: 1 });
    assert.equal(validateGatewayOptions({}).grpcInvokeOffload, 0);
    assert.throws(() => validateGatewayOptions({ grpcInvokeOffload: -1 }), /grpcInvokeOffload/);
    assert.throws(() => parseCli(["--grpc-invoke-offload", "yes"], {}), /--grpc-invoke-offload must be an integer/);
    assert.match(HELP, /--grpc-invoke-offload <n> .*\n.* GATEWAY_GRPC_INVOKE_OFFLOAD \(default 0: never\)/);
  });

  it("--warmup-events / GATEWAY_WARMUP_EVENTS: events through a private gateway before listening; 0 when embedding, the CLI's 1000", () => {
    assert.deepEqual(parseCli(["--warmup-events", "0"], { GATEWAY_WARMUP_EVENTS: "5" }), { warmupEvents: 0 });
    assert.deepEqual(parseCli([], { GATEWAY_WARMUP_EVENTS: "200" }), { warmupEvents: 200 });
    assert.equal(validateGatewayOptions({}).warmupEvents, 0);
    assert.equal(CLI_WARMUP_EVENTS, 1000);
    assert.throws(() => validateGatewayOptions({ warmupEvents: -1 }), /option warmupEvents must be a non-negative integer/);
    assert.throws(() => validateGatewayOptions({ warmupEvents: MAX_WARMUP_EVENTS + 1 }), /option warmupEvents must be at most 100000/);
    assert.throws(() => parseCli(["--warmup-events", "lots"], {}), /--warmup-events must be an integer/);
    assert.match(HELP, /--warmup-events <n> .*\n.* GATEWAY_WARMUP_EVENTS \(default 1000\)/);
  });

  it("--warmup-calls / GATEWAY_WARMUP_CALLS: JSON invokes through a private gateway before listening; 0 when embedding, the CLI's 1000", () => {
    assert.deepEqual(parseCli(["--warmup-calls", "0"], { GATEWAY_WARMUP_CALLS: "5" }), { warmupCalls: 0 });
    assert.deepEqual(parseCli([], { GATEWAY_WARMUP_CALLS: "200" }), { warmupCalls: 200 });
    assert.equal(validateGatewayOptions({}).warmupCalls, 0);
    assert.equal(CLI_WARMUP_CALLS, 1000);
    assert.throws(() => validateGatewayOptions({ warmupCalls: -1 }), /option warmupCalls must be a non-negative integer/);
    assert.throws(() => validateGatewayOptions({ warmupCalls: MAX_WARMUP_CALLS + 1 }), /option warmupCalls must be at most 20000/);
    assert.throws(() => parseCli(["--warmup-calls", "lots"], {}), /--warmup-calls must be an integer/);
    assert.match(HELP, /--warmup-calls <n> .*\n.* GATEWAY_WARMUP_CALLS \(default 1000\)/);
  });

  it("bad web pub/sub options name the option", () => {
    assert.throws(() => validateGatewayOptions({ corsOrigins: ["a.example"] }), /corsOrigins/);
    assert.throws(() => validateGatewayOptions({ tokenSecret: "short" }), /tokenSecret must be a string of at least 16 characters/);
    assert.throws(() => validateGatewayOptions({ pubsubEventBytes: 0 }), /pubsubEventBytes/);
    assert.throws(() => validateGatewayOptions({ pubsubHistoryEvents: -1 }), /pubsubHistoryEvents/);
    const o = validateGatewayOptions({});
    assert.equal(o.pubsubHistoryEvents, 1000);
    assert.equal(o.pubsubHistoryAgeMs, 60_000);
    assert.equal(o.pubsubEventBytes, 1024);
    assert.deepEqual(o.corsOrigins, []);
  });

  it("TLS flags and variables: certificate, key, client CA, allow-plaintext", () => {
    assert.deepEqual(parseCli(["--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem", "--allow-plaintext"], {}), {
      tlsCert: "c.pem",
      tlsKey: "k.pem",
      tlsClientCa: "ca.pem",
      allowPlaintext: true,
    });
    assert.deepEqual(parseCli([], { GATEWAY_TLS_CERT: "c.pem", GATEWAY_TLS_KEY: "k.pem", GATEWAY_TLS_CLIENT_CA: "ca.pem", GATEWAY_ALLOW_PLAINTEXT: "true" }), {
      tlsCert: "c.pem",
      tlsKey: "k.pem",
      tlsClientCa: "ca.pem",
      allowPlaintext: true,
    });
    assert.deepEqual(parseCli([], { GATEWAY_ALLOW_PLAINTEXT: "0" }), { allowPlaintext: false });
    assert.throws(() => parseCli([], { GATEWAY_ALLOW_PLAINTEXT: "sure" }), /GATEWAY_ALLOW_PLAINTEXT must be true or false/);
    assert.match(HELP, /--tls-cert <file> .* GATEWAY_TLS_CERT/);
    assert.match(HELP, /--allow-plaintext .* GATEWAY_ALLOW_PLAINTEXT/);
  });
});
