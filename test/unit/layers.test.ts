/**
 * The layout is the design (README "Project layout"): every import in src/ goes from a folder to one below it, the
 * fronts do not import each other (they share src/http), and no module imports itself back through a cycle. Read from
 * the sources themselves, so a new import that breaks the layering fails here with the file and the arrow.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "src");

/** What each folder may import besides itself (README's table; `gen` is generated code). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  shared: ["gen"],
  h2: ["shared"],
  workers: ["shared", "gen"],
  runtime: ["shared", "gen"],
  broker: ["shared"],
  backends: ["h2", "workers", "shared", "gen"],
  observe: ["shared"],
  config: ["observe", "backends", "shared"],
  ops: ["config", "observe", "broker", "runtime", "backends", "workers", "shared", "gen"],
  http: ["ops", "config", "observe", "shared"],
  grpc: ["ops", "config", "observe", "broker", "runtime", "backends", "workers", "h2", "shared", "gen"],
  rest: ["http", "ops", "config", "observe", "runtime", "shared", "gen"],
  web: ["http", "ops", "config", "observe", "broker", "runtime", "shared"],
  console: ["http", "shared"],
  rpcweb: ["http", "ops", "backends", "workers", "config", "observe", "shared"],
  facilities: ["grpc", "rest", "web", "rpcweb", "console", "http", "ops", "config", "observe", "broker", "runtime", "backends", "workers", "shared", "gen"],
  threads: ["facilities", "rest", "web", "rpcweb", "console", "http", "ops", "config", "observe", "broker", "runtime", "backends", "workers", "shared", "gen"],
  main: ["threads", "facilities", "grpc", "rest", "web", "rpcweb", "console", "http", "ops", "config", "observe", "broker", "runtime", "backends", "workers", "h2", "shared", "gen"],
  client: ["shared", "gen"],
};

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (relative(SRC, p) !== "gen") sources(p, out);
    } else if (e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** Every relative import of every source file, as module paths relative to src/ (`.ts`). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const spec = /(?:from\s+|import\s*\(\s*|import\s+)["'](\.\.?\/[^"']+)["']/g;
  for (const file of sources(SRC)) {
    const text = readFileSync(file, "utf8");
    const targets: string[] = [];
    for (const m of text.matchAll(spec)) targets.push(relative(SRC, normalize(join(dirname(file), m[1]!))).replace(/\.js$/, ".ts"));
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

const folderOf = (module: string): string => module.split("/")[0]!;

test("every folder of src/ has a place in the layering", () => {
  const folders = new Set([...importGraph().keys()].map(folderOf).filter((f) => !f.endsWith(".ts")));
  assert.deepEqual([...folders].filter((f) => !(f in MAY_IMPORT)), []);
});

test("imports go down the layers only, and no front imports another", () => {
  const bad: string[] = [];
  for (const [from, targets] of importGraph()) {
    const a = folderOf(from);
    for (const to of targets) {
      const b = folderOf(to);
      if (a !== b && !MAY_IMPORT[a]?.includes(b)) bad.push(`${from} -> ${to}`);
    }
  }
  assert.deepEqual(bad, [], `imports against the layering (README "Project layout"):\n${bad.join("\n")}`);
});

test("the imports of src/ have no cycle", () => {
  const graph = importGraph();
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const path: string[] = [];
  const visit = (m: string): void => {
    state.set(m, "open");
    path.push(m);
    for (const t of graph.get(m) ?? []) {
      if (state.get(t) === "open") cycles.push([...path.slice(path.indexOf(t)), t].join(" -> "));
      else if (!state.has(t) && graph.has(t)) visit(t);
    }
    path.pop();
    state.set(m, "done");
  };
  for (const m of graph.keys()) if (!state.has(m)) visit(m);
  assert.deepEqual(cycles, []);
});

test("no folder holds more than a third of src/ (generated code aside)", () => {
  const lines = new Map<string, number>();
  let total = 0;
  for (const file of sources(SRC)) {
    const n = readFileSync(file, "utf8").split("\n").length;
    total += n;
    const f = folderOf(relative(SRC, file));
    lines.set(f, (lines.get(f) ?? 0) + n);
  }
  const big = [...lines].filter(([, n]) => n > total / 3).map(([f, n]) => `${f}: ${n} of ${total} lines`);
  assert.deepEqual(big, []);
});
