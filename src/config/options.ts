import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { GatewayError } from "../shared/gateway-error.js";
import { Code } from "../shared/code.js";
import { LOG_LEVELS, type LogLevel } from "../observe/logger.js";
import { createServiceRegistry, loadServicesConfig, validateServicesConfig, type ServiceConfig, type ServiceRegistry } from "./services.js";
import { loadTls, type TlsFiles } from "./tls.js";
import { MAX_TIMER_MS } from "../shared/timers.js";
import { DEFAULT_ACCEPT_BACKLOG } from "../shared/accept-backlog.js";
import { TRACE_PROTOCOLS, TRACE_SAMPLERS, type TraceProtocol, type TraceSampler } from "../observe/span.js";
import type { TracerOptions } from "../observe/tracing.js";

/** Most warm-up events the option may ask for (about 1 s of CPU per 1,000 on a 2-core box). */
export const MAX_WARMUP_EVENTS = 100_000;
/** Most warm-up invokes the option may ask for (about 1 s per 1,000 on a 2-core box; the whole warm-up is bounded at 30 s). */
export const MAX_WARMUP_CALLS = 20_000;

/** Everything the gateway process can be told. Every flag is documented in README "Command-line flags and environment". */
export interface GatewayOptions {
  /** Path of the services configuration file (YAML or JSON). Default: none (use `services`). */
  configPath?: string;
  /** Services, when given directly instead of a file (tests, embedding). Default: []. */
  services?: ServiceConfig[];
  /** Host both servers bind. Default "127.0.0.1". */
  host?: string;
  /** gRPC port; 0 binds an ephemeral port. Default 5000. */
  grpcPort?: number;
  /** REST port; 0 binds an ephemeral port. Default 8080. */
  httpPort?: number;
  /** Sidecar runtime. Default "embedded". */
  sidecar?: "embedded" | "dapr" | "redis";
  /** Pub/sub component name from the command line; wins over the services config. Default: from config, else "pubsub". */
  pubsubName?: string;
  /** Accepted `x-api-key` values. Default []: no auth, and then only a loopback host is allowed. */
  apiKeys?: string[];
  /** Default "info". */
  logLevel?: LogLevel;
  /** Largest accepted REST body in bytes. Default 4 MiB. */
  maxBodyBytes?: number;
  /** Most triggers that may exist at once (configured crons included); past it ScheduleTrigger fails RESOURCE_EXHAUSTED. Default 10000. */
  maxTriggers?: number;
  /** Largest REST or gRPC reply body the gateway builds, in bytes; query pages are cut to fit, bulk get beyond it is refused. Default 8 MiB. */
  maxReplyBytes?: number;
  /** REST: a reply whose client accepts no bytes for this long has its connection closed, ms. Default 10000. */
  writeStallTimeoutMs?: number;
  /** REST: bytes of large replies each HTTP thread holds for clients that have not read them; past it 503. Default 64 MiB. */
  maxUnreadReplyBytes?: number;
  /** gRPC: concurrent streams per HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). Default 1000: a client multiplexes its Subscribe streams on one connection. */
  grpcMaxConcurrentStreams?: number;
  /** gRPC: a unary call whose request message has not fully arrived this long after its headers ends DEADLINE_EXCEEDED, ms. Default 10000. */
  grpcMessageTimeoutMs?: number;
  /** gRPC (native server): a connection with no open stream this long is closed gracefully (GOAWAY), ms; 0: never. Default 300000. */
  grpcIdleTimeoutMs?: number;
  /** gRPC (native server): a connection is closed gracefully at this age (±10%), its calls get 30 s more, ms; 0: never (the default). */
  grpcMaxConnectionAgeMs?: number;
  /** gRPC (native server): open connections at once; one beyond is closed at accept and counted. Default 10000. */
  grpcMaxConnections?: number;
  /**
   * Web subscribers (WebSocket and SSE on the HTTP port) open at once, shared evenly by the uWS threads; one beyond is
   * refused 503. Default: three quarters of the open-files limit (defaultConnectionBound).
   */
  webMaxConnections?: number;
  /**
   * Connections the kernel queues for each port (gRPC, HTTP) before the gateway accepts them, capped by the kernel at
   * net.core.somaxconn. uWS fixes each HTTP listening socket's queue at 512, so the HTTP port opens enough sockets
   * (SO_REUSEPORT, spread over the uWS threads) to hold this many. Default 4096 (DEFAULT_ACCEPT_BACKLOG).
   */
  acceptBacklog?: number;
  /** Bound on graceful shutdown in ms: in-flight work gets this long before streams are ended. Default 10000. */
  shutdownTimeoutMs?: number;
  /** Request headers forwarded to backends on invoke (tracing/correlation only). Default: see DEFAULT_FORWARD_HEADERS. */
  forwardHeaders?: string[];
  /**
   * The override for forwardHeaders entries that look like credentials (CREDENTIAL_HEADER_PATTERN): each one named here
   * (and in forwardHeaders) is forwarded anyway, and the gateway logs a warning naming it at start. Headers in
   * FORBIDDEN_FORWARD_HEADERS stay refused. Default [].
   */
  forwardCredentialHeaders?: string[];
  /** Deadline for backend calls when the caller sets none, in ms. Default 30000. */
  invokeDeadlineMs?: number;
  /** Payloads at least this many bytes convert in the worker pool; smaller ones inline. Default 4096 (bench/codec.ts). */
  workerThresholdBytes?: number;
  /**
   * Most conversion-pool workers alive at once in the whole process (`--conversion-workers`), shared by the main
   * thread's pool and every uWS thread's, however many `threads` there are. Workers start on the first large payload
   * and stop when idle. Default: max(1, cores - 1), what one pool had before the bound was per process.
   */
  conversionWorkers?: number;
  /** Tasks that may wait for a worker; past it calls fail RESOURCE_EXHAUSTED. Default 256. */
  workerMaxQueue?: number;
  /**
   * Threads serving the HTTP port (REST, WebSocket, SSE), each a uWS app on the same port with its own backend
   * channels for invoke; 1 serves HTTP on the main thread (no worker threads). gRPC, the broker, state, triggers and
   * the runtime stay on the main thread. Default: the number of cores.
   */
  threads?: number;
  /**
   * With `threads` > 1: run gRPC Invoke/InvokeJson's conversion and backend call on the uWS threads for a call that
   * arrives while at least this many invokes are in flight on the main thread. 0 (default): never, every gRPC invoke
   * runs on the main thread (docs/threads.md: on a machine without idle cores it only adds CPU per call).
   */
  grpcInvokeOffload?: number;
  /** Channels per backend. Default 4. Overridden per service by `grpc.channels` in the config. */
  channelsPerBackend?: number;
  /**
   * Reflect every backend's schema again this often, ms, so a changed proto (methods, HTTP rules) is picked up even
   * when the connection never dropped (docs/transcoding.md "Refresh"). 0 (default): only on reconnect and on demand.
   */
  schemaRefreshIntervalMs?: number;
  /** Broker: how long an unused upstream subscription lingers before release, ms. Default 2000. */
  subscriptionLingerMs?: number;
  /** Broker: period of the stuck-subscriber sweep, ms. Default 5000. */
  sweepIntervalMs?: number;
  /** Secret (utf-8) signing browser tokens (JWT HS256). Default $GATEWAY_TOKEN_SECRET, else a random per-process secret. */
  tokenSecret?: string;
  /** Browser origins allowed on the WebSocket and SSE routes (`*`: any). Default []: requests carrying an Origin are refused. */
  corsOrigins?: string[];
  /** Resume history: most events kept per topic. Default 1000. */
  pubsubHistoryEvents?: number;
  /**
   * Before listening, publish this many events through a private in-process gateway's gRPC fan-out path, so V8 has
   * compiled it before the first client (src/main/warmup.ts). 0: none. Default 0; the CLI's default is 1000.
   */
  warmupEvents?: number;
  /**
   * Before listening, make this many JSON invokes through the private gateway to an echo backend in this process (on
   * gRPC, and on REST too with `threads: 1`), and as many REST invokes on each uWS thread before it listens, so V8 has
   * compiled the invoke path in every isolate (src/main/warmup-invoke.ts, src/threads/warmup.ts). 0: none.
   * Default 0; the CLI's default is 1000.
   */
  warmupCalls?: number;
  /** Resume history: oldest event kept per topic, ms; also how long a topic with no web subscriber keeps recording. Default 60000. */
  pubsubHistoryAgeMs?: number;
  /** Nominal event size in bytes: a web subscriber may have 1024 x this queued before it is closed slow. Default 1024. */
  pubsubEventBytes?: number;
  /** PEM certificate (chain) both ports serve TLS with; needs tlsKey. Default none: cleartext. */
  tlsCert?: string;
  /** PEM private key of tlsCert. Never logged. */
  tlsKey?: string;
  /**
   * PEM CA bundle for mutual TLS: a gRPC client must present a certificate that chains to it (the handshake fails
   * otherwise); on the HTTP port a certificate presented is checked against it (docs/operations.md "Security").
   */
  tlsClientCa?: string;
  /** Serve cleartext on a non-loopback host (behind a TLS-terminating proxy or mesh). Default false: refused. */
  allowPlaintext?: boolean;
  /** How often the TLS files are checked for a change (reloaded without dropping connections), ms. Default 2000. */
  tlsReloadIntervalMs?: number;
  /** Dapr sidecar gRPC host. Default "127.0.0.1". */
  daprHost?: string;
  /** Dapr sidecar gRPC port. Default 50001 (the CLI: $DAPR_GRPC_PORT). */
  daprGrpcPort?: number;
  /** Redis server of `--sidecar redis`, `redis[s]://[user:password@]host:port[/db]`. Default redis://127.0.0.1:6379. Never logged (it may carry a password). */
  redisUrl?: string;
  /** `MAXLEN ~` of each topic's Redis stream (`--sidecar redis`). Default 10000. */
  redisStreamMaxLen?: number;
  /** How long a replica's claim on a job firing lasts before another replica may fire it, ms (`--sidecar redis`). Default 10000. */
  redisJobLeaseMs?: number;
  /** Sent as `dapr-api-token` to the sidecar. Default none (the CLI: $DAPR_API_TOKEN). */
  daprApiToken?: string;
  /** Required as `dapr-api-token` on sidecar callbacks. Default none (the CLI: $APP_API_TOKEN). */
  appApiToken?: string;
  /** OTLP/HTTP endpoint metrics are also exported to. Default none: nothing is sent (the CLI: $OTEL_EXPORTER_OTLP_ENDPOINT). */
  otlpEndpoint?: string;
  /** OTLP export period, ms. Default 60000 (the CLI: $OTEL_METRIC_EXPORT_INTERVAL). */
  otlpIntervalMs?: number;
  /** `service.name` of exported metrics. Default "platform-gateway" (the CLI: $OTEL_SERVICE_NAME). */
  otlpServiceName?: string;
  /**
   * Full OTLP/HTTP URL traces are exported to (e.g. http://collector:4318/v1/traces). Default none: tracing is off
   * (the CLI: --otlp-traces-endpoint, $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, docs/observability.md).
   */
  otlpTracesEndpoint?: string;
  /** http/protobuf or http/json. Default http/protobuf (the CLI: $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL). */
  otlpTracesProtocol?: TraceProtocol;
  /** Which traces are recorded, OpenTelemetry's sampler names. Default parentbased_always_on (the CLI: $OTEL_TRACES_SAMPLER). */
  traceSampler?: TraceSampler;
  /** The ratio of the traceidratio samplers, 0..1. Default 1 (the CLI: $OTEL_TRACES_SAMPLER_ARG). */
  traceSamplerArg?: number;
  /** How often queued spans are exported, ms. Default 5000 (the CLI: $OTEL_BSP_SCHEDULE_DELAY). */
  traceExportDelayMs?: number;
  /** Most ended spans waiting for export per thread; more are dropped. Default 8192 (the CLI: $OTEL_BSP_MAX_QUEUE_SIZE). */
  traceMaxQueue?: number;
  /** Most spans in one export request. Default 2048, at most traceMaxQueue (the CLI: $OTEL_BSP_MAX_EXPORT_BATCH_SIZE). */
  traceExportBatch?: number;
  /** Where logs go. Default stdout. */
  logDestination?: NodeJS.WritableStream;
}

