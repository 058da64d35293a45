/**
 * Where the worker entry is and how to start it, whether the gateway runs from compiled JavaScript (dist/) or from
 * the TypeScript sources through tsx.
 */
import { fileURLToPath } from "node:url";

/** The worker file and the execArgv its threads need. */
export interface WorkerEntry {
  readonly filename: string;
  /** undefined: inherit the process's execArgv (compiled JS needs nothing more). */
  readonly execArgv: string[] | undefined;
}

/** Resolve the worker next to this module: worker.js in dist/, worker.ts (loaded through tsx) in the sources. */
export function workerEntry(): WorkerEntry {
  const here = import.meta.url;
  if (!here.endsWith(".ts")) return { filename: fileURLToPath(new URL("./worker.js", here)), execArgv: undefined };
  let tsx = "tsx";
  try {
    // Absolute, so the worker finds tsx whatever the current directory is.
    tsx = import.meta.resolve("tsx");
  } catch {
    // keep the bare specifier
  }
  return { filename: fileURLToPath(new URL("./worker.ts", here)), execArgv: ["--import", tsx] };
}
