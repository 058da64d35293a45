/**
 * InvokeJson through the gateway against a direct grpc-js call to the same backend, in the same run: concurrency 1
 * and 64, 1 KB and 64 KB messages; added p50/p99 latency and the throughput ratio. Also REST invoke-json against
 * gRPC InvokeJson. Backend and gateway run in child processes; this process only generates load.
 *
 *   npx tsx bench/invoke.ts [--quick | --dry-run]
 *
 * Targets (issue 3): added p50 at concurrency 1 under 150 us for 1 KB; throughput at 64 at least 0.45 of direct.
 */
import { fork, type ChildProcess } from "node:child_process";
import http from "node:http";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { gatewayPackageDefinition } from "../src/shared/protos.js";
import { protosDir, SHOP_PROTO } from "../test/support/protos/descriptors.js";
import type { Figure, RunMode } from "./lib/schema.js";
import { summarize, type Summary } from "./lib/stats.js";
import type { Suite } from "./lib/suite.js";

/** Options of runInvokeBench. */
export interface InvokeBenchOptions {
  /** "full" (~1.5 min), "quick" (~20 s) or "dry-run" (wiring only). Default "full". */
  mode?: RunMode;
  /** Shorthand for mode "quick". */
  quick?: boolean;
  /** Stop early (remaining cases are skipped). */
  signal?: AbortSignal;
  /** Progress lines. */
  log?: (line: string) => void;
}

type Caller = () => Promise<unknown>;

interface Measured {
  latency: Summary; // microseconds
  rps: number;
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

async function measure(call: Caller, concurrency: number, count: number, signal?: AbortSignal): Promise<Measured> {
  const samples: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < count && !signal?.aborted) {
      next++;
      const t = performance.now();
      await call();
      samples.push((performance.now() - t) * 1000);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { latency: summarize(samples), rps: samples.length / seconds };
}

/** Sequential calls rotating through `calls`; throughput is each path's calls over its own busy time. */
async function measureInterleaved(calls: Caller[], count: number, signal?: AbortSignal): Promise<Measured[]> {
  const samples = calls.map(() => [] as number[]);
  for (let i = 0; i < count && !signal?.aborted; i++) {
    for (let j = 0; j < calls.length; j++) {
      const t = performance.now();
      await calls[j]!();
      samples[j]!.push((performance.now() - t) * 1000);
    }
  }
  return samples.map((s) => ({ latency: summarize(s), rps: s.length / (s.reduce((a, b) => a + b, 0) / 1e6) }));
}

function unaryCall(client: grpc.Client, method: string, req: unknown): Promise<any> {
  return new Promise((resolve, reject) =>
    (client as unknown as Record<string, Function>)[method]!.call(client, req, (e: grpc.ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))),
  );
}

