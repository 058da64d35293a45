import { fork, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

/** One load run's settings. */
export interface LoadOptions {
  port: number;
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Requests in flight at once (one keep-alive connection each), split over the load processes. */
  concurrency: number;
  /** Stop after this many ms... */
  durationMs: number;
  /** ...or this many requests, whichever comes first. */
  maxRequests: number;
  /** Warm-up (JIT, connections) before the measured run, not measured: this many ms or requests. */
  warmupMs: number;
  warmupMax: number;
  /** Status every response must have. */
  expectStatus: number;
  /** Load-generator processes (default 1; at most `concurrency`). */
  procs?: number;
}

/** What one load run observed. */
export interface LoadResult {
  requests: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  /** Per-request latency, microseconds (load processes one after the other, each in completion order). */
  latenciesUs: Float64Array;
  /** CPU (user + system) the load processes used during the measured run, us, summed; NaN without /proc. */
  clientCpuUs: number;
  procs: number;
}

interface ChildResult {
  requests: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  latenciesUs: Float64Array;
  /** The child's own CPU over the measured run (process.cpuUsage, microseconds). */
  cpuUs: number;
}

type ChildMessage = { type: "ready" } | ({ type: "result" } & ChildResult) | { type: "failed"; message: string };

const CHILD = fileURLToPath(new URL("./autocannon-load.cjs", import.meta.url));

/** The next message of `child` of type `type`; rejects on a "failed" message, an early exit or after `ms`. */
function next<T extends ChildMessage["type"]>(child: ChildProcess, type: T, ms: number, what: string): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
    };
    const onMessage = (m: ChildMessage): void => {
      if (m.type === type) {
        done();
        resolve(m as Extract<ChildMessage, { type: T }>);
      } else if (m.type === "failed") {
        done();
        reject(new Error(`REST load generator: ${what} failed: ${m.message}`));
      }
    };
    const onExit = (code: number | null): void => {
      done();
      reject(new Error(`REST load generator exited with code ${code} during ${what}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`REST load generator: ${what} did not finish within ${ms} ms`));
    }, ms);
    child.on("message", onMessage);
    child.on("exit", onExit);
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  if (child.connected) child.disconnect();
  const t = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(t);
}

/**
 * A closed-loop load run with autocannon (`concurrency` keep-alive connections, each sending its next request when
 * the previous one completed), bounded by time and request count, in `procs` child processes
 * (bench/rest/autocannon-load.cjs) beside the server, so the generator is not the bottleneck it measures and its CPU
 * per request can be reported. `onReady` runs after every process finished its warm-up and before the measured run
 * starts (the caller reads the server's CPU there). Any transport error, timeout or unexpected status counts as an
 * error; the first one is kept for the message.
 */
export async function runLoad(o: LoadOptions, onReady?: () => Promise<void>): Promise<LoadResult> {
  const procs = Math.max(1, Math.min(o.procs ?? 1, o.concurrency));
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < procs; i++) {
      children.push(fork(CHILD, [], { stdio: ["ignore", "inherit", "inherit", "ipc"], serialization: "advanced", execArgv: [] }));
    }
    const share = (total: number, i: number): number => Math.floor(total / procs) + (i < total % procs ? 1 : 0);
    const ready = children.map((c) => next(c, "ready", 60_000, "start and warm-up"));
    children.forEach((c, i) =>
      c.send({
        type: "config",
        url: `http://127.0.0.1:${o.port}${o.path}`,
        method: o.method,
        headers: o.headers,
        body: o.body,
        connections: share(o.concurrency, i),
        durationMs: o.durationMs,
        maxRequests: Math.max(1, share(o.maxRequests, i)),
        warmupMs: o.warmupMs,
        warmupMax: Math.max(1, share(o.warmupMax, i)),
        expectStatus: o.expectStatus,
      }),
    );
    await Promise.all(ready);
    await onReady?.();
    const results = children.map((c) => next(c, "result", o.durationMs + 60_000, "the measured run"));
    for (const c of children) c.send({ type: "go" });
    const rs = await Promise.all(results);
    const total = rs.reduce((a, r) => a + r.latenciesUs.length, 0);
    const latenciesUs = new Float64Array(total);
    let at = 0;
    for (const r of rs) {
      latenciesUs.set(r.latenciesUs, at);
      at += r.latenciesUs.length;
    }
    const firstError = rs.find((r) => r.firstError)?.firstError;
    return {
      requests: rs.reduce((a, r) => a + r.requests, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      ...(firstError ? { firstError } : {}),
      elapsedMs: Math.max(...rs.map((r) => r.elapsedMs)),
      latenciesUs,
      clientCpuUs: rs.reduce((a, r) => a + r.cpuUs, 0),
      procs,
    };
  } finally {
    await Promise.all(children.map(stopChild));
  }
}
