import { execFileSync } from "node:child_process";
import os from "node:os";
import type { MachineInfo } from "./schema.js";

/** What the machine looks like now; call `finishMachineInfo` at the end of the run for the closing load. */
export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : cpus.length;
  const load = os.loadavg()[0]!;
  return {
    cpuModel: (cpus[0]?.model ?? "unknown").trim() || "unknown",
    cores,
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    totalMemBytes: os.totalmem(),
    loadAvgStart: Number(load.toFixed(2)),
    loadAvgEnd: Number(load.toFixed(2)),
    busy: load > cores,
  };
}

/** Record the load at the end of the run. */
export function finishMachineInfo(m: MachineInfo): MachineInfo {
  const load = os.loadavg()[0]!;
  return { ...m, loadAvgEnd: Number(load.toFixed(2)), busy: m.busy || load > m.cores };
}

/** The current commit, "-dirty" when tracked files changed; "unknown" outside git. */
export function gitCommit(cwd: string): string {
  try {
    const sha = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    return dirty ? `${sha}-dirty` : sha;
  } catch {
    return "unknown";
  }
}
