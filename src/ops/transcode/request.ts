/**
 * The request message of a matched transcoding rule, as proto3 JSON text the converter takes: path variables, the
 * body (`*`, one field, or none), query parameters for the remaining fields, and grpc-gateway's patch feature (a
 * PATCH's hidden FieldMask filled from the body's keys). docs/transcoding.md "Request".
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import { decodeUtf8, locateInvalidUtf8InJson } from "../../shared/utf8.js";
import { WRAPPER_OR_TEXT_WKT } from "../../backends/http-rules.js";
import { QUERY_CACHE, type QueryField, type TranscodeRule } from "./rule.js";
import { encoderOf, fieldMask, fieldNamed } from "./values.js";

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
