import { execFileSync, spawn } from "node:child_process";
import { accessSync, constants, existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { figure } from "./figure.js";
import type { Figure, RunMode } from "./schema.js";
import { NotAvailable, type Suite, type SuiteContext } from "./suite.js";

/**
 * The `peers` suite: the shared peers harness (`../shared/peers`: Go load clients, the Go inventory backend,
 * nats-server, grpc-gateway, nginx `grpc_pass`, a bare uWS server) run against this checkout, its JSON lines turned
 * into figures with their same-run peer as baseline. The measuring is the harness's own: its runners `run_fanout.py`
 * and `run_invoke.py` are run unchanged (PERF_MAIN = this checkout, PERF_OUT = a temporary directory, `--no-wait`), so
 * these figures are the ones the harness's summaries show, not a Node re-creation of them.
 */

/** Where the harness and what it runs are (the harness's env.sh settings, each overridable from the environment). */
export interface PeersSetup {
  /** The harness directory (PEERS_DIR, or `../shared/peers` beside this checkout or beside the main checkout). */
  dir: string;
  /** Its Go builds (PERF_BUILD, default /tmp/perf/build): bin/fanoutload, bin/invokeload, bin/grpcgwproxy. */
  build: string;
  /** The Go inventory backend (BACKEND_BIN, default /tmp/peers-backend/server). */
  backendBin: string;
  /** nginx for `grpc_pass` (NGINX_BIN, default the Debian package build.sh extracts under PERF_BUILD). */
  nginxBin: string;
  /** The PATH the runners get (they start `nats-server` and `python3` from it). */
  path: string;
}

/** Resolve the setup from an environment (process.env by default) for the checkout at repoDir. */
export function peersSetup(repoDir: string, env: NodeJS.ProcessEnv = process.env): PeersSetup {
  const build = env["PERF_BUILD"] || "/tmp/perf/build";
  return {
    dir: env["PEERS_DIR"] || harnessBeside(repoDir),
    build,
    backendBin: env["BACKEND_BIN"] || "/tmp/peers-backend/server",
    nginxBin: env["NGINX_BIN"] || join(build, "nginx/usr/sbin/nginx"),
    path: env["PATH"] ?? "",
  };
}

/** `../shared/peers` beside this checkout, or beside the main checkout when this one is a worktree elsewhere. */
function harnessBeside(repoDir: string): string {
  const own = resolve(repoDir, "../shared/peers");
  if (existsSync(own)) return own;
  try {
    const common = execFileSync("git", ["rev-parse", "--git-common-dir"], { cwd: repoDir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const main = dirname(isAbsolute(common) ? common : resolve(repoDir, common));
    return resolve(main, "../shared/peers");
  } catch {
    return own;
  }
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string, path: string): boolean {
  return path.split(delimiter).some((d) => d !== "" && executable(join(d, name)));
}

const SETUP_HINT = "see the Setup section of the harness's README.md";

/** What is missing to run the harness, each naming how to get it; empty when everything is there. */
export function missingForPeers(s: PeersSetup): string[] {
  const missing: string[] = [];
  const runners = ["perflib.py", "run_fanout.py", "run_invoke.py"].filter((f) => !existsSync(join(s.dir, f)));
  if (runners.length > 0) missing.push(`the peers harness at ${s.dir} (${runners.join(", ")} missing; set PEERS_DIR to its directory)`);
  if (!onPath("python3", s.path)) missing.push("python3 on PATH");
  const goBins = ["fanoutload", "invokeload", "grpcgwproxy"].filter((b) => !executable(join(s.build, "bin", b)));
  if (goBins.length > 0) missing.push(`its Go load clients ${goBins.map((b) => join(s.build, "bin", b)).join(", ")} (the harness's ./build.sh; PERF_BUILD names another build directory)`);
  if (!executable(s.backendBin)) missing.push(`the Go inventory backend ${s.backendBin} (the harness's backend/build.sh; or set BACKEND_BIN)`);
  if (!onPath("nats-server", s.path)) missing.push("nats-server on PATH (apt-get install nats-server)");
  if (!executable(s.nginxBin)) missing.push(`nginx at ${s.nginxBin} (the harness's ./build.sh extracts Debian's nginx there; or set NGINX_BIN)`);
  return missing;
}

/** The "not available" reason for a setup, undefined when the suite can run. */
export function peersUnavailable(s: PeersSetup): string | undefined {
  const missing = missingForPeers(s);
  return missing.length === 0 ? undefined : `needs ${missing.join("; ")}; ${SETUP_HINT}`;
}

/** One line of the harness's fanout.jsonl: a run of one system, shape and subscriber count, or its error. */
export interface FanoutRecord {
  rep: number;
  sys: string;
  shape: string;
  subs: number;
  error?: string;
  complete?: boolean;
  delivered?: number;
  expected?: number;
  server_cpu_us_per_delivery?: number;
  deliveries_per_s?: number;
  p50_us?: number;
  p99_us?: number;
  server_rss_idle_bytes_per_sub?: number;
}

/** One path of a line of the harness's invoke.jsonl. */
export interface InvokePath {
  p50_us: number;
  p99_us: number;
  rps: number;
  proxy_cpu_us_per_call: number;
  errors: number;
  first_error?: string;
}

/** One line of the harness's invoke.jsonl: one concurrency of one repetition, every path interleaved. */
export interface InvokeRecord {
  rep: number;
  conc: number;
  paths: Record<string, InvokePath>;
}

/** The JSON objects of a JSON-lines text; throws naming the first line that is not a JSON object. */
export function parseJsonLines<T>(text: string, file: string): T[] {
  const out: T[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new Error(`${file} line ${i + 1} is not JSON: ${(e as Error).message}`, { cause: e });
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error(`${file} line ${i + 1} is not a JSON object`);
    out.push(v as T);
  });
  return out;
}

/** What a set of harness records gave: the figures, and what could not be used (failed runs, missing systems). */
export interface PeersFigures {
  figures: Figure[];
  problems: string[];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const num = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
const fmtRange = (xs: number[]): string => (xs.length === 1 ? `${+xs[0]!.toPrecision(3)}` : `${+Math.min(...xs).toPrecision(3)}-${+Math.max(...xs).toPrecision(3)}`);

/** A median-of-repetitions figure: value and baseline each the median of their runs, the note giving both ranges (none for one run each). */
function medianFigure(id: string, label: string, values: number[], base: { label: string; values: number[] }, unit: string, better: "lower" | "higher"): Figure {
  const runs = (xs: number[]): string => (xs.length === 1 ? "1 run" : `median of ${xs.length} runs, ${fmtRange(xs)}`);
  const f = figure(id, label, median(values), { unit, better, baseline: { label: base.label, value: median(base.values) } });
  if (values.length > 1 || base.values.length > 1) f.note = `${runs(values)}; baseline ${runs(base.values)}`;
  return f;
}

/** The fan-out comparisons: a gateway front against the peer in the same shape. */
const FANOUT_PAIRS = [
  { key: "grpc-conn", sys: "gateway", peer: "nats", shape: "conn", what: "gateway gRPC Subscribe, one connection per subscriber", peerLabel: "nats-server, one connection per subscriber" },
  { key: "grpc-mux100", sys: "gateway", peer: "nats", shape: "mux100", what: "gateway gRPC Subscribe, 100 streams per connection", peerLabel: "nats-server, 100 subscriptions per connection" },
  { key: "ws-conn", sys: "gwws", peer: "uws", shape: "conn", what: "gateway WebSocket, one connection per subscriber", peerLabel: "bare uWS topic server" },
] as const;

const FANOUT_METRICS = [
  { key: "cpu-per-delivery", what: "server CPU per delivery", field: "server_cpu_us_per_delivery", unit: "us", better: "lower" },
  { key: "deliveries-per-s", what: "deliveries/s", field: "deliveries_per_s", unit: "deliveries/s", better: "higher" },
  { key: "p50", what: "p50 publish-to-delivery", field: "p50_us", unit: "us", better: "lower" },
  { key: "p99", what: "p99 publish-to-delivery", field: "p99_us", unit: "us", better: "lower" },
  { key: "idle-bytes-per-subscriber", what: "server RSS per idle subscriber", field: "server_rss_idle_bytes_per_sub", unit: "bytes", better: "lower" },
] as const;

/** The systems and shapes run_fanout.py is asked for (the gateway's two fronts and their peers). */
export const FANOUT_SYSTEMS = ["gateway", "nats", "gwws", "uws"];

/**
 * Figures from fanout.jsonl records: for each subscriber count, each pair (gateway gRPC Subscribe against nats-server
 * in both shapes, gateway WebSocket against bare uWS) and each measure, the median over repetitions against the peer's
 * median. A run with an error or lost deliveries is left out and named in `problems`.
 */
export function fanoutFigures(records: readonly FanoutRecord[]): PeersFigures {
  const problems: string[] = [];
  const good = records.filter((r) => {
    const at = `fan-out ${r.sys} ${r.shape} ${r.subs} (repetition ${r.rep})`;
    if (r.error !== undefined) problems.push(`${at}: ${r.error.trim()}`);
    else if (r.complete === false) problems.push(`${at}: ${r.delivered}/${r.expected} delivered`);
    else return true;
    return false;
  });
  const figures: Figure[] = [];
  for (const subs of [...new Set(records.map((r) => r.subs))].sort((a, b) => a - b)) {
    for (const p of FANOUT_PAIRS) {
      const of = (sys: string): FanoutRecord[] => good.filter((r) => r.subs === subs && r.shape === p.shape && r.sys === sys);
      const mine = of(p.sys);
      const peer = of(p.peer);
      if (!records.some((r) => r.subs === subs && r.shape === p.shape && (r.sys === p.sys || r.sys === p.peer))) continue; // not asked for
      if (mine.length === 0 || peer.length === 0) {
        problems.push(`fan-out ${p.key} ${subs}: no successful run of ${mine.length === 0 ? p.sys : p.peer}`);
        continue;
      }
      for (const m of FANOUT_METRICS) {
        const a = mine.map((r) => r[m.field]).filter(num);
        const b = peer.map((r) => r[m.field]).filter(num);
        if (a.length === 0 || b.length === 0) continue;
        figures.push(
          medianFigure(`fanout-${p.key}-${m.key}-${subs}`, `Fan-out ${subs.toLocaleString("en-US")} subscribers, ${p.what}: ${m.what}`, a, { label: p.peerLabel, values: b }, m.unit, m.better),
        );
      }
    }
  }
  return { figures, problems };
}

/** The invoke paths run_invoke.py is asked for. */
export const INVOKE_PATHS = ["direct", "gwgrpc", "gwrest", "grpcgw", "gwproxy", "nginx"];

const GRPCGW = "grpc-gateway REST proxy";
const NGINX = "nginx grpc_pass";
/** A gateway path against its peer. */
const INVOKE_PAIRS = [
  { key: "grpc", path: "gwgrpc", peer: "grpcgw", what: "gateway gRPC InvokeJson", peerLabel: GRPCGW },
  { key: "rest", path: "gwrest", peer: "grpcgw", what: "gateway REST invoke-json", peerLabel: GRPCGW },
  { key: "proxy", path: "gwproxy", peer: "nginx", what: "gateway transparent gRPC proxy", peerLabel: NGINX },
] as const;

/**
 * Figures from invoke.jsonl records. At c=1: added p50 and p99 over the direct call of the same repetition, median
 * over repetitions, against the peer's (grpc-gateway for InvokeJson and REST invoke-json, nginx for the transparent
 * proxy); and, for the two gateway fronts, the repetition where the added p99 is worst relative to grpc-gateway's
 * (that ratio is at most 1 exactly when it is in every repetition). At c=64: calls/s and proxy CPU per call against
 * the peer's. A path with failed calls is left out of that repetition and named in `problems`.
 */
export function invokeFigures(records: readonly InvokeRecord[]): PeersFigures {
  const problems = new Set<string>(); // a path in several pairs (direct, grpc-gateway) is named once
  const ok = (r: InvokeRecord, path: string): InvokePath | undefined => {
    const p = r.paths[path];
    if (!p) return undefined;
    if (p.errors > 0) {
      problems.add(`invoke c=${r.conc} ${path} (repetition ${r.rep}): ${p.errors} failed calls${p.first_error ? `, first: ${p.first_error.slice(0, 200)}` : ""}`);
      return undefined;
    }
    return p;
  };
  const figures: Figure[] = [];
  for (const conc of [...new Set(records.map((r) => r.conc))].sort((a, b) => a - b)) {
    for (const pair of INVOKE_PAIRS) {
      // Per repetition, both sides (and at c=1 the direct call) measured in the same interleaved run.
      const reps: Array<{ rep: number; mine: InvokePath; peer: InvokePath; direct: InvokePath | undefined }> = [];
      for (const r of records.filter((x) => x.conc === conc)) {
        if (!r.paths[pair.path] && !r.paths[pair.peer]) continue;
        const mine = ok(r, pair.path);
        const peer = ok(r, pair.peer);
        const direct = ok(r, "direct");
        if (mine && peer && (conc !== 1 || direct)) reps.push({ rep: r.rep, mine, peer, direct });
      }
      if (reps.length === 0) {
        if (records.some((r) => r.conc === conc && (r.paths[pair.path] || r.paths[pair.peer]))) problems.add(`invoke c=${conc} ${pair.key}: no repetition with both ${pair.path} and ${pair.peer}`);
        continue;
      }
      const base = (values: number[], what = ""): { label: string; values: number[] } => ({ label: `${pair.peerLabel}${what}`, values });
      if (conc === 1) {
        for (const q of ["p50", "p99"] as const) {
          const field = q === "p50" ? "p50_us" : "p99_us";
          const added = reps.map((x) => ({ rep: x.rep, mine: x.mine[field] - x.direct![field], peer: x.peer[field] - x.direct![field] }));
          figures.push(
            medianFigure(`invoke-c1-added-${q}-${pair.key}`, `Invoke c=1, ${pair.what}: added ${q} over the direct call`, added.map((a) => a.mine), base(added.map((a) => a.peer), `, its added ${q}`), "us", "lower"),
          );
          if (q === "p99" && pair.peer === "grpcgw") {
            const ratios = added.map((a) => (a.peer > 0 ? a.mine / a.peer : Infinity));
            const worst = added[ratios.indexOf(Math.max(...ratios))]!;
            figures.push(
              figure(`invoke-c1-added-p99-${pair.key}-worst`, `Invoke c=1, ${pair.what}: added p99, the repetition worst against ${pair.peerLabel}`, worst.mine, {
                unit: "us",
                baseline: { label: `${pair.peerLabel}, its added p99 in that repetition`, value: worst.peer },
                note: `repetition ${worst.rep} of ${added.length}; ratios per repetition ${ratios.map((x) => x.toFixed(2)).join(", ")}`,
              }),
            );
          }
        }
      } else {
        figures.push(
          medianFigure(`invoke-c${conc}-calls-per-s-${pair.key}`, `Invoke c=${conc}, ${pair.what}: calls/s`, reps.map((x) => x.mine.rps), base(reps.map((x) => x.peer.rps)), "calls/s", "higher"),
          medianFigure(`invoke-c${conc}-cpu-per-call-${pair.key}`, `Invoke c=${conc}, ${pair.what}: proxy CPU per call`, reps.map((x) => x.mine.proxy_cpu_us_per_call), base(reps.map((x) => x.peer.proxy_cpu_us_per_call)), "us", "lower"),
        );
      }
    }
  }
  return { figures, problems: [...problems] };
}

/** What one mode runs: repetitions (each = run_invoke.py then run_fanout.py, as the harness's run_all.sh does) and the runners' arguments. */
export interface PeersPlan {
  reps: number;
  invoke: string[];
  fanout: string[];
}

/**
 * Full: the issue's medians of 3, 1,000 and 10,000 subscribers, both shapes. Quick: one repetition of the runners'
 * --quick counts at 1,000 subscribers. Dry run: the smallest the runners do (200 subscribers, --quick), wiring only.
 */
export function peersPlan(mode: RunMode): PeersPlan {
  const invoke = ["--conc", "1,64", "--paths", INVOKE_PATHS.join(",")];
  const fanout = ["--shapes", "conn,mux100", "--systems", FANOUT_SYSTEMS.join(",")];
  if (mode === "full") return { reps: 3, invoke, fanout: [...fanout, "--subs", "1000,10000"] };
  return { reps: 1, invoke: [...invoke, "--quick"], fanout: [...fanout, "--subs", mode === "quick" ? "1000" : "200", "--quick"] };
}

/** How long a runner is given to stop (it stops its servers and load client) after SIGINT before it is killed. */
const STOP_GRACE_MS = 20_000;
/** Lines of a child's output kept for an error message. */
const TAIL_LINES = 20;

/** A process by pid and start time (/proc/<pid>/stat field 22), so that a reused pid is never signalled. */
interface ProcId {
  pid: number;
  start: string;
}

function procStat(pid: number): { ppid: number; start: string } | undefined {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces: fields after it start past the last ')'.
    const parts = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(parts[1]), start: parts[19] ?? "" };
  } catch {
    return undefined;
  }
}

/** Every live descendant of pid (servers and load clients a runner started), from one scan of /proc. */
function descendants(pid: number): ProcId[] {
  const children = new Map<number, ProcId[]>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    const st = procStat(Number(e));
    if (!st) continue;
    const list = children.get(st.ppid) ?? [];
    list.push({ pid: Number(e), start: st.start });
    children.set(st.ppid, list);
  }
  const out: ProcId[] = [];
  const queue = [pid];
  while (queue.length > 0 && out.length < 10_000) {
    for (const c of children.get(queue.shift()!) ?? []) {
      out.push(c);
      queue.push(c.pid);
    }
  }
  return out;
}

