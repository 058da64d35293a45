import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { loadBackendTls, type BackendTlsConfig } from "../backends/backend-tls.js";
import { parseTemplate, type HttpRuleSpec } from "../backends/http-rules.js";

/** A cron job declared for a service; scheduled as a trigger at startup. */
export interface CronJobConfig {
  name: string;
  schedule: string;
  targetTopic: string;
}

/** A service's REST transcoding (docs/transcoding.md "Configuration"). */
export interface TranscodingConfig {
  /** Serve the service's HTTP rules. Default true. */
  enabled: boolean;
  /** Literal path segments in front of every rule's template ("" for none, the default), e.g. "/lib". */
  prefix: string;
  /** The error body: grpc-gateway's `{code, message, details}` (default) or Google's `{"error": {...}}`. */
  errors: "grpc-gateway" | "google";
  /** `apiConfig`'s rules by selector ("pkg.Service.Method"): each replaces that method's annotation. */
  apiRules?: ReadonlyMap<string, HttpRuleSpec>;
  /** The apiConfig file, as configured. */
  apiConfig?: string;
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
  /** REST routes from the backend's HTTP rules; absent: the defaults (at the root, grpc-gateway's error body). */
  transcoding?: TranscodingConfig;
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
  checkKeys(raw, ["name", "grpc", "pubsub", "state", "jobs", "transcoding"], where, problems);
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
  if (raw["transcoding"] !== undefined) {
    const t = transcoding(raw["transcoding"], `${where}.transcoding`, problems);
    if (t) entry.transcoding = t;
  }
  return entry;
}