/** Options without a default: absent stays absent. */
type Unset = "configPath" | "pubsubName" | "daprApiToken" | "appApiToken" | "logDestination" | "tokenSecret" | "otlpEndpoint" | "otlpTracesEndpoint" | "tlsCert" | "tlsKey" | "tlsClientCa";

/**
 * The validated, complete, frozen options. Nothing here reads the environment: the CLI (`cli-args.ts`) turns
 * variables into options, and a program embedding the gateway passes what it wants.
 */
export type ValidatedOptions = Readonly<Required<Omit<GatewayOptions, Unset>> & Pick<GatewayOptions, Unset>> & {
  /** The TLS files when tlsCert is set (checked: they load and match), else undefined. */
  readonly tls: TlsFiles | undefined;
};

/** Tracing and correlation identifiers: they carry no authority. */
export const DEFAULT_FORWARD_HEADERS: readonly string[] = Object.freeze([
  "traceparent",
  "tracestate",
  "x-request-id",
  "x-correlation-id",
  "b3",
  "x-b3-traceid",
  "x-b3-spanid",
  "x-b3-parentspanid",
  "x-b3-sampled",
  "x-b3-flags",
]);

/** Headers that carry authority and may never be forwarded, whatever the configuration says. */
export const FORBIDDEN_FORWARD_HEADERS: readonly string[] = Object.freeze([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "dapr-api-token",
  "x-forwarded-user",
  "x-auth-token",
  "x-access-token",
  "x-csrf-token",
]);

