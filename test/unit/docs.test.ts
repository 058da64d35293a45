/**
 * The docs stay readable from the repository alone: no text cites a tracker number (a reader of the repository cannot
 * follow it; say what the code does or what was measured instead), every source path the docs name in backticks
 * exists, and every relative link points at a file that exists. Read from the files themselves, so a moved module or
 * a stale name fails here with the file, the line and what it named.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** README, BENCHMARKS and every page of docs/. */
const DOCS = ["README.md", "BENCHMARKS.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

/** Where comments and test names live; bench/results holds recorded runs (their tags are data). */
const CODE_DIRS = ["src", "test", "bench", "scripts", ".ci"];
const SKIP = new Set(["src/gen", "bench/results", "test/fuzz/corpus"]);

/** "issue" or "issues", any case, then a number, joined by spaces, a line break, "#" or "-" or nothing: a tracker reference. */
const TRACKER_REF = /\bissues?[\s#-]*\d/gi;

function codeFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    if (SKIP.has(p)) continue;
    if (e.isDirectory()) codeFiles(p, out);
    else if (/\.(ts|mts|mjs|cjs|js|py|sh)$/.test(e.name) || dir === ".ci") out.push(p);
  }
  return out;
}

/** `file:line: excerpt` for every match of `re` in `text`. */
function hits(file: string, text: string, re: RegExp): string[] {
  return [...text.matchAll(re)].map((m) => `${file}:${text.slice(0, m.index).split("\n").length}: ${JSON.stringify(m[0])}`);
}

test("README, BENCHMARKS and docs/ say what the code does, not which issue asked for it", () => {
  const found = DOCS.flatMap((f) => hits(f, readFileSync(join(ROOT, f), "utf8"), TRACKER_REF));
  assert.deepEqual(found, [], `tracker references in the docs (write what was built or measured instead):\n${found.join("\n")}`);
});

test("comments and test names in src/, test/, bench/, scripts/ and .ci/ cite no issue numbers", () => {
  const found = CODE_DIRS.filter((d) => existsSync(join(ROOT, d))).flatMap((d) =>
    codeFiles(d).flatMap((f) => hits(f, readFileSync(join(ROOT, f), "utf8"), TRACKER_REF)),
  );
  assert.deepEqual(found, [], `tracker references in the code (write what the code does instead):\n${found.join("\n")}`);
});

/** A repository path in backticks: `src/...`, `test/...`, `bench/...`, `scripts/...`, `dist/src/...` (built from src). */
const NAMED_PATH = /`(?:dist\/)?((?:src|test|bench|scripts)\/[A-Za-z0-9_./-]*)/g;

test("every source path the docs name in backticks exists", () => {
  const missing: string[] = [];
  for (const f of DOCS) {
    const lines = readFileSync(join(ROOT, f), "utf8").split("\n");
    lines.forEach((line, i) => {
      for (const m of line.matchAll(NAMED_PATH)) {
        const built = m[0].startsWith("`dist/");
        let p = m[1]!.replace(/[.,:]+$/, "");
        // A path followed by a pattern (`test/fuzz/corpus/*.bin`, `src/{a,b}`) is checked up to the pattern.
        if (/[*{<]/.test(line.slice(m.index! + m[0].length, m.index! + m[0].length + 1))) p = p.replace(/\/[^/]*$/, "");
        if (p.startsWith("src/gen")) continue; // generated at build time (scripts/gen-protos.mjs)
        if (built) p = p.replace(/\.js$/, ".ts");
        if (!existsSync(join(ROOT, p))) missing.push(`${f}:${i + 1}: ${m[0]}`);
      }
    });
  }
  assert.deepEqual(missing, [], `docs name paths that do not exist (moved or renamed?):\n${missing.join("\n")}`);
});

test("every relative link in the docs points at a file that exists", () => {
  const broken: string[] = [];
  for (const f of DOCS) {
    const text = readFileSync(join(ROOT, f), "utf8");
    for (const m of text.matchAll(/\]\(([^)\s#]+)(?:#[^)\s]*)?\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/i.test(target)) continue; // http:, https:, mailto:
      const p = join(ROOT, dirname(f), target);
      if (!existsSync(p)) broken.push(`${f}:${text.slice(0, m.index).split("\n").length}: ${target} (${relative(ROOT, p)})`);
    }
  }
  assert.deepEqual(broken, [], `broken links in the docs:\n${broken.join("\n")}`);
});
