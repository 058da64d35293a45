import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RunResult } from "./schema.js";

/** Names that are safe as a file base name. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** Check a results name; throws naming the problem. */
export function validateResultName(name: string): string {
  if (!NAME.test(name) || name.includes("..")) {
    throw new Error(`--name '${name}' is not a valid results name: use letters, digits, '.', '_' and '-' (up to 100 characters)`);
  }
  return name;
}

/** The default name of a run: "<mode>-<UTC date and time>", e.g. "full-2025-01-31T14-05-09Z". */
export function defaultResultName(mode: string, at: Date): string {
  return `${mode}-${at.toISOString().replace(/\.\d+Z$/, "Z").replace(/:/g, "-")}`;
}

/** Write `<dir>/<name>.json` (pretty, trailing newline); returns its path. */
export async function writeRunResult(dir: string, result: RunResult): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${result.name}.json`);
  await writeFile(path, JSON.stringify(result, null, 2) + "\n");
  return path;
}
