/**
 * InvokeJson through the gateway against a direct grpc-js call to the same backend, in the same run: concurrency 1
 * and 64, 1 KB and 64 KB messages; added p50/p99 latency and the throughput ratio. Also REST invoke-json against
 * gRPC InvokeJson, and the same call on an HTTP rule (`POST /v1/orders`, body `*`, the google.api.http transcoding)
 * against REST invoke-json: gateway CPU per call and throughput as a ratio in the same run. Backend and gateway run in
 * child processes. The load comes from several load processes
 * (bench/invoke/load-child.ts: raw node:http2 streams for gRPC, raw keep-alive HTTP/1.1 sockets for REST; 2 by default,
 * INVOKE_LOAD_PROCS=N) so the client is not the bottleneck it measures; each figure set reports the load client's CPU
 * per call beside the gateway's. This process only orchestrates.
 *
 *   npx tsx bench/invoke.ts [--quick | --dry-run]
 *
 * Targets: added p50 at concurrency 1 under 150 us for 1 KB; throughput at 64 at least 0.45 of direct; the HTTP rule's
 * gateway CPU per call at concurrency 64 at most 1.10 of invoke-json's.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { gatewayPackageDefinition } from "../src/shared/protos.js";
import { protosDir, SHOP_PROTO } from "../test/support/protos/descriptors.js";
import type { Figure, RunMode } from "./lib/schema.js";
import { cpuUs } from "./lib/proc.js";
import { summarize, type Summary } from "./lib/stats.js";
import type { Suite } from "./lib/suite.js";
import type { RunCommand, RunResult, Target } from "./invoke/load-child.js";

/** Options of runInvokeBench. */
export interface InvokeBenchOptions {
  /** "full" (~1.5 min), "quick" (~20 s) or "dry-run" (wiring only). Default "full". */
  mode?: RunMode;
  /** Shorthand for mode "quick". */
  quick?: boolean;
  /** Load-generating child processes for concurrency 64. Default 2 (env INVOKE_LOAD_PROCS). */
  loadProcs?: number;
  /** Stop early (remaining cases are skipped). */
  signal?: AbortSignal;
  /** Progress lines. */
  log?: (line: string) => void;
}

interface Measured {
  latency: Summary; // microseconds
  rps: number;
  /** Load-client CPU per call, us (every load process summed). */
  clientCpuUs: number;
  /** Gateway CPU per call, us (/proc/<pid>/stat; NaN where unreadable or for the direct path). */
  gatewayCpuUs: number;
}

function startChild(args: string[]): Promise<{ child: ChildProcess; ready: Record<string, number> }> {
  const child = fork(fileURLToPath(new URL("./invoke/child.ts", import.meta.url)), args, {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    child.once("message", (m: { ready: Record<string, number> }) => resolve({ child, ready: m.ready }));
    child.once("exit", (code) => reject(new Error(`bench child ${args.join(" ")} exited with ${code}`)));
  });
}

/** A load-generating child (bench/invoke/load-child.ts) and a way to run commands on it. */
interface LoadProc {
  child: ChildProcess;
  run(cmd: Omit<RunCommand, "id">): Promise<RunResult>;
}

async function startLoadProc(targets: Target[]): Promise<LoadProc> {
  const child = fork(fileURLToPath(new URL("./invoke/load-child.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const waiting = new Map<number, (r: RunResult) => void>();
  let ids = 0;
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`load child exited with ${code}`)));
    child.on("message", (m: { ready?: boolean; result?: RunResult }) => {
      if (m.ready) resolve();
      if (m.result) {
        waiting.get(m.result.id)?.(m.result);
        waiting.delete(m.result.id);
      }
    });
    child.send({ init: targets });
  });
  return {
    child,
    run: (cmd) =>
      new Promise<RunResult>((resolve) => {
        const id = ++ids;
        waiting.set(id, resolve);
        child.send({ run: { ...cmd, id } });
      }),
  };
}


/** An Order of about `bytes` of proto3 JSON, in a shape that proto-loader objects and proto3 JSON share. */
function orderOfSize(bytes: number): Record<string, unknown> {
  const items: unknown[] = [];
  const order: Record<string, unknown> = { orderId: "bench-1", bigSigned: "9007199254740993", status: "STATUS_OPEN", paid: true, total: 99.5, items, counters: { a: "1" } };
  let i = 0;
  while (JSON.stringify(order).length < bytes) {
    items.push({ sku: `sku-${i}`, quantity: i + 1, unitPrice: { currencyCode: "EUR", units: String(i + 10), nanos: 5 }, tags: ["alpha", "beta"] });
    i++;
  }
  return order;
}