const alive = (p: ProcId): boolean => procStat(p.pid)?.start === p.start;

/** SIGTERM each process still alive (same pid, same start time), SIGKILL those left after STOP_GRACE_MS / 4. */
async function stopLeftovers(procs: ProcId[]): Promise<void> {
  const signal = (sig: NodeJS.Signals): void => {
    for (const p of procs.filter(alive)) {
      try {
        process.kill(p.pid, sig);
      } catch {
        // exited in between
      }
    }
  };
  signal("SIGTERM");
  for (let waited = 0; waited < STOP_GRACE_MS / 4 && procs.some(alive); waited += 100) await new Promise((r) => setTimeout(r, 100));
  signal("SIGKILL");
}

/** Run a child to its end, each output line a progress step; resolves with its exit code and last lines. */
function runChild(cmd: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }, ctx: SuiteContext, step: string): Promise<{ code: number | null; tail: string[] }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
    const tail: string[] = [];
    let killTimer: NodeJS.Timeout | undefined;
    const onLine = (line: string): void => {
      if (line.trim() === "") return;
      // After an abort the runner prints its KeyboardInterrupt traceback: kept for the reason, not shown.
      if (!ctx.signal.aborted) ctx.progress.step("peers", `${step}: ${line}`);
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
    };
    for (const stream of [child.stdout, child.stderr]) {
      let partial = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        const lines = (partial + chunk).split("\n");
        partial = lines.pop()!.slice(-4096); // a line without its end is bounded
        lines.forEach(onLine);
      });
      stream.on("end", () => onLine(partial));
    }
    // SIGINT, not SIGTERM: Python turns it into KeyboardInterrupt, so the runner's finally blocks stop the servers and
    // the load client it started; SIGKILL of this one pid only if it has not exited after the grace. A server still
    // starting (inside the harness's Server constructor) has no finally to stop it: the runner's descendants at the
    // abort are stopped by pid once the runner is gone.
    let leftovers: ProcId[] = [];
    const onAbort = (): void => {
      if (child.pid !== undefined) leftovers = descendants(child.pid);
      child.kill("SIGINT");
      killTimer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    };
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    child.on("error", (e) => {
      ctx.signal.removeEventListener("abort", onAbort);
      reject(new Error(`${step}: ${e.message}`));
    });
    child.on("close", (code) => {
      ctx.signal.removeEventListener("abort", onAbort);
      clearTimeout(killTimer);
      void stopLeftovers(leftovers).then(() => resolvePromise({ code, tail }));
    });
  });
}

