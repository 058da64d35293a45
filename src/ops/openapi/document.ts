/**
 * The OpenAPI 3.1 document of the backends' HTTP bindings (docs/openapi.md): pure, from each backend's reflected
 * schema and the list of bindings to describe (whoever applies prefixes and rule overrides hands them in).
 *
 * Choices the spec leaves open:
 * - A multi-segment path variable (`{name=shelves/*\/books/*}`) is expanded into one path parameter per wildcard, as
 *   Google's protoc-gen-openapi does: `/v1/shelves/{shelf}/books/{book}`, each parameter named after the literal
 *   before it (singular) and described as a segment of the field. OpenAPI path parameters cannot hold `/`, and the
 *   expanded form keeps `GET /v1/{name=messages/*}` and `GET /v1/{name=shelves/*\/books/*}` apart. A `**` becomes one
 *   parameter that may hold `/` (`x-multi-segment: true`).
 * - A custom HTTP verb (`custom: {kind: "PURGE"}`) has no operation key in OpenAPI 3.1: such operations are left out
 *   of `paths` and listed under the top-level `x-custom-operations` (method, path, operation).
 * - Two bindings on the same method and path: the first kept, the other listed under `x-refused`.
 */
import { createHash } from "node:crypto";
import type { DescField, DescMessage, DescMethod } from "@bufbuild/protobuf";
import type { HttpBinding, TemplateSegment } from "../../backends/http-rules.js";
import { WRAPPER_OR_TEXT_WKT } from "../../backends/http-rules.js";
import type { BackendSchema } from "../../backends/schema.js";
import { leadingComment } from "./comments.js";
import { ANY_SCHEMA, ANY_SCHEMA_NAME, ERROR_SCHEMA, ERROR_SCHEMA_NAME, SchemaCollector, wellKnownSchema, type JsonSchema } from "./json-schema.js";

/** One binding to describe: the method, its rule, and the path prefix its routes are served under ("" for the root). */
export interface OpenApiBinding {
  readonly method: DescMethod;
  readonly binding: HttpBinding;
  readonly prefix: string;
}

/** One backend in the document. */
export interface OpenApiBackend {
  /** Registered service name. */
  readonly service: string;
  readonly schema: BackendSchema;
  readonly bindings: readonly OpenApiBinding[];
  /** Annotations that could not be used (listed under `x-problems`). */
  readonly problems?: readonly { method: string; message: string }[];
}

/** A registered backend left out because its schema could not be loaded, and why. */
export interface UnavailableBackend {
  readonly service: string;
  readonly message: string;
}

export interface OpenApiInput {
  readonly backends: readonly OpenApiBackend[];
  readonly unavailable?: readonly UnavailableBackend[];
  /** info.title. */
  readonly title: string;
  /** Declare the x-api-key scheme and require it on every operation (false when the gateway has no keys). */
  readonly apiKey: boolean;
}

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, unknown>> };

/** The HTTP methods OpenAPI 3.1 has operation keys for. */
const OPERATION_KEYS = new Set(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);

/** `info.version`: the schema id of one backend, or a hash of every backend's for the combined document. */
export function documentVersion(backends: readonly { service: string; schema: BackendSchema }[]): string {
  if (backends.length === 1) return backends[0]!.schema.set.id;
  const h = createHash("sha256");
  for (const b of backends) h.update(`${b.service}=${b.schema.set.id};`);
  return h.digest("hex").slice(0, 16);
}

/** "shelves" -> "shelf", "books" -> "book", "messages" -> "message", "policies" -> "policy". */
function singular(word: string): string {
  if (/ves$/.test(word)) return word.slice(0, -3) + "f";
  if (/ies$/.test(word)) return word.slice(0, -3) + "y";
  if (/(ss|us)$/.test(word)) return word;
  if (/s$/.test(word)) return word.slice(0, -1);
  return word;
}

/** A path parameter of an expanded template. */
interface PathParam {
  readonly name: string;
  readonly schema: JsonSchema;
  readonly description: string;
  readonly multiSegment: boolean;
  /** The request field it (partly) sets, proto names. */
  readonly fieldPath: readonly string[];
}

function segmentText(s: TemplateSegment): string {
  return s.kind === "literal" ? s.value : s.kind;
}