/**
 * Headers the backend call's own HTTP/2 and gRPC framing sets (connection-specific headers HTTP/2 forbids, the
 * request's content headers, and the `grpc-` names gRPC reserves): forwardHeaders refuses them, since a caller's copy
 * would duplicate or contradict the gateway's and fail the backend call.
 */
const TRANSPORT_HEADERS: ReadonlySet<string> = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "host", "content-type", "content-length", "user-agent"]);

/**
 * A header whose name contains one of these looks like it carries a credential: forwardHeaders refuses it unless it is
 * also named in forwardCredentialHeaders (a fixed list missed x-amz-security-token, x-goog-iap-jwt-assertion, ...).
 */
export const CREDENTIAL_HEADER_PATTERN = /auth|token|key|secret|session|cookie|jwt|credential|signature|password/i;

/** Options whose values are secrets: an error about one names the option, never its value. */
const SECRET_OPTIONS = new Set(["apiKeys", "daprApiToken", "appApiToken", "tokenSecret", "redisUrl"]);

function bad(field: string, value: unknown, problem: string): never {
  const got = SECRET_OPTIONS.has(field) ? "value not shown: it is a secret" : `got ${JSON.stringify(value)}`;
  throw new GatewayError(Code.INVALID_ARGUMENT, `option ${field} ${problem} (${got})`);
}