const PREFIX = /^(\/(?:[A-Za-z0-9\-._~!$&'()+,;=@]|%[0-9A-Fa-f]{2})+)+$/;
const RULE_METHODS = ["get", "put", "post", "delete", "patch"] as const;

/** A service's `transcoding` block; its `apiConfig` file is read and checked now. */
function transcoding(raw: unknown, where: string, problems: Problems): TranscodingConfig | undefined {
  if (!isObject(raw)) {
    problems.push(`${where}: must be an object {enabled?, prefix?, errors?, apiConfig?}`);
    return undefined;
  }
  checkKeys(raw, ["enabled", "prefix", "errors", "apiConfig"], where, problems);
  const out: TranscodingConfig = { enabled: true, prefix: "", errors: "grpc-gateway" };
  if (raw["enabled"] !== undefined) {
    if (typeof raw["enabled"] !== "boolean") problems.push(`${where}.enabled: must be true or false (got ${JSON.stringify(raw["enabled"])})`);
    else out.enabled = raw["enabled"];
  }
  if (raw["prefix"] !== undefined) {
    const p = raw["prefix"];
    if (typeof p !== "string" || (p !== "" && !PREFIX.test(p))) {
      problems.push(`${where}.prefix: must be literal path segments such as "/lib" (starting with /, no trailing /, no {}, * or :), got ${JSON.stringify(p)}`);
    } else out.prefix = p;
  }
  if (raw["errors"] !== undefined) {
    const e = raw["errors"];
    if (e !== "grpc-gateway" && e !== "google") problems.push(`${where}.errors: must be "grpc-gateway" or "google" (got ${JSON.stringify(e)})`);
    else out.errors = e;
  }
  const file = raw["apiConfig"] === undefined ? undefined : str(raw, "apiConfig", where, problems);
  if (file !== undefined) {
    out.apiConfig = file;
    const rules = apiConfigRules(file, `${where}.apiConfig (${file})`, problems);
    if (rules) out.apiRules = rules;
  }
  return out;
}

/** One rule of a google.api.Service YAML's `http.rules`. */
function ruleSpec(raw: unknown, where: string, problems: Problems, nested: boolean): HttpRuleSpec | undefined {
  if (!isObject(raw)) {
    problems.push(`${where}: must be an object {selector, get|put|post|delete|patch|custom, body?, response_body?, additional_bindings?}`);
    return undefined;
  }
  checkKeys(raw, [...(nested ? [] : ["selector"]), ...RULE_METHODS, "custom", "body", "response_body", "responseBody", "additional_bindings", "additionalBindings"], where, problems);
  const patterns = [...RULE_METHODS, "custom"].filter((k) => raw[k] !== undefined);
  if (patterns.length !== 1) {
    problems.push(`${where}: must have exactly one of get, put, post, delete, patch, custom (has ${patterns.length === 0 ? "none" : patterns.join(", ")})`);
    return undefined;
  }
  let httpMethod: string;
  let path: unknown;
  if (patterns[0] === "custom") {
    const c = raw["custom"];
    if (!isObject(c) || typeof c["kind"] !== "string" || !/^[A-Za-z][A-Za-z0-9-]*$/.test(c["kind"])) {
      problems.push(`${where}.custom: must be {kind, path} with kind an HTTP method token`);
      return undefined;
    }
    httpMethod = c["kind"].toUpperCase();
    path = c["path"];
  } else {
    httpMethod = patterns[0]!.toUpperCase();
    path = raw[patterns[0]!];
  }
  if (typeof path !== "string") {
    problems.push(`${where}: the path must be a string (got ${JSON.stringify(path)})`);
    return undefined;
  }
  try {
    parseTemplate(path);
  } catch (e) {
    problems.push(`${where}: ${GatewayError.from(e).rawMessage}`);
    return undefined;
  }
  const text = (k: string, alt: string): string => {
    const v = raw[k] ?? raw[alt];
    if (v === undefined) return "";
    if (typeof v !== "string") problems.push(`${where}.${k}: must be a string (got ${JSON.stringify(v)})`);
    return typeof v === "string" ? v : "";
  };
  const more = raw["additional_bindings"] ?? raw["additionalBindings"] ?? [];
  const additionalBindings: HttpRuleSpec[] = [];
  if (!Array.isArray(more)) problems.push(`${where}.additional_bindings: must be a list`);
  else if (nested && more.length > 0) problems.push(`${where}: an additional binding has additional_bindings of its own`);
  else
    more.forEach((r, i) => {
      const spec = ruleSpec(r, `${where}.additional_bindings[${i}]`, problems, true);
      if (spec) additionalBindings.push(spec);
    });
  return { httpMethod, path, body: text("body", "body"), responseBody: text("response_body", "responseBody"), additionalBindings };
}

/**
 * The `http.rules` of a google.api.Service YAML (the file grpc-gateway takes as --grpc-api-configuration), by
 * selector. Selectors are full method names ("pkg.Service.Method"); wildcards are refused.
 */
function apiConfigRules(file: string, where: string, problems: Problems): Map<string, HttpRuleSpec> | undefined {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, "utf8"));
  } catch (e) {
    problems.push(`${where}: cannot be read as YAML: ${(e as Error).message}`);
    return undefined;
  }
  const http = isObject(doc) ? doc["http"] : undefined;
  const rules = isObject(http) ? http["rules"] : undefined;
  if (!Array.isArray(rules)) {
    problems.push(`${where}: must be a google.api.Service document with http: rules: [...]`);
    return undefined;
  }
  const out = new Map<string, HttpRuleSpec>();
  rules.forEach((r, i) => {
    const w = `${where} http.rules[${i}]`;
    const selector = isObject(r) ? r["selector"] : undefined;
    if (typeof selector !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$/.test(selector)) {
      problems.push(`${w}.selector: must be a full method name such as pkg.Service.Method (wildcards are not supported), got ${JSON.stringify(selector)}`);
      return;
    }
    if (out.has(selector)) problems.push(`${w}.selector: ${selector} has a rule already`);
    const spec = ruleSpec(r, w, problems, false);
    if (spec) out.set(selector, spec);
  });
  return out;
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
