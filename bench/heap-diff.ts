/**
 * Compares two V8 heap snapshots by constructor: `tsx bench/heap-diff.ts a.heapsnapshot b.heapsnapshot [top]`.
 * Prints, for the `top` (default 25) constructors whose object count grew most from a to b, the count and self size
 * in each and the difference. Used with `bench/soak.ts --heap-snapshots dir` to tell a leak (some constructor's count
 * grows with the work done) from heap sizing (counts flat, only RSS grows).
 */
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Count and total self size of the nodes of each (type, name); strings and code lumped by type. */
function tally(file: string): Map<string, { count: number; bytes: number }> {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
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

const [a, b, topArg] = process.argv.slice(2);
if (!a || !b) throw new Error("usage: tsx bench/heap-diff.ts a.heapsnapshot b.heapsnapshot [top]");
const before = tally(a);
const after = tally(b);
const rows = [...new Set([...before.keys(), ...after.keys()])].map((k) => {
  const x = before.get(k) ?? { count: 0, bytes: 0 };
  const y = after.get(k) ?? { count: 0, bytes: 0 };
  return { constructor: k.slice(0, 80), countA: x.count, countB: y.count, dCount: y.count - x.count, dKiB: Math.round((y.bytes - x.bytes) / 1024) };
});
const sum = (m: Map<string, { count: number; bytes: number }>): number => [...m.values()].reduce((s, e) => s + e.bytes, 0) / (1024 * 1024);
console.log(`total self size: ${sum(before).toFixed(1)} MiB -> ${sum(after).toFixed(1)} MiB`);
console.table(rows.sort((p, q) => q.dCount - p.dCount).slice(0, Number(topArg ?? 25)));
