import * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { asBuffer } from "../shared/bytes.js";
import { echo } from "../shared/echo.js";
import { abortable, type CancelSignal } from "../shared/signals.js";
import type { TraceContextHeaders } from "./h2-unary.js";
import { loadBackendTls, type BackendTlsConfig } from "./backend-tls.js";
import { createChannelPool, type ChannelPool } from "./channel-pool.js";
import { createH2UnaryClient, type CallOutcome } from "./h2-unary.js";
import { fetchReflection, type ReflectionResult, type ReflectionVersion } from "./reflection-client.js";
import { buildSchema, type BackendSchema, type MethodEntry } from "./schema.js";

/** Options of one backend. */
export interface BackendOptions {
  /** The registered service name. */
  name: string;
  host: string;
  port: number;
  /** Channels in the pool. */
  channels: number;
  /** Dial over TLS (every call: unary, streams, reflection, proxy). Default: cleartext. */
  tls?: BackendTlsConfig;
  /** Largest backend response accepted, bytes. */
  maxReceiveBytes: number;
  /** Bound on one reflection fetch, ms. Default 10000. */
  reflectionTimeoutMs?: number;
  /** A method that is not found triggers a refresh at most this often, ms. Default 1000. */
  minRefreshIntervalMs?: number;
  /** Told when the backend's schema changed or a fetch failed (for logs). */
  onSchema?(event: { schema?: BackendSchema; error?: GatewayError; version?: ReflectionVersion }): void;
  onStateChange?(index: number, state: grpc.connectivityState): void;
  /**
   * Where the schema comes from instead of this backend's own reflection: a uWS worker thread asks the main thread,
   * which reflects once for the process. `fresh`: reflect again (a refresh); else the source's current schema.
   * `stale`: the id of the schema that missed a method, on a refresh a miss asked for (absent on an explicit one).
   */
  schemaSource?: SchemaSource;
}

/** The schema of a backend as another thread got it (reflection's files and services, and the version that answered). */
export type SchemaSource = (service: string, fresh: boolean, signal?: CancelSignal, stale?: string) => Promise<ReflectionResult>;

export type { CallOutcome } from "./h2-unary.js";

/** A registered, dialable backend: its channel pool, its reflected schema, and unary calls with raw bytes. */
export interface Backend {
  readonly name: string;
  /** "host:port" */
  readonly address: string;
  /** The grpc-js channels (streams, the proxy, reflection): created on first use, so a backend only called unary holds one client stack. */
  readonly pool: ChannelPool;
  /** The cached schema, fetched on first use; concurrent callers share one fetch. A failed fetch is not cached. */
  schema(signal?: CancelSignal): Promise<BackendSchema>;
  /** The cached schema if one was fetched, without waiting. */
  cachedSchema(): BackendSchema | undefined;
  /** Drop the cache and fetch again (shared with any fetch already running). */
  refresh(signal?: CancelSignal): Promise<BackendSchema>;
  /** Take a schema fetched elsewhere (the main thread's reflection, pushed to a uWS thread when it changed). */
  adopt(reflected: ReflectionResult): BackendSchema;
  /**
   * Resolve a method name (see BackendSchema.find); when it is not found, refresh the schema once (rate limited)
   * and look again. NOT_FOUND naming the method and listing what exists when it still is not there.
   */
  resolve(method: string, signal?: CancelSignal): Promise<{ schema: BackendSchema; method: MethodEntry }>;
  /**
   * Unary call with pre-encoded request bytes. `deadline` is epoch ms. Carried by the gateway's own HTTP/2 client on
   * its own `channels` connections (src/backends/h2-unary.ts: raw frames over net.Socket, grpc-js's statuses, a small
   * fraction of the client CPU per call of grpc-js or node:http2); the grpc-js pool keeps health, reconnects,
   * reflection and streams.
   */
  call(path: string, request: Uint8Array, metadata: grpc.Metadata, deadline: number, signal?: CancelSignal, trace?: TraceContextHeaders): Promise<CallOutcome>;
  /** Reflection fetches started so far and the protocol version in use (v1 until a fallback happened). */
  reflectionStats(): { fetches: number; version: ReflectionVersion };
  close(): void;
}


