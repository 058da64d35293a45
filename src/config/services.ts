import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { loadBackendTls, type BackendTlsConfig } from "../backends/backend-tls.js";

/** A cron job declared for a service; scheduled as a trigger at startup. */
export interface CronJobConfig {
  name: string;
  schedule: string;
  targetTopic: string;
}

/** One registered service (README "Services configuration file"). JSON/YAML field names are these, camelCase. */
export interface ServiceConfig {
  name: string;
  /**
   * Backend gRPC address; absent for non-dialable entries. `channels` overrides the pool size. `tls` dials it over
   * TLS (every call: unary, streams, reflection, the transparent proxy): `ca` (default: the system roots), `cert` and
   * `key` (a client certificate, for a backend that requires mutual TLS), `serverName` (the name its certificate
   * must carry, default `host`). Paths are PEM files, relative to the working directory.
   */
  grpc?: { host: string; port: number; channels?: number; tls?: BackendTlsConfig };
  pubsub?: { pubsubName: string };
  /**
   * `queryIndexName`: with `--sidecar dapr`, the Redis Stack query index (one of the state component's
   * `queryIndexes`) this store's queries use; it also makes the store keep JSON documents (docs/dapr.md "State").
   * Ignored by the embedded runtime.
   */
  state?: { storeName: string; keys: string[]; queryIndexName?: string };
  jobs?: { crons: CronJobConfig[] };
}

/** The registry of configured services. */
export interface ServiceRegistry {
  /** Every entry, in file order, including non-dialable ones. */
  readonly all: readonly ServiceConfig[];
  /** Entries with a `grpc` address. */
  readonly dialable: readonly ServiceConfig[];
  get(name: string): ServiceConfig | undefined;
  /** The gateway-wide pub/sub component name after precedence (flag, config, "pubsub"). */
  readonly pubsubName: string;
}

type Problems = string[];

