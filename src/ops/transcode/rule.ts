/**
 * A transcoding rule: one HTTP binding of a backend method, compiled with its service's configuration (the prefix, the
 * error shape) into what matching a request and building its message need.
 */
import type { DescField, DescMessage, DescMethod } from "@bufbuild/protobuf";
import type { HttpBinding, PathTemplate } from "../../backends/http-rules.js";
import type { TranscodingConfig } from "../../config/services.js";
import { encoderOf, type Encoder } from "./values.js";

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

export interface QueryField {
  /** Proto field names from the request message down. */
  readonly path: readonly string[];
  readonly repeated: boolean;
  readonly encode: Encoder;
}

/** Query parameter names remembered per rule (valid ones and refusals alike); more are resolved each time. */
export const QUERY_CACHE = 64;

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

/** Compile a binding of `desc` with its service's configuration. */
export function compileRule(service: string, cfg: TranscodingConfig, desc: DescMethod, b: HttpBinding): TranscodeRule {
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
