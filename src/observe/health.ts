import { within } from "../shared/timers.js";

/** One health check entry. */
export interface HealthEntry {
  status: "Healthy" | "Degraded" | "Unhealthy";
  description: string;
}

/** The `/health` body (docs/operations.md "Health"). */
export interface HealthReport {
  status: HealthEntry["status"];
  /** Time the checks took, as a .NET-style time span `hh:mm:ss.fffffff`. */
  totalDuration: string;
  entries: Record<string, HealthEntry>;
}

/** Format milliseconds as `hh:mm:ss.fffffff` (7 fractional digits, 100 ns ticks). */
export function formatTimeSpan(ms: number): string {
  const ticks = Math.max(0, Math.round(ms * 10_000));
  const totalSeconds = Math.floor(ticks / 10_000_000);
  const frac = ticks % 10_000_000;
  const h = Math.floor(totalSeconds / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const s = totalSeconds % 60;
  const p2 = (n: number) => String(n).padStart(2, "0");
  return `${p2(h)}:${p2(m)}:${p2(s)}.${String(frac).padStart(7, "0")}`;
}

const rank = { Healthy: 0, Degraded: 1, Unhealthy: 2 } as const;

/**
 * Run every check (each bounded by `timeoutMs`; a check that throws or times out is Unhealthy) and combine them:
 * the report's status is the worst entry's.
 */
export async function runHealthChecks(
  checks: Array<() => Promise<Record<string, HealthEntry>>>,
  timeoutMs = 2000,
): Promise<HealthReport> {
  const started = performance.now();
  const entries: Record<string, HealthEntry> = {};
  await Promise.all(
    checks.map(async (check) => {
      try {
        Object.assign(entries, await within(check(), timeoutMs, () => new Error(`health check timed out after ${timeoutMs} ms`)));
      } catch (e) {
        entries[`check-${Object.keys(entries).length}`] = { status: "Unhealthy", description: (e as Error).message };
      }
    }),
  );
  let status: HealthEntry["status"] = "Healthy";
  for (const e of Object.values(entries)) if (rank[e.status] > rank[status]) status = e.status;
  return { status, totalDuration: formatTimeSpan(performance.now() - started), entries };
}
