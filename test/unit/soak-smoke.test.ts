/**
 * Keeps the soak's leak-check options from rotting without timing anything: a 6-second soak with `--heap-snapshots`
 * (real gateway and backend child processes, real gRPC traffic) reports the live heap after a forced GC beside RSS and
 * heapTotal, writes both snapshots, and `bench/heap-diff.ts` reads them. Figures are never asserted against targets.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));

function run(script: string, args: string[], timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", script, ...args], { cwd: repo, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

interface SoakResult {
  samples: number;
  rssStartMiB: number;
  heapTotalStartMiB: number;
  heapUsedAfterGcStartMiB?: number;
  heapUsedAfterGcEndMiB?: number;
  heapUsedAfterGcSeriesMiB?: Array<[number, number]>;
  heapSnapshots?: string[];
  outcomes: Record<string, number>;
}

describe("bench/soak.ts --heap-snapshots (6-second run) and bench/heap-diff.ts", () => {
  let dir: string;
  let soak: { code: number; stdout: string; stderr: string };
  let result: SoakResult;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "soak-smoke-"));
    soak = await run("bench/soak.ts", ["0.1", "--heap-snapshots", dir, "--json-out", join(dir, "soak.json")], 120_000);
    if (soak.code === 0) result = JSON.parse(await readFile(join(dir, "soak.json"), "utf8")) as SoakResult;
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("samples heapUsed after a forced GC beside RSS and heapTotal, while the workload runs", () => {
    assert.equal(soak.code, 0, `soak failed:\n${soak.stderr}`);
    // At least a start, a middle and an end sample: each sample forces a GC in the gateway, which on a loaded machine
    // can take long enough that the 6 s run fits fewer than its nominal 12.
    assert.ok(result.samples >= 3, `only ${result.samples} samples`);
    assert.equal(result.heapUsedAfterGcSeriesMiB?.length, result.samples);
    // Live heap after gc is a real, smaller figure than the heap reservation and RSS.
    assert.ok(result.heapUsedAfterGcStartMiB! > 1 && result.heapUsedAfterGcStartMiB! < result.heapTotalStartMiB, JSON.stringify(result));
    assert.ok(result.heapTotalStartMiB < result.rssStartMiB);
    for (const what of ["publish:OK", "save:OK", "invoke:OK"]) assert.ok((result.outcomes[what] ?? 0) > 0, `no ${what}: ${JSON.stringify(result.outcomes)}`);
  });

  it("writes the warm-up and end snapshots, and heap-diff compares them by constructor", async () => {
    assert.deepEqual(result.heapSnapshots, [join(dir, "warm.heapsnapshot"), join(dir, "end.heapsnapshot")]);
    assert.deepEqual((await readdir(dir)).sort(), ["end.heapsnapshot", "soak.json", "warm.heapsnapshot"]);
    const diff = await run("bench/heap-diff.ts", [join(dir, "warm.heapsnapshot"), join(dir, "end.heapsnapshot"), "5"], 60_000);
    assert.equal(diff.code, 0, diff.stderr);
    assert.match(diff.stdout, /^total self size: [\d.]+ MiB -> [\d.]+ MiB$/m);
    assert.match(diff.stdout, /constructor.*countA.*countB.*dCount.*dKiB/);
    // Five rows: the row index, a constructor (type:name), two counts.
    assert.match(diff.stdout, /│ 4 +│ '[^']+' +│ \d+ +│ \d+ +│/);
  });
});