function port(field: string, v: unknown, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 65535) bad(field, v, "must be an integer port 0-65535");
  return v;
}

/**
 * Durations in ms: any positive number (timers take fractions). Counts and sizes use positiveInt / nonNegativeInt:
 * `conversionWorkers: 2.5` or `channelsPerBackend: 1.5` is refused naming the option, never rounded somewhere later.
 */
function positive(field: string, v: unknown, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) bad(field, v, "must be a positive number");
  return v;
}

/** Most connections one port may queue: 64 uWS listening sockets of 512, and far beyond any somaxconn in use. */
const MAX_ACCEPT_BACKLOG = 32_768;

function acceptBacklog(v: unknown): number {
  return atMost("acceptBacklog", positiveInt("acceptBacklog", v, DEFAULT_ACCEPT_BACKLOG), MAX_ACCEPT_BACKLOG);
}

function positiveInt(field: string, v: unknown, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v <= 0) bad(field, v, "must be a positive integer");
  return v;
}

function nonNegativeInt(field: string, v: unknown, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) bad(field, v, "must be a non-negative integer");
  return v;
}

/** `v` (already checked to be a number), unless it is over `most`. */
function atMost(field: string, v: number, most: number, unit = ""): number {
  if (v > most) bad(field, v, `must be at most ${most}${unit}`);
  return v;
}

/** The Redis URL, checked without ever echoing it (it may carry a password). */
function redisUrl(v: unknown): string {
  if (v === undefined) return "redis://127.0.0.1:6379";
  let u: URL | undefined;
  try {
    u = typeof v === "string" ? new URL(v) : undefined;
  } catch {
    u = undefined;
  }
  if (!u || (u.protocol !== "redis:" && u.protocol !== "rediss:") || u.hostname === "") {
    throw new GatewayError(Code.INVALID_ARGUMENT, "option redisUrl must be a URL redis://[user:password@]host[:port][/db] or rediss://... (value not shown: it may carry a password)");
  }
  if (u.port !== "" && (Number(u.port) < 1 || Number(u.port) > 65535)) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `option redisUrl has port ${u.port}; it must be 1-65535`);
  }
  return v as string;
}

/** A duration a timer takes (setTimeout's largest is 2^31-1 ms); 0 turns the timer off. */
function timerMs(field: string, v: unknown, dflt: number): number {
  return atMost(field, nonNegativeInt(field, v, dflt), MAX_TIMER_MS, " (ms)");
}

/** A string option that may be absent; an empty string counts as absent, as an empty variable does in the CLI. */
function oneOf<T extends string>(field: string, v: unknown, allowed: readonly T[], dflt: T): T {
  if (v === undefined) return dflt;
  if (typeof v === "string" && (allowed as readonly string[]).includes(v)) return v as T;
  return bad(field, v, `must be one of ${allowed.join(", ")}`);
}

