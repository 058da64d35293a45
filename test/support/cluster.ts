import assert from "node:assert/strict";
import { startGatewayProcess, type GatewayProcess } from "./cli.js";
import { startTestRedis, type TestRedisServer } from "./redis-server.js";

/** The API key every replica of a test cluster accepts. */
export const CLUSTER_KEY = "cluster-test-key";

/** One gateway process of a cluster. */
export interface Replica {
  /** "A", "B", "C", ... (stable across restarts of that slot). */
  name: string;
  /** The running process; replaced by Cluster.restartReplica(). */
  proc: GatewayProcess;
  /** e.g. "http://127.0.0.1:40123" */
  http: string;
  /** e.g. "127.0.0.1:40124" */
  grpc: string;
}

/** One redis-server and N gateway processes on it (`--sidecar redis`), all real child processes. */
export interface Cluster {
  redis: TestRedisServer;
  replicas: Replica[];
  /** SIGKILL replica `i` (mid-stream, as a crash would); resolves once it exited. */
  kill(i: number): Promise<void>;
  /** Start slot `i` again (new ephemeral ports; after kill() or a graceful stop). */
  restartReplica(i: number): Promise<Replica>;
  /** Run a long step with progress lines on stderr; on failure print the last log lines of every process, rethrow. */
  step<T>(what: string, fn: () => Promise<T>): Promise<T>;
  /** Stop every gateway (SIGTERM, then SIGKILL past the bound) and the redis-server, remove its data; idempotent. */
  close(): Promise<void>;
}

export interface ClusterOptions {
  /** Number of gateway processes (default 3). */
  replicas?: number;
  /** CLI arguments every replica gets after the runtime's. */
  gatewayArgs?: string[];
  /** Per-replica extra arguments, by index. */
  replicaArgs?: string[][];
  /** The runtime's arguments; default `--sidecar redis --redis-url <the cluster's redis>` (`[]`: embedded). */
  runtimeArgs?: (redisUrl: string) => string[];
}

/** Bound on one gateway process's start: three tsx compiles at once on a shared 2-core machine take a while. */
const GATEWAY_START_MS = 90_000;
/** Bound on a graceful stop of one gateway before it is killed. */
const GATEWAY_STOP_MS = 15_000;

/** Every child a cluster started, so an abrupt end of the test process still kills them (see below). */
const children = new Set<GatewayProcess>();
process.once("exit", () => {
  // Synchronous last resort (a runner timeout or an uncaught error skipped close()): no orphan keeps a port or
  // writes into a removed directory after the test file's process is gone.
  for (const g of children) if (g.proc.exitCode === null) g.proc.kill("SIGKILL");
});

/** Print one progress line for a long cluster step (the runner shows stderr of a test file as it runs). */
export function progress(msg: string): void {
  process.stderr.write(`[cluster ${new Date().toISOString().slice(11, 23)}] ${msg}\n`);
}