/** A gRPC message with its 5-byte length prefix, base64 for IPC. */
function framed(bytes: Buffer): string {
  const out = Buffer.alloc(5 + bytes.length);
  out.writeUInt32BE(bytes.length, 1);
  bytes.copy(out, 5);
  return out.toString("base64");
}

function check(r: RunResult[]): void {
  const errors = r.reduce((a, x) => a + x.errors, 0);
  if (errors > 0) throw new Error(`${errors} calls failed; first: ${r.find((x) => x.firstError)?.firstError}`);
}

/** `concurrency` callers on one target, split over the load processes, all started together. */
async function measure(procs: LoadProc[], target: string, concurrency: number, count: number, gatewayPid: number | undefined): Promise<Measured> {
  const used = procs.slice(0, Math.max(1, Math.min(procs.length, concurrency)));
  const g0 = cpuUs(gatewayPid);
  const rs = await Promise.all(
    used.map((p, i) => {
      const share = Math.floor(concurrency / used.length) + (i < concurrency % used.length ? 1 : 0);
      const calls = Math.floor(count / used.length) + (i < count % used.length ? 1 : 0);
      return p.run({ targets: [target], concurrency: share, count: calls, interleaved: false });
    }),
  );
  const g = cpuUs(gatewayPid) - g0;
  check(rs);
  const samples = rs.flatMap((r) => r.samples[target]!);
  const wall = Math.max(...rs.map((r) => r.wallMs));
  return {
    latency: summarize(samples),
    rps: samples.length / (wall / 1000),
    clientCpuUs: rs.reduce((a, r) => a + r.cpuUs, 0) / samples.length,
    gatewayCpuUs: gatewayPid === undefined ? NaN : g / samples.length,
  };
}

/** Sequential calls rotating through `targets` in one load process; throughput is each path's calls over its own busy time. */
async function measureInterleaved(proc: LoadProc, targets: string[], count: number): Promise<Measured[]> {
  const r = await proc.run({ targets, concurrency: 1, count, interleaved: true });
  check([r]);
  return targets.map((t) => ({
    latency: summarize(r.samples[t]!),
    rps: r.samples[t]!.length / (r.busyMs[t]! / 1000),
    clientCpuUs: r.cpuUs / (r.samples[t]!.length * targets.length),
    gatewayCpuUs: NaN,
  }));
}

/**
 * Resolve once the HTTP rule answers 200: its route exists once the backend's schema is loaded (when its channel
 * first comes up). Bounded to 15 s.
 */