function ratio(field: string, v: unknown): number {
  if (v === undefined) return 1;
  if (typeof v === "number" && v >= 0 && v <= 1) return v;
  return bad(field, v, "must be a number from 0 to 1");
}

/** An http(s) URL: the exporter would otherwise fail on every export, far from the setting. */
function tracesEndpoint(v: unknown): string | undefined {
  const s = optionalString("otlpTracesEndpoint", v);
  if (s === undefined || s === "") return undefined;
  let url: URL | undefined;
  try {
    url = new URL(s);
  } catch {
    // reported below
  }
  // Not echoed: a collector URL may carry a credential.
  if (url?.protocol !== "http:" && url?.protocol !== "https:") throw new GatewayError(Code.INVALID_ARGUMENT, "option otlpTracesEndpoint must be an http:// or https:// URL");
  return s;
}

function optionalString(field: string, v: unknown): string | undefined {
  if (v === undefined || v === "") return undefined;
  if (typeof v !== "string") bad(field, v, "must be a string");
  return v;
}

/** Most uWS threads: beyond the cores they only add contention, and each holds its own backend channels. */
export const MAX_THREADS = 64;

function threadCount(v: unknown): number {
  if (v === undefined) return Math.min(availableParallelism(), MAX_THREADS);
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_THREADS) bad("threads", v, `must be an integer from 1 to ${MAX_THREADS}`);
  return v;
}

/** Most conversion workers: each is a V8 isolate (about 10 MB) with its own compiled schemas. */
export const MAX_CONVERSION_WORKERS = 256;

function conversionWorkerCount(v: unknown): number {
  if (v === undefined) return Math.max(1, availableParallelism() - 1);
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_CONVERSION_WORKERS) {
    bad("conversionWorkers", v, `must be an integer from 1 to ${MAX_CONVERSION_WORKERS}, the most conversion-pool workers of the process (--conversion-workers, GATEWAY_CONVERSION_WORKERS)`);
  }
  return v;
}

/** True for loopback hosts: 127.0.0.0/8, ::1 and "localhost". */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * tlsCert, tlsKey and tlsClientCa: both or neither of the pair, a client CA only with them, and every file readable,
 * parsed, the key matching the certificate (read here at start; the ports read them again, and on each change).
 */
function tlsFiles(o: GatewayOptions): TlsFiles | undefined {
  const cert = optionalString("tlsCert", o.tlsCert);
  const key = optionalString("tlsKey", o.tlsKey);
  const clientCa = optionalString("tlsClientCa", o.tlsClientCa);
  if (cert === undefined && key === undefined) {
    if (clientCa !== undefined) bad("tlsClientCa (--tls-client-ca)", clientCa, "needs --tls-cert and --tls-key: mutual TLS is TLS");
    return undefined;
  }
  if (cert === undefined) bad("tlsKey (--tls-key)", "(not shown)", "needs --tls-cert, the certificate it belongs to");
  if (key === undefined) bad("tlsCert (--tls-cert)", cert, "needs --tls-key, its private key");
  const files: TlsFiles = { cert, key, ...(clientCa !== undefined ? { clientCa } : {}) };
  loadTls(files, { cert: "option tlsCert (--tls-cert)", key: "option tlsKey (--tls-key)", clientCa: "option tlsClientCa (--tls-client-ca)" });
  return files;
}

/**
 * Fill defaults and check every field; a bad field throws a GatewayError naming the field and the value.
 * Also enforces the secure default: no API key configured means a loopback host only.
 */
