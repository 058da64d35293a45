/**
 * The `peers` bench suite without running the harness: its JSON lines turned into figures with same-run baselines,
 * medians and targets, and the "not available" path when the harness or its binaries are missing (through the suite
 * runner and through `npm run bench` itself). The fixtures are the harness's own records: `main1-*.jsonl` copied from
 * `../shared/peers/results/` (2026-11-23: gateway, nats-server and bare uWS fan-out, including a failed run; invoke
 * direct, gateway gRPC and REST, grpc-gateway), `dry-run-*.jsonl` written by `npm run bench -- --only peers --dry-run`
 * on 2026-11-27 (gateway WebSocket fan-out, the transparent proxy and nginx grpc_pass).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { BEGIN, END, renderResults } from "../../bench/lib/markdown.js";
import {
  fanoutFigures,
  invokeFigures,
  missingForPeers,
  parseJsonLines,
  peersPlan,
  peersSetup,
  peersSuite,
  type FanoutRecord,
  type InvokeRecord,
} from "../../bench/lib/peers-harness.js";
import { createProgress } from "../../bench/lib/progress.js";
import { runSuite } from "../../bench/lib/run-suite.js";
import { checkRunResult, type Figure, type RunResult } from "../../bench/lib/schema.js";
import { applyTargets } from "../../bench/lib/targets.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const fixture = (name: string): string => join(repo, "test/fixtures/peers", name);
const fanoutMain1 = parseJsonLines<FanoutRecord>(readFileSync(fixture("main1-fanout.jsonl"), "utf8"), "main1-fanout.jsonl");
const invokeMain1 = parseJsonLines<InvokeRecord>(readFileSync(fixture("main1-invoke.jsonl"), "utf8"), "main1-invoke.jsonl");
const fanoutDry = parseJsonLines<FanoutRecord>(readFileSync(fixture("dry-run-fanout.jsonl"), "utf8"), "dry-run-fanout.jsonl");
const invokeDry = parseJsonLines<InvokeRecord>(readFileSync(fixture("dry-run-invoke.jsonl"), "utf8"), "dry-run-invoke.jsonl");

const byId = (figs: Figure[]): Map<string, Figure> => new Map(figs.map((f) => [f.id, f]));
/** Figures keep 3 significant digits (ratios 4). */
const near = (a: number | undefined, b: number, what: string): void => assert.ok(a !== undefined && Math.abs(a - b) <= Math.abs(b) * 5e-3, `${what}: ${a} vs ${b}`);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const fan = (sys: string, shape: string, subs: number): FanoutRecord[] => fanoutMain1.filter((r) => r.sys === sys && r.shape === shape && r.subs === subs && r.error === undefined);