/** Run the benchmark and return its figures (microseconds for latency, req/s for throughput). */
export async function runInvokeBench(opts: InvokeBenchOptions = {}): Promise<Figure[]> {
  const mode: RunMode = opts.mode ?? (opts.quick ? "quick" : "full");
  const log = opts.log ?? (() => undefined);
  // Quick mode keeps every case and figure with fewer calls, so the whole `npm run bench -- --quick` stays near a minute.
  const n1 = mode === "full" ? 4000 : mode === "quick" ? 400 : 20;
  const n64 = mode === "full" ? 20000 : mode === "quick" ? 2000 : 64;
  const warmup = mode === "full" ? 400 : mode === "quick" ? 120 : 8;
  const children: ChildProcess[] = [];
  const figures: Figure[] = [];
  try {
    const backend = await startChild(["backend"]);
    children.push(backend.child);
    const gateway = await startChild(["gateway", String(backend.ready["port"])]);
    children.push(gateway.child);

    const shop = loadSync(SHOP_PROTO, { includeDirs: [protosDir], longs: String, enums: String, oneofs: true, defaults: false });
    const Direct = grpc.makeGenericClientConstructor(shop["shop.v1.OrderService"] as grpc.ServiceDefinition, "OrderService");
    const direct = new Direct(`127.0.0.1:${backend.ready["port"]}`, grpc.credentials.createInsecure());
    const Gw = grpc.makeGenericClientConstructor(gatewayPackageDefinition()["platform.Gateway"] as grpc.ServiceDefinition, "Gateway");
    const gw = new Gw(`127.0.0.1:${gateway.ready["grpcPort"]}`, grpc.credentials.createInsecure());
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const restPort = gateway.ready["httpPort"]!;
    const rest = (body: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: restPort, method: "POST", path: "/v1/gateway/invoke-json", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const r = JSON.parse(Buffer.concat(chunks).toString()) as { success: boolean; message: string };
            if (!r.success) reject(new Error(r.message));
            else resolve();
          });
        });
        req.on("error", reject);
        req.end(body);
      });

    for (const size of [1024, 64 * 1024]) {
      const order = orderOfSize(size);
      const json = JSON.stringify(order);
      const kb = `${Math.round(size / 1024)}KB`;
      const viaDirect: Caller = () => unaryCall(direct, "PutOrder", order);
      const viaGateway: Caller = async () => {
        const r = await unaryCall(gw, "InvokeJson", { service: "orders", method: "PutOrder", request_data: json });
        if (!r.success) throw new Error(`${r.status}: ${r.message}`);
      };
      const restBody = JSON.stringify({ service: "orders", method: "PutOrder", request_data: json });
      const viaRest: Caller = () => rest(restBody);
      // Warm up every path (JIT, schema fetch, connections).
      for (const c of [viaDirect, viaGateway, viaRest]) await measure(c, 8, warmup);

      for (const concurrency of [1, 64]) {
        if (opts.signal?.aborted) break;
        const count = concurrency === 1 ? n1 : n64;
        const scaled = size > 4096 ? Math.max(10, Math.round(count / 8)) : count;
        let d: Measured, g: Measured, r: Measured;
        if (concurrency === 1) {
          // Interleaved call by call, so a noisy neighbour hits all three paths alike.
          log(`invoke ${kb} c=1: direct / gateway gRPC / gateway REST, interleaved`);
          [d, g, r] = await measureInterleaved([viaDirect, viaGateway, viaRest], scaled, opts.signal) as [Measured, Measured, Measured];
        } else {
          log(`invoke ${kb} c=${concurrency}: direct`);
          d = await measure(viaDirect, concurrency, scaled, opts.signal);
          log(`invoke ${kb} c=${concurrency}: gateway gRPC InvokeJson`);
          g = await measure(viaGateway, concurrency, scaled, opts.signal);
          log(`invoke ${kb} c=${concurrency}: gateway REST invoke-json`);
          r = await measure(viaRest, concurrency, scaled, opts.signal);
        }
        const id = `${kb}-c${concurrency}`;
        const p50Added = g.latency.p50 - d.latency.p50;
        const note = `n=${g.latency.n}; direct p50 ${d.latency.p50.toFixed(0)} us, p99 ${d.latency.p99.toFixed(0)} us; gateway p50 ${g.latency.p50.toFixed(0)} us, p99 ${g.latency.p99.toFixed(0)} us`;
        figures.push({
          id: `added-p50-${id}`,
          label: `InvokeJson added p50 latency, ${kb}, concurrency ${concurrency}`,
          value: p50Added,
          unit: "us",
          better: "lower",
          baseline: { label: "direct grpc-js call p50", value: d.latency.p50 },
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
          baseline: { label: "direct grpc-js call p99", value: d.latency.p99 },
          ratio: g.latency.p99 / d.latency.p99,
        });
        figures.push({
          id: `throughput-${id}`,
          label: `InvokeJson throughput, ${kb}, concurrency ${concurrency}`,
          value: g.rps,
          unit: "req/s",
          better: "higher",
          baseline: { label: "direct grpc-js call", value: d.rps },
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
      }
    }
    direct.close();
    gw.close();
    agent.destroy();
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