export function validateGatewayOptions(o: GatewayOptions): ValidatedOptions {
  // Embedders of the old option: an error that names it, not a silent switch of server.
  if ((o as { grpcServer?: unknown }).grpcServer !== undefined) {
    bad("grpcServer", (o as { grpcServer?: unknown }).grpcServer, "was removed: the gRPC port is always served by the gateway's own gRPC server (--grpc-server too)");
  }
  if ((o as { workerThreads?: unknown }).workerThreads !== undefined) {
    bad("workerThreads", (o as { workerThreads?: unknown }).workerThreads, "was replaced by conversionWorkers, the bound on conversion-pool workers for the whole process (every thread's pool together)");
  }
  const host = o.host ?? "127.0.0.1";
  if (typeof host !== "string" || host === "") bad("host", host, "must be a non-empty string");
  const apiKeys = o.apiKeys ?? [];
  if (!Array.isArray(apiKeys)) bad("apiKeys", apiKeys, "must be a list of non-empty strings");
  const badKey = apiKeys.findIndex((k) => typeof k !== "string" || k === "");
  if (badKey >= 0) {
    // Which entry, never the keys: a rotation that passes an unset variable must not print the other keys.
    const k: unknown = apiKeys[badKey];
    throw new GatewayError(Code.INVALID_ARGUMENT, `option apiKeys must be a list of non-empty strings (entry ${badKey} is ${k === "" ? "empty" : `a ${typeof k}`}; the keys are not shown)`);
  }
  if (apiKeys.length === 0 && !isLoopbackHost(host)) {
    throw new GatewayError(
      Code.FAILED_PRECONDITION,
      `refusing to serve on non-loopback host ${host} without an API key: set --api-key or GATEWAY_API_KEYS, or bind 127.0.0.1`,
    );
  }
  const sidecar = o.sidecar ?? "embedded";
  if (sidecar !== "embedded" && sidecar !== "dapr" && sidecar !== "redis") bad("sidecar", sidecar, "must be embedded, dapr or redis");
  const appApiToken = optionalString("appApiToken", o.appApiToken);
  // Same rule as the API keys: with Dapr the gRPC port hosts the job callbacks (sidecar-callback-facility.ts), which
  // take no x-api-key; without APP_API_TOKEN anyone who reaches the port could fire any trigger.
  if (sidecar === "dapr" && !appApiToken && !isLoopbackHost(host)) {
    throw new GatewayError(
      Code.FAILED_PRECONDITION,
      `refusing to serve on non-loopback host ${host} with --sidecar dapr and no APP_API_TOKEN: the Dapr job callbacks on the gRPC port would accept anyone; set APP_API_TOKEN (the same secret daprd's app token uses), or bind 127.0.0.1`,
    );
  }
  const tls = tlsFiles(o);
  const allowPlaintext = o.allowPlaintext ?? false;
  if (typeof allowPlaintext !== "boolean") bad("allowPlaintext", allowPlaintext, "must be a boolean");
  // API keys (and Dapr's app token) in the clear are only as secret as the network: off loopback, TLS or an explicit
  // decision that something in front terminates it.
  if (tls === undefined && !allowPlaintext && !isLoopbackHost(host)) {
    throw new GatewayError(
      Code.FAILED_PRECONDITION,
      `refusing to serve cleartext on non-loopback host ${host}: API keys and data would cross the network unencrypted; set --tls-cert and --tls-key (GATEWAY_TLS_CERT, GATEWAY_TLS_KEY), or --allow-plaintext (GATEWAY_ALLOW_PLAINTEXT=true) when a proxy or mesh in front terminates TLS, or bind 127.0.0.1`,
    );
  }
  const logLevel = o.logLevel ?? "info";
  if (!LOG_LEVELS.includes(logLevel)) bad("logLevel", logLevel, `must be one of ${LOG_LEVELS.join(", ")}`);
  if (o.pubsubName !== undefined && (typeof o.pubsubName !== "string" || o.pubsubName === "")) {
    bad("pubsubName", o.pubsubName, "must be a non-empty string");
  }
  const forwardHeaders = (o.forwardHeaders ?? DEFAULT_FORWARD_HEADERS).map((h) => h.toLowerCase());
  for (const h of forwardHeaders) {
    if (!/^[0-9a-z_.-]+$/.test(h)) bad("forwardHeaders", h, "must hold header names matching ^[0-9a-z_.-]+$");
    if (h.endsWith("-bin")) bad("forwardHeaders", h, "must not name binary (-bin) headers");
    if (TRANSPORT_HEADERS.has(h) || h.startsWith("grpc-")) {
      bad("forwardHeaders", h, "must not name a header the backend call sets itself (HTTP/2 connection headers, content-type, content-length, user-agent, grpc-*)");
    }
    if (FORBIDDEN_FORWARD_HEADERS.includes(h)) {
      throw new GatewayError(
        Code.FAILED_PRECONDITION,
        `option forwardHeaders must not include ${h}: it carries authority, and only tracing and correlation headers may reach a backend`,
      );
    }
  }
  const rawOverride: unknown = o.forwardCredentialHeaders ?? [];
  if (!Array.isArray(rawOverride) || rawOverride.some((h) => typeof h !== "string")) {
    bad("forwardCredentialHeaders", o.forwardCredentialHeaders, "must be a list of header names");
  }
  const credentialOverride = (rawOverride as string[]).map((h) => h.toLowerCase());
  for (const h of credentialOverride) {
    if (!forwardHeaders.includes(h)) bad("forwardCredentialHeaders", h, "must name a header that forwardHeaders also lists");
  }
  for (const h of forwardHeaders) {
    if (CREDENTIAL_HEADER_PATTERN.test(h) && !credentialOverride.includes(h)) {
      throw new GatewayError(
        Code.FAILED_PRECONDITION,
        `option forwardHeaders must not include ${h}: the name looks like a credential (it contains ${CREDENTIAL_HEADER_PATTERN.exec(h)![0]}); ` +
          `if backends really need it, name it again with --forward-credential-header ${h}`,
      );
    }
  }
  const corsOrigins = o.corsOrigins ?? [];
  if (!Array.isArray(corsOrigins) || corsOrigins.some((c) => typeof c !== "string" || !(c === "*" || /^https?:\/\/[^\s/]+$/.test(c)))) {
    bad("corsOrigins", corsOrigins, "must be a list of origins like https://app.example.com (scheme, host, optional port) or *");
  }
  const tokenSecret = o.tokenSecret;
  if (tokenSecret !== undefined && (typeof tokenSecret !== "string" || tokenSecret.length < 16)) {
    throw new GatewayError(Code.INVALID_ARGUMENT, "option tokenSecret must be a string of at least 16 characters");
  }
  return Object.freeze({
    configPath: o.configPath,
    services: o.services ?? [],
    host,
    grpcPort: port("grpcPort", o.grpcPort, 5000),
    httpPort: port("httpPort", o.httpPort, 8080),
    sidecar,
    pubsubName: o.pubsubName,
    apiKeys: Object.freeze([...apiKeys]) as string[],
    logLevel,
    maxBodyBytes: positiveInt("maxBodyBytes", o.maxBodyBytes, 4 * 1024 * 1024),
    maxReplyBytes: positiveInt("maxReplyBytes", o.maxReplyBytes, 8 * 1024 * 1024),
    writeStallTimeoutMs: positive("writeStallTimeoutMs", o.writeStallTimeoutMs, 10_000),
    maxUnreadReplyBytes: positiveInt("maxUnreadReplyBytes", o.maxUnreadReplyBytes, 64 * 1024 * 1024),
    grpcMaxConcurrentStreams: positiveInt("grpcMaxConcurrentStreams", o.grpcMaxConcurrentStreams, 1000),
    grpcMessageTimeoutMs: positive("grpcMessageTimeoutMs", o.grpcMessageTimeoutMs, 10_000),
    grpcIdleTimeoutMs: timerMs("grpcIdleTimeoutMs", o.grpcIdleTimeoutMs, 300_000),
    grpcMaxConnectionAgeMs: timerMs("grpcMaxConnectionAgeMs", o.grpcMaxConnectionAgeMs, 0),
    grpcMaxConnections: positiveInt("grpcMaxConnections", o.grpcMaxConnections, defaultConnectionBound()),
    webMaxConnections: positiveInt("webMaxConnections", o.webMaxConnections, defaultConnectionBound()),
    acceptBacklog: acceptBacklog(o.acceptBacklog),
    shutdownTimeoutMs: positive("shutdownTimeoutMs", o.shutdownTimeoutMs, 10_000),
    maxTriggers: positiveInt("maxTriggers", o.maxTriggers, 10_000),
    forwardHeaders: Object.freeze(forwardHeaders) as string[],
    forwardCredentialHeaders: Object.freeze(credentialOverride) as string[],
    invokeDeadlineMs: positive("invokeDeadlineMs", o.invokeDeadlineMs, 30_000),
    workerThresholdBytes: nonNegativeInt("workerThresholdBytes", o.workerThresholdBytes, 4096),
    conversionWorkers: conversionWorkerCount(o.conversionWorkers),
    workerMaxQueue: nonNegativeInt("workerMaxQueue", o.workerMaxQueue, 256),
    threads: threadCount(o.threads),
    grpcInvokeOffload: nonNegativeInt("grpcInvokeOffload", o.grpcInvokeOffload, 0),
    channelsPerBackend: positiveInt("channelsPerBackend", o.channelsPerBackend, 4),
    schemaRefreshIntervalMs: nonNegativeInt("schemaRefreshIntervalMs", o.schemaRefreshIntervalMs, 0),
    subscriptionLingerMs: nonNegativeInt("subscriptionLingerMs", o.subscriptionLingerMs, 2000),
    sweepIntervalMs: positive("sweepIntervalMs", o.sweepIntervalMs, 5000),
    tokenSecret,
    corsOrigins: Object.freeze([...corsOrigins]) as string[],
    pubsubHistoryEvents: nonNegativeInt("pubsubHistoryEvents", o.pubsubHistoryEvents, 1000),
    warmupEvents: atMost("warmupEvents", nonNegativeInt("warmupEvents", o.warmupEvents, 0), MAX_WARMUP_EVENTS),
    warmupCalls: atMost("warmupCalls", nonNegativeInt("warmupCalls", o.warmupCalls, 0), MAX_WARMUP_CALLS),
    pubsubHistoryAgeMs: positive("pubsubHistoryAgeMs", o.pubsubHistoryAgeMs, 60_000),
    pubsubEventBytes: positiveInt("pubsubEventBytes", o.pubsubEventBytes, 1024),
    redisUrl: redisUrl(o.redisUrl),
    redisStreamMaxLen: positiveInt("redisStreamMaxLen", o.redisStreamMaxLen, 10_000),
    redisJobLeaseMs: timerMs("redisJobLeaseMs", o.redisJobLeaseMs, 10_000) || bad("redisJobLeaseMs", o.redisJobLeaseMs, "must be positive"),
    daprHost: o.daprHost ?? "127.0.0.1",
    daprGrpcPort: port("daprGrpcPort", o.daprGrpcPort, 50001),
    daprApiToken: optionalString("daprApiToken", o.daprApiToken),
    appApiToken,
    otlpEndpoint: optionalString("otlpEndpoint", o.otlpEndpoint),
    otlpIntervalMs: positive("otlpIntervalMs", o.otlpIntervalMs, 60_000),
    otlpServiceName: optionalString("otlpServiceName", o.otlpServiceName) ?? "platform-gateway",
    otlpTracesEndpoint: tracesEndpoint(o.otlpTracesEndpoint),
    otlpTracesProtocol: oneOf("otlpTracesProtocol", o.otlpTracesProtocol, TRACE_PROTOCOLS, "http/protobuf"),
    traceSampler: oneOf("traceSampler", o.traceSampler, TRACE_SAMPLERS, "parentbased_always_on"),
    traceSamplerArg: ratio("traceSamplerArg", o.traceSamplerArg),
    traceExportDelayMs: positive("traceExportDelayMs", o.traceExportDelayMs, 5000),
    traceMaxQueue: positiveInt("traceMaxQueue", o.traceMaxQueue, 8192),
    traceExportBatch: positiveInt("traceExportBatch", o.traceExportBatch, 2048),
    logDestination: o.logDestination,
    tlsCert: tls?.cert,
    tlsKey: tls?.key,
    tlsClientCa: tls?.clientCa,
    tls,
    allowPlaintext,
    tlsReloadIntervalMs: positive("tlsReloadIntervalMs", o.tlsReloadIntervalMs, 2000),
  });
}

