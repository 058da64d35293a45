/**
 * A strict reader of the OpenMetrics 1.0 text format, for tests: it checks each line against the specification's ABNF
 * (metric descriptors, samples, exemplars, the closing `# EOF`) and the rules around it that a scraper relies on
 * (descriptors before samples, a family's samples together and named after it, exemplars only on buckets and counter
 * totals within 128 characters of labels, buckets ending at +Inf). It throws naming the first line at fault.
 */

/** One exemplar: its labels, value and timestamp (seconds). */
export interface OmExemplar {
  labels: Record<string, string>;
  value: number;
  timestamp: number | undefined;
}

/** One sample line. */
export interface OmSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  exemplar: OmExemplar | undefined;
}

/** One metric family. */
export interface OmFamily {
  name: string;
  type: string;
  help: string | undefined;
  samples: OmSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// realnumber from the ABNF, and the special values (case-insensitive there).
const REAL = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
const TYPES = new Set(["counter", "gauge", "histogram", "gaugehistogram", "stateset", "info", "summary", "unknown"]);
/** The sample-name suffixes each type allows after its family name. */
const SUFFIXES: Record<string, readonly string[]> = {
  counter: ["_total", "_created"],
  gauge: [""],
  histogram: ["_bucket", "_sum", "_count", "_created"],
  gaugehistogram: ["_bucket", "_gsum", "_gcount"],
  summary: ["", "_sum", "_count", "_created"],
  info: ["_info"],
  stateset: [""],
  unknown: [""],
};

function parseNumber(s: string, where: string): number {
  if (REAL.test(s)) return Number(s);
  const l = s.toLowerCase();
  if (l === "nan") return Number.NaN;
  if (/^[+-]?inf(inity)?$/.test(l)) return l.startsWith("-") ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  throw new Error(`${where}: ${JSON.stringify(s)} is not an OpenMetrics number`);
}

/** Read `{a="x",b="y"}` at `s[at]`; returns the labels and the index after `}`. */
function readLabels(s: string, at: number, where: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = at + 1;
  if (s[i] === "}") return { labels, end: i + 1 };
  for (;;) {
    const eq = s.indexOf("=", i);
    if (eq < 0) throw new Error(`${where}: a label without "="`);
    const name = s.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new Error(`${where}: bad label name ${JSON.stringify(name)}`);
    if (name in labels) throw new Error(`${where}: label ${name} twice`);
    if (s[eq + 1] !== '"') throw new Error(`${where}: label ${name}'s value is not quoted`);
    let v = "";
    let j = eq + 2;
    for (; j < s.length && s[j] !== '"'; j++) {
      if (s[j] === "\n") throw new Error(`${where}: a raw newline in a label value`);
      if (s[j] === "\\") {
        const e = s[++j];
        if (e === "n") v += "\n";
        else if (e === "\\" || e === '"') v += e;
        else throw new Error(`${where}: bad escape \\${e ?? ""} in label ${name}`);
      } else v += s[j];
    }
    if (j >= s.length) throw new Error(`${where}: unterminated value of label ${name}`);
    labels[name] = v;
    i = j + 1;
    if (s[i] === "}") return { labels, end: i + 1 };
    if (s[i] !== ",") throw new Error(`${where}: expected "," or "}" after label ${name}`);
    i++;
  }
}

/** Parse `text`, throwing at the first departure from OpenMetrics 1.0. */
export function parseOpenMetrics(text: string): OmFamily[] {
  if (!text.endsWith("# EOF\n") && !text.endsWith("# EOF")) throw new Error("the exposition does not end with # EOF");
  const lines = text.replace(/\n$/, "").split("\n");
  if (lines.pop() !== "# EOF") throw new Error("the last line is not # EOF");
  const families: OmFamily[] = [];
  const seen = new Set<string>();
  let current: OmFamily | undefined;
  lines.forEach((line, n) => {
    const where = `line ${n + 1} (${line.slice(0, 80)})`;
    if (line === "") throw new Error(`${where}: empty lines are not allowed`);
    if (line.startsWith("#")) {
      const m = /^# (TYPE|HELP|UNIT) ([^ ]+)(?: (.*))?$/.exec(line);
      if (!m) throw new Error(`${where}: a comment that is not TYPE, HELP or UNIT`);
      const [, kind, name, rest] = m as unknown as [string, string, string, string | undefined];
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name`);
      if (current?.name !== name) {
        if (seen.has(name)) throw new Error(`${where}: family ${name} appears twice (interleaved)`);
        seen.add(name);
        current = { name, type: "unknown", help: undefined, samples: [] };
        families.push(current);
      } else if (current.samples.length > 0) throw new Error(`${where}: a descriptor after ${name}'s samples`);
      if (kind === "TYPE") {
        if (!TYPES.has(rest ?? "")) throw new Error(`${where}: unknown type ${rest ?? ""}`);
        current.type = rest!;
      } else if (kind === "HELP") {
        // escaped-string: a backslash only before n, a backslash or a double quote; no bare double quote.
        if (/[\\"]/.test((rest ?? "").replace(/\\[n\\"]/g, ""))) throw new Error(`${where}: bad escape in help`);
        current.help = rest ?? "";
      }
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd < 0) throw new Error(`${where}: no value`);
    const name = line.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name`);
    let i = nameEnd;
    let labels: Record<string, string> = {};
    if (line[i] === "{") ({ labels, end: i } = readLabels(line, i, where));
    if (line[i] !== " ") throw new Error(`${where}: expected a space before the value`);
    const hash = line.indexOf(" # ", i);
    const main = (hash < 0 ? line.slice(i + 1) : line.slice(i + 1, hash)).split(" ");
    if (main.length < 1 || main.length > 2) throw new Error(`${where}: expected a value and an optional timestamp`);
    const value = parseNumber(main[0]!, where);
    if (main[1] !== undefined) parseNumber(main[1], where);
    const family = current;
    if (!family || !(SUFFIXES[family.type] ?? [""]).some((s) => family.name + s === name)) throw new Error(`${where}: sample ${name} is not part of family ${family?.name ?? "(none)"}`);
    let exemplar: OmExemplar | undefined;
    if (hash >= 0) {
      if (!(name.endsWith("_bucket") && family.type === "histogram") && !(name.endsWith("_total") && family.type === "counter")) throw new Error(`${where}: an exemplar on ${name}`);
      const ex = line.slice(hash + 3);
      if (ex[0] !== "{") throw new Error(`${where}: an exemplar without labels`);
      const { labels: exLabels, end } = readLabels(ex, 0, where);
      const size = Object.entries(exLabels).reduce((a, [k, v]) => a + [...k].length + [...v].length, 0);
      if (size > 128) throw new Error(`${where}: exemplar labels of ${size} characters (at most 128)`);
      const rest = ex.slice(end).split(" ");
      if (rest[0] !== "" || rest.length < 2 || rest.length > 3) throw new Error(`${where}: an exemplar is "{labels} value [timestamp]"`);
      exemplar = { labels: exLabels, value: parseNumber(rest[1]!, where), timestamp: rest[2] === undefined ? undefined : parseNumber(rest[2], where) };
    }
    if (name.endsWith("_bucket") && family.type === "histogram") {
      if (labels["le"] === undefined) throw new Error(`${where}: a bucket without le`);
      parseNumber(labels["le"], where);
    }
    family.samples.push({ name, labels, value, exemplar });
  });
  for (const f of families) {
    if (f.type !== "histogram") continue;
    // Each series' buckets ascend to +Inf, with counts that never decrease.
    const series = new Map<string, OmSample[]>();
    for (const s of f.samples.filter((x) => x.name.endsWith("_bucket"))) {
      const { le: _le, ...rest } = s.labels;
      const key = JSON.stringify(Object.entries(rest).sort());
      series.set(key, [...(series.get(key) ?? []), s]);
    }
    for (const [key, buckets] of series) {
      const les = buckets.map((b) => parseNumber(b.labels["le"]!, f.name));
      if (les.at(-1) !== Number.POSITIVE_INFINITY) throw new Error(`${f.name}${key}: the buckets do not end at +Inf`);
      for (let i = 1; i < buckets.length; i++) {
        if (!(les[i]! > les[i - 1]!)) throw new Error(`${f.name}${key}: le not ascending`);
        if (buckets[i]!.value < buckets[i - 1]!.value) throw new Error(`${f.name}${key}: bucket counts decrease`);
      }
    }
  }
  return families;
}
