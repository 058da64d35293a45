import { parseArgs } from "node:util";
import { GatewayError } from "../shared/gateway-error.js";
import { LOG_LEVELS, type LogLevel } from "../observe/logger.js";
import type { GatewayOptions } from "../config/options.js";

/** The `--help` text. */
export const HELP = `platform-gateway: dynamic gRPC gateway with state, pub/sub and triggers

Usage: platform-gateway [options]

Options (each has an environment variable; the flag wins):
  --config <file>         services configuration, YAML or JSON         GATEWAY_CONFIG (default config/gateway.yaml when present)
  --host <host>           host both servers bind                        GATEWAY_HOST (default 127.0.0.1)
  --grpc-port <port>      gRPC port, 0 = ephemeral                      GATEWAY_GRPC_PORT (default 5000)
  --http-port <port>      REST port, 0 = ephemeral                      GATEWAY_HTTP_PORT (default 8080)
  --sidecar <kind>        embedded | dapr | redis                       GATEWAY_SIDECAR (default embedded)
  --pubsub-name <name>    sidecar pub/sub component name                GATEWAY_PUBSUB_NAME (default: config, else pubsub)
  --api-key <key>         accepted x-api-key, repeatable                GATEWAY_API_KEYS (comma-separated)
  --log-level <level>     ${LOG_LEVELS.join("|")}   GATEWAY_LOG_LEVEL (default info)
  --max-body-bytes <n>    largest REST body and gRPC request message    GATEWAY_MAX_BODY_BYTES (default 4194304)
  --max-reply-bytes <n>   largest reply body; query pages cut to fit    GATEWAY_MAX_REPLY_BYTES (default 8388608)
  --write-stall-timeout <ms> close a REST connection that reads nothing  GATEWAY_WRITE_STALL_TIMEOUT_MS (default 10000)
  --max-unread-reply-bytes <n> REST reply bytes held for non-readers, per HTTP thread (and built at once)
                                                                GATEWAY_MAX_UNREAD_REPLY_BYTES (default 67108864)
  --grpc-max-streams <n>  concurrent gRPC streams per connection        GATEWAY_GRPC_MAX_STREAMS (default 1000)
  --grpc-message-timeout <ms> wait for a unary request message          GATEWAY_GRPC_MESSAGE_TIMEOUT_MS (default 10000)
  --grpc-idle-timeout <ms> close a gRPC connection idle this long, 0 = never GATEWAY_GRPC_IDLE_TIMEOUT_MS (default 300000)
  --grpc-max-connection-age <ms> close gRPC connections at this age, 0 = never GATEWAY_GRPC_MAX_CONNECTION_AGE_MS (default 0)
  --grpc-max-connections <n> open gRPC connections at once               GATEWAY_GRPC_MAX_CONNECTIONS (default 3/4 of ulimit -n)
  --web-max-connections <n> WebSocket and SSE subscribers at once         GATEWAY_WEB_MAX_CONNECTIONS (default 3/4 of ulimit -n)
  --accept-backlog <n>    connections queued per port before accept     GATEWAY_ACCEPT_BACKLOG (default 4096)
  --forward-header <h>    header forwarded to backends, repeatable      GATEWAY_FORWARD_HEADERS (comma-separated)
  --forward-credential-header <h>  override: forward a --forward-header whose name looks like a credential
                          (auth, token, key, secret, ...), repeatable   GATEWAY_FORWARD_CREDENTIAL_HEADERS (logged as a warning)
  --shutdown-timeout <ms> bound on graceful shutdown                    GATEWAY_SHUTDOWN_TIMEOUT_MS (default 10000)
  --max-triggers <n>      most triggers at once                         GATEWAY_MAX_TRIGGERS (default 10000)
  --token-secret <s>      secret signing browser tokens (>= 16 chars)   GATEWAY_TOKEN_SECRET (default: random per process)
  --cors-origin <origin>  browser origin allowed (REST and web), repeat GATEWAY_CORS_ORIGINS (comma-separated; default none)
  --pubsub-history-events <n> resume history events per topic          GATEWAY_PUBSUB_HISTORY_EVENTS (default 1000)
  --pubsub-history-age <ms>   resume history age per topic             GATEWAY_PUBSUB_HISTORY_AGE_MS (default 60000)
  --pubsub-event-bytes <n>    nominal event size; web bound = 1024 x n GATEWAY_PUBSUB_EVENT_BYTES (default 1024)
  --warmup-events <n>     events through a private gateway before listening, 0 = none (docs/warmup.md)
                                                                GATEWAY_WARMUP_EVENTS (default 1000)
  --warmup-calls <n>      JSON invokes through it (and each HTTP thread) before listening, 0 = none
                                                                GATEWAY_WARMUP_CALLS (default 1000)
  --threads <n>           threads serving the HTTP port (REST, WebSocket, SSE; 1 = main thread only)
                                                                GATEWAY_THREADS (default: the number of cores)
  --conversion-workers <n> most JSON<->protobuf pool workers in the process (all threads together)
                                                                GATEWAY_CONVERSION_WORKERS (default: cores - 1, at least 1)
  --grpc-invoke-offload <n> with --threads > 1, run a gRPC invoke on the threads when n are in flight
                                                                GATEWAY_GRPC_INVOKE_OFFLOAD (default 0: never)
  --schema-refresh-interval <ms> reflect every backend's schema again this often
                                                                GATEWAY_SCHEMA_REFRESH_INTERVAL_MS (default 0: on reconnect only)
  --tls-cert <file>       PEM certificate (chain) both ports serve TLS with GATEWAY_TLS_CERT (default none: cleartext)
  --tls-key <file>        PEM private key of --tls-cert                 GATEWAY_TLS_KEY
  --tls-client-ca <file>  PEM CA: gRPC clients must present a certificate it signed (mutual TLS)
                                                                GATEWAY_TLS_CLIENT_CA
  --allow-plaintext       serve cleartext on a non-loopback host        GATEWAY_ALLOW_PLAINTEXT (true|false, default false)
  --dapr-host <host>      Dapr sidecar host                             DAPR_HOST (default 127.0.0.1)
  --dapr-grpc-port <port> Dapr sidecar gRPC port                        DAPR_GRPC_PORT (default 50001)
  --redis-url <url>       Redis of --sidecar redis (docs/redis.md)      GATEWAY_REDIS_URL (default redis://127.0.0.1:6379)
  --redis-stream-maxlen <n>  entries kept per topic stream (MAXLEN ~)   GATEWAY_REDIS_STREAM_MAXLEN (default 10000)
  --redis-job-lease-ms <ms>  a replica's claim on a job firing          GATEWAY_REDIS_JOB_LEASE_MS (default 10000)
  --otlp-traces-endpoint <url> export traces over OTLP/HTTP to this URL   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (default none: off)
  --otlp-traces-protocol <p> http/protobuf | http/json                  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (default http/protobuf)
  -h, --help              print this help

Dapr tokens come from DAPR_API_TOKEN (sent to the sidecar) and APP_API_TOKEN (required on sidecar job callbacks).
Metrics are also exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set (every OTEL_METRIC_EXPORT_INTERVAL
ms, default 60000; service.name OTEL_SERVICE_NAME, default platform-gateway).
Traces are exported when a traces endpoint is given, or OTEL_TRACES_EXPORTER=otlp (then to OTEL_EXPORTER_OTLP_ENDPOINT
plus /v1/traces); sampling follows OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (docs/observability.md).
With no API key the gateway accepts every caller and refuses to bind a non-loopback host; the same holds for
--sidecar dapr without APP_API_TOKEN (its job callbacks would accept anyone). A non-loopback host also needs
--tls-cert/--tls-key, or --allow-plaintext when a proxy or mesh in front terminates TLS. Certificate files are
checked every 2 s and a changed pair is served to new connections; open ones keep theirs.
`;

