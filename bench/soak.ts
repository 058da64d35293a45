/**
 * Mixed soak of the gateway, to watch its memory over time:
 * `tsx bench/soak.ts [minutes] [--json-out file] [--gc] [--heap-snapshots dir]` (default 10 minutes). The gateway runs
 * in a child process (embedded runtime, ports on 127.0.0.1 only) in front of the order test backend in another; this
 * process drives, all at once and each loop bounded:
 *   - subscribe/cancel churn: gRPC Subscribe streams on a few topics, each cancelled after 50-500 ms;
 *   - publish: PublishEvent to those topics;
 *   - state writes with etags: GetState, then SaveState with that etag (some deliberately stale: ABORTED expected);
 *   - invokes with cancellations: InvokeJson to a backend method that sleeps, half cancelled after 20-100 ms.
 * The gateway's RSS and V8 heap size (heapTotal) are sampled every 10 s. At the end one JSON object is printed: RSS and
 * heapTotal at start and end, and their slopes in MiB/min fitted (least squares) over the samples after a warm-up of
 * the first fifth of the run, plus counts of every outcome so an error rate is visible.
 *
 * `--gc` (opt-in) starts the gateway child with `--expose-gc`; every sample then forces a full collection in the child
 * first and records the main isolate's `heapUsed` (live JS objects) beside RSS, so a growing live heap (a leak) can be
 * told apart from V8 and the allocator sizing their pools (RSS growth with a flat heap). `--heap-snapshots dir` (implies
 * `--gc`) also writes a heap snapshot of the child at the end of the warm-up and at the end of the run; compare them
 * with `tsx bench/heap-diff.ts a.heapsnapshot b.heapsnapshot` (object counts and bytes by constructor).
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeHeapSnapshot } from "node:v8";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../src/shared/protos.js";

const HOST = "127.0.0.1";
const KEY = "soak-key";
const SELF = fileURLToPath(import.meta.url);
const INVOKE_CHILD = fileURLToPath(new URL("./invoke/child.ts", import.meta.url));

/** The gateway child: a gateway with the backend registered for invoke and state, reporting its RSS on request. */
async function gatewayChild(backendPort: number): Promise<void> {
  const { createGateway } = await import("../src/main/gateway.js");
  const quiet = new Writable({ write: (_c, _e, cb) => cb() });
  const gw = await createGateway({
    host: HOST,
    grpcPort: 0,
    httpPort: 0,
    apiKeys: [KEY],
    logLevel: "error",
    logDestination: quiet,
    services: [{ name: "orders", grpc: { host: HOST, port: backendPort }, state: { storeName: "soak-store", keys: [] } }],
  });
  process.send?.({ ready: { grpcPort: gw.grpcPort, httpPort: gw.httpPort } });
  process.on("message", (m: string | { snapshot: string }) => {
    // With --expose-gc (the --gc option) a full collection first, so heapUsed counts live objects only.
    if (m === "heap") {
      (globalThis as { gc?: () => void }).gc?.();
      const u = process.memoryUsage();
      process.send?.({ heap: { rss: u.rss, heapUsed: u.heapUsed, heapTotal: u.heapTotal, external: u.external, arrayBuffers: u.arrayBuffers } });
    }
    if (typeof m === "object" && m.snapshot) process.send?.({ snapshotWritten: writeHeapSnapshot(m.snapshot) });
  });
  process.on("disconnect", () => {
    gw.destroy();
    process.exit(0);
  });
}

function ready<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("child did not start within 60 s")), 60_000);
    child.on("message", (m: { ready?: T }) => {
      if (m.ready) {
        clearTimeout(t);
        resolve(m.ready);
      }
    });
    child.once("exit", (code) => reject(new Error(`child exited with ${code}`)));
  });
}