/** A caller's abort: the schema fetch it waited on goes on (others may share it); the caller gets CANCELLED. */
const cancelled = (reason: unknown): GatewayError => GatewayError.from(reason, Code.CANCELLED);

/**
 * Create a backend; nothing is dialled until first use or `pool.connect()`, and the grpc-js channels are not even
 * created until then. TLS files are read here (a GatewayError
 * INVALID_ARGUMENT naming the field when one does not load).
 */
export function createBackend(opts: BackendOptions): Backend {
  const address = opts.host.includes(":") && !opts.host.startsWith("[") ? `[${opts.host}]:${opts.port}` : `${opts.host}:${opts.port}`;
  const tls = opts.tls ? loadBackendTls(opts.tls, `service ${opts.name} grpc.tls`) : undefined;
  let channels: ChannelPool | undefined;
  const pool = (): ChannelPool =>
    (channels ??= createChannelPool({
      address,
      size: opts.channels,
      ...(tls ? { tls } : {}),
      maxReceiveBytes: opts.maxReceiveBytes,
      ...(opts.onStateChange ? { onStateChange: opts.onStateChange } : {}),
    }));
  const unary = createH2UnaryClient({ address, connections: opts.channels, maxReceiveBytes: opts.maxReceiveBytes, ...(tls ? { tls } : {}) });
  const minRefresh = opts.minRefreshIntervalMs ?? 1000;
  let version: ReflectionVersion = "v1";
  let current: BackendSchema | undefined;
  let inflight: Promise<BackendSchema> | undefined;
  let fetchedAt = 0;
  let fetches = 0;

  const adopt = (r: ReflectionResult): BackendSchema => {
    version = r.version;
    const schema = buildSchema(r.files, r.services, `service ${opts.name}`);
    const changed = current?.set.id !== schema.set.id;
    // Keep the old object when nothing changed, so its method cache stays warm.
    if (changed) current = schema;
    fetchedAt = Date.now();
    if (changed) opts.onSchema?.({ schema, version });
    return current!;
  };

  /**
   * `fresh` and `stale` matter with a schemaSource only (this backend's own reflection always fetches anew): `stale` is
   * the id of the schema a method was not found in, so a source that already holds a newer one answers with it.
   */
  const fetch = (fresh = true, stale?: string): Promise<BackendSchema> =>
    (inflight ??= (async () => {
      fetches++;
      try {
        const r = opts.schemaSource
          ? await opts.schemaSource(opts.name, fresh, undefined, stale)
          : await fetchReflection({ service: opts.name, address, client: pool().first(), timeoutMs: opts.reflectionTimeoutMs ?? 10_000 }, version);
        return adopt(r);
      } catch (e) {
        const err = GatewayError.from(e);
        opts.onSchema?.({ error: err });
        throw err;
      } finally {
        inflight = undefined;
      }
    })());

  const backend: Backend = {
    name: opts.name,
    address,
    get pool() {
      return pool();
    },
    schema: (signal) => (current ? Promise.resolve(current) : abortable(fetch(false), signal, cancelled)),
    cachedSchema: () => current,
    refresh: (signal) => abortable(fetch(), signal, cancelled),
    adopt,
    async resolve(method, signal) {
      let schema = current ?? (await abortable(fetch(), signal, cancelled));
      let found = schema.find(method);
      if (!found && Date.now() - fetchedAt >= minRefresh) {
        schema = await abortable(fetch(true, schema.set.id), signal, cancelled);
        found = schema.find(method);
      }
      if (!found) {
        const known = schema.methods.map((m) => m.fullName);
        throw new GatewayError(
          Code.NOT_FOUND,
          `method ${echo(method)} not found on service ${opts.name}; it has ${known.length > 0 ? known.join(", ") : "no methods"}`,
        );
      }
      return { schema, method: found };
    },
    call(path, request, metadata, deadline, signal, trace): Promise<CallOutcome> {
      return unary.call(path, asBuffer(request), metadata, deadline, signal, trace);
    },
    reflectionStats: () => ({ fetches, version }),
    close() {
      channels?.close();
      unary.close();
    },
  };
  return backend;
}
