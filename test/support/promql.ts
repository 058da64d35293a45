/**
 * A PromQL parser for tests: the language as Prometheus parses it (selectors with matchers, range and subquery
 * brackets, offset and @, functions with their argument types, aggregations with by/without either side, binary
 * operators with precedence, bool, on/ignoring and group_left/group_right, number and string literals, comments), by
 * recursive descent. It throws with the position of the first error and returns every vector selector, so a test can
 * check the metric and label names an expression reads. (.ci/run also hands the dashboard's queries to promtool.)
 */

/** One vector selector of an expression. */
export interface Selector {
  /** The metric name ("" when only matchers were given, e.g. `{__name__="x"}`). */
  name: string;
  matchers: Array<{ label: string; op: string; value: string }>;
}

/** Label names an expression groups or matches by (by, without, on, ignoring, group_left/right). */
export interface Parsed {
  selectors: Selector[];
  groupingLabels: string[];
}

type Kind = "scalar" | "vector" | "matrix" | "string";

const AGGREGATIONS = new Set(["sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio"]);
/** Aggregations with a parameter before the vector. */
const PARAM_AGGREGATIONS = new Set(["topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio"]);
const RANGE_FUNCTIONS = ["rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets", "predict_linear", "holt_winters", "absent_over_time", "present_over_time", "last_over_time"];
const OVER_TIME = ["avg", "min", "max", "sum", "count", "quantile", "stddev", "stdvar"].map((a) => `${a}_over_time`);
/** Each function's argument kinds ("?" marks optional ones, "..." a repeated last one) and result. */
const FUNCTIONS: Record<string, { args: string[]; result: Kind }> = {
  ...Object.fromEntries([...RANGE_FUNCTIONS, ...OVER_TIME].map((f) => [f, { args: ["matrix"], result: "vector" as Kind }])),
  predict_linear: { args: ["matrix", "scalar"], result: "vector" },
  quantile_over_time: { args: ["scalar", "matrix"], result: "vector" },
  histogram_quantile: { args: ["scalar", "vector"], result: "vector" },
  clamp: { args: ["vector", "scalar", "scalar"], result: "vector" },
  clamp_min: { args: ["vector", "scalar"], result: "vector" },
  clamp_max: { args: ["vector", "scalar"], result: "vector" },
  round: { args: ["vector", "scalar?"], result: "vector" },
  label_replace: { args: ["vector", "string", "string", "string", "string"], result: "vector" },
  label_join: { args: ["vector", "string", "string", "string..."], result: "vector" },
  time: { args: [], result: "scalar" },
  vector: { args: ["scalar"], result: "vector" },
  scalar: { args: ["vector"], result: "scalar" },
  absent: { args: ["vector"], result: "vector" },
  sort: { args: ["vector"], result: "vector" },
  sort_desc: { args: ["vector"], result: "vector" },
  timestamp: { args: ["vector"], result: "vector" },
  ...Object.fromEntries(["abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn"].map((f) => [f, { args: ["vector"], result: "vector" as Kind }])),
};
const BINARY_PRECEDENCE: Array<string[]> = [["or"], ["and", "unless"], ["==", "!=", "<=", "<", ">=", ">"], ["+", "-"], ["*", "/", "%", "atan2"], ["^"]];
const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "atan2"]);

