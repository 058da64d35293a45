import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { round } from "./figure.js";
import type { Figure, RunMode } from "./schema.js";
import { NotAvailable, type Suite, type SuiteContext } from "./suite.js";

/** How to find a suite in another engineer's module. */
export interface ExternalSpec {
  name: string;
  title: string;
  /** Absolute path of the module. */
  file: string;
  /** Name of an exported `Suite` object, used when present. */
  suiteExport: string;
  /** Name of an exported `run...Bench(options)` function, the fallback. */
  functionExport: string;
  budgetMs: Record<RunMode, number>;
  /** Extra options for the function entry point per mode (e.g. a tiny stream count for a dry run). */
  functionOptions?: Partial<Record<RunMode, Record<string, unknown>>>;
}

/** What the suite module looks like once loaded: a Suite, or a function to wrap. */
export type Loaded = { kind: "suite"; suite: Suite } | { kind: "function"; fn: (o: Record<string, unknown>) => Promise<unknown> };

/** Import the module and find its entry; NotAvailable when the file or the export is missing. */
export async function loadExternal(spec: ExternalSpec): Promise<Loaded> {
  if (!existsSync(spec.file)) throw new NotAvailable(`${relativeName(spec.file)} has not landed in this checkout`);
  const mod = (await import(pathToFileURL(spec.file).href)) as Record<string, unknown>;
  const s = mod[spec.suiteExport] as Suite | undefined;
  if (s && typeof s === "object" && typeof s.run === "function") return { kind: "suite", suite: s };
  const fn = mod[spec.functionExport];
  if (typeof fn === "function") return { kind: "function", fn: fn as (o: Record<string, unknown>) => Promise<unknown> };
  throw new NotAvailable(`${relativeName(spec.file)} exports neither ${spec.suiteExport} nor ${spec.functionExport}()`);
}

function relativeName(file: string): string {
  const i = file.lastIndexOf("/bench/");
  return i >= 0 ? file.slice(i + 1) : file;
}

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

/**
 * Turn whatever a suite returned into Figures: Figure-shaped items are kept (a missing ratio is filled from the
 * baseline); `{figures}` / `{results}` wrappers are unwrapped; anything else becomes figures from its numeric leaves
 * (named by their path, no baseline), so nothing measured is lost. The raw value is kept by the caller.
 */
export function normalizeFigures(raw: unknown, prefix = ""): Figure[] {
  if (Array.isArray(raw)) return raw.flatMap((item, i) => (isFigureLike(item) ? [fromFigureLike(item)] : normalizeFigures(item, `${prefix}${i}.`)));
  if (isObj(raw)) {
    if (Array.isArray(raw["figures"])) return normalizeFigures(raw["figures"], prefix);
    if (Array.isArray(raw["results"])) return normalizeFigures(raw["results"], prefix);
    if (isFigureLike(raw)) return [fromFigureLike(raw)];
    const named = typeof raw["name"] === "string" ? `${prefix}${raw["name"]}.` : prefix;
    return Object.entries(raw).flatMap(([k, v]) => {
      if (typeof v === "number" && Number.isFinite(v)) return [{ id: `${named}${k}`, label: `${named}${k}`, value: v, unit: "", better: "lower" as const, note: "reported by the suite without a baseline" }];
      return isObj(v) || Array.isArray(v) ? normalizeFigures(v, `${named}${k}.`) : [];
    });
  }
  return [];
}

function isFigureLike(x: unknown): x is Record<string, unknown> {
  return isObj(x) && typeof x["value"] === "number" && (typeof x["id"] === "string" || typeof x["label"] === "string" || typeof x["name"] === "string");
}

function fromFigureLike(x: Record<string, unknown>): Figure {
  const id = String(x["id"] ?? x["name"] ?? x["label"]);
  const f: Figure = {
    id,
    label: String(x["label"] ?? x["name"] ?? id),
    value: round(x["value"] as number),
    unit: String(x["unit"] ?? ""),
    better: x["better"] === "higher" ? "higher" : "lower",
  };
  const b = x["baseline"];
  if (isObj(b) && typeof b["value"] === "number") f.baseline = { label: String(b["label"] ?? "baseline"), value: round(b["value"]) };
  else if (typeof b === "number") f.baseline = { label: String(x["baselineLabel"] ?? "baseline"), value: round(b) };
  if (typeof x["ratio"] === "number" && Number.isFinite(x["ratio"])) f.ratio = round(x["ratio"], 4);
  else if (f.baseline && f.baseline.value !== 0) f.ratio = round(f.value / f.baseline.value, 4);
  const t = x["target"];
  if (isObj(t) && typeof t["text"] === "string") f.target = { text: t["text"], met: typeof t["met"] === "boolean" ? t["met"] : null };
  if (typeof x["note"] === "string") f.note = x["note"];
  return f;
}

/** A harness Suite over another engineer's module, adapted to whichever entry point it exports. */
export function externalSuite(spec: ExternalSpec): Suite {
  return {
    name: spec.name,
    title: spec.title,
    budgetMs: spec.budgetMs,
    async run(ctx: SuiteContext) {
      const loaded = await loadExternal(spec);
      const raw =
        loaded.kind === "suite"
          ? await loaded.suite.run(ctx)
          : await loaded.fn({ mode: ctx.mode, quick: ctx.mode !== "full", dryRun: ctx.mode === "dry-run", signal: ctx.signal, log: (l: string) => ctx.progress.step(spec.name, l), ...spec.functionOptions?.[ctx.mode] });
      const figures = normalizeFigures(raw);
      // Keep the raw value only when it holds more than the figures already say.
      const list = isObj(raw) && Object.keys(raw).length === 1 && Array.isArray(raw["figures"]) ? raw["figures"] : raw;
      return { figures, raw: Array.isArray(list) && list.every(isFigureLike) ? undefined : raw };
    },
  };
}
