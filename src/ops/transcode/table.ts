/**
 * The transcoding routes of every dialable backend (docs/transcoding.md "Routes"): each backend's `google.api.http`
 * rules (or its `apiConfig` rules) compiled into one trie, rebuilt whenever a schema loads or changes, in config then
 * declaration order; a rule that conflicts with one before it, would shadow a gateway route, or uses a method the HTTP
 * server cannot receive is refused, logged once and listed in `/health`.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { httpRulesOf, type HttpBinding, type PathTemplate } from "../../backends/http-rules.js";
import type { BackendSchema } from "../../backends/schema.js";
import type { ServiceRegistry, TranscodingConfig } from "../../config/services.js";
import type { Logger } from "../../observe/logger.js";
import type { HealthEntry } from "../../observe/health.js";
import { createRouteTrie, type MatchResult, type RouteTrie } from "./match.js";
import { compileRule, type TranscodeRule } from "./rule.js";

/** A route the gateway serves itself, which no rule may shadow. */
export interface ReservedRoute {
  readonly method: string;
  /** "/a/{param}/{rest+}" as the router writes it. */
  readonly path: string;
}

/** The transcoding routes of every dialable backend, rebuilt on every schema change. */
export interface TranscodeTable {
  /** A backend's schema loaded or changed: rebuild the routes (every backend, config order, so precedence holds). */
  sync(service: string, schema: BackendSchema): void;
  /** The gateway's own routes; a rule that would shadow one is refused. Rebuilds. */
  reserve(routes: readonly ReservedRoute[]): void;
  match(httpMethod: string, path: string): MatchResult<TranscodeRule>;
  /** The rules in the table, as "METHOD template (service method)". */
  routes(): readonly string[];
  /** Rules left out (conflicts, shadowed gateway routes, bad annotations), each a sentence naming them. */
  refused(): readonly string[];
  /**
   * What the table serves for one backend, for its OpenAPI document: each kept binding with the service's prefix, and
   * the backend's rules left out, by method. Empty for a backend with no schema yet or transcoding disabled.
   */
  servedBy(service: string): { bindings: ReadonlyArray<ServedBinding>; problems: ReadonlyArray<{ method: string; message: string }> };
  /** How many times the table was rebuilt: what `servedBy` answers changes only with it (documents cached by it). */
  generation(): number;
  /** The `/health` entry, when rules were refused. */
  health(): Record<string, HealthEntry>;
}

/** One binding the table serves. */
export interface ServedBinding {
  readonly method: DescMethod;
  readonly binding: HttpBinding;
  /** The service's configured prefix ("" for none). */
  readonly prefix: string;
}

/** The request methods uWebSockets.js parses; it drops a connection whose request has any other (e.g. PURGE). */
const SERVED_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]);

const DEFAULTS: TranscodingConfig = { enabled: true, prefix: "", errors: "grpc-gateway" };

/** A request path a gateway route would answer, to test rules against: each parameter as one "x" segment. */
function samplePath(path: string): string {
  return path.replace(/\{[A-Za-z_]+\+?\}/g, "x");
}

/** A request path a template would answer: each `*` and `**` as one "x" segment. */
function sampleOfTemplate(t: PathTemplate): string {
  const segs = t.segments.map((s) => (s.kind === "literal" ? s.value : "x"));
  return `/${segs.join("/")}${t.verb ? `:${t.verb}` : ""}`;
}

/** Whether a gateway route ("/a/{p}/{rest+}") answers `path`. */
function reservedMatches(route: string, path: string): boolean {
  const want = route.split("/").slice(1);
  const got = path.split("/").slice(1);
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    if (w.endsWith("+}")) return got.length > i && got.slice(i).every((p) => p !== "");
    if (got[i] === undefined || (w.startsWith("{") ? got[i] === "" : got[i] !== w)) return false;
  }
  return got.length === want.length;
}

/** Whether a rule and a gateway route answer a common path (checked on a sample of each: a heuristic, not a proof). */
function overlaps(rule: TranscodeRule, route: ReservedRoute): boolean {
  if (route.method !== rule.httpMethod) return false;
  if (reservedMatches(route.path, sampleOfTemplate(rule.template))) return true;
  const probe = createRouteTrie<true>();
  probe.add(rule.httpMethod, rule.template, true);
  try {
    const hit = probe.match(route.method, samplePath(route.path));
    return hit !== undefined && "match" in hit;
  } catch {
    return false;
  }
}

