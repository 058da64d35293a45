/**
 * Keeps `npm run bench` from rotting without timing anything: a dry run (tiny iteration counts) of the in-process
 * and REST suites writes a results file of the documented shape and regenerates a BENCHMARKS.md copy; `--list`
 * loads every suite module. Figures are never asserted against targets here.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parseCodecOutput } from "../../bench/lib/codec-adapter.js";
import { normalizeFigures } from "../../bench/lib/external.js";
import { BEGIN, END } from "../../bench/lib/markdown.js";
import { parseRunOptions } from "../../bench/lib/options.js";
import { checkRunResult, type RunResult } from "../../bench/lib/schema.js";
import { summarize } from "../../bench/lib/stats.js";
import { medianOf, webFigures, type WebMeasured } from "../../bench/webfanout.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

function runBench(args: string[], timeoutMs = 90_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", "bench/run.ts", ...args], { cwd: repo, timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? ((err as { code: number }).code) : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

describe("bench harness (dry run)", () => {
  let dir: string;
  let run: { code: number; stdout: string; stderr: string };
  let result: RunResult;
  let markdown: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "bench-smoke-"));
    await writeFile(join(dir, "BENCHMARKS.md"), `# Benchmarks\n\nHand-written prose stays.\n\n${BEGIN}\nold table\n${END}\n\nTrailing prose stays.\n`);
    run = await runBench(["--dry-run", "--only", "micro,rest", "--name", "smoke", "--out-dir", dir, "--markdown", join(dir, "BENCHMARKS.md")]);
    if (run.code === 0) {
      result = JSON.parse(await readFile(join(dir, "smoke.json"), "utf8")) as RunResult;
      markdown = await readFile(join(dir, "BENCHMARKS.md"), "utf8");
    }
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("exits 0 with a progress line per step on stderr", () => {
    assert.equal(run.code, 0, `bench failed:\n${run.stderr}\n${run.stdout}`);
    for (const step of ["micro: ring buffer push/pump", "micro: encode one SubscribeResponse", "micro: broker fan-out to 10000 subscriber(s)", "rest: uWS: GET", "rest: node:http: POST"]) {
      assert.match(run.stderr, new RegExp(`^\\[bench +[\\d.]+s\\] ${step.replace(/[()]/g, "\\$&")}`, "m"), `no progress line for '${step}'`);
    }
  });

  it("writes bench/results-style JSON of the documented shape, every figure with a same-run baseline and ratio", () => {
    assert.deepEqual(checkRunResult(result), []);
    assert.equal(result.name, "smoke");
    assert.equal(result.mode, "dry-run");
    assert.ok(result.machine.cpuModel.length > 0 && result.machine.cores >= 1 && result.machine.node === process.version);
    assert.deepEqual(result.suites.map((s) => [s.name, s.status]), [["micro", "ok"], ["rest", "ok"]]);
    const ids = result.suites.flatMap((s) => s.figures.map((f) => f.id));
    for (const id of ["ring-push-pump", "encode-subscribe-response", "broker-fanout-1", "broker-fanout-100", "broker-fanout-10000", "rest-get-cpu", "rest-post-rps"]) {
      assert.ok(ids.includes(id), `figure ${id} missing (have ${ids.join(", ")})`);
    }
    for (const f of result.suites.flatMap((s) => s.figures)) {
      assert.ok(f.baseline && f.baseline.value > 0, `${f.id} has no baseline`);
      assert.ok(typeof f.ratio === "number" && f.ratio > 0, `${f.id} has no ratio`);
      assert.ok(f.value > 0, `${f.id} value ${f.value}`);
    }
  });

  it("regenerates only the generated section of BENCHMARKS.md", () => {
    assert.match(markdown, /^# Benchmarks\n\nHand-written prose stays\./);
    assert.match(markdown, /Trailing prose stays\.\n$/);
    assert.ok(!markdown.includes("old table"));
    assert.match(markdown, /\| Ring push \+ pump, burst of 64, per event .*\| [\d.,]+ ns \| [\d.,]+ ns \(Array push\/shift\) \| [\d.]+x \|/);
    assert.match(markdown, /Machine: .+, \d+ cores, .*Node v\d+/);
    assert.equal(markdown.split(BEGIN).length, 2);
  });

  it("writes nothing else into the output directory", async () => {
    assert.deepEqual((await readdir(dir)).sort(), ["BENCHMARKS.md", "smoke.json"]);
  });
});

describe("web fan-out suite (dry run: 20 subscribers per system, real processes and sockets)", () => {
  let dir: string;
  let run: { code: number; stdout: string; stderr: string };
  let result: RunResult;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "bench-smoke-web-"));
    run = await runBench(["--dry-run", "--only", "web-fanout", "--name", "web", "--out-dir", dir, "--markdown", "none"]);
    if (run.code === 0) result = JSON.parse(await readFile(join(dir, "web.json"), "utf8")) as RunResult;
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("measures bare uWS, gateway WebSocket, SSE and gRPC Subscribe, each subscriber getting every event", () => {
    assert.equal(run.code, 0, `bench failed:\n${run.stderr}\n${run.stdout}`);
    assert.deepEqual(checkRunResult(result), []);
    assert.deepEqual(result.suites.map((s) => [s.name, s.status]), [["web-fanout", "ok"]]);
    for (const sys of ["bare uWS native publish", "gateway WebSocket", "gateway SSE", "gateway gRPC Subscribe"]) {
      assert.match(run.stderr, new RegExp(`web-fanout: ${sys}, 20 subscribers: .* 200/200$`, "m"), `${sys} did not deliver 10 events to 20 subscribers`);
    }
    const figs = new Map(result.suites[0]!.figures.map((f) => [f.id, f]));
    for (const sys of ["ws", "sse", "grpc"]) {
      for (const m of ["cpu-per-delivery", "deliveries-per-s", "p50-latency", "p99-latency", "client-cpu-per-delivery", "idle-bytes-per-subscriber"]) {
        const f = figs.get(`${sys}-${m}-20`);
        assert.ok(f, `figure ${sys}-${m}-20 missing (have ${[...figs.keys()].join(", ")})`);
        assert.ok(Number.isFinite(f.value), `${f.id} = ${f.value}`);
      }
      assert.ok(figs.get(`${sys}-deliveries-per-s-20`)!.baseline!.label.startsWith("bare uWS"));
      assert.ok(figs.get(`${sys}-deliveries-per-s-20`)!.value > 0);
    }
    // The targets are attached, and a dry run judges none of them.
    for (const [id, text] of [["ws-cpu-per-delivery-20", "ratio <= 1.3"], ["sse-cpu-per-delivery-20", "ratio <= 2"], ["ws-idle-bytes-per-subscriber-20", "<= 2 KB per idle subscriber"], ["ws-vs-grpc-cpu-per-delivery-20", "ratio <= 0.2 (>= 5x less CPU)"]] as const) {
      assert.deepEqual(figs.get(id)?.target, { text, met: null }, id);
    }
  });
});

describe("invoke suite (dry run: backend, gateway and two load processes over real sockets)", () => {
  let dir: string;
  let run: { code: number; stdout: string; stderr: string };
  let result: RunResult;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "bench-smoke-invoke-"));
    run = await runBench(["--dry-run", "--only", "invoke", "--name", "invoke", "--out-dir", dir, "--markdown", "none"]);
    if (run.code === 0) result = JSON.parse(await readFile(join(dir, "invoke.json"), "utf8")) as RunResult;
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("drives every path from the load processes without errors and reports client CPU per call beside the gateway's", () => {
    assert.equal(run.code, 0, `bench failed:\n${run.stderr}\n${run.stdout}`);
    assert.deepEqual(checkRunResult(result), []);
    assert.deepEqual(result.suites.map((s) => [s.name, s.status]), [["invoke", "ok"]]);
    assert.match(run.stderr, /invoke 1KB c=64: direct, 2 load processes/);
    const figs = new Map(result.suites[0]!.figures.map((f) => [f.id, f]));
    for (const size of ["1KB", "64KB"]) {
      for (const c of [1, 64]) {
        assert.ok(figs.get(`throughput-${size}-c${c}`)!.value > 0, `throughput-${size}-c${c}`);
        for (const path of ["direct", "grpc", "rest"]) {
          const f = figs.get(`client-cpu-${path}-${size}-c${c}`);
          assert.ok(f, `figure client-cpu-${path}-${size}-c${c} missing (have ${[...figs.keys()].join(", ")})`);
          assert.ok(Number.isFinite(f.value) && f.value > 0, `${f.id} = ${f.value}`);
          // At concurrency 64 the gateway's own CPU per call (read from /proc) is the baseline of the gateway paths.
          if (c === 64 && path !== "direct" && process.platform === "linux") assert.equal(f.baseline?.label, "gateway CPU per call", f.id);
        }
      }
    }
  });
});

describe("bench harness wiring", () => {
  it("--list loads every suite (an external suite that has not landed is 'not available', not a crash)", async () => {
    const r = await runBench(["--list"]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n").map((l) => l.split("\t"));
    assert.deepEqual(lines.map((l) => l[0]), ["micro", "rest", "codec", "invoke", "fanout", "web-fanout", "peers"]);
    for (const [name, state] of lines) assert.match(state!, /^(built in|script|loaded|harness|not available: (bench\/\w+\.ts has not landed|needs ))/, `${name}: ${state}`);
  });

  it("rejects bad arguments naming them, and runs nothing", async () => {
    const r = await runBench(["--only", "nope"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--only: unknown suite 'nope' \(suites: micro, rest, codec, invoke, fanout, web-fanout, peers\)/);
    assert.throws(() => parseRunOptions(["--name", "../x"], []), /--name '..\/x' is not a valid results name/);
    assert.throws(() => parseRunOptions(["--bogus"], []), /unknown argument '--bogus'/);
    assert.equal(parseRunOptions(["--quick"], []).mode, "quick");
    assert.equal(parseRunOptions(["--quick", "--dry-run"], []).mode, "dry-run");
  });

  it("reads bench/codec.ts output into figures and judges the default threshold against the crossover", () => {
    const figures = parseCodecOutput(
      [
        "## Conformance",
        "- @bufbuild/protobuf: 30/30",
        "| JSON size | binary size | direction | @bufbuild us | protobufjs us | ratio |",
        "|---|---|---|---|---|---|",
        "| 1024 | 600 | JSON->binary | 10.0 | 25.0 | 2.50 |",
        "",
        "| direction | payload B | inline latency us | pool latency us | inline main us | pool main us | pool main / inline |",
        "|---|---|---|---|---|---|---|",
        "| json->binary | 16384 | 100 | 300 | 100 | 40 | 0.40 |",
        "- json->binary: pool cheaper for the main thread from 16384 B",
        "- binary->json: pool cheaper for the main thread from 4096 B",
        "| message | JSON B | binary B | direction | library CPU us | fast path CPU us | library / fast | of which JSON.parse us | ratio without it |",
        "|---|---|---|---|---|---|---|---|---|",
        "| order ~1024 B | 1170 | 397 | binary->JSON | 20.0 | 8.00 | 2.50 |  |  |",
      ].join("\n"),
    );
    const byId = new Map(figures.map((f) => [f.id, f]));
    assert.equal(byId.get("conformance-bufbuild-protobuf")?.ratio, 1);
    assert.deepEqual([byId.get("library-json-binary-1024")?.value, byId.get("library-json-binary-1024")?.ratio], [10, 0.4]);
    assert.equal(byId.get("pool-main-json-binary-16384")?.ratio, 0.4);
    assert.deepEqual([byId.get("fast-path-binary-json-order-1024-b")?.value, byId.get("fast-path-binary-json-order-1024-b")?.ratio], [8, 0.4]);
    const t = byId.get("threshold-default")!;
    assert.equal(t.baseline?.value, 16384, "the crossover is the size from which the pool pays in both directions");
    assert.equal(typeof t.target?.met, "boolean");
  });

  it("normalizes another suite's return value into figures without losing numbers", () => {
    const figs = normalizeFigures({ results: [{ id: "a", label: "A", value: 2, unit: "us", baseline: { label: "raw", value: 4 } }, { name: "b", cpu: 3 }] });
    assert.deepEqual(figs.map((f) => [f.id, f.value, f.ratio]), [["a", 2, 0.5], ["1.b.cpu", 3, undefined]]);
  });

  it("web fan-out: per-field medians of repetitions, figures as ratios to bare uWS and WebSocket vs gRPC Subscribe", () => {
    const run = (system: WebMeasured["system"], cpu: number, rss: number): WebMeasured => ({ system, subs: 1000, serverCpuUsPerDelivery: cpu, clientCpuUsPerDelivery: 5, deliveriesPerSec: 1e5, p50Us: 10, p99Us: 20, idleBytesPerSubscriber: rss, delivered: 100, expected: 100, msgBytes: 300 });
    const uws = medianOf([run("uws", 6, 700), run("uws", 5, 800), run("uws", 9, 900)]);
    assert.deepEqual([uws.serverCpuUsPerDelivery, uws.idleBytesPerSubscriber, uws.delivered, uws.cpuRange], [6, 800, 300, [5, 9]]);
    const figs = webFigures(1000, { uws, ws: medianOf([run("ws", 7.2, 1500)]), grpc: medianOf([run("grpc", 36, 40000)]) }, "x") as Array<{ id: string; value: number; baseline?: { value: number } }>;
    const byId = new Map(figs.map((f) => [f.id, f]));
    assert.deepEqual([byId.get("ws-cpu-per-delivery-1000")?.value, byId.get("ws-cpu-per-delivery-1000")?.baseline?.value], [7.2, 6]);
    assert.deepEqual([byId.get("ws-vs-grpc-cpu-per-delivery-1000")?.value, byId.get("ws-vs-grpc-cpu-per-delivery-1000")?.baseline?.value], [7.2, 36]);
    assert.equal(byId.has("sse-cpu-per-delivery-1000"), false, "no SSE figures when SSE was not measured");
  });

  it("stats use nearest-rank percentiles", () => {
    const s = summarize([5, 1, 4, 2, 3, 6, 7, 8, 9, 10]);
    assert.deepEqual([s.p50, s.p99, s.min, s.max, s.mean, s.n], [5, 10, 1, 10, 5.5, 10]);
  });

  it("checkRunResult names what is wrong", () => {
    assert.deepEqual(checkRunResult({}).slice(0, 2), ["schemaVersion must be 1", "name must be a string"]);
    const bad = { schemaVersion: 1, name: "x", mode: "quick", startedAt: "t", commit: "c", durationMs: 1, machine: { cpuModel: "c", cores: 2, node: "v20" }, suites: [{ name: "s", status: "ok", figures: [{ id: "f", label: "F", unit: "us", value: 1, better: "lower", baseline: { label: "b", value: 2 } }] }] };
    assert.deepEqual(checkRunResult(bad), ["suites[0].figures[0].ratio must be a finite number when there is a baseline"]);
  });
});
