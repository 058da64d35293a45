/**
 * REST transcoding (docs/transcoding.md): the routes of every dialable backend's `google.api.http` rules (or its
 * service configuration's `apiConfig` rules), and the mapping of an HTTP request onto the method's request message
 * as proto3 JSON text the converter takes (path variables, body, query parameters), and of the response back.
 * Transport-free: the REST front (src/rest/transcode.ts) runs the matched rule through the invoke operations.
 */
import { ScalarType, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { Code, codeName, httpStatusOf } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import { decodeUtf8, locateInvalidUtf8InJson } from "../shared/utf8.js";
import { parseRfc3339 } from "../shared/rfc3339.js";
import { httpRulesOf, WRAPPER_OR_TEXT_WKT, type HttpBinding, type PathTemplate } from "../backends/http-rules.js";
import type { BackendSchema } from "../backends/schema.js";
import type { ServiceRegistry, TranscodingConfig } from "../config/services.js";
import type { Logger } from "../observe/logger.js";
import type { HealthEntry } from "../observe/health.js";
import { createRouteTrie, type MatchResult, type RouteTrie } from "./transcode-match.js";

/** A field value as it comes from a path or query: text, to proto3 JSON. Throws the problem as a plain message. */
type Encoder = (text: string) => string;

/** One routable binding of a backend method. */
export interface TranscodeRule {
  /** Registered service name (the backend). */
  readonly service: string;
  /** "pkg.Service/Method", for invoke. */
  readonly method: string;
  readonly desc: DescMethod;
  readonly httpMethod: string;
  /** The template with the service's prefix in front. */
  readonly template: PathTemplate;
  /** The metrics route label: the template as written, prefix included (bounded: one per rule). */
  readonly label: string;
  readonly serverStreaming: boolean;
  readonly errors: TranscodingConfig["errors"];
  /** Per template variable: the field path and how its text becomes JSON. */
  readonly pathFields: ReadonlyArray<{ readonly path: readonly string[]; readonly encode: Encoder }>;
  /** "" (no body), "*" or the top-level request field the body sets. */
  readonly body: string;
  /**
   * The request's one top-level google.protobuf.FieldMask field (proto name) that a PATCH with a message body field
   * fills from the body's keys when the request leaves it unset (grpc-gateway's patch feature); else undefined.
   */
  readonly patchMask: string | undefined;
  /** The response field `response_body` selects, as JSON names it. */
  readonly responseField: DescField | undefined;
  /** Query parameter name -> its field (or why it cannot be set), as first resolved. Bounded by QUERY_CACHE. */
  readonly queryFields: Map<string, QueryField | string>;
}

interface QueryField {
  /** Proto field names from the request message down. */
  readonly path: readonly string[];
  readonly repeated: boolean;
  readonly encode: Encoder;
}

/** Query parameter names remembered per rule (valid ones and refusals alike); more are resolved each time. */
const QUERY_CACHE = 64;

const INT = /^[-+]?\d+$/;
const UINT = /^\+?\d+$/;
const DURATION = /^-?\d+(\.\d{1,9})?s$/;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

const str: Encoder = (t) => JSON.stringify(t);

function intEncoder(min: number, max: number): Encoder {
  return (t) => {
    if (!INT.test(t)) throw new Error(`must be an integer, got '${echo(t)}'`);
    const n = Number(t);
    if (n < min || n > max) throw new Error(`is out of range (${min} to ${max}), got '${echo(t)}'`);
    return String(n);
  };
}

/** 64-bit integers go as JSON strings (proto3 JSON), checked as digits only: the converter checks the range. */
const int64: Encoder = (t) => {
  if (!INT.test(t)) throw new Error(`must be an integer, got '${echo(t)}'`);
  return JSON.stringify(t);
};
const uint64: Encoder = (t) => {
  if (!UINT.test(t)) throw new Error(`must be an unsigned integer, got '${echo(t)}'`);
  return JSON.stringify(t);
};
const float: Encoder = (t) => {
  if (t === "NaN" || t === "Infinity" || t === "-Infinity") return JSON.stringify(t);
  const n = t.trim() === "" ? NaN : Number(t);
  if (!Number.isFinite(n)) throw new Error(`must be a number, got '${echo(t)}'`);
  return String(n);
};
/** Go's strconv.ParseBool, which grpc-gateway uses. */
const bool: Encoder = (t) => {
  if (t === "1" || t === "t" || t === "T" || t === "true" || t === "TRUE" || t === "True") return "true";
  if (t === "0" || t === "f" || t === "F" || t === "false" || t === "FALSE" || t === "False") return "false";
  throw new Error(`must be true or false, got '${echo(t)}'`);
};
const bytes: Encoder = (t) => {
  if (!BASE64.test(t)) throw new Error(`must be base64 (standard or URL-safe alphabet), got '${echo(t)}'`);
  return JSON.stringify(t);
};

function scalarEncoder(t: ScalarType): Encoder {
  switch (t) {
    case ScalarType.STRING:
      return str;
    case ScalarType.BOOL:
      return bool;
    case ScalarType.BYTES:
      return bytes;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return float;
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return intEncoder(-2147483648, 2147483647);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return intEncoder(0, 4294967295);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return uint64;
    default:
      return int64;
  }
}

/** Nanoseconds per unit of Go's time.ParseDuration (µ as U+00B5 and U+03BC both, as Go takes them). */
const GO_UNITS: Record<string, bigint> = { ns: 1n, us: 1_000n, "\u00b5s": 1_000n, "\u03bcs": 1_000n, ms: 1_000_000n, s: 1_000_000_000n, m: 60_000_000_000n, h: 3_600_000_000_000n };
const GO_DURATION = /^[-+]?(?:\d*(?:\.\d*)?(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$/;
const GO_PART = /(\d*)(?:\.(\d*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/g;
/** Go's limit: a time.Duration is an int64 of nanoseconds. */
const GO_MAX_NANOS = 2n ** 63n - 1n;

/**
 * A duration in Go's form (time.ParseDuration, which grpc-gateway reads query and path Durations with: `13h`,
 * `1h30m`, `1.5s`, `300ms`, `-5m`, `0`) as proto3 JSON's (`46800s`, `0.300s`), or undefined when it is not one.
 * Computed in whole nanoseconds, a fraction below that cut off as Go cuts it.
 */
function goDuration(t: string): string | undefined {
  if (t === "0" || t === "+0" || t === "-0") return "0s";
  if (!GO_DURATION.test(t)) return undefined;
  let nanos = 0n;
  for (const [, whole, frac, unit] of t.matchAll(GO_PART)) {
    // Each part needs a digit before or after its point ("." alone or "s" alone is no number).
    if (whole === "" && (frac === undefined || frac === "")) return undefined;
    const per = GO_UNITS[unit!]!;
    nanos += BigInt(whole || "0") * per;
    if (frac) nanos += (BigInt(frac) * per) / 10n ** BigInt(frac.length);
    if (nanos > GO_MAX_NANOS) return undefined;
  }
  const sign = t.startsWith("-") && nanos > 0n ? "-" : "";
  const seconds = nanos / 1_000_000_000n;
  const rest = nanos % 1_000_000_000n;
  if (rest === 0n) return `${sign}${seconds}s`;
  // proto3 JSON writes 3, 6 or 9 fractional digits.
  const digits = rest % 1_000_000n === 0n ? 3 : rest % 1_000n === 0n ? 6 : 9;
  return `${sign}${seconds}.${rest.toString().padStart(9, "0").slice(0, digits)}s`;
}

/** google.protobuf.FieldMask paths as grpc-gateway takes them (comma-separated proto names) to its JSON (lowerCamel). */
const fieldMask: Encoder = (t) =>
  JSON.stringify(
    t
      .split(",")
      .map((p) => p.trim().replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()))
      .join(","),
  );

const WKT_ENCODERS: Record<string, Encoder> = {
  "google.protobuf.Timestamp": (t) => {
    if (parseRfc3339(t) === undefined) throw new Error(`must be an RFC 3339 timestamp, got '${echo(t)}'`);
    return JSON.stringify(t);
  },
  "google.protobuf.Duration": (t) => {
    if (DURATION.test(t)) return JSON.stringify(t);
    const json = goDuration(t);
    if (json === undefined) throw new Error(`must be a duration (1.5s as proto3 JSON writes it, or Go's form such as 1h30m or 300ms), got '${echo(t)}'`);
    return JSON.stringify(json);
  },
  "google.protobuf.FieldMask": fieldMask,
  "google.protobuf.DoubleValue": float,
  "google.protobuf.FloatValue": float,
  "google.protobuf.Int64Value": int64,
  "google.protobuf.UInt64Value": uint64,
  "google.protobuf.Int32Value": scalarEncoder(ScalarType.INT32),
  "google.protobuf.UInt32Value": scalarEncoder(ScalarType.UINT32),
  "google.protobuf.BoolValue": bool,
  "google.protobuf.StringValue": str,
  "google.protobuf.BytesValue": bytes,
};

/** How a path or query text sets `f` (a scalar, enum or text-valued well-known type), or undefined when it cannot. */
function encoderOf(f: DescField): Encoder | undefined {
  const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind;
  if (kind === "scalar") return scalarEncoder(f.scalar!);
  if (kind === "enum") {
    const e = f.enum!;
    return (t) => {
      if (e.values.some((v) => v.name === t)) return JSON.stringify(t);
      // A number only when the enum has it (grpc-gateway's parseField: "%q is not a valid value").
      if (INT.test(t) && e.values.some((v) => v.number === Number(t))) return String(Number(t));
      throw new Error(`must be a value of ${e.typeName} (${e.values.map((v) => v.name).join(", ")}) or its number, got '${echo(t)}'`);
    };
  }
  if (kind === "message") return WKT_ENCODERS[f.message!.typeName];
  return undefined;
}

function fieldNamed(m: DescMessage, name: string): DescField | undefined {
  return m.fields.find((f) => f.name === name) ?? m.fields.find((f) => f.jsonName === name);
}

/** Resolve a query parameter name (proto or JSON field names, dotted) to the field it sets, or why it cannot. */
function resolveQuery(rule: Pick<TranscodeRule, "desc" | "pathFields" | "body">, key: string): QueryField | string {
  if (rule.body === "*") return `sets nothing: the request body is the whole message (the rule's body is "*")`;
  const names = key.split(".");
  let m: DescMessage = rule.desc.input;
  const path: string[] = [];
  let f: DescField | undefined;
  for (let i = 0; i < names.length; i++) {
    f = fieldNamed(m, names[i]!);
    if (!f) return `is not a field of ${m.typeName}`;
    path.push(f.name);
    if (i === names.length - 1) break;
    if (f.fieldKind !== "message" || WRAPPER_OR_TEXT_WKT.has(f.message.typeName)) return `is not a field path: ${f.name} is not a message`;
    m = f.message;
  }
  const dotted = path.join(".");
  const overlaps = (other: readonly string[]): boolean => {
    const o = other.join(".");
    return o === dotted || o.startsWith(`${dotted}.`) || dotted.startsWith(`${o}.`);
  };
  if (rule.pathFields.some((p) => overlaps(p.path))) return "is set by the path";
  if (rule.body !== "" && overlaps([rule.body])) return "is set by the request body";
  if (f!.fieldKind === "map") return "is a map field, which query parameters do not set";
  const encode = encoderOf(f!);
  if (!encode) return `is a message (${f!.message!.typeName}); set its fields as ${key}.<field>`;
  return { path, repeated: f!.fieldKind === "list", encode };
}

/** A JSON object under construction: members as JSON text, or nested objects. */
type Tree = Map<string, Tree | string>;

function put(tree: Tree, path: readonly string[], json: string): void {
  let t = tree;
  for (let i = 0; i < path.length - 1; i++) {
    let next = t.get(path[i]!);
    if (typeof next !== "object") t.set(path[i]!, (next = new Map()));
    t = next;
  }
  t.set(path[path.length - 1]!, json);
}

function serialize(tree: Tree): string {
  let out = "{";
  for (const [k, v] of tree) {
    if (out.length > 1) out += ",";
    out += `${JSON.stringify(k)}:${typeof v === "string" ? v : serialize(v)}`;
  }
  return out + "}";
}

function badParam(name: string, problem: string): GatewayError {
  return new GatewayError(Code.INVALID_ARGUMENT, `query parameter ${echo(name)} ${problem}`, { field: name });
}

/** The body as text; INVALID_ARGUMENT when it is not UTF-8. */
function bodyText(body: Buffer): string {
  const d = decodeUtf8(body);
  if ("invalidAt" in d) throw new GatewayError(Code.INVALID_ARGUMENT, `request body is not valid UTF-8 (${locateInvalidUtf8InJson(body, d.invalidAt)})`);
  return d.text;
}

function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * The request message of `rule` as proto3 JSON text, from the captured path values, the query and the body.
 * INVALID_ARGUMENT naming the parameter or the problem for anything it cannot use (docs/transcoding.md "Request").
 */
export function transcodeRequest(rule: TranscodeRule, values: readonly string[], query: URLSearchParams, body: Buffer): string {
  const tree: Tree = new Map();
  for (let i = 0; i < rule.pathFields.length; i++) {
    const p = rule.pathFields[i]!;
    try {
      put(tree, p.path, p.encode(values[i]!));
    } catch (e) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `path variable ${p.path.join(".")} ${(e as Error).message}`, { field: p.path.join(".") });
    }
  }
  let lists: Map<string, string[]> | undefined;
  for (const [key, value] of query) {
    let q = rule.queryFields.get(key);
    if (q === undefined) {
      q = resolveQuery(rule, key);
      if (rule.queryFields.size < QUERY_CACHE) rule.queryFields.set(key, q);
    }
    if (typeof q === "string") throw badParam(key, q);
    let json: string;
    try {
      json = q.encode(value);
    } catch (e) {
      throw badParam(key, (e as Error).message);
    }
    const dotted = q.path.join(".");
    if (q.repeated) {
      const list = (lists ??= new Map()).get(dotted);
      if (list) list.push(json);
      else {
        lists.set(dotted, [json]);
        put(tree, q.path, "");
      }
    } else {
      if (lists?.has(dotted) || hasPath(tree, q.path)) throw badParam(key, "is given more than once (it is not a repeated field)");
      put(tree, q.path, json);
    }
  }
  if (lists) for (const [dotted, list] of lists) put(tree, dotted.split("."), `[${list.join(",")}]`);

  if (rule.body === "" || body.length === 0) return serialize(tree);
  const text = bodyText(body);
  if (rule.body === "*") {
    // The body is the message: passed through as it is, unless path values go into it.
    if (tree.size === 0) return text;
    const obj = parseBody(text);
    if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new GatewayError(Code.INVALID_ARGUMENT, "request body must be a JSON object");
    merge(obj as Record<string, unknown>, tree, "");
    return JSON.stringify(obj);
  }
  const value = parseBody(text);
  // Before the path values are merged in: the mask names what the client's body sets.
  if (rule.patchMask !== undefined && !maskGiven(tree, rule.patchMask)) {
    const paths: string[] = [];
    maskPaths(rule.desc.input.fields.find((f) => f.name === rule.body)!.message!, value, "", paths);
    if (paths.length > 0) tree.set(rule.patchMask, fieldMask(paths.sort().join(",")));
  }
  const under = tree.get(rule.body);
  if (under !== undefined) {
    // The path sets fields inside the body's field ({book.name=...} with body "book"): merged, the path winning.
    if (typeof value !== "object" || value === null || Array.isArray(value) || typeof under !== "object") {
      throw new GatewayError(Code.INVALID_ARGUMENT, `request body must be a JSON object (it is the request's ${rule.body} field)`);
    }
    merge(value as Record<string, unknown>, under, `${rule.body}.`);
    tree.set(rule.body, JSON.stringify(value));
    return serialize(tree);
  }
  // Checked to be one JSON value, then spliced in as written.
  const rest = serialize(tree);
  return `{${JSON.stringify(rule.body)}:${text}${rest.length > 2 ? "," + rest.slice(1) : "}"}`;
}

/** Whether the query set the FieldMask field to a mask with paths (grpc-gateway fills a missing or empty one). */
function maskGiven(tree: Tree, field: string): boolean {
  const v = tree.get(field);
  return v !== undefined && v !== '""';
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The field mask paths (proto names) of a PATCH body of message `m`, as grpc-gateway's FieldMaskFromRequestBody
 * makes them: every key down to a leaf (a non-object value, or an empty object); a repeated or map field ends its path
 * (never one path per element); a Struct or Value field is followed by its JSON keys; an Any field ends its path and
 * needs its "@type". A key the message does not have is skipped: the converter refuses the body for it.
 */
function maskPaths(m: DescMessage, node: unknown, prefix: string, out: string[]): void {
  if (!isObject(node)) return;
  for (const [k, v] of Object.entries(node)) {
    const f = fieldNamed(m, k);
    if (!f) continue;
    const path = prefix + f.name;
    const type = f.fieldKind === "message" ? f.message.typeName : undefined;
    if (f.fieldKind === "list" || f.fieldKind === "map") out.push(path);
    else if (type === "google.protobuf.Struct" || type === "google.protobuf.Value") blindPaths(path, v, out);
    else if (type === "google.protobuf.Any") {
      if (!isObject(v) || !("@type" in v)) throw new GatewayError(Code.INVALID_ARGUMENT, `request body field ${path} (google.protobuf.Any) has no "@type"`, { field: path });
      out.push(path);
    } else if (f.fieldKind === "message" && isObject(v) && Object.keys(v).length > 0) maskPaths(f.message, v, `${path}.`, out);
    else out.push(path);
  }
}

/** Paths under a Struct or Value field: its JSON keys as they are, down to each non-object value. */
function blindPaths(path: string, node: unknown, out: string[]): void {
  if (!isObject(node)) return void out.push(path);
  for (const [k, v] of Object.entries(node)) {
    if (isObject(v)) blindPaths(`${path}.${k}`, v, out);
    else out.push(`${path}.${k}`);
  }
}

function hasPath(tree: Tree, path: readonly string[]): boolean {
  let t: Tree | string | undefined = tree;
  for (const p of path) {
    if (typeof t !== "object") return false;
    t = t.get(p);
  }
  return t !== undefined;
}

/** Path values into a parsed `*` body: the path wins over what the body says. */
function merge(obj: Record<string, unknown>, tree: Tree, where: string): void {
  for (const [k, v] of tree) {
    if (typeof v === "string") obj[k] = JSON.parse(v);
    else {
      const inner = obj[k] ?? {};
      if (typeof inner !== "object" || inner === null || Array.isArray(inner)) throw new GatewayError(Code.INVALID_ARGUMENT, `request body field ${where}${k} must be an object`);
      obj[k] = inner;
      merge(inner as Record<string, unknown>, v, `${where}${k}.`);
    }
  }
}

/** The JSON an unset field has in a selected `response_body` (the converter omits unset fields). */
function defaultJson(f: DescField): string {
  switch (f.fieldKind) {
    case "list":
      return "[]";
    case "map":
    case "message":
      return "{}";
    case "enum":
      return JSON.stringify(f.enum.values[0]?.name ?? 0);
    default:
      if (f.scalar === ScalarType.STRING || f.scalar === ScalarType.BYTES) return '""';
      if (f.scalar === ScalarType.BOOL) return "false";
      if (f.scalar === ScalarType.INT64 || f.scalar === ScalarType.UINT64 || f.scalar === ScalarType.SINT64 || f.scalar === ScalarType.FIXED64 || f.scalar === ScalarType.SFIXED64) return '"0"';
      return "0";
  }
}

/** The response body of `rule` from the converter's JSON: the whole message as given, or the `response_body` field. */
export function transcodeResponse(rule: TranscodeRule, json: string): string {
  const f = rule.responseField;
  if (!f) return json;
  const v = (JSON.parse(json) as Record<string, unknown>)[f.jsonName];
  return v === undefined ? defaultJson(f) : JSON.stringify(v);
}

/** The error body in the rule's shape: grpc-gateway's `{code, message, details}` or Google's `{"error": {...}}`. */
export function transcodeErrorBody(shape: TranscodingConfig["errors"], e: GatewayError): string {
  if (shape === "google") return JSON.stringify({ error: { code: httpStatusOf(e.code), message: e.rawMessage, status: codeName(e.code), details: [] } });
  return JSON.stringify({ code: e.code, message: e.rawMessage, details: [] });
}

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

/** A template with the prefix's literal segments in front. */
function prefixed(prefix: string, t: PathTemplate): PathTemplate {
  if (prefix === "") return t;
  const lits = prefix
    .slice(1)
    .split("/")
    .map((value) => ({ kind: "literal" as const, value }));
  const n = lits.length;
  return {
    text: prefix + t.text,
    segments: [...lits, ...t.segments],
    variables: t.variables.map((v) => ({ ...v, start: v.start + n, end: v.end + n })),
    verb: t.verb,
  };
}

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
 * The FieldMask field grpc-gateway's patch feature fills for a binding: PATCH, a body that is one message field, and
 * exactly one FieldMask field at the top of the request (with two, it cannot tell which one to fill).
 */
function patchMaskOf(input: DescMessage, b: HttpBinding): string | undefined {
  if (b.httpMethod !== "PATCH" || b.body === "" || b.body === "*") return undefined;
  const body = input.fields.find((f) => f.name === b.body);
  if (body?.fieldKind !== "message") return undefined;
  const masks = input.fields.filter((f) => (f.fieldKind === "message" || f.fieldKind === "list") && f.message?.typeName === "google.protobuf.FieldMask");
  return masks.length === 1 && masks[0]!.fieldKind === "message" && masks[0] !== body ? masks[0]!.name : undefined;
}

function compile(service: string, cfg: TranscodingConfig, desc: DescMethod, b: HttpBinding): TranscodeRule {
  const template = prefixed(cfg.prefix, b.template);
  const pathFields = template.variables.map((v) => {
    let m: DescMessage = desc.input;
    let f: DescField | undefined;
    for (const name of v.fieldPath) {
      f = m.fields.find((x) => x.name === name)!;
      if (f.fieldKind === "message") m = f.message;
    }
    // http-rules.ts checked the field exists and is a scalar, enum or text-valued well-known type.
    return { path: v.fieldPath, encode: encoderOf(f!)! };
  });
  return {
    service,
    method: `${desc.parent.typeName}/${desc.name}`,
    desc,
    httpMethod: b.httpMethod,
    template,
    label: template.text,
    serverStreaming: desc.methodKind === "server_streaming",
    errors: cfg.errors,
    pathFields,
    body: b.body,
    patchMask: patchMaskOf(desc.input, b),
    responseField: b.responseBody === "" ? undefined : desc.output.fields.find((f) => f.name === b.responseBody),
    queryFields: new Map(),
  };
}

/** Create the table. Logs each newly refused rule once (warn), naming it and what it conflicts with. */
export function createTranscodeTable(deps: { services: ServiceRegistry; logger: Logger }): TranscodeTable {
  const schemas = new Map<string, BackendSchema>();
  let reserved: readonly ReservedRoute[] = [];
  let trie: RouteTrie<TranscodeRule> = createRouteTrie();
  let listed: string[] = [];
  let refused: string[] = [];
  let logged = new Set<string>();
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
          const rule = compile(svc.name, cfg, desc, b);
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
    health(): Record<string, HealthEntry> {
      if (refused.length === 0) return {};
      return { transcoding: { status: "Degraded", description: `${refused.length} HTTP rule(s) refused: ${refused.join("; ")}` } };
    },
  };
}