/** What createTracer needs from the options (the main thread and each uWS worker thread make their own tracer). */
export function tracerOptions(o: ValidatedOptions): TracerOptions {
  return {
    endpoint: o.otlpTracesEndpoint,
    protocol: o.otlpTracesProtocol,
    sampler: o.traceSampler,
    samplerArg: o.traceSamplerArg,
    serviceName: o.otlpServiceName,
    exportDelayMs: o.traceExportDelayMs,
    maxQueue: o.traceMaxQueue,
    exportBatch: o.traceExportBatch,
  };
}

/** The services registry the options name (config file, inline services, or none). */
export async function loadRegistry(o: ValidatedOptions): Promise<ServiceRegistry> {
  if (o.configPath) return loadServicesConfig(o.configPath, o.pubsubName);
  if (o.services.length > 0) return validateServicesConfig({ services: o.services }, o.pubsubName);
  return createServiceRegistry([], o.pubsubName ?? "pubsub");
}

/**
 * The default bound on open gRPC connections, and on web subscribers: three quarters of the process's open-files limit (its soft limit, read
 * from /proc/self/limits), so connections are refused at accept before the process runs out of descriptors while a
 * quarter stays for the HTTP port, backends and files; 10,000 where the limit cannot be read (not Linux) or is
 * unlimited. On a 20,000-file machine: 15,000, so 10,000 subscribers with a connection each and their publishers fit.
 */
export function defaultConnectionBound(limits: () => string = () => readFileSync("/proc/self/limits", "utf8")): number {
  try {
    const soft = /^Max open files\s+(\d+)/m.exec(limits())?.[1];
    if (soft !== undefined) return Math.max(1, Math.floor((Number(soft) * 3) / 4));
  } catch {
    // not Linux: the fixed default below
  }
  return 10_000;
}