/** A flag's value, else the environment variable's (an empty variable counts as unset), with where it came from. */
type Sourced = { value: string; source: string } | undefined;

function int(given: Sourced): number | undefined {
  if (given === undefined) return undefined;
  const n = /^\s*-?\d+\s*$/.test(given.value) ? Number(given.value) : NaN;
  if (!Number.isSafeInteger(n)) throw new GatewayError(3, `${given.source} must be an integer (got ${JSON.stringify(given.value)})`);
  return n;
}

/**
 * OTEL_METRIC_EXPORT_INTERVAL as OpenTelemetry SDKs read it: a positive number of ms, anything else ignored (the
 * default applies), so a variable meant for another process never stops the gateway.
 */
function otelInterval(v: string | undefined): number | undefined {
  const n = v === undefined || v.trim() === "" ? NaN : Number(v);
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

function bool(given: Sourced): boolean | undefined {
  if (given === undefined) return undefined;
  const v = given.value.trim().toLowerCase();
  if (v === "true" || v === "1" || v === "yes") return true;
  if (v === "false" || v === "0" || v === "no") return false;
  throw new GatewayError(3, `${given.source} must be true or false (got ${JSON.stringify(given.value)})`);
}

function list(given: Sourced): string[] | undefined {
  return given === undefined ? undefined : given.value.split(",").map((s) => s.trim()).filter(Boolean);
}

/**
 * Turn argv and the environment into GatewayOptions: a flag wins over its environment variable, and an empty
 * variable counts as unset. A bad value throws a GatewayError naming the flag or the variable.
 */
export function parseCli(argv: string[], env: NodeJS.ProcessEnv): GatewayOptions | "help" {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      config: { type: "string" },
      host: { type: "string" },
      "grpc-port": { type: "string" },
      "http-port": { type: "string" },
      sidecar: { type: "string" },
      "pubsub-name": { type: "string" },
      "api-key": { type: "string", multiple: true },
      "log-level": { type: "string" },
      "max-body-bytes": { type: "string" },
      "max-reply-bytes": { type: "string" },
      "write-stall-timeout": { type: "string" },
      "max-unread-reply-bytes": { type: "string" },
      "grpc-max-streams": { type: "string" },
      "grpc-message-timeout": { type: "string" },
      "grpc-idle-timeout": { type: "string" },
      "grpc-max-connection-age": { type: "string" },
      "grpc-max-connections": { type: "string" },
      "web-max-connections": { type: "string" },
      "accept-backlog": { type: "string" },
      "forward-header": { type: "string", multiple: true },
      "forward-credential-header": { type: "string", multiple: true },
      "shutdown-timeout": { type: "string" },
      "max-triggers": { type: "string" },
      "token-secret": { type: "string" },
      "cors-origin": { type: "string", multiple: true },
      "pubsub-history-events": { type: "string" },
      "pubsub-history-age": { type: "string" },
      "pubsub-event-bytes": { type: "string" },
      "warmup-events": { type: "string" },
      "warmup-calls": { type: "string" },
      threads: { type: "string" },
      "grpc-invoke-offload": { type: "string" },
      "schema-refresh-interval": { type: "string" },
      "conversion-workers": { type: "string" },
      // Removed (the grpc-js server front was retired); still parsed, so that passing it gets an error naming it.
      "grpc-server": { type: "string" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "tls-client-ca": { type: "string" },
      "allow-plaintext": { type: "boolean" },
      "dapr-host": { type: "string" },
      "dapr-grpc-port": { type: "string" },
      "redis-url": { type: "string" },
      "redis-stream-maxlen": { type: "string" },
      "redis-job-lease-ms": { type: "string" },
      "otlp-traces-endpoint": { type: "string" },
      "otlp-traces-protocol": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return "help";
  const opts: GatewayOptions = {};
  const set = <K extends keyof GatewayOptions>(k: K, v: GatewayOptions[K] | undefined): void => {
    if (v !== undefined) opts[k] = v;
  };
  const flags = values as Record<string, string | string[] | boolean | undefined>;
  const from = (flag: string, envName: string): Sourced => {
    const f = flags[flag];
    if (typeof f === "string") return { value: f, source: `--${flag}` };
    const e = env[envName];
    return e === undefined || e === "" ? undefined : { value: e, source: envName };
  };
  const str = (flag: string, envName: string): string | undefined => from(flag, envName)?.value;
  set("configPath", str("config", "GATEWAY_CONFIG"));
  set("host", str("host", "GATEWAY_HOST"));
  set("grpcPort", int(from("grpc-port", "GATEWAY_GRPC_PORT")));
  set("httpPort", int(from("http-port", "GATEWAY_HTTP_PORT")));
  set("sidecar", str("sidecar", "GATEWAY_SIDECAR") as GatewayOptions["sidecar"]);
  set("pubsubName", str("pubsub-name", "GATEWAY_PUBSUB_NAME"));
  set("apiKeys", values["api-key"] ?? list(from("", "GATEWAY_API_KEYS")));
  set("logLevel", str("log-level", "GATEWAY_LOG_LEVEL") as LogLevel | undefined);
  set("maxBodyBytes", int(from("max-body-bytes", "GATEWAY_MAX_BODY_BYTES")));
  set("maxReplyBytes", int(from("max-reply-bytes", "GATEWAY_MAX_REPLY_BYTES")));
  set("writeStallTimeoutMs", int(from("write-stall-timeout", "GATEWAY_WRITE_STALL_TIMEOUT_MS")));
  set("maxUnreadReplyBytes", int(from("max-unread-reply-bytes", "GATEWAY_MAX_UNREAD_REPLY_BYTES")));
  set("grpcMaxConcurrentStreams", int(from("grpc-max-streams", "GATEWAY_GRPC_MAX_STREAMS")));
  set("grpcMessageTimeoutMs", int(from("grpc-message-timeout", "GATEWAY_GRPC_MESSAGE_TIMEOUT_MS")));
  set("grpcIdleTimeoutMs", int(from("grpc-idle-timeout", "GATEWAY_GRPC_IDLE_TIMEOUT_MS")));
  set("grpcMaxConnectionAgeMs", int(from("grpc-max-connection-age", "GATEWAY_GRPC_MAX_CONNECTION_AGE_MS")));
  set("grpcMaxConnections", int(from("grpc-max-connections", "GATEWAY_GRPC_MAX_CONNECTIONS")));
  set("webMaxConnections", int(from("web-max-connections", "GATEWAY_WEB_MAX_CONNECTIONS")));
  set("acceptBacklog", int(from("accept-backlog", "GATEWAY_ACCEPT_BACKLOG")));
  set("forwardHeaders", values["forward-header"] ?? list(from("", "GATEWAY_FORWARD_HEADERS")));
  set("forwardCredentialHeaders", values["forward-credential-header"] ?? list(from("", "GATEWAY_FORWARD_CREDENTIAL_HEADERS")));
  set("shutdownTimeoutMs", int(from("shutdown-timeout", "GATEWAY_SHUTDOWN_TIMEOUT_MS")));
  set("maxTriggers", int(from("max-triggers", "GATEWAY_MAX_TRIGGERS")));
  set("tokenSecret", str("token-secret", "GATEWAY_TOKEN_SECRET"));
  set("corsOrigins", values["cors-origin"] ?? list(from("", "GATEWAY_CORS_ORIGINS")));
  set("pubsubHistoryEvents", int(from("pubsub-history-events", "GATEWAY_PUBSUB_HISTORY_EVENTS")));
  set("pubsubHistoryAgeMs", int(from("pubsub-history-age", "GATEWAY_PUBSUB_HISTORY_AGE_MS")));
  set("pubsubEventBytes", int(from("pubsub-event-bytes", "GATEWAY_PUBSUB_EVENT_BYTES")));
  set("warmupEvents", int(from("warmup-events", "GATEWAY_WARMUP_EVENTS")));
  set("warmupCalls", int(from("warmup-calls", "GATEWAY_WARMUP_CALLS")));
  set("threads", int(from("threads", "GATEWAY_THREADS")));
  set("grpcInvokeOffload", int(from("grpc-invoke-offload", "GATEWAY_GRPC_INVOKE_OFFLOAD")));
  set("schemaRefreshIntervalMs", int(from("schema-refresh-interval", "GATEWAY_SCHEMA_REFRESH_INTERVAL_MS")));
  set("conversionWorkers", int(from("conversion-workers", "GATEWAY_CONVERSION_WORKERS")));
  set("tlsCert", str("tls-cert", "GATEWAY_TLS_CERT"));
  set("tlsKey", str("tls-key", "GATEWAY_TLS_KEY"));
  set("tlsClientCa", str("tls-client-ca", "GATEWAY_TLS_CLIENT_CA"));
  set("allowPlaintext", values["allow-plaintext"] === true ? true : bool(from("", "GATEWAY_ALLOW_PLAINTEXT")));
  const removed = from("grpc-server", "GATEWAY_GRPC_SERVER");
  if (removed) {
    throw new GatewayError(3, `${removed.source} was removed: the gRPC port is always served by the gateway's own gRPC server (docs/native-grpc-server.md); drop ${removed.source}`);
  }
  set("daprHost", str("dapr-host", "DAPR_HOST"));
  set("daprGrpcPort", int(from("dapr-grpc-port", "DAPR_GRPC_PORT")));
  set("redisUrl", str("redis-url", "GATEWAY_REDIS_URL"));
  set("redisStreamMaxLen", int(from("redis-stream-maxlen", "GATEWAY_REDIS_STREAM_MAXLEN")));
  set("redisJobLeaseMs", int(from("redis-job-lease-ms", "GATEWAY_REDIS_JOB_LEASE_MS")));
  // Variables without a flag. This function is the only place the gateway reads the environment.
  set("daprApiToken", str("", "DAPR_API_TOKEN"));
  set("appApiToken", str("", "APP_API_TOKEN"));
  set("otlpEndpoint", str("", "OTEL_EXPORTER_OTLP_ENDPOINT"));
  set("otlpIntervalMs", otelInterval(env["OTEL_METRIC_EXPORT_INTERVAL"]));
  set("otlpServiceName", str("", "OTEL_SERVICE_NAME"));
  const traces = tracesEndpoint(from("otlp-traces-endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), env);
  if (traces !== undefined) {
    set("otlpTracesEndpoint", traces);
    set("otlpTracesProtocol", (str("otlp-traces-protocol", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? str("", "OTEL_EXPORTER_OTLP_PROTOCOL")) as GatewayOptions["otlpTracesProtocol"]);
    set("traceSampler", str("", "OTEL_TRACES_SAMPLER")?.trim().toLowerCase() as GatewayOptions["traceSampler"]);
    set("traceSamplerArg", ratioArg(from("", "OTEL_TRACES_SAMPLER_ARG")));
    set("traceExportDelayMs", otelInterval(env["OTEL_BSP_SCHEDULE_DELAY"]));
    set("traceMaxQueue", int(from("", "OTEL_BSP_MAX_QUEUE_SIZE")));
    set("traceExportBatch", int(from("", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")));
  }
  return opts;
}

/**
 * Where traces go, or undefined (tracing off). Off by default: a traces endpoint (the flag or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as given) turns it on unless OTEL_TRACES_EXPORTER=none; so does
 * OTEL_TRACES_EXPORTER=otlp alone, with OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces (default http://localhost:4318).
 * OTEL_EXPORTER_OTLP_ENDPOINT alone keeps exporting metrics only, as before tracing existed.
 */
function tracesEndpoint(given: Sourced, env: NodeJS.ProcessEnv): string | undefined {
  const exporter = env["OTEL_TRACES_EXPORTER"]?.trim().toLowerCase() || undefined;
  if (exporter !== undefined && exporter !== "otlp" && exporter !== "none") {
    throw new GatewayError(3, `OTEL_TRACES_EXPORTER must be otlp or none (got ${JSON.stringify(env["OTEL_TRACES_EXPORTER"])}): traces are exported over OTLP/HTTP only`);
  }
  if (given !== undefined) return given.source.startsWith("--") || exporter !== "none" ? given.value : undefined;
  if (exporter !== "otlp") return undefined;
  const base = (env["OTEL_EXPORTER_OTLP_ENDPOINT"] || "http://localhost:4318").replace(/\/+$/, "");
  return `${base}/v1/traces`;
}

/** OTEL_TRACES_SAMPLER_ARG: a number (validated 0..1 with the options). */
function ratioArg(given: Sourced): number | undefined {
  if (given === undefined) return undefined;
  const n = Number(given.value.trim());
  if (given.value.trim() === "" || !Number.isFinite(n)) throw new GatewayError(3, `${given.source} must be a number from 0 to 1 (got ${JSON.stringify(given.value)})`);
  return n;
}