/** Path parameter schema of a single-`*` variable: the field's own JSON type when it is a scalar, enum or text WKT. */
function pathFieldSchema(f: DescField | undefined, c: SchemaCollector): JsonSchema {
  if (!f) return { type: "string" };
  if (f.fieldKind === "scalar" || f.fieldKind === "enum") return c.field(f);
  if (f.fieldKind === "message") return wellKnownSchema(f.message.typeName) ?? { type: "string" };
  return { type: "string" };
}

function fieldByPath(m: DescMessage, path: readonly string[]): DescField | undefined {
  let cur: DescMessage | undefined = m;
  let f: DescField | undefined;
  for (const n of path) {
    f = cur?.fields.find((x) => x.name === n);
    if (!f) return undefined;
    cur = f.fieldKind === "message" ? f.message : undefined;
  }
  return f;
}

/** The OpenAPI path of a binding and its path parameters (see the module comment). */
export function openApiPath(prefix: string, b: HttpBinding, input: DescMessage, c: SchemaCollector): { path: string; params: PathParam[] } {
  const t = b.template;
  const parts: string[] = [];
  const params: PathParam[] = [];
  const used = new Set<string>();
  const unique = (name: string): string => {
    let n = name;
    for (let i = 2; used.has(n); i++) n = `${name}_${i}`;
    used.add(n);
    return n;
  };
  let i = 0;
  while (i < t.segments.length) {
    const v = t.variables.find((x) => x.start === i);
    if (!v) {
      const s = t.segments[i]!;
      if (s.kind === "literal") parts.push(s.value);
      else {
        const name = unique(`segment${i + 1}`);
        parts.push(`{${name}}`);
        params.push({ name, schema: { type: "string" }, description: s.kind === "**" ? "Any rest of the path (not bound to a field)." : "Any one segment (not bound to a field).", multiSegment: s.kind === "**", fieldPath: [] });
      }
      i++;
      continue;
    }
    const field = v.fieldPath.join(".");
    const f = fieldByPath(input, v.fieldPath);
    const doc = f ? leadingComment(f) : undefined;
    if (v.end - v.start === 1 && t.segments[v.start]!.kind === "*") {
      const name = unique(field);
      parts.push(`{${name}}`);
      params.push({ name, schema: pathFieldSchema(f, c), description: doc ?? `Sets ${field}.`, multiSegment: false, fieldPath: v.fieldPath });
    } else {
      const pattern = t.segments.slice(v.start, v.end).map(segmentText).join("/");
      for (let k = v.start; k < v.end; k++) {
        const s = t.segments[k]!;
        if (s.kind === "literal") {
          parts.push(s.value);
          continue;
        }
        const before = k > v.start ? t.segments[k - 1] : undefined;
        const name = unique(before?.kind === "literal" ? singular(before.value) : field);
        parts.push(`{${name}}`);
        const what = s.kind === "**" ? "the rest of the path (may contain /)" : "one segment";
        params.push({
          name,
          schema: s.kind === "**" ? { type: "string" } : { type: "string", pattern: "^[^/]+$" },
          description: `${what} of ${field} (${pattern}).${doc ? "\n\n" + doc : ""}`,
          multiSegment: s.kind === "**",
          fieldPath: v.fieldPath,
        });
      }
    }
    i = v.end;
  }
  const base = prefix.replace(/\/+$/, "");
  return { path: `${base}/${parts.join("/")}${t.verb !== undefined ? ":" + t.verb : ""}`, params };
}

/** A field can be a query parameter: a scalar, enum or text WKT, or a list of those. */
function queryLeafSchema(f: DescField, c: SchemaCollector): JsonSchema | undefined {
  switch (f.fieldKind) {
    case "scalar":
    case "enum":
      return c.field(f);
    case "message":
      return WRAPPER_OR_TEXT_WKT.has(f.message.typeName) ? c.field(f) : undefined;
    case "list":
      if (f.listKind === "message" && !WRAPPER_OR_TEXT_WKT.has(f.message.typeName)) return undefined;
      return c.field(f);
    case "map":
      return undefined;
  }
}

/** Nesting bound of query parameters (`a.b.c...`): a recursive message would otherwise never end. */
const MAX_QUERY_DEPTH = 8;

