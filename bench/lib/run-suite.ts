import type { Progress } from "./progress.js";
import type { RunMode, SuiteResult } from "./schema.js";
import { NotAvailable, type Suite } from "./suite.js";

/** How long past its budget a suite may take to wind down after its signal aborted, before the harness gives up. */
export const GRACE_MS = 30_000;

/** Period of the "still running" line while a suite runs. */
export const HEARTBEAT_MS = 20_000;

/**
 * Run one suite within its budget: abort its signal when the budget passes, give up GRACE_MS later. A NotAvailable
 * becomes status "not-available"; any other error, or giving up, becomes "failed" with the message. Never throws.
 */
export async function runSuite(suite: Suite, mode: RunMode, progress: Progress): Promise<SuiteResult> {
  const ac = new AbortController();
  const budget = suite.budgetMs[mode];
  const t0 = performance.now();
  const timers: NodeJS.Timeout[] = [];
  const base = { name: suite.name, title: suite.title };
  try {
    const giveUp = new Promise<never>((_, reject) => {
      timers.push(
        setTimeout(() => {
          progress.step(suite.name, `over its ${Math.round(budget / 1000)} s budget: asking it to stop`);
          ac.abort(new Error("time budget exceeded"));
        }, budget),
        setTimeout(() => reject(new Error(`gave up: still running ${Math.round((budget + GRACE_MS) / 1000)} s after start`)), budget + GRACE_MS),
      );
    });
    // A suite that prints no steps of its own (e.g. one long load phase) still shows it is alive.
    const heartbeat = setInterval(() => progress.step(suite.name, `still running (${Math.round((performance.now() - t0) / 1000)} s)`), HEARTBEAT_MS);
    heartbeat.unref();
    timers.push(heartbeat);
    const out = await Promise.race([suite.run({ mode, progress, signal: ac.signal }), giveUp]);
    const durationMs = Math.round(performance.now() - t0);
    if (Array.isArray(out)) return { ...base, status: "ok", durationMs, figures: out };
    const r: SuiteResult = { ...base, status: out.status ?? "ok", durationMs, figures: out.figures };
    if (out.reason) r.reason = out.reason;
    if (out.raw !== undefined) r.raw = out.raw;
    if (ac.signal.aborted && r.status === "ok") r.reason = `stopped early at its ${Math.round(budget / 1000)} s budget: some figures may be missing`;
    return r;
  } catch (e) {
    const durationMs = Math.round(performance.now() - t0);
    if (e instanceof NotAvailable || (e as Error)?.name === "NotAvailable") return { ...base, status: "not-available", reason: (e as Error).message, durationMs, figures: [] };
    return { ...base, status: "failed", reason: (e as Error)?.message ?? String(e), durationMs, figures: [] };
  } finally {
    for (const t of timers) clearTimeout(t); // clearTimeout also clears intervals
  }
}