interface Token {
  t: "ident" | "number" | "string" | "duration" | "op" | "eof";
  v: string;
  at: number;
}

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const ops = ["==", "!=", "<=", ">=", "=~", "!~", "(", ")", "{", "}", "[", "]", ",", "=", "<", ">", "+", "-", "*", "/", "%", "^", ":", "@"];
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === "#") {
      while (i < src.length && src[i] !== "\n") i++;
      continue;
    }
    const at = i;
    if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      let v = "";
      while (j < src.length && src[j] !== c) {
        if (src[j] === "\\" && c !== "`") j++;
        v += src[j];
        j++;
      }
      if (j >= src.length) throw new Error(`unterminated string at ${at}`);
      out.push({ t: "string", v, at });
      i = j + 1;
      continue;
    }
    const dur = /^(?:[0-9]+(?:ms|[smhdwy]))+/.exec(src.slice(i));
    if (dur) {
      out.push({ t: "duration", v: dur[0], at });
      i += dur[0].length;
      continue;
    }
    const num = /^(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|Inf|NaN)(?![A-Za-z0-9_:])/.exec(src.slice(i));
    if (num && /[0-9.]/.test(c)) {
      out.push({ t: "number", v: num[0], at });
      i += num[0].length;
      continue;
    }
    const id = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(src.slice(i));
    if (id) {
      out.push({ t: "ident", v: id[0], at });
      i += id[0].length;
      continue;
    }
    const op = ops.find((o) => src.startsWith(o, i));
    if (!op) throw new Error(`unexpected character ${JSON.stringify(c)} at ${i}`);
    out.push({ t: "op", v: op, at });
    i += op.length;
  }
  out.push({ t: "eof", v: "", at: src.length });
  return out;
}

