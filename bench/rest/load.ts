import { Agent, request } from "node:http";

/** One load run's settings. */
export interface LoadOptions {
  port: number;
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Requests in flight at once (one keep-alive connection each). */
  concurrency: number;
  /** Stop after this many ms... */
  durationMs: number;
  /** ...or this many requests, whichever comes first. */
  maxRequests: number;
  /** Status every response must have. */
  expectStatus: number;
}

/** What one load run observed. */
export interface LoadResult {
  requests: number;
  errors: number;
  elapsedMs: number;
  /** Per-request latency, microseconds, in completion order. */
  latenciesUs: Float64Array;
}

/**
 * A small closed-loop load generator in plain Node (autocannon-style: `concurrency` keep-alive connections, each
 * sending its next request when the previous one completed), bounded by time and request count. Any transport error
 * or unexpected status counts as an error; the first one is kept for the message.
 */
export async function runLoad(o: LoadOptions): Promise<LoadResult & { firstError?: string }> {
  const agent = new Agent({ keepAlive: true, maxSockets: o.concurrency });
  const lat = new Float64Array(o.maxRequests);
  let issued = 0;
  let done = 0;
  let errors = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const deadline = t0 + o.durationMs;
  const headers = { ...o.headers, ...(o.body ? { "content-length": String(o.body.length) } : {}) };
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const start = performance.now();
      const req = request({ host: "127.0.0.1", port: o.port, method: o.method, path: o.path, headers, agent }, (res) => {
        res.on("data", () => undefined);
        res.on("end", () => {
          if (res.statusCode !== o.expectStatus) {
            errors++;
            firstError ??= `status ${res.statusCode} (expected ${o.expectStatus})`;
          }
          lat[done++] = (performance.now() - start) * 1000;
          resolve();
        });
      });
      req.on("error", (e) => {
        errors++;
        firstError ??= e.message;
        lat[done++] = (performance.now() - start) * 1000;
        resolve();
      });
      req.end(o.body);
    });
  const worker = async (): Promise<void> => {
    while (issued < o.maxRequests && performance.now() < deadline) {
      issued++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  const elapsedMs = performance.now() - t0;
  agent.destroy();
  return { requests: done, errors, elapsedMs, latenciesUs: lat.subarray(0, done), ...(firstError ? { firstError } : {}) };
}
