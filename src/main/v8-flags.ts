import { setFlagsFromString } from "node:v8";

/**
 * V8's interrupt budget for the gateway process: how much bytecode a function runs before V8 considers optimizing it,
 * 1/8 of V8's default (67,584). Each uWS worker thread is an isolate that warms its JIT on its own share of the calls,
 * so with V8's budget every thread ran the REST invoke path unoptimized for twice as many of the process's calls as one
 * thread did, and a short load spent much of its CPU warming up. With this budget the hot path is optimized after a
 * few hundred calls per thread; measured, it costs less CPU per call warm or not, with 1 thread or 2 (docs/threads.md,
 * "What a thread costs").
 */
export const INTERRUPT_BUDGET = 8448;

/** The V8 flags the CLI sets for its process, less any that node was started with (`node --interrupt-budget=...` wins). */
export function cliV8Flags(execArgv: readonly string[]): string[] {
  return execArgv.some((a) => /^--interrupt[-_]budget(=|$)/.test(a)) ? [] : [`--interrupt-budget=${INTERRUPT_BUDGET}`];
}

/**
 * Set the CLI's V8 flags (cliV8Flags) for this process, before the gateway starts: V8 flags are per process, so the
 * worker threads' isolates get them too. Only the CLI does this; an application embedding the gateway owns its
 * process's flags. Returns the flags set.
 */
export function tuneV8(execArgv: readonly string[] = process.execArgv): string[] {
  const flags = cliV8Flags(execArgv);
  for (const f of flags) setFlagsFromString(f);
  return flags;
}
