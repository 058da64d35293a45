/**
 * The path matcher of the transcoding routes (docs/transcoding.md "Matching"): a segment trie of parsed
 * `google.api.http` templates, so a request costs one map lookup per path segment, not a scan over every rule.
 *
 * Precedence, as grpc-gateway and google/api/http.proto give it: at each segment a literal beats `*`, and `*` beats
 * `**` (which takes the rest of the path, zero or more segments); a rule with a `:verb` is tried before one without, so
 * `/v1/{name=books/*}:archive` wins over `/v1/{name=books/*}` for ".../books/1:archive". Literals are compared with the
 * raw (still percent-encoded) segment, as grpc-gateway does. Captured values are percent-decoded: a single-segment
 * variable decodes everything, a multi-segment one leaves `%2F` as it is (google/api/http.proto), so the value's
 * `/` are the path's own. A trailing slash is one more, empty, segment: `/v1/books/` does not match `/v1/books`, and a
 * `*` matches an empty segment (grpc-gateway's behaviour).
 */
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { echo } from "../../shared/echo.js";
import type { PathTemplate } from "../../backends/http-rules.js";

/** What a matched path gives: each template variable's decoded value, in the template's variable order. */
export interface PathMatch<T> {
  readonly entry: T;
  readonly values: readonly string[];
}

/** The outcome of a lookup: the entry for the method, or the methods that would match the path (405), or nothing. */
export type MatchResult<T> = { match: PathMatch<T> } | { allowed: readonly string[] } | undefined;

/** The rules of one path shape and verb, by HTTP method (each with its own template: variable names may differ). */
type Terminal<T> = Map<string, { readonly entry: T; readonly template: PathTemplate }>;

interface TrieNode<T> {
  literal: Map<string, TrieNode<T>> | undefined;
  star: TrieNode<T> | undefined;
  /** Rules ending in `**` here, by verb ("" when none). */
  deep: Map<string, Terminal<T>> | undefined;
  /** Rules ending here, by verb. */
  end: Map<string, Terminal<T>> | undefined;
}

const node = <T>(): TrieNode<T> => ({ literal: undefined, star: undefined, deep: undefined, end: undefined });

/** A segment trie of templates by HTTP method. Built once per schema change; read per request. */
export interface RouteTrie<T> {
  /**
   * Add a rule: undefined when added, else the entry already holding the same method and path shape (the same
   * literals, `*`/`**` positions and verb, whatever the variable names), which keeps it.
   */
  add(httpMethod: string, template: PathTemplate, entry: T): T | undefined;
  /** Match a request path (raw, as the request line has it, without the query). Throws INVALID_ARGUMENT for bad percent-encoding. */
  match(httpMethod: string, path: string): MatchResult<T>;
  readonly size: number;
}

/** Decode a captured value; a multi-segment one keeps `%2F` (and `%2f`) encoded. */
export function decodeCaptured(raw: string, multiSegment: boolean): string {
  if (!raw.includes("%")) return raw;
  try {
    if (!multiSegment) return decodeURIComponent(raw);
    const parts = raw.split(/(%2[Ff])/);
    for (let i = 0; i < parts.length; i += 2) parts[i] = decodeURIComponent(parts[i]!);
    return parts.join("");
  } catch {
    throw new GatewayError(Code.INVALID_ARGUMENT, `the path is not valid percent-encoded UTF-8: ${echo(raw)}`);
  }
}

export function createRouteTrie<T>(): RouteTrie<T> {
  const root = node<T>();
  let size = 0;

  const add = (httpMethod: string, template: PathTemplate, entry: T): T | undefined => {
    let n = root;
    const segs = template.segments;
    const verb = template.verb ?? "";
    let terminals: Map<string, Terminal<T>>;
    for (let i = 0; ; i++) {
      const s = segs[i];
      if (s === undefined) {
        terminals = n.end ??= new Map();
        break;
      }
      if (s.kind === "**") {
        terminals = n.deep ??= new Map();
        break;
      }
      if (s.kind === "*") n = n.star ??= node();
      else {
        const lit = (n.literal ??= new Map());
        let next = lit.get(s.value);
        if (!next) lit.set(s.value, (next = node()));
        n = next;
      }
    }
    let t = terminals.get(verb);
    if (!t) terminals.set(verb, (t = new Map()));
    const held = t.get(httpMethod);
    if (held !== undefined) return held.entry;
    t.set(httpMethod, { entry, template });
    size++;
    return undefined;
  };

  /** Depth-first over the trie in precedence order; `visit` gets each terminal whose shape matches, true to stop. */
  const walk = (n: TrieNode<T>, parts: readonly string[], i: number, verb: string, visit: (t: Terminal<T>) => boolean): boolean => {
    if (i === parts.length) {
      const t = n.end?.get(verb);
      if (t && visit(t)) return true;
    } else {
      const lit = n.literal?.get(parts[i]!);
      if (lit && walk(lit, parts, i + 1, verb, visit)) return true;
      if (n.star && walk(n.star, parts, i + 1, verb, visit)) return true;
    }
    const d = n.deep?.get(verb);
    return d !== undefined && visit(d);
  };

  /** The decoded variable values of `template` for `parts` (which its shape matched). */
  const capture = (template: PathTemplate, parts: readonly string[]): string[] => {
    const out: string[] = [];
    const segs = template.segments;
    for (const v of template.variables) {
      const deep = segs[v.end - 1]!.kind === "**";
      // A `**` runs to the end of the path; everything else has one part per segment.
      const end = deep ? parts.length : v.end;
      out.push(decodeCaptured(v.multiSegment ? parts.slice(v.start, end).join("/") : parts[v.start]!, v.multiSegment));
    }
    return out;
  };

  const match = (httpMethod: string, path: string): MatchResult<T> => {
    const parts = path.slice(1).split("/");
    let found: PathMatch<T> | undefined;
    let allowed: Set<string> | undefined;
    const tryParts = (p: readonly string[], verb: string): boolean =>
      walk(root, p, 0, verb, (t) => {
        const hit = t.get(httpMethod);
        if (hit !== undefined) {
          found = { entry: hit.entry, values: capture(hit.template, p) };
          return true;
        }
        for (const m of t.keys()) (allowed ??= new Set()).add(m);
        return false;
      });
    // A last segment "x:verb" is first tried as segment "x" with that verb, then whole without one.
    const last = parts[parts.length - 1]!;
    const colon = last.lastIndexOf(":");
    if (colon > 0 && colon < last.length - 1) {
      const split = parts.slice();
      split[split.length - 1] = last.slice(0, colon);
      if (tryParts(split, last.slice(colon + 1))) return { match: found! };
    }
    if (tryParts(parts, "")) return { match: found! };
    return allowed ? { allowed: [...allowed] } : undefined;
  };

  return {
    add,
    match,
    get size() {
      return size;
    },
  };
}