describe("peers suite: the harness's fanout.jsonl", () => {
  const { figures, problems } = fanoutFigures(fanoutMain1);
  const figs = byId(figures);

  it("reports gRPC Subscribe against nats-server per shape and subscriber count, medians over the repetitions", () => {
    const f = figs.get("fanout-grpc-conn-cpu-per-delivery-1000")!;
    const mine = fan("gateway", "conn", 1000).map((r) => r.server_cpu_us_per_delivery!);
    const nats = fan("nats", "conn", 1000).map((r) => r.server_cpu_us_per_delivery!);
    assert.equal(mine.length, 2, "the fixture holds two repetitions of this case");
    assert.equal(f.unit, "us");
    assert.equal(f.baseline?.label, "nats-server, one connection per subscriber");
    near(f.value, median(mine), "value");
    near(f.baseline?.value, median(nats), "baseline");
    near(f.ratio, median(mine) / median(nats), "ratio");
    assert.match(f.note!, /^median of 2 runs, [\d.]+-[\d.]+; baseline median of 2 runs/);
    const mux = figs.get("fanout-grpc-mux100-cpu-per-delivery-1000")!;
    assert.equal(mux.baseline?.label, "nats-server, 100 subscriptions per connection");
    near(mux.ratio, fan("gateway", "mux100", 1000)[0]!.server_cpu_us_per_delivery! / fan("nats", "mux100", 1000)[0]!.server_cpu_us_per_delivery!, "mux100 ratio");
    for (const m of ["cpu-per-delivery", "deliveries-per-s", "p50", "p99", "idle-bytes-per-subscriber"]) {
      for (const key of ["grpc-conn-1000", "grpc-mux100-1000", "grpc-conn-10000"]) {
        const [shape, subs] = [key.split("-")[1], key.split("-")[2]];
        assert.ok(figs.has(`fanout-grpc-${shape}-${m}-${subs}`), `fanout-grpc-${shape}-${m}-${subs} missing (have ${[...figs.keys()].join(", ")})`);
      }
    }
    assert.equal(figs.get("fanout-grpc-conn-deliveries-per-s-1000")?.better, "higher");
    assert.equal(figs.get("fanout-grpc-conn-idle-bytes-per-subscriber-1000")?.unit, "bytes");
  });

  it("leaves a failed run out, naming it, and names a pair whose own side never ran", () => {
    // 10,000 subscribers, one connection each: repetition 0 of the gateway failed to open every subscriber.
    assert.ok(problems.some((p) => p.startsWith("fan-out gateway conn 10000 (repetition 0): fanoutload exited 1: fanoutload: grpc: 9926 of 10000 subscribers opened")), problems.join("\n"));
    near(figs.get("fanout-grpc-conn-cpu-per-delivery-10000")?.value, fan("gateway", "conn", 10000)[0]!.server_cpu_us_per_delivery!, "only the successful run");
    assert.equal(figs.get("fanout-grpc-conn-cpu-per-delivery-10000")!.note, undefined, "one run on each side: no range to give");
    // bare uWS ran at 1,000, the gateway's WebSocket did not (the recording predates it).
    assert.ok(problems.includes("fan-out ws-conn 1000: no successful run of gwws"), problems.join("\n"));
    assert.equal([...figs.keys()].some((k) => k.startsWith("fanout-ws-")), false);
  });

  it("reports the gateway WebSocket against bare uWS (a dry run's records)", () => {
    const dry = fanoutFigures(fanoutDry);
    assert.deepEqual(dry.problems, []);
    const f = byId(dry.figures).get("fanout-ws-conn-cpu-per-delivery-200")!;
    const ws = fanoutDry.find((r) => r.sys === "gwws")!;
    const uws = fanoutDry.find((r) => r.sys === "uws")!;
    assert.equal(f.baseline?.label, "bare uWS topic server");
    near(f.ratio, ws.server_cpu_us_per_delivery! / uws.server_cpu_us_per_delivery!, "ws ratio");
    assert.equal(dry.figures.length, 15, "5 measures x (gRPC conn, gRPC mux100, WebSocket)");
  });

  it("attaches the targets: CPU per delivery against nats-server, bytes per idle subscriber; a dry run judges none", () => {
    const judged = byId(applyTargets("peers", figures, "full"));
    assert.deepEqual(judged.get("fanout-grpc-conn-cpu-per-delivery-1000")?.target, { text: "ratio <= 1 (at or below nats-server)", met: false });
    assert.deepEqual(judged.get("fanout-grpc-mux100-cpu-per-delivery-1000")?.target, { text: "ratio <= 1.5", met: false });
    assert.deepEqual(judged.get("fanout-grpc-conn-idle-bytes-per-subscriber-10000")?.target, { text: "<= 8 KB per idle subscriber", met: false });
    assert.deepEqual(judged.get("fanout-grpc-mux100-idle-bytes-per-subscriber-1000")?.target, { text: "<= 3 KB per idle subscriber", met: false });
    assert.equal(judged.get("fanout-grpc-conn-p99-1000")?.target, undefined);
    // Met when the figure is within its bound.
    const small = applyTargets("peers", [{ ...figures[0]!, id: "fanout-grpc-mux100-idle-bytes-per-subscriber-1000", value: 3000 }], "quick");
    assert.equal(small[0]!.target?.met, true);
    for (const f of applyTargets("peers", figures, "dry-run")) if (f.target) assert.equal(f.target.met, null, f.id);
  });
});