/** Start a redis-server and `replicas` gateways with `--sidecar redis --redis-url`; every child is stopped on failure. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const n = opts.replicas ?? 3;
  const redis = await startTestRedis();
  const replicas: Replica[] = [];
  const names = Array.from({ length: n }, (_, i) => String.fromCharCode(65 + i));

  const launch = async (i: number): Promise<Replica> => {
    const args = [
      ...(opts.runtimeArgs ?? ((url: string) => ["--sidecar", "redis", "--redis-url", url]))(redis.url), "--api-key", CLUSTER_KEY,
      "--threads", "1", "--conversion-workers", "1", "--log-level", "info",
      ...(opts.gatewayArgs ?? []), ...(opts.replicaArgs?.[i] ?? []),
    ];
    const proc = await startGatewayProcess(args, {}, GATEWAY_START_MS);
    children.add(proc);
    const r = { name: names[i]!, proc, http: `http://127.0.0.1:${proc.httpPort}`, grpc: `127.0.0.1:${proc.grpcPort}` };
    // "gateway listening" comes before the runtime's connection is up (calls made then fail UNAVAILABLE, in-band);
    // a load balancer sends traffic once /health says so, and so does the harness.
    await waitHealthy(r, GATEWAY_START_MS);
    return r;
  };

  const stopAll = async (): Promise<void> => {
    await Promise.all(
      replicas.map(async (r) => {
        // A replica killed earlier has exited already (GatewayProcess.stop() would wait for an exit that came).
        if (r.proc.proc.exitCode !== null || r.proc.proc.signalCode !== null) return void children.delete(r.proc);
        const timer = setTimeout(() => r.proc.proc.kill("SIGKILL"), GATEWAY_STOP_MS);
        await r.proc.stop("SIGTERM");
        clearTimeout(timer);
        children.delete(r.proc);
      }),
    );
    await redis.close();
  };

  const logTail = (): string =>
    replicas
      .map((r) => `--- replica ${r.name} (${r.http}, gRPC ${r.grpc}) last log lines:\n${[...r.proc.stdout.slice(-25), ...r.proc.stderr.slice(-10)].join("\n")}`)
      .join("\n");

  try {
    progress(`redis-server on ${redis.url}; starting ${n} gateways`);
    const started = await Promise.allSettled(names.map((_, i) => launch(i)));
    for (const s of started) if (s.status === "fulfilled") replicas.push(s.value);
    const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed) throw failed.reason;
    progress(`gateways up: ${replicas.map((r) => `${r.name}=${r.http}`).join(" ")}`);
  } catch (e) {
    await stopAll();
    throw e;
  }

  let closed = false;
  return {
    redis,
    replicas,
    async kill(i) {
      const r = replicas[i]!;
      progress(`kill -9 replica ${r.name}`);
      await r.proc.stop("SIGKILL");
      children.delete(r.proc);
    },
    async restartReplica(i) {
      const old = replicas[i]!;
      if (old.proc.proc.exitCode === null && old.proc.proc.signalCode === null) await old.proc.stop("SIGTERM");
      children.delete(old.proc);
      const r = await launch(i);
      replicas[i] = r;
      progress(`replica ${r.name} restarted on ${r.http}`);
      return r;
    },
    async step(what, fn) {
      const t0 = Date.now();
      progress(`${what} ...`);
      try {
        const v = await fn();
        progress(`${what}: done in ${Date.now() - t0} ms`);
        return v;
      } catch (e) {
        progress(`${what}: FAILED after ${Date.now() - t0} ms: ${(e as Error).message}\n${logTail()}`);
        throw e;
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await stopAll();
    },
  };
}

/** Resolve once `r`'s /health answers 200 (polled every 50 ms); reject after `timeoutMs` with the last answer. */
export async function waitHealthy(r: Replica, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    try {
      const h = await health(r);
      if (h.status === 200) return;
      last = `${h.status} ${JSON.stringify(h.body)}`;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > end) throw new Error(`replica ${r.name} not healthy within ${timeoutMs} ms: ${last}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** A replica's `GET /health`: the HTTP status and the body. */
export async function health(r: Replica): Promise<{ status: number; body: { status: string; entries: Record<string, { status: string; description: string }> } }> {
  const res = await fetch(`${r.http}/health`, { signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: (await res.json()) as never };
}

/** POST one structured CloudEvent to `topic` through a replica's REST front; resolves the reply's status body. */
export async function publishRest(r: Replica, topic: string, event: Record<string, unknown>, timeoutMs = 10_000): Promise<{ http: number; status: { success: boolean; status: string; message: string } }> {
  const res = await fetch(`${r.http}/v1/pubsub/${encodeURIComponent(topic)}`, {
    method: "POST",
    headers: { "x-api-key": CLUSTER_KEY, "content-type": "application/cloudevents+json" },
    body: JSON.stringify({ specversion: "1.0", source: "urn:cluster-test", type: "cluster.test", ...event }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await res.json()) as { status: { success: boolean; status: string; message: string } };
  return { http: res.status, status: body.status };
}

/** Like publishRest, but the publish must succeed. */
export async function mustPublish(r: Replica, topic: string, event: Record<string, unknown>): Promise<void> {
  const { http, status } = await publishRest(r, topic, event);
  assert.equal(http, 200, `publish to ${topic} via ${r.name}: HTTP ${http} ${JSON.stringify(status)}`);
  assert.equal(status.success, true, `publish to ${topic} via ${r.name}: ${JSON.stringify(status)}`);
}

/**
 * Assert that `got` (event ids as one subscriber received them) is exactly `want`, in order: on failure the message
 * says what is missing, duplicated or out of order, not a 300-element diff.
 */
export function assertExactly(got: string[], want: string[], who: string): void {
  if (got.length === want.length && got.every((g, i) => g === want[i])) return;
  const seen = new Map<string, number>();
  for (const g of got) seen.set(g, (seen.get(g) ?? 0) + 1);
  const missing = want.filter((w) => !seen.has(w));
  const dup = [...seen].filter(([, c]) => c > 1).map(([g]) => g);
  const wantSet = new Set(want);
  const extra = got.filter((g) => !wantSet.has(g));
  const firstOff = got.findIndex((g, i) => g !== want[i]);
  assert.fail(
    `${who}: got ${got.length} events, want ${want.length}; missing ${missing.length} [${missing.slice(0, 10).join(",")}], ` +
      `duplicated ${dup.length} [${dup.slice(0, 10).join(",")}], unexpected ${extra.length} [${extra.slice(0, 10).join(",")}], ` +
      `first difference at index ${firstOff} (got ${got[firstOff]}, want ${want[firstOff]})`,
  );
}
