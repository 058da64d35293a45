import { readFileSync } from "node:fs";

/** Linux USER_HZ: the unit of utime/stime in /proc/<pid>/stat. */
const CLK_TCK = 100;

/** CPU time (user + system) a process has used so far, us, from /proc/<pid>/stat; NaN when it cannot be read. */
export function cpuUs(pid: number | undefined): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces: fields after it start past the last ')'.
    const parts = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return ((Number(parts[11]) + Number(parts[12])) * 1e6) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** Resident set size of a process, bytes, from /proc/<pid>/status (0 when it cannot be read). */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return Number(m?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}