describe("peers suite: the harness's invoke.jsonl", () => {
  const { figures, problems } = invokeFigures(invokeMain1);
  const figs = byId(figures);
  const c1 = invokeMain1.filter((r) => r.conc === 1);

  it("reports c=1 added latency over the same repetition's direct call against grpc-gateway's, and c=64 calls/s and CPU", () => {
    assert.deepEqual(problems, []);
    const added = (path: string, q: "p50_us" | "p99_us"): number[] => c1.map((r) => r.paths[path]![q] - r.paths["direct"]![q]);
    const f = figs.get("invoke-c1-added-p50-grpc")!;
    assert.equal(f.baseline?.label, "grpc-gateway REST proxy, its added p50");
    near(f.value, median(added("gwgrpc", "p50_us")), "added p50");
    near(f.baseline?.value, median(added("grpcgw", "p50_us")), "grpc-gateway added p50");
    near(figs.get("invoke-c1-added-p99-rest")?.value, median(added("gwrest", "p99_us")), "REST added p99");
    const rps = figs.get("invoke-c64-calls-per-s-grpc")!;
    const c64 = invokeMain1.filter((r) => r.conc === 64);
    near(rps.value, median(c64.map((r) => r.paths["gwgrpc"]!.rps)), "calls/s");
    assert.equal(rps.better, "higher");
    near(figs.get("invoke-c64-cpu-per-call-rest")?.baseline?.value, median(c64.map((r) => r.paths["grpcgw"]!.proxy_cpu_us_per_call)), "grpc-gateway CPU per call");
    // The recording has neither the transparent proxy nor nginx: no figures, and nothing to complain about.
    assert.equal([...figs.keys()].some((k) => k.endsWith("-proxy")), false);
  });

  it("the worst repetition's added p99 carries the every-repetition target", () => {
    const ratios = c1.map((r) => (r.paths["gwgrpc"]!.p99_us - r.paths["direct"]!.p99_us) / (r.paths["grpcgw"]!.p99_us - r.paths["direct"]!.p99_us));
    const worst = c1[ratios.indexOf(Math.max(...ratios))]!;
    const f = figs.get("invoke-c1-added-p99-grpc-worst")!;
    near(f.value, worst.paths["gwgrpc"]!.p99_us - worst.paths["direct"]!.p99_us, "worst value");
    near(f.ratio, Math.max(...ratios), "worst ratio");
    assert.match(f.note!, new RegExp(`^repetition ${worst.rep} of 2; ratios per repetition`));
    const judged = byId(applyTargets("peers", figures, "full"));
    assert.deepEqual(judged.get("invoke-c1-added-p99-grpc-worst")?.target, { text: "ratio <= 1 in every repetition", met: false });
    assert.deepEqual(judged.get("invoke-c64-calls-per-s-rest")?.target, { text: "ratio >= 2", met: false });
    assert.equal(judged.get("invoke-c1-added-p99-grpc")?.target, undefined, "the median is shown, the worst repetition judged");
  });

  it("reports the transparent proxy against nginx grpc_pass with its targets (a dry run's records)", () => {
    const dry = invokeFigures(invokeDry);
    assert.deepEqual(dry.problems, []);
    const figs = byId(applyTargets("peers", dry.figures, "quick"));
    const r64 = invokeDry.find((r) => r.conc === 64)!;
    const cpu = figs.get("invoke-c64-cpu-per-call-proxy")!;
    assert.equal(cpu.baseline?.label, "nginx grpc_pass");
    near(cpu.ratio, r64.paths["gwproxy"]!.proxy_cpu_us_per_call / r64.paths["nginx"]!.proxy_cpu_us_per_call, "proxy CPU ratio");
    assert.equal(cpu.target?.text, "ratio <= 1 (at or below nginx)");
    assert.equal(typeof cpu.target?.met, "boolean");
    assert.equal(figs.get("invoke-c1-added-p50-proxy")?.target?.text, "ratio <= 1 (at or below nginx)");
    assert.equal(figs.has("invoke-c1-added-p99-proxy-worst"), false, "the every-repetition p99 target is grpc-gateway's");
  });

  it("a path with failed calls is left out of that repetition and named once", () => {
    const broken = structuredClone(invokeMain1);
    const r = broken.find((x) => x.conc === 64 && x.rep === 1)!;
    r.paths["gwrest"] = { ...r.paths["gwrest"]!, errors: 3, first_error: "rpc error: code = Unavailable" };
    const out = invokeFigures(broken);
    assert.deepEqual(out.problems, ["invoke c=64 gwrest (repetition 1): 3 failed calls, first: rpc error: code = Unavailable"]);
    // grpc-gateway is the baseline of two pairs: its failure is named once and drops that repetition from both.
    const c1 = structuredClone(invokeMain1).map((x) => (x.conc === 1 && x.rep === 0 ? { ...x, paths: { ...x.paths, grpcgw: { ...x.paths["grpcgw"]!, errors: 1 } } } : x));
    const out1 = invokeFigures(c1);
    assert.deepEqual(out1.problems, ["invoke c=1 grpcgw (repetition 0): 1 failed calls"]);
    assert.match(byId(out1.figures).get("invoke-c1-added-p99-rest-worst")!.note!, /^repetition 1 of 1;/);
    const f = byId(out.figures).get("invoke-c64-calls-per-s-rest")!;
    const rep0 = broken.find((x) => x.conc === 64 && x.rep === 0)!;
    near(f.value, rep0.paths["gwrest"]!.rps, "only repetition 0");
    near(f.baseline?.value, rep0.paths["grpcgw"]!.rps, "the baseline from the same repetition only");
    assert.equal(f.note, undefined);
    assert.match(byId(out.figures).get("invoke-c64-calls-per-s-grpc")!.note!, /^median of 2 runs/, "the other paths keep both repetitions");
  });
});

