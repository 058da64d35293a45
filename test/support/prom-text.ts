/**
 * An in-process checker of the Prometheus text exposition format (version 0.0.4, what `/metrics` serves), so
 * `npm test` needs nothing but Node. It parses every line and reports what Prometheus' own parser would refuse
 * (`promtool check metrics` "parsing error"s) and the lint findings promtool adds, each as one line naming the metric:
 *
 * - syntax: `# HELP name text`, `# TYPE name counter|gauge|histogram|summary|untyped`, samples
 *   `name{label="value",...} value [timestamp]`; metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names
 *   `[a-zA-Z_][a-zA-Z0-9_]*` (not `__`-prefixed), label values quoted with only `\\`, `\"` and `\n` escapes, values
 *   Go floats (`NaN`, `+Inf`, `-Inf` included), timestamps integers, the text ending in a newline;
 * - structure: at most one HELP and one TYPE per family, TYPE before the family's first sample, a family's lines
 *   together (not interleaved with another family), sample names that belong to the declared type (`_bucket`, `_sum`,
 *   `_count` for histograms; `_sum`, `_count` and a `quantile` label for summaries), no label given twice in a sample,
 *   no series (name + label set) given twice;
 * - histograms: per label set, `le` labels parse as floats and ascend, bucket counts never decrease, a `+Inf` bucket
 *   exists and equals `_count`, and `_sum` is present;
 * - lint (as promtool): every family has HELP text, counters end in `_total`, other types do not, names are
 *   snake_case, and units are base units (seconds, bytes; not milliseconds, minutes, kilobytes...).
 *
 * The grammar follows Prometheus' `expfmt` text parser and `promtool`'s `promlint` rules.
 */

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);
/** Go's strconv.ParseFloat, which Prometheus uses: decimals, and Inf/Infinity/NaN in any case (prom-client writes "Nan"). */
const FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)$/i;
const NON_BASE_UNITS = /_(?:milliseconds|microseconds|nanoseconds|minutes|hours|days|weeks|kilobytes|megabytes|gigabytes|kibibytes|mebibytes|gibibytes|millis|ms)(?:_|$)/;

/** One parsed sample line. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  line: number;
}

/** A metric family: its HELP, TYPE and samples. */
export interface PromFamily {
  name: string;
  help?: string;
  type: string;
  samples: PromSample[];
}

/** The parsed exposition and everything wrong with it (empty when Prometheus would accept it without findings). */
export interface PromCheck {
  families: Map<string, PromFamily>;
  problems: string[];
}

function parseValue(text: string): number | undefined {
  if (!FLOAT.test(text)) return undefined;
  if (/^[+]?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^[+-]?nan$/i.test(text)) return NaN;
  return Number(text);
}

/** Parse `{a="x",b="y"}` starting at `text[0] === "{"`; returns the labels and the rest, or an error. */
function parseLabels(text: string): { labels: Array<[string, string]>; rest: string } | { error: string } {
  const labels: Array<[string, string]> = [];
  let i = 1;
  const skipSpace = (): void => {
    while (text[i] === " " || text[i] === "\t") i++;
  };
  for (;;) {
    skipSpace();
    if (text[i] === "}") return { labels, rest: text.slice(i + 1) };
    const m = /^[^=\s}]*/.exec(text.slice(i))![0];
    if (!LABEL_NAME.test(m)) return { error: `invalid label name "${m}"` };
    if (m.startsWith("__")) return { error: `label name "${m}" is reserved (starts with __)` };
    i += m.length;
    skipSpace();
    if (text[i] !== "=") return { error: `expected "=" after label name "${m}"` };
    i++;
    skipSpace();
    if (text[i] !== '"') return { error: `label value of "${m}" is not quoted` };
    i++;
    let value = "";
    for (;;) {
      const c = text[i];
      if (c === undefined || c === "\n") return { error: `label value of "${m}" is not terminated` };
      if (c === '"') break;
      if (c === "\\") {
        const n = text[i + 1];
        if (n === "\\") value += "\\";
        else if (n === '"') value += '"';
        else if (n === "n") value += "\n";
        else return { error: `invalid escape "\\${n ?? ""}" in label value of "${m}"` };
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    i++;
    labels.push([m, value]);
    skipSpace();
    if (text[i] === ",") {
      i++;
      continue;
    }
    if (text[i] === "}") return { labels, rest: text.slice(i + 1) };
    return { error: `expected "," or "}" after the value of label "${m}"` };
  }
}

/** The family a sample name belongs to, given the declared types so far. */
function familyOf(name: string, types: Map<string, string>): string {
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const t = types.get(base);
    if (t === "histogram" || (t === "summary" && suffix !== "_bucket")) return base;
  }
  return name;
}

