/**
 * `npm run bench`: every benchmark suite, one progress line per step, results in `bench/results/<name>.json` and the
 * generated table in BENCHMARKS.md. See `--help` and docs/benchmarks.md.
 */
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { codecSuite } from "./lib/codec-adapter.js";
import { externalSuite, loadExternal, type ExternalSpec } from "./lib/external.js";
import { finishMachineInfo, gitCommit, machineInfo } from "./lib/machine.js";
import { updateBenchmarksMd } from "./lib/markdown.js";
import { parseRunOptions, USAGE } from "./lib/options.js";
import { peersSetup, peersSuite, peersUnavailable } from "./lib/peers-harness.js";
import { createProgress } from "./lib/progress.js";
import { defaultResultName, writeRunResult } from "./lib/results.js";
import { runSuite } from "./lib/run-suite.js";
import { RESULT_SCHEMA_VERSION, type RunResult, type SuiteResult } from "./lib/schema.js";
import type { Suite } from "./lib/suite.js";
import { applyTargets } from "./lib/targets.js";
import { microSuite } from "./micro/index.js";
import { restSuite } from "./rest/index.js";

const benchDir = dirname(fileURLToPath(import.meta.url));
const repoDir = resolve(benchDir, "..");

const invokeSpec: ExternalSpec = {
  name: "invoke",
  title: "InvokeJson through the gateway vs a direct grpc-js call (c=1/64, 1 KB/64 KB); REST invoke-json vs gRPC",
  file: join(benchDir, "invoke.ts"),
  suiteExport: "invokeSuite",
  functionExport: "runInvokeBench",
  budgetMs: { full: 180_000, quick: 60_000, "dry-run": 60_000 },
};
const fanoutSpec: ExternalSpec = {
  name: "fanout",
  title: "Fan-out: gateway process vs a raw grpc-js server writing pre-encoded buffers, 1,000 and 10,000 subscribers",
  file: join(benchDir, "fanout.ts"),
  suiteExport: "fanoutSuite",
  functionExport: "runFanoutBench",
  budgetMs: { full: 240_000, quick: 90_000, "dry-run": 60_000 },
  // runFanoutBench({quick, streams}): a dry run only needs the wiring, not 1,000 streams.
  functionOptions: { "dry-run": { streams: [20] } },
};

const webFanoutSpec: ExternalSpec = {
  name: "web-fanout",
  title: "Web fan-out: gateway WebSocket, SSE and gRPC Subscribe vs a bare uWS native-publish server, 1,000 and 10,000 subscribers, one connection each",
  file: join(benchDir, "webfanout.ts"),
  suiteExport: "webFanoutSuite",
  functionExport: "runWebFanoutBench",
  budgetMs: { full: 720_000, quick: 180_000, "dry-run": 90_000 },
};
const EXTERNAL: Record<string, ExternalSpec> = { invoke: invokeSpec, fanout: fanoutSpec, "web-fanout": webFanoutSpec };

/** Every suite in run order: cheap in-process ones first, the load suites after, the shared peers harness last. */
const SUITES: Suite[] = [
  microSuite,
  restSuite,
  codecSuite(join(benchDir, "codec.ts")),
  externalSuite(invokeSpec),
  externalSuite(fanoutSpec),
  externalSuite(webFanoutSpec),
  peersSuite(repoDir),
];

async function main(): Promise<number> {
  let opts;
  try {
    opts = parseRunOptions(process.argv.slice(2), SUITES.map((s) => s.name));
  } catch (e) {
    process.stderr.write(`bench: ${(e as Error).message}\n`);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (opts.list) {
    for (const s of SUITES) {
      const spec = EXTERNAL[s.name];
      let state = s.name === "codec" ? "script (run as a child process; its tables are parsed)" : "built in";
      if (s.name === "peers") {
        const setup = peersSetup(repoDir);
        const why = peersUnavailable(setup);
        state = why ? `not available: ${why}` : `harness (runs ${setup.dir}/run_fanout.py and run_invoke.py)`;
      }
      if (spec) {
        try {
          const l = await loadExternal(spec);
          state = l.kind === "suite" ? `loaded (${spec.suiteExport})` : `loaded (${spec.functionExport})`;
        } catch (e) {
          state = `not available: ${(e as Error).message}`;
        }
      }
      process.stdout.write(`${s.name}\t${state}\t${s.title}\n`);
    }
    return 0;
  }
  const started = new Date();
  const progress = createProgress();
  const machine = machineInfo();
  const selected = SUITES.filter((s) => opts.only.length === 0 || opts.only.includes(s.name));
  progress.step("bench", `${opts.mode} run of ${selected.map((s) => s.name).join(", ")} on ${machine.cpuModel} (${machine.cores} cores, load ${machine.loadAvgStart}), Node ${machine.node}`);
  const suites: SuiteResult[] = [];
  for (const s of selected) {
    progress.step(s.name, `start (budget ${Math.round(s.budgetMs[opts.mode] / 1000)} s)`);
    const r = await runSuite(s, opts.mode, progress);
    r.figures = applyTargets(s.name, r.figures, opts.mode);
    suites.push(r);
    progress.step(s.name, `${r.status}${r.reason ? `: ${r.reason}` : ""} (${r.figures.length} figures, ${(r.durationMs / 1000).toFixed(1)} s)`);
  }
  const name = opts.name ?? defaultResultName(opts.mode, started);
  const result: RunResult = {
    schemaVersion: RESULT_SCHEMA_VERSION,
    name,
    mode: opts.mode,
    startedAt: started.toISOString(),
    durationMs: Date.now() - started.getTime(),
    commit: gitCommit(repoDir),
    machine: finishMachineInfo(machine),
    suites,
  };
  const outDir = resolve(opts.outDir ?? join(benchDir, "results"));
  const path = await writeRunResult(outDir, result);
  progress.step("bench", `wrote ${relative(process.cwd(), path) || path}`);
  if (opts.markdown !== "none") {
    const md = resolve(opts.markdown ?? join(repoDir, "BENCHMARKS.md"));
    await updateBenchmarksMd(md, result, relative(dirname(md), path));
    progress.step("bench", `regenerated ${relative(process.cwd(), md) || md}`);
  }
  for (const s of suites) {
    process.stdout.write(`${s.name}: ${s.status}${s.reason ? ` (${s.reason})` : ""}\n`);
    for (const f of s.figures) {
      const ratio = f.ratio === undefined ? "" : ` ratio ${f.ratio.toFixed(2)}x vs ${f.baseline?.label}`;
      const target = f.target ? ` [${f.target.text}: ${f.target.met === null ? "not judged" : f.target.met ? "met" : "NOT met"}]` : "";
      process.stdout.write(`  ${f.label}: ${f.value} ${f.unit}${ratio}${target}\n`);
    }
  }
  return suites.some((s) => s.status === "failed") ? 1 : 0;
}

// Exit explicitly: a suite that gave up past its budget may leave handles (sockets, children) behind.
process.exit(await main());
