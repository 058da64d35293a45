/** Progress lines on stderr ("[bench  12.3s] micro: ring push/pump"), so stdout stays free for the summary. */
export interface Progress {
  /** One line for one step. */
  step(suite: string, message: string): void;
  /** Seconds since the run started. */
  elapsed(): number;
}

/** Create a progress reporter writing to `out` (default process.stderr). */
export function createProgress(out: { write(s: string): unknown } = process.stderr): Progress {
  const t0 = performance.now();
  const elapsed = (): number => (performance.now() - t0) / 1000;
  return {
    step(suite, message) {
      out.write(`[bench ${elapsed().toFixed(1).padStart(6)}s] ${suite}: ${message}\n`);
    },
    elapsed,
  };
}