/** The query parameters of a binding: every leaf field the path and body do not set, by JSON names joined with ".". */
function queryParams(m: DescMessage, excluded: ReadonlySet<string>, c: SchemaCollector): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const walk = (msg: DescMessage, protoPrefix: string, jsonPrefix: string, chain: readonly string[]): void => {
    for (const f of msg.fields) {
      const protoPath = protoPrefix + f.name;
      if (excluded.has(protoPath)) continue;
      const leaf = queryLeafSchema(f, c);
      if (leaf) {
        const { description, "x-proto-name": _, ...schema } = leaf;
        const p: Record<string, unknown> = { name: jsonPrefix + f.jsonName, in: "query", required: false, schema, "x-field": protoPath };
        if (typeof description === "string") p["description"] = description;
        if (f.fieldKind === "list") {
          p["style"] = "form";
          p["explode"] = true;
        }
        if (f.deprecated) p["deprecated"] = true;
        out.push(p);
      } else if (f.fieldKind === "message" && !wellKnownSchema(f.message.typeName) && !chain.includes(f.message.typeName) && chain.length < MAX_QUERY_DEPTH) {
        walk(f.message, protoPath + ".", jsonPrefix + f.jsonName + ".", [...chain, f.message.typeName]);
      }
    }
  };
  walk(m, "", "", [m.typeName]);
  return out;
}

function summaryOf(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const first = text.split(/\n\s*\n/)[0]!.replace(/\s+/g, " ").trim();
  const dot = first.search(/\.(\s|$)/);
  return dot >= 0 ? first.slice(0, dot + 1) : first;
}

const errorRef = { $ref: `#/components/schemas/${ERROR_SCHEMA_NAME}` };

function operation(backend: OpenApiBackend, ob: OpenApiBinding, operationId: string, params: PathParam[], c: SchemaCollector): Record<string, unknown> {
  const { method: m, binding: b } = ob;
  const doc = leadingComment(m);
  const op: Record<string, unknown> = { operationId, tags: [m.parent.typeName] };
  const summary = summaryOf(doc);
  if (summary) op["summary"] = summary;
  op["description"] = `${doc ? doc + "\n\n" : ""}gRPC ${m.parent.typeName}/${m.name} of service \`${backend.service}\` (${b.httpMethod} ${b.template.text}).`;
  if (m.deprecated) op["deprecated"] = true;
  // Path fields, the body field and (for body "*") everything else are not query parameters.
  const pathFields = new Set(params.filter((p) => p.fieldPath.length > 0).map((p) => p.fieldPath.join(".")));
  const parameters: Record<string, unknown>[] = params.map((p) => ({
    name: p.name,
    in: "path",
    required: true,
    description: p.description,
    schema: p.schema,
    ...(p.multiSegment ? { "x-multi-segment": true } : {}),
    ...(p.fieldPath.length > 0 ? { "x-field": p.fieldPath.join(".") } : {}),
  }));
  if (b.body !== "*") {
    const excluded = new Set(pathFields);
    if (b.body !== "") excluded.add(b.body);
    parameters.push(...queryParams(m.input, excluded, c));
  }
  if (parameters.length > 0) op["parameters"] = parameters;
  if (b.body !== "") {
    let schema: JsonSchema;
    if (b.body === "*") {
      const topLevel = new Set([...pathFields].filter((p) => !p.includes(".")));
      schema = topLevel.size === 0 ? c.message(m.input) : c.objectOf(m.input, topLevel);
    } else {
      schema = c.field(m.input.fields.find((f) => f.name === b.body)!);
    }
    op["requestBody"] = { required: b.body !== "*", content: { "application/json": { schema } } };
  }
  const out = b.responseBody === "" ? c.message(m.output) : c.field(m.output.fields.find((f) => f.name === b.responseBody)!);
  const success =
    m.methodKind === "server_streaming"
      ? {
          description: "A stream of newline-delimited JSON objects: `{\"result\": <message>}` per message, and `{\"error\": <status>}` as the last line when the stream fails after it started.",
          content: { "application/x-ndjson": { schema: { type: "object", properties: { result: out, error: errorRef } } } },
        }
      : { description: b.responseBody === "" ? `${m.output.typeName}` : `Field ${b.responseBody} of ${m.output.typeName}`, content: { "application/json": { schema: out } } };
  op["responses"] = { "200": success, default: { description: "An error, with the HTTP status grpc-gateway maps its gRPC code to.", content: { "application/json": { schema: errorRef } } } };
  return op;
}

/** True when every component of `b` that `a` also has is the same schema. */
function agrees(a: Map<string, JsonSchema>, b: Map<string, JsonSchema>): boolean {
  for (const [k, v] of b) {
    const mine = a.get(k);
    if (mine !== undefined && JSON.stringify(mine) !== JSON.stringify(v)) return false;
  }
  return true;
}

