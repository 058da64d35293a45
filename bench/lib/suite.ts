import type { Progress } from "./progress.js";
import type { Figure, RunMode } from "./schema.js";

/** What the harness hands every suite. */
export interface SuiteContext {
  mode: RunMode;
  progress: Progress;
  /** Aborted when the suite passes its time budget: stop early and report what was measured. */
  signal: AbortSignal;
}

/** One suite of the harness. */
export interface Suite {
  /** Short name, used by --only. */
  name: string;
  /** One line for the table. */
  title: string;
  /** Time budget per mode, ms; the harness aborts `signal` when it passes and gives up 30 s later. */
  budgetMs: Record<RunMode, number>;
  /**
   * Run and return figures. Throw `NotAvailable` when the suite cannot run here (e.g. its module has not landed),
   * `raw` may be attached by returning `{figures, raw}`.
   */
  run(ctx: SuiteContext): Promise<Figure[] | { figures: Figure[]; raw?: unknown; status?: "ok" | "skipped"; reason?: string }>;
}

/** Thrown by a suite that cannot run in this checkout (reported as "not available", not as a failure). */
export class NotAvailable extends Error {
  override readonly name = "NotAvailable";
}

/** Scale a count by mode: full as given, quick a fifth, dry-run tiny. */
export function scaled(mode: RunMode, full: number, quick = Math.max(1, Math.round(full / 5)), dry = Math.max(1, Math.round(full / 1000))): number {
  return mode === "full" ? full : mode === "quick" ? quick : dry;
}
