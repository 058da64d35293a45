import { Bench } from "tinybench";
import type { RunMode } from "./schema.js";

/** Per-operation timing of one tinybench task, in nanoseconds. */
export interface OpTiming {
  /** Mean ns per call. */
  meanNs: number;
  p50Ns: number;
  p99Ns: number;
  /** Calls measured. */
  samples: number;
}

const TIME_MS: Record<RunMode, number> = { full: 1500, quick: 250, "dry-run": 1 };
const ITERATIONS: Record<RunMode, number> = { full: 200, quick: 50, "dry-run": 2 };

/**
 * Time each task with tinybench (warm-up on except in dry-run) and return ns/op per task name. Tasks run one after
 * the other, never concurrently, so they do not compete for the CPU. A task that throws fails the whole call.
 */
export async function timeTasks(mode: RunMode, tasks: Record<string, () => unknown>): Promise<Record<string, OpTiming>> {
  const bench = new Bench({ time: TIME_MS[mode], iterations: ITERATIONS[mode], warmup: mode !== "dry-run", throws: true });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  await bench.run();
  const out: Record<string, OpTiming> = {};
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== "completed" && r.state !== "aborted-with-statistics") {
      throw new Error(`benchmark task '${task.name}' did not complete (${r.state})`);
    }
    out[task.name] = { meanNs: r.latency.mean * 1e6, p50Ns: r.latency.p50 * 1e6, p99Ns: r.latency.p99 * 1e6, samples: r.latency.df + 1 };
  }
  return out;
}
