/**
 * Compares two V8 heap snapshots by constructor: `tsx bench/heap-diff.ts a.heapsnapshot b.heapsnapshot [top] [--per N]`.
 * Prints, for the `top` (default 25) constructors whose object count grew most from a to b, the count and self size
 * in each and the difference. Used with `bench/soak.ts --heap-snapshots dir` to tell a leak (some constructor's count
 * grows with the work done) from heap sizing (counts flat, only RSS grows).
 *
 * `--per N`: what each of N things opened between the snapshots keeps (subscribers, connections): the growth per
 * thing, by constructor, and the arrays b holds at least N/2 of, by the object and property that hold them, with their
 * element stores (a shared array is counted once per holder). Snapshots of a gateway:
 * `node --heapsnapshot-signal=SIGUSR2 dist/src/main/cli.js ...`, `kill -USR2 <pid>` before and after.
 */
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

const read = (file: string): Snapshot => JSON.parse(readFileSync(file, "utf8")) as Snapshot;

/** Count and total self size of the nodes of each (type, name); strings and code lumped by type. */
function tally(s: Snapshot): Map<string, { count: number; bytes: number }> {
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const [iType, iName, iSize] = [fields.indexOf("type"), fields.indexOf("name"), fields.indexOf("self_size")];
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]!]!;
    // Names of strings, numbers and code are their contents: lump them by type.
    const named = type === "object" || type === "closure" || type === "native" || type === "array";
    const key = named ? `${type}:${s.strings[s.nodes[i + iName]!]}` : type;
    const e = out.get(key) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += s.nodes[i + iSize]!;
    out.set(key, e);
  }
  return out;
}

/** The JS arrays `s` holds, by (holder's constructor, property): how many, and their bytes with element stores. */
function arraysByHolder(s: Snapshot): Map<string, { count: number; bytes: number }> {
  const { node_fields: nf, node_types: nt, edge_fields: ef, edge_types: et } = s.snapshot.meta;
  const [types, etypes, width, ewidth] = [nt[0], et[0], nf.length, ef.length];
  const [iType, iName, iSize, iEdges] = [nf.indexOf("type"), nf.indexOf("name"), nf.indexOf("self_size"), nf.indexOf("edge_count")];
  const { nodes, edges, strings } = s;
  const firstEdge: number[] = [];
  for (let i = 0, e = 0; i < nodes.length; i += width) {
    firstEdge.push(e);
    e += nodes[i + iEdges]! * ewidth;
  }
  const elements = (n: number): number => {
    for (let e = firstEdge[n / width]!, k = 0; k < nodes[n + iEdges]!; k++, e += ewidth) {
      if (etypes[edges[e]!] === "internal" && strings[edges[e + 1]!] === "elements") return nodes[edges[e + 2]! + iSize]!;
    }
    return 0;
  };
  const out = new Map<string, { count: number; bytes: number }>();
  for (let n = 0; n < nodes.length; n += width) {
    for (let e = firstEdge[n / width]!, k = 0; k < nodes[n + iEdges]!; k++, e += ewidth) {
      const to = edges[e + 2]!;
      if (etypes[edges[e]!] !== "property" || types[nodes[to + iType]!] !== "object" || strings[nodes[to + iName]!] !== "Array") continue;
      if (strings[edges[e + 1]!] === "__proto__") continue; // Array.prototype, once per array
      const key = `${strings[nodes[n + iName]!]!.slice(0, 40)}.${strings[edges[e + 1]!]}`;
      const x = out.get(key) ?? { count: 0, bytes: 0 };
      x.count++;
      x.bytes += nodes[to + iSize]! + elements(to);
      out.set(key, x);
    }
  }
  return out;
}

const args = process.argv.slice(2);
const perAt = args.indexOf("--per");
const per = perAt >= 0 ? Number(args.splice(perAt, 2)[1]) : undefined;
const [a, b, topArg] = args;
if (!a || !b || (per !== undefined && !(per > 0))) throw new Error("usage: tsx bench/heap-diff.ts a.heapsnapshot b.heapsnapshot [top] [--per N]");
const before = tally(read(a));
const snapshotB = read(b);
const after = tally(snapshotB);
const rows = [...new Set([...before.keys(), ...after.keys()])].map((k) => {
  const x = before.get(k) ?? { count: 0, bytes: 0 };
  const y = after.get(k) ?? { count: 0, bytes: 0 };
  return { constructor: k.slice(0, 80), countA: x.count, countB: y.count, dCount: y.count - x.count, dKiB: Math.round((y.bytes - x.bytes) / 1024) };
});
const sum = (m: Map<string, { count: number; bytes: number }>): number => [...m.values()].reduce((s, e) => s + e.bytes, 0) / (1024 * 1024);
console.log(`total self size: ${sum(before).toFixed(1)} MiB -> ${sum(after).toFixed(1)} MiB`);
const top = Number(topArg ?? 25);
if (per === undefined) console.table(rows.sort((p, q) => q.dCount - p.dCount).slice(0, top));
else {
  const grown = (k: string): number => (after.get(k)?.bytes ?? 0) - (before.get(k)?.bytes ?? 0);
  const total = [...after.keys()].reduce((t, k) => t + grown(k), 0);
  console.log(`growth per one of ${per}: ${Math.round(total / per)} B`);
  console.table(
    [...after.keys()]
      .sort((p, q) => grown(q) - grown(p))
      .slice(0, top)
      .map((k) => ({ constructor: k.slice(0, 60), bytesEach: Math.round(grown(k) / per), objectsEach: +(((after.get(k)?.count ?? 0) - (before.get(k)?.count ?? 0)) / per).toFixed(2) })),
  );
  console.log("arrays held, by holder and property (after):");
  console.table(
    [...arraysByHolder(snapshotB)]
      .filter(([, x]) => x.count >= per / 2)
      .sort(([, x], [, y]) => y.bytes - x.bytes)
      .slice(0, top)
      .map(([holder, x]) => ({ holder, count: x.count, bytesEach: Math.round(x.bytes / x.count) })),
  );
}