/**
/** Create the table. Logs each newly refused rule once (warn), naming it and what it conflicts with. */
export function createTranscodeTable(deps: { services: ServiceRegistry; logger: Logger }): TranscodeTable {
  const schemas = new Map<string, BackendSchema>();
  let reserved: readonly ReservedRoute[] = [];
  let trie: RouteTrie<TranscodeRule> = createRouteTrie();
  let listed: string[] = [];
  let refused: string[] = [];
  let logged = new Set<string>();
  let generation = 0;
  let served = new Map<string, { bindings: ServedBinding[]; problems: Array<{ method: string; message: string }> }>();

  const rebuild = (): void => {
    const next = createRouteTrie<TranscodeRule>();
    const names: string[] = [];
    const problems: string[] = [];
    const byService = new Map<string, { bindings: ServedBinding[]; problems: Array<{ method: string; message: string }> }>();
    for (const svc of deps.services.dialable) {
      const schema = schemas.get(svc.name);
      const cfg = svc.transcoding ?? DEFAULTS;
      if (!schema || !cfg.enabled) continue;
      const mine = { bindings: [] as ServedBinding[], problems: [] as Array<{ method: string; message: string }> };
      byService.set(svc.name, mine);
      const refuse = (method: string, message: string, sentence: string): void => {
        problems.push(sentence);
        mine.problems.push({ method, message });
      };
      const rules = httpRulesOf(schema.registry, schema.services, cfg.apiRules);
      for (const p of rules.problems) refuse(p.method, p.message, `${svc.name}: ${p.method}: ${p.message}`);
      for (const [desc, bindings] of rules.bindings) {
        const what = `${desc.parent.typeName}.${desc.name}`;
        if (desc.methodKind === "client_streaming" || desc.methodKind === "bidi_streaming") {
          const message = `is ${desc.methodKind.replace("_", "-")}; transcoding serves unary and server-streaming methods`;
          refuse(what, message, `${svc.name}: ${what}: ${message}`);
          continue;
        }
        for (const b of bindings) {
          const rule = compileRule(svc.name, cfg, desc, b);
          const name = `${rule.httpMethod} ${rule.label} (${svc.name} ${what})`;
          if (!SERVED_METHODS.has(rule.httpMethod)) {
            const message = `${rule.httpMethod} ${rule.label} is refused: the HTTP server (uWebSockets.js) receives only ${[...SERVED_METHODS].join(", ")}`;
            refuse(what, message, `${name} is refused: the HTTP server (uWebSockets.js) receives only ${[...SERVED_METHODS].join(", ")}`);
            continue;
          }
          const shadowed = reserved.find((r) => overlaps(rule, r));
          if (shadowed) {
            const message = `it would shadow the gateway's own route ${shadowed.method} ${shadowed.path}`;
            refuse(what, `${rule.httpMethod} ${rule.label} is refused: ${message}`, `${name} is refused: ${message}`);
            continue;
          }
          const held = next.add(rule.httpMethod, rule.template, rule);
          if (held) {
            const message = `${held.httpMethod} ${held.label} (${held.service} ${held.desc.parent.typeName}.${held.desc.name}) already has that method and path`;
            refuse(what, `${rule.httpMethod} ${rule.label} is refused: ${message}`, `${name} is refused: ${message}`);
            continue;
          }
          names.push(name);
          mine.bindings.push({ method: desc, binding: b, prefix: cfg.prefix });
        }
      }
    }
    trie = next;
    listed = names;
    refused = problems;
    served = byService;
    generation++;
    const now = new Set(problems);
    for (const p of problems) if (!logged.has(p)) deps.logger.warn({ rule: p }, "transcoding rule refused");
    logged = now;
  };

  return {
    sync(service, schema) {
      schemas.set(service, schema);
      rebuild();
    },
    reserve(routes) {
      reserved = routes;
      rebuild();
    },
    match: (httpMethod, path) => trie.match(httpMethod, path),
    routes: () => listed,
    refused: () => refused,
    servedBy: (service) => served.get(service) ?? { bindings: [], problems: [] },
    generation: () => generation,
    health(): Record<string, HealthEntry> {
      if (refused.length === 0) return {};
      return { transcoding: { status: "Degraded", description: `${refused.length} HTTP rule(s) refused: ${refused.join("; ")}` } };
    },
  };
}
