import type { ChannelCredentials, ChannelOptions } from "@grpc/grpc-js";
import { invalidArgument } from "./errors.js";
import { isChannelCredentials } from "./grpc-js-internals.js";

/** How a subscription reconnects after a termination the client did not ask for (jittered exponential backoff). */
export interface ReconnectOptions {
  /** Delay before the first reconnect attempt, ms. Default 100. */
  initialDelayMs?: number;
  /** Upper bound of any delay, ms. Default 5000. */
  maxDelayMs?: number;
  /** Growth factor per failed attempt. Default 2. */
  multiplier?: number;
  /** Random spread as a fraction of the delay, 0-1: the delay is scaled by a factor in [1 - jitter, 1 + jitter]. Default 0.2. */
  jitter?: number;
  /** Give up after this many consecutive failed attempts (the subscription then ends with the last error). Default Infinity. */
  maxAttempts?: number;
}

/** Options of `createGatewayClient()`. */
export interface GatewayClientOptions {
  /** The gateway's gRPC address, `host:port` (e.g. "127.0.0.1:5000" or "gateway.internal:443"). Required. */
  address: string;
  /** Sent as `x-api-key` on every call. Default: none, and then no key header is sent at all. */
  apiKey?: string;
  /**
   * Transport security. `true`: TLS verified against the system CA roots. Given ChannelCredentials: used as is.
   * Default `false`: plaintext (loopback or trusted networks only).
   */
  tls?: boolean | ChannelCredentials;
  /** Reconnect policy of subscriptions (also tunes the channel's own reconnect backoff). Default: see ReconnectOptions. */
  reconnect?: ReconnectOptions;
  /** Deadline for unary calls, ms; 0 means none. Default 0 (request() has its own timeout). */
  callTimeoutMs?: number;
  /**
   * While calls are open (a subscription, a stream), PING the gateway after this long without a PING, ms
   * (`grpc.keepalive_time_ms`), so a connection that died without a FIN or RST (a half-open connection) is noticed.
   * Default 30000; the gateway's gRPC server accepts PINGs far more often (docs/client.md "Liveness").
   */
  keepaliveTimeMs?: number;
  /**
   * How long a keepalive PING waits for its ACK before the connection is closed, ms (`grpc.keepalive_timeout_ms`):
   * its calls fail UNAVAILABLE and subscriptions reconnect. Default 20000.
   */
  keepaliveTimeoutMs?: number;
  /** Extra grpc-js channel options, merged over the library's (keepalive included). Default {}. */
  channelOptions?: ChannelOptions;
}

/** Reconnect options with every default filled. */
export type ResolvedReconnectOptions = Readonly<Required<ReconnectOptions>>;

/** The validated client options. */
export interface ResolvedClientOptions {
  readonly address: string;
  readonly apiKey: string | undefined;
  readonly tls: boolean | ChannelCredentials;
  readonly reconnect: ResolvedReconnectOptions;
  readonly callTimeoutMs: number;
  readonly keepaliveTimeMs: number;
  readonly keepaliveTimeoutMs: number;
  readonly channelOptions: ChannelOptions;
}

/** Default keepalive PING period of the gRPC channel while calls are open, ms. */
export const DEFAULT_KEEPALIVE_TIME_MS = 30_000;
/** Default wait for a keepalive PING's ACK, ms. */
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20_000;

function num(field: string, v: unknown, dflt: number, ok: (n: number) => boolean, rule: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || Number.isNaN(v) || !ok(v)) throw invalidArgument(field, `${rule} (got ${JSON.stringify(v)})`);
  return v;
}

/** A timeout option: a finite number of ms > 0 (`dflt` when absent); anything else throws INVALID_ARGUMENT naming it. */
export function timeoutMsOption(field: string, v: unknown, dflt: number): number {
  return num(field, v, dflt, (n) => n > 0 && Number.isFinite(n), "must be a finite number > 0");
}

/** Fill the reconnect defaults and check each field; a bad field throws INVALID_ARGUMENT naming it. */
export function resolveReconnectOptions(r: ReconnectOptions = {}, prefix = "reconnect"): ResolvedReconnectOptions {
  const initialDelayMs = num(`${prefix}.initialDelayMs`, r.initialDelayMs, 100, (n) => n >= 0 && Number.isFinite(n), "must be a finite number >= 0");
  const maxDelayMs = num(`${prefix}.maxDelayMs`, r.maxDelayMs, 5000, (n) => n >= initialDelayMs && Number.isFinite(n), `must be a finite number >= initialDelayMs (${initialDelayMs})`);
  const multiplier = num(`${prefix}.multiplier`, r.multiplier, 2, (n) => n >= 1 && Number.isFinite(n), "must be a finite number >= 1");
  const jitter = num(`${prefix}.jitter`, r.jitter, 0.2, (n) => n >= 0 && n <= 1, "must be between 0 and 1");
  const maxAttempts = num(`${prefix}.maxAttempts`, r.maxAttempts, Infinity, (n) => n >= 1 && (Number.isInteger(n) || n === Infinity), "must be an integer >= 1 or Infinity");
  return Object.freeze({ initialDelayMs, maxDelayMs, multiplier, jitter, maxAttempts });
}

/** Validate `createGatewayClient()` options; a bad field throws a GatewayClientError (INVALID_ARGUMENT) naming it. */
export function resolveClientOptions(o: GatewayClientOptions): ResolvedClientOptions {
  if (typeof o !== "object" || o === null) throw invalidArgument("options", "must be an object");
  if (typeof o.address !== "string" || o.address.trim() === "") throw invalidArgument("address", `must be a non-empty "host:port" string (got ${JSON.stringify(o.address)})`);
  if (o.apiKey !== undefined && (typeof o.apiKey !== "string" || o.apiKey === "")) throw invalidArgument("apiKey", "must be a non-empty string when given");
  const tls = o.tls ?? false;
  if (typeof tls !== "boolean" && !isChannelCredentials(tls)) {
    throw invalidArgument("tls", "must be a boolean or grpc ChannelCredentials");
  }
  const callTimeoutMs = num("callTimeoutMs", o.callTimeoutMs, 0, (n) => n >= 0 && Number.isFinite(n), "must be a finite number >= 0");
  const keepaliveTimeMs = timeoutMsOption("keepaliveTimeMs", o.keepaliveTimeMs, DEFAULT_KEEPALIVE_TIME_MS);
  const keepaliveTimeoutMs = timeoutMsOption("keepaliveTimeoutMs", o.keepaliveTimeoutMs, DEFAULT_KEEPALIVE_TIMEOUT_MS);
  return Object.freeze({
    address: o.address.trim(),
    apiKey: o.apiKey,
    tls,
    reconnect: resolveReconnectOptions(o.reconnect),
    callTimeoutMs,
    keepaliveTimeMs,
    keepaliveTimeoutMs,
    channelOptions: { ...(o.channelOptions ?? {}) },
  });
}

/** The delay before reconnect attempt `attempt` (0-based): exponential, bounded by maxDelayMs, jittered (the gateway's one backoff). */
export { backoffDelay } from "../shared/backoff.js";
