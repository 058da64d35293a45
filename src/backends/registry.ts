import * as grpc from "@grpc/grpc-js";
import { createBackend, type Backend, type BackendOptions } from "./backend.js";
import type { BackendTlsConfig } from "./backend-tls.js";
import type { BackendSchema } from "./schema.js";

/** One dialable service as the registry needs it. */
export interface BackendConfig {
  name: string;
  host: string;
  port: number;
  /** Pool size for this backend; default the registry's `channelsPerBackend`. */
  channels?: number;
  /** Dial over TLS. Default: cleartext. */
  tls?: BackendTlsConfig;
}

/** Options of the backend registry. */
export interface BackendRegistryOptions {
  /** Default pool size per backend. */
  channelsPerBackend: number;
  /** Largest backend response accepted, bytes. */
  maxReceiveBytes: number;
  /** Passed to every backend (logging hooks, reflection timing). */
  backend?: Partial<Pick<BackendOptions, "reflectionTimeoutMs" | "minRefreshIntervalMs" | "onSchema" | "schemaSource">>;
  /** Told, with the service name, whenever a backend's schema loaded or changed (e.g. to route its services). */
  onSchemaOf?(service: string, schema: BackendSchema): void;
  /** Connectivity changes, for logs. */
  onStateChange?(service: string, index: number, state: grpc.connectivityState): void;
}

/** Health of the pools (the `grpc-channel-pool` entry). */
export interface PoolHealth {
  status: "Healthy" | "Degraded";
  description: string;
}

/** Every dialable backend by registered name. */
export interface BackendRegistry {
  /** Registered names, in config order. */
  readonly names: readonly string[];
  get(name: string): Backend | undefined;
  /** Connect every pool and keep it connected; backends down now are retried in the background. */
  connect(): void;
  /** Healthy when every channel is READY or IDLE; Degraded naming the services that are not. */
  health(): PoolHealth;
  /**
   * Serve `config` under its name through `get` until the returned function closes it: not in `names`, health,
   * connect() or the schema hooks, and its schema from `schemaSource` (no reflection). The gateway's own warm-up
   * backend (src/main/own-warmup.ts). Throws if the name is taken.
   */
  hide(config: BackendConfig, schemaSource: NonNullable<BackendOptions["schemaSource"]>): () => void;
  close(): void;
}

const OK_STATES = new Set([grpc.connectivityState.READY, grpc.connectivityState.IDLE]);

/** Create a backend (channel pool + reflection cache) for each dialable service. */
export function createBackendRegistry(configs: readonly BackendConfig[], opts: BackendRegistryOptions): BackendRegistry {
  const byName = new Map<string, Backend>();
  for (const c of configs) {
    byName.set(
      c.name,
      createBackend({
        ...opts.backend,
        ...(opts.onSchemaOf
          ? {
              onSchema: (e: Parameters<NonNullable<BackendOptions["onSchema"]>>[0]) => {
                opts.backend?.onSchema?.(e);
                if (e.schema) opts.onSchemaOf!(c.name, e.schema);
              },
            }
          : {}),
        name: c.name,
        host: c.host,
        port: c.port,
        channels: c.channels ?? opts.channelsPerBackend,
        ...(c.tls ? { tls: c.tls } : {}),
        maxReceiveBytes: opts.maxReceiveBytes,
        ...(opts.onStateChange ? { onStateChange: (i: number, s: grpc.connectivityState) => opts.onStateChange!(c.name, i, s) } : {}),
      }),
    );
  }
  const names = Object.freeze(configs.map((c) => c.name));
  /** The registered backends (the hidden ones are in byName too, so `get` is one lookup for both). */
  const listed = (): Backend[] => names.map((n) => byName.get(n)!);
  return {
    names,
    get: (name) => byName.get(name),
    connect() {
      for (const b of listed()) b.pool.connect();
    },
    hide(c, schemaSource) {
      if (byName.has(c.name)) throw new Error(`backend ${c.name} is already registered`);
      const b = createBackend({
        schemaSource,
        name: c.name,
        host: c.host,
        port: c.port,
        channels: c.channels ?? opts.channelsPerBackend,
        maxReceiveBytes: opts.maxReceiveBytes,
      });
      byName.set(c.name, b);
      return () => {
        if (byName.get(c.name) !== b) return;
        byName.delete(c.name);
        b.close();
      };
    },
    health() {
      if (names.length === 0) return { status: "Healthy", description: "no dialable backends registered" };
      const bad: string[] = [];
      for (const b of listed()) {
        const states = b.pool.states();
        const notOk = states.filter((s) => !OK_STATES.has(s));
        if (notOk.length > 0) {
          const names = [...new Set(notOk.map((s) => grpc.connectivityState[s]))].join("/");
          bad.push(`${b.name} (${b.address}: ${notOk.length}/${states.length} channels ${names})`);
        }
      }
      if (bad.length === 0) return { status: "Healthy", description: `${names.length} backend(s), every channel READY or IDLE` };
      return { status: "Degraded", description: `not connected: ${bad.join(", ")}` };
    },
    close() {
      for (const b of byName.values()) b.close();
    },
  };
}