/** Parse `src` as a PromQL expression. */
export function parsePromQL(src: string): Parsed {
  const toks = tokenize(src);
  let p = 0;
  const selectors: Selector[] = [];
  const groupingLabels: string[] = [];
  const peek = (o = 0): Token => toks[Math.min(p + o, toks.length - 1)]!;
  const fail = (msg: string): never => {
    throw new Error(`${msg} at ${peek().at} in ${src}`);
  };
  const isOp = (v: string): boolean => (peek().t === "op" || peek().t === "ident") && peek().v === v;
  const expect = (v: string): void => {
    if (!isOp(v)) fail(`expected ${JSON.stringify(v)}, got ${JSON.stringify(peek().v)}`);
    p++;
  };
  const labelList = (): void => {
    expect("(");
    while (!isOp(")")) {
      const t = peek();
      if (t.t !== "ident") fail("expected a label name");
      groupingLabels.push(t.v);
      p++;
      if (!isOp(",")) break;
      p++;
    }
    expect(")");
  };
  const duration = (): void => {
    if (peek().t !== "duration") fail("expected a duration");
    p++;
  };

  /** `[range]`, `[range:step]`, offset and @ after an expression of kind `k`. */
  const postfix = (k: Kind, isSelector: boolean): Kind => {
    let kind = k;
    if (isOp("[")) {
      p++;
      duration();
      if (isOp(":")) {
        p++;
        if (peek().t === "duration") p++;
        if (kind !== "vector") fail("a subquery needs an instant vector");
      } else if (!isSelector) fail("a range needs a vector selector (or a subquery with ':')");
      expect("]");
      kind = "matrix";
    }
    for (;;) {
      if (isOp("offset")) {
        p++;
        if (isOp("-")) p++;
        duration();
      } else if (isOp("@")) {
        p++;
        if (peek().t === "number") p++;
        else if (peek().t === "ident" && ["start", "end"].includes(peek().v)) {
          p++;
          expect("(");
          expect(")");
        } else fail("expected a timestamp after @");
      } else break;
    }
    return kind;
  };

  const selector = (name: string): Kind => {
    const sel: Selector = { name, matchers: [] };
    if (isOp("{")) {
      p++;
      while (!isOp("}")) {
        const label = peek();
        if (label.t !== "ident") fail("expected a label name in the matchers");
        p++;
        const op = peek();
        if (op.t !== "op" || !["=", "!=", "=~", "!~"].includes(op.v)) fail("expected a matcher operator");
        p++;
        const value = peek();
        if (value.t !== "string") fail("expected a quoted label value");
        p++;
        if (op.v === "=~" || op.v === "!~") {
          try {
            new RegExp(`^(?:${value.v})$`);
          } catch {
            fail(`bad regular expression ${value.v}`);
          }
        }
        sel.matchers.push({ label: label.v, op: op.v, value: value.v });
        if (!isOp(",")) break;
        p++;
      }
      expect("}");
    }
    if (name === "" && sel.matchers.length === 0) fail("a selector needs a name or a matcher");
    selectors.push(sel);
    return postfix("vector", true);
  };

  const args = (): Kind[] => {
    expect("(");
    const kinds: Kind[] = [];
    while (!isOp(")")) {
      kinds.push(expr(0));
      if (!isOp(",")) break;
      p++;
    }
    expect(")");
    return kinds;
  };

  const primary = (): Kind => {
    const t = peek();
    if (t.t === "op" && (t.v === "-" || t.v === "+")) {
      p++;
      return primary();
    }
    if (t.t === "number") {
      p++;
      return "scalar";
    }
    if (t.t === "string") {
      p++;
      return "string";
    }
    if (t.t === "op" && t.v === "(") {
      p++;
      const k = expr(0);
      expect(")");
      return postfix(k, false);
    }
    if (t.t === "op" && t.v === "{") return selector("");
    if (t.t !== "ident" || KEYWORDS.has(t.v)) return fail(`unexpected ${JSON.stringify(t.v)}`);
    p++;
    if (AGGREGATIONS.has(t.v)) {
      let grouped = false;
      if (isOp("by") || isOp("without")) {
        p++;
        labelList();
        grouped = true;
      }
      const kinds = args();
      if (!grouped && (isOp("by") || isOp("without"))) {
        p++;
        labelList();
      }
      const want = PARAM_AGGREGATIONS.has(t.v) ? ["param", "vector"] : ["vector"];
      if (kinds.length !== want.length) fail(`${t.v} takes ${want.length} argument(s), got ${kinds.length}`);
      if (kinds.at(-1) !== "vector") fail(`${t.v} aggregates an instant vector, got a ${kinds.at(-1)}`);
      return postfix("vector", false);
    }
    if (isOp("(")) {
      const f = FUNCTIONS[t.v];
      if (!f) fail(`unknown function ${t.v}`);
      const kinds = args();
      const spec = f!.args;
      const required = spec.filter((a) => !a.endsWith("?") && !a.endsWith("...")).length;
      const variadic = spec.some((a) => a.endsWith("..."));
      if (kinds.length < required || (!variadic && kinds.length > spec.length)) fail(`${t.v} takes ${spec.length} argument(s), got ${kinds.length}`);
      kinds.forEach((k, i) => {
        const want = (spec[Math.min(i, spec.length - 1)] ?? "").replace(/\?|\.\.\./g, "");
        if (want !== k) fail(`argument ${i + 1} of ${t.v} must be a ${want}, got a ${k}`);
      });
      return postfix(f!.result, false);
    }
    return selector(t.v);
  };

  const expr = (level: number): Kind => {
    if (level >= BINARY_PRECEDENCE.length) return primary();
    let left = expr(level + 1);
    for (;;) {
      const t = peek();
      const ops = BINARY_PRECEDENCE[level]!;
      if (!((t.t === "op" || t.t === "ident") && ops.includes(t.v))) return left;
      p++;
      const comparison = level === 2;
      if (isOp("bool")) {
        if (!comparison) fail("bool only follows a comparison");
        p++;
      }
      if (isOp("on") || isOp("ignoring")) {
        p++;
        labelList();
        if (isOp("group_left") || isOp("group_right")) {
          p++;
          if (isOp("(")) labelList();
        }
      }
      // ^ is right-associative; the others left.
      const right = t.v === "^" ? expr(level) : expr(level + 1);
      for (const k of [left, right]) if (k === "matrix" || k === "string") fail(`${t.v} cannot take a ${k}`);
      if (["and", "or", "unless"].includes(t.v) && (left !== "vector" || right !== "vector")) fail(`${t.v} needs two vectors`);
      left = left === "scalar" && right === "scalar" ? "scalar" : "vector";
    }
  };

  const kind = expr(0);
  if (peek().t !== "eof") fail(`unexpected ${JSON.stringify(peek().v)} after the expression`);
  if (kind === "matrix" || kind === "string") fail(`a query must be an instant vector or a scalar, not a ${kind}`);
  return { selectors, groupingLabels };
}
