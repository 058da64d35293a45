/**
 * The OpenAPI documents the gateway serves (`GET /v1/openapi.json`, `GET /v1/grpc/{service}/openapi.json`): built from
 * the backends' current schemas and what the transcoding table serves, cached as JSON text per set of schema ids and
 * table generation, so a backend whose schema changed (a restart with an edited proto, seen at the next reflection
 * refresh), or a rule another backend's change let in or refused, shows in the next request's document.
 */
import type { BackendRegistry } from "../../backends/registry.js";
import type { BackendSchema } from "../../backends/schema.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { backendNamed } from "../dispatch.js";
import type { ServiceRegistry } from "../../config/services.js";
import type { TranscodeTable } from "../transcode/table.js";
import { buildOpenApiDocument, type OpenApiBackend, type UnavailableBackend } from "./document.js";

export interface OpenApiDeps {
  services: ServiceRegistry;
  backends: BackendRegistry;
  /** Whether the gateway requires x-api-key (the document then declares and requires the scheme). */
  apiKey: boolean;
  /** The transcoding table: each document describes exactly what it serves for the backend (`servedBy`). */
  routes: Pick<TranscodeTable, "servedBy" | "generation">;
  /** How long the combined document waits for a backend whose schema is not loaded yet, ms (default 3000). */
  loadTimeoutMs?: number;
}

export interface OpenApiOps {
  /** The document of every dialable backend, as JSON text. */
  all(signal?: AbortSignal): Promise<string>;
  /** The document of one backend, as JSON text; NOT_FOUND naming an unknown service, its reflection error when it is down. */
  one(service: unknown, signal?: AbortSignal): Promise<string>;
}

/** Documents kept: a handful of recent schema sets (every backend's, and each backend's own). */
const MAX_CACHED = 16;

export function createOpenApiOps(deps: OpenApiDeps): OpenApiOps {
  const { routes } = deps;
  const loadTimeoutMs = deps.loadTimeoutMs ?? 3_000;
  const cache = new Map<string, string>();

  const render = (key: string | undefined, backends: readonly { service: string; schema: BackendSchema }[], unavailable: UnavailableBackend[], title: string): string => {
    const hit = key === undefined ? undefined : cache.get(key);
    if (key !== undefined && hit !== undefined) {
      cache.delete(key);
      cache.set(key, hit); // most recently used last
      return hit;
    }
    const input: OpenApiBackend[] = backends.map(({ service, schema }) => ({ service, schema, ...routes.servedBy(service) }));
    const text = JSON.stringify(buildOpenApiDocument({ backends: input, unavailable, title, apiKey: deps.apiKey }));
    if (key === undefined) return text;
    cache.set(key, text);
    if (cache.size > MAX_CACHED) cache.delete(cache.keys().next().value!);
    return text;
  };

  /** A schema now: the cached one, else a load bounded by `loadTimeoutMs` and the caller's signal. */
  const load = async (service: string, signal?: AbortSignal): Promise<BackendSchema> => {
    const b = backendNamed(deps, service);
    const cached = b.cachedSchema();
    if (cached) return cached;
    const timeout = AbortSignal.timeout(loadTimeoutMs);
    return b.schema(signal ? AbortSignal.any([signal, timeout]) : timeout);
  };

  return {
    async all(signal) {
      const names = deps.backends.names;
      const results = await Promise.allSettled(names.map((n) => load(n, signal)));
      const loaded: { service: string; schema: BackendSchema }[] = [];
      const unavailable: UnavailableBackend[] = [];
      results.forEach((r, i) => {
        if (r.status === "fulfilled") loaded.push({ service: names[i]!, schema: r.value });
        else unavailable.push({ service: names[i]!, message: GatewayError.from(r.reason).rawMessage });
      });
      // A document naming unavailable backends is not cached: it carries this attempt's reasons.
      const key = unavailable.length > 0 ? undefined : `${routes.generation()}|*|${loaded.map((l) => `${l.service}=${l.schema.set.id}`).join(",")}`;
      return render(key, loaded, unavailable, "Platform Gateway: backend APIs");
    },
    async one(service, signal) {
      const b = backendNamed(deps, service);
      const schema = await load(b.name, signal);
      return render(`${routes.generation()}|${b.name}=${schema.set.id}`, [{ service: b.name, schema }], [], `Platform Gateway: ${b.name}`);
    },
  };
}