/** Sends `request` to the child and resolves with the first reply that has `field`, within `timeoutMs`. */
function ask<T>(child: ChildProcess, request: string | object, field: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ${field} reply within ${timeoutMs} ms`)), timeoutMs);
    const on = (m: Record<string, unknown>): void => {
      if (m[field] === undefined) return;
      clearTimeout(t);
      child.off("message", on);
      resolve(m[field] as T);
    };
    child.on("message", on);
    child.send(request);
  });
}

interface HeapSample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p[0], 0) / n;
  const my = points.reduce((s, p) => s + p[1], 0) / n;
  const num = points.reduce((s, p) => s + (p[0] - mx) * (p[1] - my), 0);
  const den = points.reduce((s, p) => s + (p[0] - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const rand = (lo: number, hi: number): number => lo + Math.floor(Math.random() * (hi - lo + 1));

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const outAt = args.indexOf("--json-out");
  const jsonOut = outAt >= 0 ? args[outAt + 1] : undefined;
  const snapAt = args.indexOf("--heap-snapshots");
  const snapDir = snapAt >= 0 ? args[snapAt + 1] : undefined;
  if (snapAt >= 0 && (!snapDir || snapDir.startsWith("--"))) throw new Error("--heap-snapshots needs a directory");
  if (snapDir) mkdirSync(snapDir, { recursive: true });
  const withGc = args.includes("--gc") || snapDir !== undefined;
  const valueAt = new Set([outAt + 1, snapAt + 1].filter((i) => i > 0));
  const minutes = Number(args.find((a, i) => !a.startsWith("--") && !valueAt.has(i)) ?? 10);
  if (!(minutes > 0 && minutes <= 120)) throw new Error(`minutes must be in (0, 120], got ${minutes}`);
  const durationMs = minutes * 60_000;

  const backend = fork(INVOKE_CHILD, ["backend"], { execArgv: ["--import", "tsx"] });
  const { port: backendPort } = await ready<{ port: number }>(backend);
  const gateway = fork(SELF, ["--gateway-child", String(backendPort)], { execArgv: [...(withGc ? ["--expose-gc"] : []), "--import", "tsx"] });
  const { grpcPort } = await ready<{ grpcPort: number; httpPort: number }>(gateway);

  const pkg = gatewayPackageDefinition();
  const make = (service: string): grpc.Client => {
    const Ctor = grpc.makeGenericClientConstructor(pkg[service] as grpc.ServiceDefinition, service);
    return new Ctor(`${HOST}:${grpcPort}`, grpc.credentials.createInsecure());
  };
  const md = new grpc.Metadata();
  md.set("x-api-key", KEY);
  const clients = { gateway: make("platform.Gateway"), state: make("platform.State"), pubsub: make("io.cloudevents.v1.Pubsub") };
  const counts: Record<string, number> = {};
  const count = (what: string): void => void (counts[what] = (counts[what] ?? 0) + 1);
  const unary = <T>(client: grpc.Client, method: string, req: object, cancelAfterMs?: number): Promise<T> =>
    new Promise((resolve, reject) => {
      const call = (client as unknown as Record<string, Function>)[method]!.call(client, req, md, { deadline: Date.now() + 10_000 }, (err: grpc.ServiceError | null, res: T) =>
        err ? reject(err) : resolve(res),
      ) as grpc.ClientUnaryCall;
      if (cancelAfterMs !== undefined) setTimeout(() => call.cancel(), cancelAfterMs);
    });
  const outcome = (what: string, p: Promise<unknown>): Promise<void> =>
    p.then(
      () => count(`${what}:OK`),
      (e: grpc.ServiceError) => count(`${what}:${grpc.status[e.code] ?? "error"}`),
    );

  const end = Date.now() + durationMs;
  const running = (): boolean => Date.now() < end;
  const topics = ["soak.a", "soak.b", "soak.c"];

  const churn = async (): Promise<void> => {
    while (running()) {
      const call = (clients.pubsub as unknown as Record<string, Function>)["Subscribe"]!.call(clients.pubsub, { topics: [topics[rand(0, 2)]!] }, md) as grpc.ClientReadableStream<unknown>;
      call.on("data", () => count("subscribe:event"));
      const closed = new Promise<void>((resolve) => {
        call.on("error", (e: grpc.ServiceError) => {
          count(`subscribe:${grpc.status[e.code]}`);
          resolve();
        });
        call.on("end", resolve);
      });
      await sleep(rand(50, 500));
      call.cancel();
      await Promise.race([closed, sleep(5000)]);
    }
  };
  const publish = async (): Promise<void> => {
    for (let i = 0; running(); i++) {
      const cloudevent = { id: `e${i}`, source: "urn:soak", spec_version: "1.0", type: "soak.tick", text_data: `tick ${i}` };
      await outcome("publish", unary(clients.pubsub, "PublishEvent", { topic: topics[i % 3], cloudevent }));
      await sleep(5);
    }
  };
  const stateWrites = async (): Promise<void> => {
    for (let i = 0; running(); i++) {
      const key = `k${i % 200}`;
      const got = await unary<{ etag: string }>(clients.state, "GetState", { service: "orders", key }).catch(() => ({ etag: "" }));
      // One in ten writes uses a stale etag on purpose: ABORTED is the expected answer.
      const etag = i % 10 === 9 && got.etag ? `${got.etag}-stale` : got.etag;
      await outcome("save", unary(clients.state, "SaveState", { service: "orders", key, value: JSON.stringify({ i, pad: "x".repeat(rand(10, 2000)) }), etag }));
    }
  };
  const invokes = async (): Promise<void> => {
    while (running()) {
      const batch = Array.from({ length: 20 }, (_, i) => {
        const cancel = i % 2 === 0 ? rand(20, 100) : undefined;
        const req = { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: cancel === undefined ? "soak" : "sleep:300" }) };
        return outcome(cancel === undefined ? "invoke" : "invoke-cancelled", unary(clients.gateway, "InvokeJson", req, cancel));
      });
      await Promise.all(batch);
      await sleep(50);
    }
  };

  const started = Date.now();
  const MiB = 1024 * 1024;
  const samples: Array<[number, number]> = [];
  const heapSamples: Array<[number, number]> = [];
  const externalSamples: Array<[number, number]> = [];
  const heapTotalSamples: Array<[number, number]> = [];
  const snapshots: string[] = [];
  const sample = async (): Promise<void> => {
    const t = (Date.now() - started) / 60_000;
    const h = await ask<HeapSample>(gateway, "heap", "heap", 30_000);
    samples.push([t, h.rss / MiB]);
    heapSamples.push([t, h.heapUsed / MiB]);
    externalSamples.push([t, h.external / MiB]);
    heapTotalSamples.push([t, h.heapTotal / MiB]);
  };
  const snapshot = async (name: string): Promise<void> => {
    if (snapDir) snapshots.push(await ask<string>(gateway, { snapshot: join(snapDir, name) }, "snapshotWritten", 300_000));
  };
  // Every 10 s; a run shorter than two minutes (a smoke test) samples a dozen times anyway.
  const sampleEveryMs = Math.min(10_000, durationMs / 12);
  const sampler = (async () => {
    let snapped = false;
    while (running()) {
      await sample();
      if (!snapped && (Date.now() - started) / 60_000 >= minutes / 5) {
        snapped = true;
        await snapshot("warm.heapsnapshot");
      }
      await sleep(Math.min(sampleEveryMs, Math.max(0, end - Date.now())));
    }
    await sample();
    await snapshot("end.heapsnapshot");
  })();
  await Promise.all([churn(), churn(), publish(), stateWrites(), invokes(), sampler]);

  const warm = samples.filter(([t]) => t >= minutes / 5);
  const result = {
    minutes,
    samples: samples.length,
    rssStartMiB: Number(samples[0]![1].toFixed(1)),
    rssEndMiB: Number(samples.at(-1)![1].toFixed(1)),
    rssMaxMiB: Number(Math.max(...samples.map((s) => s[1])).toFixed(1)),
    slopeMiBPerMinAfterWarmup: Number(slope(warm).toFixed(3)),
    warmupMinutes: minutes / 5,
    // V8's heap reservation (young and old generations) beside RSS: when RSS follows it, the growth is heap sizing.
    heapTotalStartMiB: Number(heapTotalSamples[0]![1].toFixed(1)),
    heapTotalEndMiB: Number(heapTotalSamples.at(-1)![1].toFixed(1)),
    heapTotalSlopeMiBPerMinAfterWarmup: Number(slope(heapTotalSamples.filter(([t]) => t >= minutes / 5)).toFixed(3)),
    heapTotalSeriesMiB: heapTotalSamples.map(([t, r]) => [Number(t.toFixed(2)), Number(r.toFixed(1))]),
    ...(withGc
      ? {
          heapUsedAfterGcStartMiB: Number(heapSamples[0]![1].toFixed(1)),
          heapUsedAfterGcEndMiB: Number(heapSamples.at(-1)![1].toFixed(1)),
          heapUsedAfterGcSlopeMiBPerMinAfterWarmup: Number(slope(heapSamples.filter(([t]) => t >= minutes / 5)).toFixed(3)),
          externalStartMiB: Number(externalSamples[0]![1].toFixed(1)),
          externalEndMiB: Number(externalSamples.at(-1)![1].toFixed(1)),
          heapUsedAfterGcSeriesMiB: heapSamples.map(([t, r]) => [Number(t.toFixed(2)), Number(r.toFixed(1))]),
          heapSnapshots: snapshots,
        }
      : {}),
    rssSeriesMiB: samples.map(([t, r]) => [Number(t.toFixed(2)), Number(r.toFixed(1))]),
    outcomes: counts,
  };
  for (const c of Object.values(clients)) c.close();
  gateway.disconnect();
  backend.disconnect();
  console.log(JSON.stringify(result, null, 2));
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify(result, null, 2) + "\n");
}

if (process.argv[2] === "--gateway-child") {
  await gatewayChild(Number(process.argv[3]));
} else {
  await main();
}
