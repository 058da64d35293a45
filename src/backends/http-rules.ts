/**
 * HTTP rules of a backend's methods: the `google.api.http` annotations (google/api/http.proto) read from the reflected
 * descriptors, and their path templates parsed and checked against the request and response messages. What the
 * transcoding routes and the OpenAPI document are built from (docs/transcoding.md).
 *
 * Template grammar (google/api/http.proto):
 *   Template = "/" Segments [ Verb ] ;  Segments = Segment { "/" Segment } ;  Segment = "*" | "**" | LITERAL | Variable ;
 *   Variable = "{" FieldPath [ "=" Segments ] "}" ;  FieldPath = IDENT { "." IDENT } ;  Verb = ":" LITERAL ;
 */
import { getExtension, hasExtension, type DescExtension, type DescField, type DescMessage, type DescMethod, type FileRegistry, type Message } from "@bufbuild/protobuf";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import { WRAPPER_TYPE_NAMES } from "../workers/fast-codec/common.js";

/** One segment of a parsed template. */
export type TemplateSegment = { kind: "literal"; value: string } | { kind: "*" } | { kind: "**" };

/** A variable of a template: the request field it sets and the segments it captures. */
export interface TemplateVariable {
  /** Field names from the request message down, e.g. ["book", "name"]. */
  readonly fieldPath: readonly string[];
  /** Index of its first segment in `segments`. */
  readonly start: number;
  /** One past its last segment. */
  readonly end: number;
  /** Captures more than one segment (`{name=shelves/*}`, `{path=**}`): `/` is kept in the value. */
  readonly multiSegment: boolean;
}

/** A parsed path template. */
export interface PathTemplate {
  /** As written in the annotation. */
  readonly text: string;
  readonly segments: readonly TemplateSegment[];
  readonly variables: readonly TemplateVariable[];
  /** The custom verb after the last `:`, e.g. "archive"; undefined when none. */
  readonly verb: string | undefined;
}

/** One HTTP binding of a method (its annotation, or one of its `additional_bindings`). */
export interface HttpBinding {
  /** Upper-case HTTP method: GET, PUT, POST, DELETE, PATCH, or a custom kind as written (e.g. "PURGE"). */
  readonly httpMethod: string;
  readonly template: PathTemplate;
  /** "" (no body), "*" (every field the path does not bind) or a top-level request field name. */
  readonly body: string;
  /** "" (the whole response) or a top-level response field name. */
  readonly responseBody: string;
}

