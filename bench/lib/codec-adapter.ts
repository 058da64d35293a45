import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { validateGatewayOptions } from "../../src/config/options.js";
import { externalSuite, type ExternalSpec } from "./external.js";
import { figure, targetOf } from "./figure.js";
import type { Figure, RunMode } from "./schema.js";
import { NotAvailable, type Suite } from "./suite.js";

/**
 * Figures from the markdown that `bench/codec.ts` prints (it is a script, not a module with an entry point):
 * conformance lines, the library speed table, the inline-vs-pool table, the crossover lines and the fast-path table.
 * Unknown lines are ignored, so the script may print more.
 */
export function parseCodecOutput(text: string): Figure[] {
  const figures: Figure[] = [];
  const crossovers: Array<{ dir: string; bytes: number | undefined }> = [];
  let table: "libs" | "pool" | "fast" | undefined;
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (t.startsWith("| JSON size")) table = "libs";
    else if (t.startsWith("| direction")) table = "pool";
    else if (t.startsWith("| message")) table = "fast";
    else if (!t.startsWith("|")) table = undefined;
    const conf = /^- (.+?): (\d+)\/(\d+)/.exec(t);
    if (conf) {
      const [, lib, passed, total] = conf;
      figures.push(figure(`conformance-${slug(lib!)}`, `${lib} proto3 JSON conformance cases passed`, Number(passed), { unit: "cases", better: "higher", baseline: { label: "cases checked", value: Number(total) } }));
      continue;
    }
    const cross = /^- (json->binary|binary->json): pool cheaper for the main thread from (?:(\d+) B|no measured size)/.exec(t);
    if (cross) {
      crossovers.push({ dir: cross[1]!, bytes: cross[2] === undefined ? undefined : Number(cross[2]) });
      continue;
    }
    if (!table || t.startsWith("|---")) continue;
    const cells = t.split("|").slice(1, -1).map((c) => c.trim());
    const nums = cells.map(Number);
    if (table === "libs" && cells.length >= 5 && Number.isFinite(nums[0])) {
      const [json, , dir] = cells;
      figures.push(
        figure(`library-${slug(dir!)}-${json}`, `@bufbuild/protobuf ${dir}, ${json} B JSON`, nums[3]!, { unit: "us", baseline: { label: "protobufjs ext/protojson", value: nums[4]! } }),
      );
    } else if (table === "fast" && cells.length >= 7 && Number.isFinite(nums[4])) {
      const [label, json, , dir] = cells;
      figures.push(
        figure(`fast-path-${slug(dir!)}-${slug(label!)}`, `Codec fast path: CPU per ${dir} conversion, ${label} (${json} B JSON)`, nums[5]!, {
          unit: "us",
          baseline: { label: "@bufbuild/protobuf path", value: nums[4]! },
        }),
      );
    } else if (table === "pool" && cells.length >= 6 && Number.isFinite(nums[1])) {
      const [dir, bytes] = cells;
      figures.push(
        figure(`pool-main-${slug(dir!)}-${bytes}`, `Pool: main-thread time per ${dir} conversion, ${bytes} B`, nums[5]!, { unit: "us", baseline: { label: "inline conversion", value: nums[4]! } }),
        figure(`pool-latency-${slug(dir!)}-${bytes}`, `Pool: latency of one ${dir} conversion, ${bytes} B`, nums[3]!, { unit: "us", baseline: { label: "inline conversion", value: nums[2]! } }),
      );
    }
  }
  const measured = crossovers.map((c) => c.bytes).filter((b): b is number => b !== undefined);
  if (crossovers.length > 0) {
    const configured = validateGatewayOptions({}).workerThresholdBytes;
    // The size from which the pool pays in every direction (a direction without a crossover leaves it unknown).
    const crossover = measured.length === crossovers.length ? Math.max(...measured) : undefined;
    const note = crossovers.map((c) => `${c.dir}: ${c.bytes === undefined ? "none" : `${c.bytes} B`}`).join("; ");
    figures.push(
      crossover === undefined
        ? figure("threshold-default", "Default workerThresholdBytes (no measured size where the pool pays in both directions)", configured, { unit: "bytes", target: { text: "default chosen from the crossover", met: null }, note })
        : figure("threshold-default", "Default workerThresholdBytes vs measured crossover (size from which the pool costs the main thread less in both directions)", configured, {
            unit: "bytes",
            baseline: { label: "measured crossover", value: crossover },
            // Sizes are measured at powers of two and the figures are noisy: within one step either way counts as chosen from the numbers.
            target: targetOf("default within 2x of the measured crossover", Math.abs(Math.log2(configured / crossover)), "<=", 1),
            note,
          }),
    );
  }
  return figures;
}

function slug(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
}

/** Run `bench/codec.ts` in a child process (tsx) and return its stdout; stderr is passed through. */
function runScript(file: string, mode: RunMode, signal: AbortSignal, onLine: (l: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", file, ...(mode === "full" ? [] : ["--quick"])], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    let partial = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      partial += chunk;
      const lines = partial.split("\n");
      partial = lines.pop()!;
      for (const l of lines) if (l.startsWith("## ")) onLine(l.slice(3));
    });
    const abort = (): void => void child.kill("SIGTERM");
    signal.addEventListener("abort", abort, { once: true });
    child.on("error", reject);
    child.on("exit", (code, sig) => {
      signal.removeEventListener("abort", abort);
      if (code === 0) resolve(out);
      else reject(new Error(`bench/codec.ts exited with ${sig ?? `code ${code}`}${signal.aborted ? " (stopped: over its time budget)" : ""}`));
    });
  });
}

/**
 * The conversion suite. If `bench/codec.ts` exports a `codecSuite` (Suite) it is imported and run; while it is a
 * plain script it runs as a child process and its printed tables are parsed. It has no dry-run mode, so a dry run
 * only checks that the file is there.
 */
export function codecSuite(file: string): Suite {
  const spec: ExternalSpec = {
    name: "codec",
    title: "Conversion: @bufbuild vs protobufjs per size; JSON<->protobuf inline vs worker pool; the threshold; the codec's fast path",
    file,
    suiteExport: "codecSuite",
    functionExport: "runCodecBench",
    budgetMs: { full: 150_000, quick: 60_000, "dry-run": 10_000 },
  };
  return {
    ...spec,
    async run(ctx) {
      if (!existsSync(file)) throw new NotAvailable("bench/codec.ts has not landed in this checkout");
      const source = readFileSync(file, "utf8");
      // Only import it when it exports an entry point; as a plain script, importing would run it in this process.
      if (/export (const|let) codecSuite|export (async )?function runCodecBench/.test(source)) return externalSuite(spec).run(ctx);
      if (ctx.mode === "dry-run") return { figures: [], status: "skipped", reason: "dry run: bench/codec.ts (a script without a dry-run mode) is present but not run" };
      const out = await runScript(file, ctx.mode, ctx.signal, (l) => ctx.progress.step("codec", l));
      const figures = parseCodecOutput(out);
      if (figures.length === 0) throw new Error("bench/codec.ts printed no table this harness can read");
      return { figures, raw: out };
    },
  };
}