async function readRecords<T>(file: string): Promise<T[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    return []; // the runner stopped before its first record
  }
  return parseJsonLines<T>(text, file);
}

/** The suite over the checkout at repoDir; the setup is read from env when it runs. */
export function peersSuite(repoDir: string, env: NodeJS.ProcessEnv = process.env): Suite {
  return {
    name: "peers",
    title: "The shared peers harness against this checkout: gRPC Subscribe vs nats-server, WebSocket vs bare uWS; InvokeJson and REST vs grpc-gateway, transparent proxy vs nginx",
    // Full: 3 x (invoke ~1 min + fan-out ~3 min at 10,000 subscribers) on 2 cores, plus a build when dist/ is stale.
    budgetMs: { full: 1_500_000, quick: 300_000, "dry-run": 180_000 },
    async run(ctx) {
      const setup = peersSetup(repoDir, env);
      const unavailable = peersUnavailable(setup);
      if (unavailable) throw new NotAvailable(unavailable);
      // The harness runs `node dist/src/main/cli.js` of PERF_MAIN: compile it when a source is newer (what `npm start` does).
      const built = await runChild(process.execPath, ["scripts/build-if-needed.mjs"], { cwd: repoDir, env }, ctx, "build");
      if (built.code !== 0) throw new Error(`scripts/build-if-needed.mjs exited ${built.code}: ${built.tail.join(" | ")}`);
      const out = await mkdtemp(join(tmpdir(), "bench-peers-"));
      try {
        const childEnv: NodeJS.ProcessEnv = {
          ...env,
          PERF_MAIN: repoDir,
          PERF_OUT: out,
          PERF_BUILD: setup.build,
          BACKEND_BIN: setup.backendBin,
          NGINX_BIN: setup.nginxBin,
          NODE: env["NODE"] || process.execPath,
          // The harness directory is shared and read-only: no __pycache__ there.
          PYTHONDONTWRITEBYTECODE: "1",
        };
        const plan = peersPlan(ctx.mode);
        const problems: string[] = [];
        for (let rep = 0; rep < plan.reps && !ctx.signal.aborted; rep++) {
          for (const [runner, args] of [["run_invoke.py", plan.invoke], ["run_fanout.py", plan.fanout]] as const) {
            if (ctx.signal.aborted) break;
            const argv = [runner, "--reps", "1", "--rep-base", String(rep), "--tag", `bench-${ctx.mode}`, "--no-wait", ...args];
            ctx.progress.step("peers", `repetition ${rep + 1}/${plan.reps}: python3 ${argv.join(" ")}`);
            const r = await runChild("python3", argv, { cwd: setup.dir, env: childEnv }, ctx, runner);
            if (r.code !== 0 && ctx.signal.aborted) problems.push(`${runner} repetition ${rep} stopped at the suite's time budget`);
            else if (r.code !== 0) problems.push(`${runner} repetition ${rep} exited ${r.code ?? "on a signal"}: ${r.tail.slice(-3).join(" | ").slice(-600)}`);
          }
        }
        const invoke = await readRecords<InvokeRecord>(join(out, "invoke.jsonl"));
        const fanout = await readRecords<FanoutRecord>(join(out, "fanout.jsonl"));
        const inv = invokeFigures(invoke);
        const fan = fanoutFigures(fanout);
        problems.push(...inv.problems, ...fan.problems);
        const figures = [...inv.figures, ...fan.figures];
        if (figures.length === 0) throw new Error(problems.length > 0 ? problems.join("; ") : "the harness wrote no records");
        const raw = { harness: setup.dir, plan, invoke, fanout };
        return problems.length === 0 ? { figures, raw } : { figures, raw, reason: `${problems.length} run(s) left out: ${problems.join("; ")}` };
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    },
  };
}