const key = (labels: Record<string, string>, without?: string): string =>
  JSON.stringify(Object.entries(labels).filter(([k]) => k !== without).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** Check histogram invariants of one family. */
function checkHistogram(f: PromFamily, problems: string[]): void {
  const series = new Map<string, { buckets: Array<{ le: number; count: number }>; sum?: number; count?: number }>();
  const get = (k: string) => series.get(k) ?? series.set(k, { buckets: [] }).get(k)!;
  for (const s of f.samples) {
    if (s.name === `${f.name}_bucket`) {
      const le = s.labels["le"];
      if (le === undefined) {
        problems.push(`${f.name}: line ${s.line}: bucket without an "le" label`);
        continue;
      }
      const bound = parseValue(le);
      if (bound === undefined || Number.isNaN(bound)) {
        problems.push(`${f.name}: line ${s.line}: le="${le}" is not a number`);
        continue;
      }
      get(key(s.labels, "le")).buckets.push({ le: bound, count: s.value });
    } else if (s.name === `${f.name}_sum`) get(key(s.labels)).sum = s.value;
    else if (s.name === `${f.name}_count`) get(key(s.labels)).count = s.value;
    else problems.push(`${f.name}: line ${s.line}: sample ${s.name} does not belong to a histogram (expected _bucket, _sum, _count)`);
  }
  for (const [labels, h] of series) {
    const where = `${f.name}${labels === "[]" ? "" : ` ${labels}`}`;
    for (let i = 1; i < h.buckets.length; i++) {
      if (!(h.buckets[i]!.le > h.buckets[i - 1]!.le)) problems.push(`${where}: bucket le=${h.buckets[i]!.le} does not follow le=${h.buckets[i - 1]!.le} in ascending order`);
      if (h.buckets[i]!.count < h.buckets[i - 1]!.count) problems.push(`${where}: bucket le=${h.buckets[i]!.le} count ${h.buckets[i]!.count} is below the previous bucket's ${h.buckets[i - 1]!.count}`);
    }
    const inf = h.buckets.find((b) => b.le === Infinity);
    if (!inf) problems.push(`${where}: no le="+Inf" bucket`);
    if (h.count === undefined) problems.push(`${where}: no _count`);
    if (h.sum === undefined) problems.push(`${where}: no _sum`);
    if (inf && h.count !== undefined && inf.count !== h.count) problems.push(`${where}: le="+Inf" bucket ${inf.count} differs from _count ${h.count}`);
  }
}

function checkSummary(f: PromFamily, problems: string[]): void {
  for (const s of f.samples) {
    if (s.name === f.name) {
      const q = s.labels["quantile"];
      const v = q === undefined ? undefined : parseValue(q);
      if (v === undefined || v < 0 || v > 1) problems.push(`${f.name}: line ${s.line}: summary quantile sample needs a quantile label in 0..1`);
    } else if (s.name !== `${f.name}_sum` && s.name !== `${f.name}_count`) {
      problems.push(`${f.name}: line ${s.line}: sample ${s.name} does not belong to a summary`);
    }
  }
}

function lint(f: PromFamily, problems: string[]): void {
  if (f.help === undefined || f.help.trim() === "") problems.push(`${f.name} no help text`);
  if (f.type === "counter" && !f.name.endsWith("_total")) problems.push(`${f.name} counter metrics should have "_total" suffix`);
  if (f.type !== "counter" && f.type !== "untyped" && f.name.endsWith("_total")) problems.push(`${f.name} non-counter metrics should not have "_total" suffix`);
  if (/[A-Z]/.test(f.name)) problems.push(`${f.name} metric names should be written in 'snake_case' not 'camelCase'`);
  const unit = NON_BASE_UNITS.exec(f.name);
  if (unit) problems.push(`${f.name} use base unit (seconds, bytes) instead of "${unit[0].replace(/_$/, "")}"`);
}

/** Parse and check an exposition. `problems` lists every error and lint finding, one line each. */
export function checkPromText(text: string): PromCheck {
  const problems: string[] = [];
  const families = new Map<string, PromFamily>();
  const types = new Map<string, string>();
  const seenSeries = new Set<string>();
  const closed = new Set<string>();
  let current: string | undefined;
  const family = (name: string): PromFamily => families.get(name) ?? families.set(name, { name, type: "untyped", samples: [] }).get(name)!;
  /** Move to family `name`; a family whose lines are not together is an error. */
  const enter = (name: string, line: number): void => {
    if (current === name) return;
    if (closed.has(name)) problems.push(`${name}: line ${line}: lines of this family are not together (another family came in between)`);
    if (current !== undefined) closed.add(current);
    current = name;
  };

  if (text !== "" && !text.endsWith("\n")) problems.push("the exposition does not end with a newline");
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  lines.forEach((raw, index) => {
    const n = index + 1;
    const line = raw.replace(/\r$/, "");
    if (line.trim() === "") return;
    if (line.startsWith("#")) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line);
      if (!m) return; // a plain comment
      const [, kw, name, rest] = m as unknown as [string, "HELP" | "TYPE", string, string | undefined];
      if (!METRIC_NAME.test(name)) return void problems.push(`line ${n}: invalid metric name "${name}" in ${kw}`);
      enter(name, n);
      const f = family(name);
      if (kw === "HELP") {
        if (f.help !== undefined) problems.push(`${name}: line ${n}: second HELP line`);
        f.help = (rest ?? "").replace(/\\(\\|n)/g, (_, c: string) => (c === "n" ? "\n" : "\\"));
      } else {
        const t = (rest ?? "").trim();
        if (!TYPES.has(t)) return void problems.push(`${name}: line ${n}: unknown type "${t}"`);
        if (types.has(name)) problems.push(`${name}: line ${n}: second TYPE line`);
        if (f.samples.length > 0) problems.push(`${name}: line ${n}: TYPE after the family's first sample`);
        types.set(name, t);
        f.type = t;
      }
      return;
    }
    const nameMatch = /^[^\s{]+/.exec(line);
    const name = nameMatch?.[0] ?? "";
    if (!METRIC_NAME.test(name)) return void problems.push(`line ${n}: invalid metric name "${name}"`);
    let rest = line.slice(name.length);
    let labelList: Array<[string, string]> = [];
    if (rest.startsWith("{")) {
      const r = parseLabels(rest);
      if ("error" in r) return void problems.push(`${name}: line ${n}: ${r.error}`);
      labelList = r.labels;
      rest = r.rest;
    }
    const parts = rest.trim().split(/\s+/);
    if (!/^\s/.test(rest) || parts.length < 1 || parts.length > 2 || parts[0] === "") return void problems.push(`${name}: line ${n}: expected "value [timestamp]" after the name and labels`);
    const value = parseValue(parts[0]!);
    if (value === undefined) return void problems.push(`${name}: line ${n}: "${parts[0]}" is not a float value`);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) return void problems.push(`${name}: line ${n}: timestamp "${parts[1]}" is not an integer`);
    const labels: Record<string, string> = {};
    for (const [k, v] of labelList) {
      if (k in labels) problems.push(`${name}: line ${n}: label "${k}" given twice`);
      labels[k] = v;
    }
    const famName = familyOf(name, types);
    enter(famName, n);
    const f = family(famName);
    if (f.type === "counter" || f.type === "gauge" || f.type === "untyped") {
      if (name !== famName) problems.push(`${famName}: line ${n}: sample ${name} does not match its family`);
    }
    if (f.type === "counter" && value < 0) problems.push(`${name}: line ${n}: counter value ${value} is negative`);
    const series = `${name}${key(labels)}`;
    if (seenSeries.has(series)) problems.push(`${name}: line ${n}: duplicate series ${name}${labelList.length ? `{${labelList.map(([k, v]) => `${k}="${v}"`).join(",")}}` : ""}`);
    seenSeries.add(series);
    f.samples.push({ name, labels, value, line: n });
  });
  for (const f of families.values()) {
    if (f.type === "histogram") checkHistogram(f, problems);
    if (f.type === "summary") checkSummary(f, problems);
    lint(f, problems);
  }
  return { families, problems };
}