describe("peers suite: runs and availability", () => {
  it("a bad JSON line is named by file and line", () => {
    assert.throws(() => parseJsonLines('{"a":1}\nnot json\n', "fanout.jsonl"), /^Error: fanout\.jsonl line 2 is not JSON/);
    assert.throws(() => parseJsonLines("[1]\n", "invoke.jsonl"), /invoke\.jsonl line 1 is not a JSON object/);
  });

  it("maps the modes onto the runners' arguments", () => {
    const full = peersPlan("full");
    assert.equal(full.reps, 3);
    assert.deepEqual(full.fanout, ["--shapes", "conn,mux100", "--systems", "gateway,nats,gwws,uws", "--subs", "1000,10000"]);
    assert.deepEqual(full.invoke, ["--conc", "1,64", "--paths", "direct,gwgrpc,gwrest,grpcgw,gwproxy,nginx"]);
    assert.deepEqual([peersPlan("quick").reps, peersPlan("quick").fanout.slice(-3), peersPlan("quick").invoke.at(-1)], [1, ["--subs", "1000", "--quick"], "--quick"]);
    assert.deepEqual(peersPlan("dry-run").fanout.slice(-3), ["--subs", "200", "--quick"]);
  });

  const missingEnv = { PEERS_DIR: "/nonexistent/peers", PERF_BUILD: "/nonexistent/build", BACKEND_BIN: "/nonexistent/server", PATH: "/nonexistent/bin" };

  it("names everything missing and how to get it", () => {
    const missing = missingForPeers(peersSetup(repo, missingEnv));
    assert.deepEqual(missing, [
      "the peers harness at /nonexistent/peers (perflib.py, run_fanout.py, run_invoke.py missing; set PEERS_DIR to its directory)",
      "python3 on PATH",
      "its Go load clients /nonexistent/build/bin/fanoutload, /nonexistent/build/bin/invokeload, /nonexistent/build/bin/grpcgwproxy (the harness's ./build.sh; PERF_BUILD names another build directory)",
      "the Go inventory backend /nonexistent/server (the harness's backend/build.sh; or set BACKEND_BIN)",
      "nats-server on PATH (apt-get install nats-server)",
      "nginx at /nonexistent/build/nginx/usr/sbin/nginx (the harness's ./build.sh extracts Debian's nginx there; or set NGINX_BIN)",
    ]);
  });

  it("is 'not available' through the suite runner, without starting anything", async () => {
    const lines: string[] = [];
    const r = await runSuite(peersSuite(repo, missingEnv), "dry-run", createProgress({ write: (s: string) => lines.push(s) }));
    assert.equal(r.status, "not-available");
    assert.match(r.reason!, /^needs the peers harness at \/nonexistent\/peers .*; nats-server on PATH .*; see the Setup section of the harness's README\.md$/);
    assert.deepEqual(r.figures, []);
    assert.deepEqual(lines, [], "no build, no runner");
  });

  it("`npm run bench -- --only peers` reports it not available, says what it needs, and exits 0", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bench-peers-na-"));
    try {
      const md = join(dir, "BENCHMARKS.md");
      await writeFile(md, `# Benchmarks\n\n${BEGIN}\nold\n${END}\n`);
      const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, ["--import", "tsx", "bench/run.ts", "--dry-run", "--only", "peers", "--name", "na", "--out-dir", dir, "--markdown", md], { cwd: repo, timeout: 60_000, env: { ...process.env, ...missingEnv, PATH: process.env["PATH"]! } }, (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
        });
      });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^peers: not-available \(needs the peers harness at \/nonexistent\/peers /m);
      const result = JSON.parse(await readFile(join(dir, "na.json"), "utf8")) as RunResult;
      assert.deepEqual(checkRunResult(result), []);
      assert.deepEqual(result.suites.map((s) => [s.name, s.status]), [["peers", "not-available"]]);
      assert.match(await readFile(md, "utf8"), /### peers: The shared peers harness .*\n\nNot available: needs the peers harness at \/nonexistent\/peers .*the Go inventory backend \/nonexistent\/server/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("the generated markdown says when a suite left runs out", () => {
    const figures = fanoutFigures(fanoutMain1).figures.slice(0, 1);
    const run: RunResult = {
      schemaVersion: 1, name: "x", mode: "full", startedAt: "2026-11-27T00:00:00Z", durationMs: 1, commit: "c",
      machine: { cpuModel: "cpu", cores: 2, node: "v20", platform: "linux-x64", totalMemBytes: 2 ** 30, loadAvgStart: 0, loadAvgEnd: 0, busy: false },
      suites: [{ name: "peers", title: "T", status: "ok", reason: "1 run(s) left out: fan-out gateway conn 10000", durationMs: 1, figures }],
    };
    const md = renderResults(run, "x.json");
    assert.match(md, /### peers: T\n\nIncomplete: 1 run\(s\) left out: fan-out gateway conn 10000\.\n\n\| Figure /);
    assert.match(md, /\| Fan-out 1,000 subscribers, gateway gRPC Subscribe, one connection per subscriber: server CPU per delivery <sub>median of 2 runs.*\| [\d.]+ us \| [\d.]+ us \(nats-server, one connection per subscriber\) \| [\d.]+x \|/);
  });
});
