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

/**
 * How much bytecode TurboFan inlines into one optimized function: a callee of at most 115 bytes (V8's default 460),
 * and 230 in all (920). Smaller graphs compile faster, and on two cores the compiler threads take the CPU the calls
 * need while the process warms up: measured, the first thousands of calls' p99 fell by about a third and warm calls
 * cost the same (docs/threads.md, "What a thread costs").
 */
export const MAX_INLINED_BYTECODE = 115;
export const MAX_INLINED_BYTECODE_CUMULATIVE = 230;

/** The flags the CLI sets, by name. */
const CLI_FLAGS: ReadonlyArray<readonly [name: string, value: number]> = [
  ["interrupt-budget", INTERRUPT_BUDGET],
  ["max-inlined-bytecode-size", MAX_INLINED_BYTECODE],
  ["max-inlined-bytecode-size-cumulative", MAX_INLINED_BYTECODE_CUMULATIVE],
];

/** Whether node was started with the flag `name` (V8 reads `-` and `_` alike). */
function given(execArgv: readonly string[], name: string): boolean {
  const spelled = new Set([name, name.replaceAll("-", "_")]);
  return execArgv.some((a) => spelled.has(a.replace(/^--/, "").split("=")[0]!));
}

/** The V8 flags the CLI sets for its process, less any that node was started with (`node --interrupt-budget=...` wins). */
export function cliV8Flags(execArgv: readonly string[]): string[] {
  return CLI_FLAGS.filter(([name]) => !given(execArgv, name)).map(([name, value]) => `--${name}=${value}`);
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