function checkKeys(obj: Record<string, unknown>, allowed: string[], where: string, problems: Problems): void {
  for (const k of Object.keys(obj)) if (!allowed.includes(k)) problems.push(`${where}: unknown field "${k}"`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(obj: Record<string, unknown>, field: string, where: string, problems: Problems, required = true): string | undefined {
  const v = obj[field];
  if (v === undefined && !required) return undefined;
  if (typeof v !== "string" || v === "") {
    problems.push(`${where}.${field}: must be a non-empty string (got ${JSON.stringify(v)})`);
    return undefined;
  }
  return v;
}

/** A service's `grpc.tls`: its shape, then its files (readable, parsed, key matching certificate). */
function backendTls(raw: unknown, where: string, problems: Problems): BackendTlsConfig | undefined {
  if (raw === undefined) return undefined;
  if (!isObject(raw)) {
    problems.push(`${where}: must be an object {ca?, cert?, key?, serverName?} ({} for TLS with the system roots)`);
    return undefined;
  }
  checkKeys(raw, ["ca", "cert", "key", "serverName"], where, problems);
  const before = problems.length;
  const out: BackendTlsConfig = {};
  for (const f of ["ca", "cert", "key", "serverName"] as const) {
    const v = str(raw, f, where, problems, false);
    if (v !== undefined) out[f] = v;
  }
  if (problems.length > before) return undefined;
  try {
    loadBackendTls(out, where);
  } catch (e) {
    problems.push(GatewayError.from(e).rawMessage);
    return undefined;
  }
  return out;
}

function validateEntry(raw: unknown, index: number, problems: Problems): ServiceConfig | undefined {
  let where = `services[${index}]`;
  if (!isObject(raw)) {
    problems.push(`${where}: must be an object`);
    return undefined;
  }
  if (typeof raw["name"] === "string" && raw["name"] !== "") where = `service "${raw["name"]}"`;
  checkKeys(raw, ["name", "grpc", "pubsub", "state", "jobs"], where, problems);
  const name = str(raw, "name", where, problems) ?? "";
  const entry: ServiceConfig = { name };
  if (raw["grpc"] !== undefined) {
    const g = raw["grpc"];
    if (!isObject(g)) problems.push(`${where}.grpc: must be an object {host, port}`);
    else {
      checkKeys(g, ["host", "port", "channels", "tls"], `${where}.grpc`, problems);
      const host = str(g, "host", `${where}.grpc`, problems) ?? "";
      const port = g["port"];
      if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) {
        problems.push(`${where}.grpc.port: must be an integer 1-65535 (got ${JSON.stringify(port)})`);
      }
      const channels = g["channels"];
      if (channels !== undefined && (typeof channels !== "number" || !Number.isInteger(channels) || channels < 1 || channels > 64)) {
        problems.push(`${where}.grpc.channels: must be an integer 1-64 (got ${JSON.stringify(channels)})`);
      }
      const tls = backendTls(g["tls"], `${where}.grpc.tls`, problems);
      entry.grpc = { host, port: port as number, ...(channels !== undefined ? { channels: channels as number } : {}), ...(tls ? { tls } : {}) };
    }
  }
  if (raw["pubsub"] !== undefined) {
    const p = raw["pubsub"];
    if (!isObject(p)) problems.push(`${where}.pubsub: must be an object {pubsubName}`);
    else {
      checkKeys(p, ["pubsubName"], `${where}.pubsub`, problems);
      entry.pubsub = { pubsubName: str(p, "pubsubName", `${where}.pubsub`, problems) ?? "" };
    }
  }
  if (raw["state"] !== undefined) {
    const s = raw["state"];
    if (!isObject(s)) problems.push(`${where}.state: must be an object {storeName, keys}`);
    else {
      checkKeys(s, ["storeName", "keys", "queryIndexName"], `${where}.state`, problems);
      const storeName = str(s, "storeName", `${where}.state`, problems) ?? "";
      const queryIndexName = s["queryIndexName"] === undefined ? undefined : str(s, "queryIndexName", `${where}.state`, problems);
      const keys = s["keys"] ?? [];
      if (!Array.isArray(keys) || keys.some((k) => typeof k !== "string")) {
        problems.push(`${where}.state.keys: must be a list of strings (got ${JSON.stringify(keys)})`);
      }
      entry.state = { storeName, keys: Array.isArray(keys) ? (keys as string[]) : [], ...(queryIndexName ? { queryIndexName } : {}) };
    }
  }
  if (raw["jobs"] !== undefined) {
    const j = raw["jobs"];
    if (!isObject(j)) problems.push(`${where}.jobs: must be an object {crons}`);
    else {
      checkKeys(j, ["crons"], `${where}.jobs`, problems);
      const crons = j["crons"] ?? [];
      const out: CronJobConfig[] = [];
      if (!Array.isArray(crons)) problems.push(`${where}.jobs.crons: must be a list`);
      else
        crons.forEach((c, i) => {
          const w = `${where}.jobs.crons[${i}]`;
          if (!isObject(c)) return void problems.push(`${w}: must be an object {name, schedule, targetTopic}`);
          checkKeys(c, ["name", "schedule", "targetTopic"], w, problems);
          out.push({
            name: str(c, "name", w, problems) ?? "",
            schedule: str(c, "schedule", w, problems) ?? "",
            targetTopic: str(c, "targetTopic", w, problems) ?? "",
          });
        });
      entry.jobs = { crons: out };
    }
  }
  return entry;
}

/**
 * Validate a parsed services document (`{services: [...]}`): reports every problem at once, each naming the entry
 * and the field; unknown fields are errors. Also resolves the gateway-wide pub/sub name (flag, config, "pubsub")
 * and fails when entries disagree on it.
 */
export function validateServicesConfig(doc: unknown, pubsubFlag?: string): ServiceRegistry {
  const problems: Problems = [];
  let entries: unknown[] = [];
  if (Array.isArray(doc)) entries = doc;
  else if (isObject(doc)) {
    checkKeys(doc, ["services"], "config", problems);
    const s = doc["services"] ?? [];
    if (!Array.isArray(s)) problems.push(`config.services: must be a list`);
    else entries = s;
  } else if (doc !== null && doc !== undefined) problems.push("config: must be an object {services: [...]}");
  const services: ServiceConfig[] = [];
  const seen = new Set<string>();
  entries.forEach((raw, i) => {
    const e = validateEntry(raw, i, problems);
    if (!e) return;
    if (e.name && seen.has(e.name)) problems.push(`service "${e.name}": name registered twice`);
    seen.add(e.name);
    services.push(e);
  });
  const names = new Map<string, string[]>();
  for (const s of services) {
    if (s.pubsub?.pubsubName) names.set(s.pubsub.pubsubName, [...(names.get(s.pubsub.pubsubName) ?? []), s.name]);
  }
  if (names.size > 1) {
    const parts = [...names].map(([n, who]) => `${n} (${who.join(", ")})`);
    problems.push(`pubsub.pubsubName must be the same for every entry; found ${parts.join(" vs ")}`);
  }
  const indexes = new Map<string, { index: string; service: string }>();
  for (const s of services) {
    const st = s.state;
    if (!st?.queryIndexName) continue;
    const earlier = indexes.get(st.storeName);
    if (earlier && earlier.index !== st.queryIndexName) {
      problems.push(`service "${s.name}".state.queryIndexName: store ${st.storeName} already uses query index "${earlier.index}" (service "${earlier.service}"); one store has one index`);
    } else indexes.set(st.storeName, { index: st.queryIndexName, service: s.name });
  }
  if (problems.length > 0) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `invalid services configuration:\n  - ${problems.join("\n  - ")}`);
  }
  const pubsubName = pubsubFlag ?? [...names.keys()][0] ?? "pubsub";
  return createServiceRegistry(services, pubsubName);
}

/** A registry over already validated entries. */
export function createServiceRegistry(services: readonly ServiceConfig[], pubsubName: string): ServiceRegistry {
  const byName = new Map(services.map((s) => [s.name, s]));
  return Object.freeze({
    all: Object.freeze([...services]),
    dialable: Object.freeze(services.filter((s) => s.grpc !== undefined)),
    get: (name: string) => byName.get(name),
    pubsubName,
  });
}

/** Read and validate a YAML or JSON services file. */
export async function loadServicesConfig(path: string, pubsubFlag?: string): Promise<ServiceRegistry> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `cannot read config file ${path}: ${(e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = path.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `config file ${path} is not valid ${path.endsWith(".json") ? "JSON" : "YAML"}: ${(e as Error).message}`);
  }
  return validateServicesConfig(doc, pubsubFlag);
}