/** The field number of the `google.api.http` extension of google.protobuf.MethodOptions. */
export const HTTP_RULE_EXTENSION_NUMBER = 72295728;

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** RFC 3986 pchar, minus "/" "{" "}" "*" ":" which the grammar gives meaning to. */
const LITERAL = /^(?:[A-Za-z0-9\-._~!$&'()+,;=@]|%[0-9A-Fa-f]{2})+$/;

function bad(text: string, problem: string): GatewayError {
  return new GatewayError(Code.FAILED_PRECONDITION, `path template ${JSON.stringify(echo(text))} ${problem}`);
}

/**
 * Parse a path template. Throws FAILED_PRECONDITION naming the problem: a malformed template is the backend's
 * configuration error, not the caller's.
 */
export function parseTemplate(text: string): PathTemplate {
  if (!text.startsWith("/")) throw bad(text, "must start with /");
  let rest = text.slice(1);
  // The verb is the text after the last ':' outside braces and after the last '/'.
  let verb: string | undefined;
  const lastSlash = rest.lastIndexOf("/");
  const lastBrace = rest.lastIndexOf("}");
  const colon = rest.lastIndexOf(":");
  if (colon > lastSlash && colon > lastBrace) {
    verb = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!LITERAL.test(verb)) throw bad(text, `has an invalid verb ${JSON.stringify(echo(verb))}`);
  }
  const segments: TemplateSegment[] = [];
  const variables: TemplateVariable[] = [];
  const fields = new Set<string>();
  let i = 0;
  const addSegment = (s: string, inVariable: boolean): void => {
    if (s === "*") segments.push({ kind: "*" });
    else if (s === "**") segments.push({ kind: "**" });
    else if (s === "") throw bad(text, "has an empty segment");
    else if (!LITERAL.test(s)) throw bad(text, `has an invalid ${inVariable ? "variable " : ""}segment ${JSON.stringify(echo(s))}`);
    else segments.push({ kind: "literal", value: s });
  };
  while (i <= rest.length) {
    if (rest[i] === "{") {
      const close = rest.indexOf("}", i);
      if (close < 0) throw bad(text, "has an unclosed {");
      const inner = rest.slice(i + 1, close);
      if (inner.includes("{")) throw bad(text, "nests a variable in a variable");
      const eq = inner.indexOf("=");
      const path = eq < 0 ? inner : inner.slice(0, eq);
      const fieldPath = path.split(".");
      if (!fieldPath.every((f) => IDENT.test(f))) throw bad(text, `has an invalid field path ${JSON.stringify(echo(path))}`);
      if (fields.has(path)) throw bad(text, `binds ${path} twice`);
      fields.add(path);
      const start = segments.length;
      for (const s of (eq < 0 ? "*" : inner.slice(eq + 1)).split("/")) addSegment(s, true);
      const end = segments.length;
      const multiSegment = end - start > 1 || segments[start]!.kind === "**";
      variables.push({ fieldPath, start, end, multiSegment });
      i = close + 1;
    } else {
      let next = rest.indexOf("/", i);
      if (next < 0) next = rest.length;
      const s = rest.slice(i, next);
      if (s.includes("}")) throw bad(text, "has a } without {");
      addSegment(s, false);
      i = next;
    }
    if (i >= rest.length) break;
    if (rest[i] !== "/") throw bad(text, `has ${JSON.stringify(rest[i])} where / was expected`);
    i++;
    if (i === rest.length) throw bad(text, "ends with /");
  }
  const deep = segments.findIndex((s) => s.kind === "**");
  if (deep >= 0 && deep !== segments.length - 1) throw bad(text, "has ** before its last segment");
  return { text, segments, variables, verb };
}

/** The scalar or enum field at `path` of `message`, as a path variable or query parameter may set it. */
export function fieldAt(message: DescMessage, path: readonly string[]): DescField | undefined {
  let m: DescMessage | undefined = message;
  let f: DescField | undefined;
  for (const name of path) {
    if (!m) return undefined;
    f = m.fields.find((x) => x.name === name);
    if (!f) return undefined;
    m = f.fieldKind === "message" ? f.message : undefined;
  }
  return f;
}

function checkBinding(method: DescMethod, b: HttpBinding): void {
  const where = `${method.parent.typeName}.${method.name} (${b.httpMethod} ${b.template.text})`;
  for (const v of b.template.variables) {
    const f = fieldAt(method.input, v.fieldPath);
    const name = v.fieldPath.join(".");
    if (!f) throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: path variable ${name} is not a field of ${method.input.typeName}`);
    if (f.fieldKind === "list" || f.fieldKind === "map") throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: path variable ${name} is a repeated or map field`);
    if (f.fieldKind === "message" && !WRAPPER_OR_TEXT_WKT.has(f.message.typeName)) {
      throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: path variable ${name} is a message field`);
    }
  }
  if (b.body !== "" && b.body !== "*" && !method.input.fields.some((f) => f.name === b.body)) {
    throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: body ${b.body} is not a field of ${method.input.typeName}`);
  }
  if (b.responseBody !== "" && !method.output.fields.some((f) => f.name === b.responseBody)) {
    throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: response_body ${b.responseBody} is not a field of ${method.output.typeName}`);
  }
}

/** Well-known message types whose JSON form is one string or scalar, so a path or query value can set them. */
export const WRAPPER_OR_TEXT_WKT: ReadonlySet<string> = new Set(["google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask", ...WRAPPER_TYPE_NAMES]);

/** A method whose annotation could not be used, and why. */
export interface RuleProblem {
  readonly method: string;
  readonly message: string;
}

/** The bindings of every annotated method of a schema, and the annotations refused (with the reason). */
export interface HttpRules {
  readonly bindings: ReadonlyMap<DescMethod, readonly HttpBinding[]>;
  readonly problems: readonly RuleProblem[];
}

/** An HttpRule message as @bufbuild/protobuf decodes it with the backend's own google.api.HttpRule descriptor. */
interface HttpRuleMessage extends Message {
  pattern: { case: "get" | "put" | "post" | "delete" | "patch"; value: string } | { case: "custom"; value: { kind: string; path: string } } | { case: undefined };
  body: string;
  responseBody: string;
  additionalBindings: HttpRuleMessage[];
}

/**
 * One HTTP rule as written, from an annotation or from a google.api.Service YAML (`http: rules:`, the file
 * grpc-gateway takes as --grpc-api-configuration): the same fields as google.api.HttpRule.
 */
export interface HttpRuleSpec {
  /** Upper-case HTTP method as the rule's pattern names it (GET ... PATCH, or a custom kind). */
  readonly httpMethod: string;
  readonly path: string;
  readonly body: string;
  readonly responseBody: string;
  readonly additionalBindings: readonly HttpRuleSpec[];
}

const CUSTOM_KIND = /^[A-Z][A-Z0-9-]*$/;

/** An annotation's HttpRule as a spec; FAILED_PRECONDITION when it has no pattern or an unusable custom kind. */
function specOf(where: string, rule: HttpRuleMessage): HttpRuleSpec {
  const p = rule.pattern;
  if (p.case === undefined) throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: a google.api.http rule has no pattern (get, put, post, delete, patch or custom)`);
  let httpMethod: string;
  let path: string;
  if (p.case === "custom") {
    httpMethod = p.value.kind.toUpperCase();
    path = p.value.path;
    if (!CUSTOM_KIND.test(httpMethod)) throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: custom kind ${JSON.stringify(echo(p.value.kind))} is not an HTTP method token`);
  } else {
    httpMethod = p.case.toUpperCase();
    path = p.value;
  }
  return { httpMethod, path, body: rule.body, responseBody: rule.responseBody, additionalBindings: rule.additionalBindings.map((r) => specOf(where, r)) };
}

function binding(method: DescMethod, rule: HttpRuleSpec, nested: boolean): HttpBinding {
  const where = `${method.parent.typeName}.${method.name}`;
  if (nested && rule.additionalBindings.length > 0) {
    throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: an additional binding has additional_bindings of its own`);
  }
  if (!CUSTOM_KIND.test(rule.httpMethod)) throw new GatewayError(Code.FAILED_PRECONDITION, `${where}: ${JSON.stringify(echo(rule.httpMethod))} is not an HTTP method token`);
  const b: HttpBinding = { httpMethod: rule.httpMethod, template: parseTemplate(rule.path), body: rule.body, responseBody: rule.responseBody };
  checkBinding(method, b);
  return b;
}