async function ruleServed(port: number, json: string): Promise<void> {
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await fetch(`http://127.0.0.1:${port}/v1/orders`, { method: "POST", headers: { "content-type": "application/json" }, body: json, signal: AbortSignal.timeout(5000) });
    await r.arrayBuffer();
    if (r.status === 200) return;
    if (Date.now() > end) throw new Error(`POST /v1/orders still answers ${r.status} after 15 s`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

const us = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(0)} us` : "n/a");

/** Run the benchmark and return its figures (microseconds for latency, req/s for throughput). */
export async function runInvokeBench(opts: InvokeBenchOptions = {}): Promise<Figure[]> {
  const mode: RunMode = opts.mode ?? (opts.quick ? "quick" : "full");
  const log = opts.log ?? (() => undefined);
  const nProcs = Math.max(1, opts.loadProcs ?? (Number(process.env["INVOKE_LOAD_PROCS"]) || 2));
  // Quick mode keeps every case and figure with fewer calls, so the whole `npm run bench -- --quick` stays near a minute.
  const n1 = mode === "full" ? 4000 : mode === "quick" ? 400 : 20;
  const n64 = mode === "full" ? 20000 : mode === "quick" ? 3000 : 64;
  const warmup = mode === "full" ? 1000 : mode === "quick" ? 300 : 8;
  const children: ChildProcess[] = [];
  const figures: Figure[] = [];
  try {
    const backend = await startChild(["backend"]);
    children.push(backend.child);
    const gateway = await startChild(["gateway", String(backend.ready["port"])]);
    children.push(gateway.child);
    const gwPid = gateway.child.pid;

    const shop = loadSync(SHOP_PROTO, { includeDirs: [protosDir], longs: String, enums: String, oneofs: true, defaults: false });
    const putOrder = (shop["shop.v1.OrderService"] as grpc.ServiceDefinition)["PutOrder"]!;
    const invokeJson = (gatewayPackageDefinition()["platform.Gateway"] as grpc.ServiceDefinition)["InvokeJson"]!;
    const bPort = backend.ready["port"]!;
    const gPort = gateway.ready["grpcPort"]!;
    const hPort = gateway.ready["httpPort"]!;

    for (const size of [1024, 64 * 1024]) {
      const order = orderOfSize(size);
      const json = JSON.stringify(order);
      const kb = `${Math.round(size / 1024)}KB`;
      const targets: Target[] = [
        { name: "direct", kind: "grpc", port: bPort, path: putOrder.path, body: framed(putOrder.requestSerialize(order)), check: "none" },
        { name: "grpc", kind: "grpc", port: gPort, path: invokeJson.path, body: framed(invokeJson.requestSerialize({ service: "orders", method: "PutOrder", request_data: json })), check: "invoke" },
        { name: "rest", kind: "rest", port: hPort, path: "/v1/gateway/invoke-json", body: Buffer.from(JSON.stringify({ service: "orders", method: "PutOrder", request_data: json })).toString("base64"), check: "rest-invoke" },
        { name: "rule", kind: "rest", port: hPort, path: "/v1/orders", body: Buffer.from(json).toString("base64"), check: "none" },
      ];
      const procs = await Promise.all(Array.from({ length: nProcs }, () => startLoadProc(targets)));
      try {
        // Warm up every path in every load process (JIT, schema fetch, connections).
        await ruleServed(hPort, json);
        for (const t of ["direct", "grpc", "rest", "rule"]) await measure(procs, t, 8 * nProcs, warmup, undefined);

        for (const concurrency of [1, 64]) {
          if (opts.signal?.aborted) break;
          const count = concurrency === 1 ? n1 : n64;
          const scaled = size > 4096 ? Math.max(10, Math.round(count / 8)) : count;
          let d: Measured, g: Measured, r: Measured, h: Measured;
          if (concurrency === 1) {
            // Interleaved call by call in one load process, so a noisy neighbour hits all four paths alike.
            log(`invoke ${kb} c=1: direct / gateway gRPC / gateway REST / HTTP rule, interleaved`);
            [d, g, r, h] = (await measureInterleaved(procs[0]!, ["direct", "grpc", "rest", "rule"], scaled)) as [Measured, Measured, Measured, Measured];
          } else {
            log(`invoke ${kb} c=${concurrency}: direct, ${nProcs} load processes`);
            d = await measure(procs, "direct", concurrency, scaled, undefined);
            log(`invoke ${kb} c=${concurrency}: gateway gRPC InvokeJson`);
            g = await measure(procs, "grpc", concurrency, scaled, gwPid);
            log(`invoke ${kb} c=${concurrency}: gateway REST invoke-json`);
            r = await measure(procs, "rest", concurrency, scaled, gwPid);
            log(`invoke ${kb} c=${concurrency}: gateway HTTP rule POST /v1/orders`);
            h = await measure(procs, "rule", concurrency, scaled, gwPid);
          }
          const id = `${kb}-c${concurrency}`;
          const p50Added = g.latency.p50 - d.latency.p50;
          const note =
            `n=${g.latency.n}; direct p50 ${d.latency.p50.toFixed(0)} us, p99 ${d.latency.p99.toFixed(0)} us; gateway p50 ${g.latency.p50.toFixed(0)} us, p99 ${g.latency.p99.toFixed(0)} us; ` +
            `client CPU/call: direct ${us(d.clientCpuUs)}, gRPC ${us(g.clientCpuUs)}, REST ${us(r.clientCpuUs)}; gateway CPU/call: gRPC ${us(g.gatewayCpuUs)}, REST ${us(r.gatewayCpuUs)}`;
          figures.push({
            id: `added-p50-${id}`,
            label: `InvokeJson added p50 latency, ${kb}, concurrency ${concurrency}`,
            value: p50Added,
            unit: "us",
            better: "lower",
            baseline: { label: "direct gRPC call p50", value: d.latency.p50 },
            ratio: g.latency.p50 / d.latency.p50,
            ...(kb === "1KB" && concurrency === 1 ? { target: { text: "added p50 < 150 us", met: p50Added < 150 } } : {}),
            note,
          });
          figures.push({
            id: `added-p99-${id}`,
            label: `InvokeJson added p99 latency, ${kb}, concurrency ${concurrency}`,
            value: g.latency.p99 - d.latency.p99,
            unit: "us",
            better: "lower",
            baseline: { label: "direct gRPC call p99", value: d.latency.p99 },
            ratio: g.latency.p99 / d.latency.p99,
          });
          figures.push({
            id: `throughput-${id}`,
            label: `InvokeJson throughput, ${kb}, concurrency ${concurrency}`,
            value: g.rps,
            unit: "req/s",
            better: "higher",
            baseline: { label: "direct gRPC call", value: d.rps },
            ratio: g.rps / d.rps,
            ...(concurrency === 64 ? { target: { text: "ratio >= 0.45", met: g.rps / d.rps >= 0.45 } } : {}),
          });
          figures.push({
            id: `rest-vs-grpc-p50-${id}`,
            label: `REST invoke-json p50 vs gRPC InvokeJson, ${kb}, concurrency ${concurrency}`,
            value: r.latency.p50,
            unit: "us",
            better: "lower",
            baseline: { label: "gRPC InvokeJson p50", value: g.latency.p50 },
            ratio: r.latency.p50 / g.latency.p50,
            note: `REST p99 ${r.latency.p99.toFixed(0)} us`,
          });
          figures.push({
            id: `rest-vs-grpc-throughput-${id}`,
            label: `REST invoke-json throughput vs gRPC InvokeJson, ${kb}, concurrency ${concurrency}`,
            value: r.rps,
            unit: "req/s",
            better: "higher",
            baseline: { label: "gRPC InvokeJson", value: g.rps },
            ratio: r.rps / g.rps,
          });
          figures.push({
            id: `rule-vs-rest-p50-${id}`,
            label: `HTTP rule POST /v1/orders p50 vs REST invoke-json, ${kb}, concurrency ${concurrency}`,
            value: h.latency.p50,
            unit: "us",
            better: "lower",
            baseline: { label: "REST invoke-json p50", value: r.latency.p50 },
            ratio: h.latency.p50 / r.latency.p50,
            note: `HTTP rule p99 ${h.latency.p99.toFixed(0)} us`,
          });
          figures.push({
            id: `rule-vs-rest-throughput-${id}`,
            label: `HTTP rule POST /v1/orders throughput vs REST invoke-json, ${kb}, concurrency ${concurrency}`,
            value: h.rps,
            unit: "req/s",
            better: "higher",
            baseline: { label: "REST invoke-json", value: r.rps },
            ratio: h.rps / r.rps,
          });
          if (Number.isFinite(h.gatewayCpuUs) && Number.isFinite(r.gatewayCpuUs)) {
            const cpuRatio = h.gatewayCpuUs / r.gatewayCpuUs;
            figures.push({
              id: `rule-vs-rest-cpu-${id}`,
              label: `Gateway CPU per call, HTTP rule POST /v1/orders vs REST invoke-json, ${kb}, concurrency ${concurrency}`,
              value: h.gatewayCpuUs,
              unit: "us",
              better: "lower",
              baseline: { label: "REST invoke-json gateway CPU per call", value: r.gatewayCpuUs },
              ratio: cpuRatio,
              target: { text: "ratio <= 1.10", met: cpuRatio <= 1.1 },
            });
          }
          // Bench honesty: what the load client spends per call, beside what the gateway spends. A client
          // that costs as much as the gateway per call measures itself.
          for (const [path, m] of [["direct", d], ["gRPC InvokeJson", g], ["REST invoke-json", r], ["HTTP rule", h]] as const) {
            figures.push({
              id: `client-cpu-${path.split(" ")[0]!.toLowerCase()}-${id}`,
              label: `Load-client CPU per call, ${path}, ${kb}, concurrency ${concurrency} (${concurrency === 1 ? "1 process, interleaved: the mean over the four paths" : `${nProcs} process${nProcs === 1 ? "" : "es"}`})`,
              value: m.clientCpuUs,
              unit: "us",
              better: "lower",
              ...(Number.isFinite(m.gatewayCpuUs) ? { baseline: { label: "gateway CPU per call", value: m.gatewayCpuUs }, ratio: m.clientCpuUs / m.gatewayCpuUs } : {}),
            });
          }
        }
      } finally {
        for (const p of procs) p.child.disconnect();
      }
    }
  } finally {
    for (const c of children) c.disconnect();
  }
  return figures;
}

/** The harness suite (bench/run.ts `--only invoke`). */
export const invokeSuite: Suite = {
  name: "invoke",
  title: "InvokeJson through the gateway vs a direct grpc-js call (c=1/64, 1 KB/64 KB); REST invoke-json vs gRPC",
  budgetMs: { full: 180_000, quick: 60_000, "dry-run": 30_000 },
  run: ({ mode, progress, signal }) => runInvokeBench({ mode, signal, log: (l) => progress.step("invoke", l) }),
};

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const mode: RunMode = process.argv.includes("--dry-run") ? "dry-run" : process.argv.includes("--quick") ? "quick" : "full";
  const figures = await runInvokeBench({ mode, log: (l) => process.stderr.write(`[invoke] ${l}\n`) });
  for (const f of figures) {
    const base = f.baseline ? ` (baseline ${f.baseline.label}: ${f.baseline.value.toFixed(1)}; ratio ${f.ratio?.toFixed(2)})` : "";
    const target = f.target ? ` [${f.target.text}: ${f.target.met ? "met" : "NOT met"}]` : "";
    console.log(`${f.label}: ${f.value.toFixed(1)} ${f.unit}${base}${target}${f.note ? `; ${f.note}` : ""}`);
  }
}