/** Build the document. Deterministic: backends, services and methods in the order given. */
export function buildOpenApiDocument(input: OpenApiInput): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  const components = new Map<string, JsonSchema>();
  const custom: Record<string, unknown>[] = [];
  const refused: Record<string, unknown>[] = [];
  const problems: Record<string, unknown>[] = [];
  const tags = new Map<string, Record<string, unknown>>();
  const operationIds = new Set<string>();

  for (const backend of input.backends) {
    const build = (prefix: string): { c: SchemaCollector; ops: Array<{ path: string; key: string; httpMethod: string; op: Record<string, unknown> }> } => {
      const c = new SchemaCollector(prefix);
      const ops: Array<{ path: string; key: string; httpMethod: string; op: Record<string, unknown> }> = [];
      const perMethod = new Map<DescMethod, number>();
      for (const ob of backend.bindings) {
        const n = perMethod.get(ob.method) ?? 0;
        perMethod.set(ob.method, n + 1);
        const base = `${ob.method.parent.name}_${ob.method.name}${n > 0 ? "_" + n : ""}`;
        const { path, params } = openApiPath(ob.prefix, ob.binding, ob.method.input, c);
        ops.push({ path, key: ob.binding.httpMethod.toLowerCase(), httpMethod: ob.binding.httpMethod, op: operation(backend, ob, base, params, c) });
      }
      // Every message of the files declaring the backend's services, and everything its methods reach, annotated or not.
      const files = new Set(backend.schema.services.map((n) => backend.schema.registry.getService(n)?.file));
      for (const file of files) if (file) c.fileMessages(file.messages);
      for (const m of backend.schema.methods) {
        c.message(m.desc.input);
        c.message(m.desc.output);
      }
      c.drain();
      return { c, ops };
    };
    // Component names are the proto type names; a backend whose types disagree with an earlier one's under the same
    // name gets its own names, prefixed by its registered service name.
    let built = build("");
    if (!agrees(components, built.c.components)) built = build(`${backend.service}.`);
    for (const [k, v] of built.c.components) if (!components.has(k)) components.set(k, v);

    for (const { path, key, httpMethod, op } of built.ops) {
      let id = op["operationId"] as string;
      for (let i = 2; operationIds.has(id); i++) id = `${op["operationId"] as string}_${i}`;
      op["operationId"] = id;
      operationIds.add(id);
      const tag = (op["tags"] as string[])[0]!;
      if (!tags.has(tag)) {
        const svc = backend.schema.registry.getService(tag);
        const doc = svc ? leadingComment(svc) : undefined;
        tags.set(tag, { name: tag, description: `${doc ? doc + "\n\n" : ""}Served by backend \`${backend.service}\`.` });
      }
      if (!OPERATION_KEYS.has(key)) {
        custom.push({ method: httpMethod, path, operation: op });
        continue;
      }
      const item = (paths[path] ??= {});
      if (item[key] !== undefined) {
        refused.push({ method: httpMethod, path, operationId: id, message: `${httpMethod} ${path} is already ${(item[key] as { operationId: string }).operationId}` });
        continue;
      }
      item[key] = op;
    }
    for (const p of backend.problems ?? []) problems.push({ service: backend.service, ...p });
  }
  // Path-level parameters are repeated per operation rather than hoisted: operations on one path may name them alike
  // but bind different fields.
  components.set(ERROR_SCHEMA_NAME, ERROR_SCHEMA);
  components.set(ANY_SCHEMA_NAME, ANY_SCHEMA); // the error's details

  const doc: OpenApiDocument = {
    openapi: "3.1.0",
    info: {
      title: input.title,
      version: documentVersion(input.backends),
      description: "Generated by the gateway from its backends' reflected descriptors and google.api.http annotations.",
    },
    tags: [...tags.values()],
    paths,
    components: {
      schemas: Object.fromEntries([...components].sort(([a], [b]) => a.localeCompare(b))),
      ...(input.apiKey ? { securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "x-api-key" } } } : {}),
    },
  };
  if (input.apiKey) doc["security"] = [{ apiKey: [] }];
  if (custom.length > 0) doc["x-custom-operations"] = custom;
  if (refused.length > 0) doc["x-refused"] = refused;
  if (problems.length > 0) doc["x-problems"] = problems;
  if ((input.unavailable ?? []).length > 0) doc["x-unavailable"] = input.unavailable;
  return doc;
}