/**
 * The `google.api.http` bindings of every method of `services` in `registry` (the backend's reflected files). The
 * extension is read with the descriptor of google/api/annotations.proto the backend itself served, as every backend
 * that uses the annotation imports it; a method whose annotation is present but undecodable, or whose template or
 * fields do not fit its messages, is left out and reported in `problems`.
 */
export function httpRulesOf(registry: FileRegistry, services: readonly string[], overrides?: ReadonlyMap<string, HttpRuleSpec>): HttpRules {
  const bindings = new Map<DescMethod, HttpBinding[]>();
  const problems: RuleProblem[] = [];
  const ext = registry.getExtension("google.api.http") as DescExtension | undefined;
  const used = new Set<string>();
  for (const name of services) {
    const svc = registry.getService(name);
    if (!svc) continue;
    for (const m of svc.methods) {
      // A rule of the service configuration replaces the method's annotation (google/api/http.proto).
      const override = overrides?.get(`${svc.typeName}.${m.name}`);
      if (override) {
        used.add(`${svc.typeName}.${m.name}`);
        try {
          bindings.set(m, [binding(m, override, false), ...override.additionalBindings.map((r) => binding(m, r, true))]);
        } catch (e) {
          problems.push({ method: `${svc.typeName}.${m.name}`, message: GatewayError.from(e).rawMessage });
        }
        continue;
      }
      const options = m.proto.options;
      if (!options) continue;
      if (!ext) {
        if (options.$unknown?.some((u) => u.no === HTTP_RULE_EXTENSION_NUMBER)) {
          problems.push({ method: `${svc.typeName}.${m.name}`, message: "has a google.api.http annotation, but the backend's reflection does not serve google/api/http.proto to read it with" });
        }
        continue;
      }
      if (!hasExtension(options, ext)) continue;
      try {
        const rule = specOf(`${svc.typeName}.${m.name}`, getExtension(options, ext) as unknown as HttpRuleMessage);
        bindings.set(m, [binding(m, rule, false), ...rule.additionalBindings.map((r) => binding(m, r, true))]);
      } catch (e) {
        problems.push({ method: `${svc.typeName}.${m.name}`, message: GatewayError.from(e).rawMessage });
      }
    }
  }
  for (const selector of overrides?.keys() ?? []) {
    if (!used.has(selector)) problems.push({ method: selector, message: "the apiConfig rule's selector names no method of the backend's services" });
  }
  return { bindings, problems };
}
