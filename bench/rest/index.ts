import { fork, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { figure, round } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { summarize } from "../lib/stats.js";
import type { Suite } from "../lib/suite.js";
import { runLoad, type LoadOptions } from "./load.js";
import { BENCH_API_KEY } from "./routes.js";

type Kind = "uws" | "node";

interface ServerChild {
  child: ChildProcess;
  port: number;
  native: boolean;
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

async function startServer(kind: Kind): Promise<ServerChild> {
  const child = fork(fileURLToPath(new URL("./server.ts", import.meta.url)), ["--kind", kind], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  const lines = createInterface({ input: child.stdout! });
  const first = await Promise.race([
    once(lines, "line").then(([l]) => String(l)),
    once(child, "exit").then(([code]) => {
      throw new Error(`REST bench server (${kind}) exited with code ${code} before listening`);
    }),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`REST bench server (${kind}) did not start within 30 s`)), 30_000).unref()),
  ]);
  lines.close();
  const { port, native } = JSON.parse(first) as { port: number; native: boolean };
  return {
    child,
    port,
    native,
    async cpuMicros() {
      child.send("cpu");
      const [m] = (await once(child, "message")) as [{ cpu: NodeJS.CpuUsage }];
      return m.cpu.user + m.cpu.system;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, "exit");
      child.disconnect();
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

interface Endpoint {
  id: string;
  label: string;
  load: Pick<LoadOptions, "method" | "path" | "headers" | "body" | "expectStatus">;
}

const ECHO_BODY = Buffer.from(JSON.stringify({ order: "A-1001", items: Array.from({ length: 12 }, (_, i) => ({ sku: `sku-${i}`, qty: i + 1, note: "x".repeat(40) })) }));

const ENDPOINTS: Endpoint[] = [
  {
    id: "get",
    label: "GET /v1/config/list-services",
    load: { method: "GET", path: "/v1/config/list-services", headers: { "x-api-key": BENCH_API_KEY }, expectStatus: 200 },
  },
  {
    id: "post",
    label: `POST ${ECHO_BODY.length} B JSON echo`,
    load: { method: "POST", path: "/v1/bench/echo/orders", headers: { "x-api-key": BENCH_API_KEY, "content-type": "application/json" }, body: ECHO_BODY, expectStatus: 200 },
  },
];

interface Measured {
  rps: number;
  p50: number;
  p99: number;
  cpuPerReq: number;
  /** Load generator (autocannon) CPU per request, us. */
  clientCpuPerReq: number;
  n: number;
  procs: number;
}

/** Load-generator processes: `REST_LOAD_PROCS` (default 1: with the server that fills a 2-core machine). */
function loadProcs(): number {
  const v = Number(process.env["REST_LOAD_PROCS"] ?? "1");
  if (!Number.isInteger(v) || v < 1 || v > 16) throw new Error(`REST_LOAD_PROCS must be an integer from 1 to 16 (got ${process.env["REST_LOAD_PROCS"]})`);
  return v;
}

async function measure(server: ServerChild, ep: Endpoint, mode: RunMode, concurrency: number, procs: number): Promise<Measured> {
  const durationMs = mode === "full" ? 5000 : mode === "quick" ? 1200 : 200;
  const maxRequests = mode === "dry-run" ? 40 : 2_000_000;
  let cpu0 = NaN;
  const r = await runLoad(
    {
      ...ep.load,
      port: server.port,
      concurrency,
      durationMs,
      maxRequests,
      // Warm-up: JIT and connections, not measured.
      warmupMs: mode === "dry-run" ? 50 : 500,
      warmupMax: mode === "dry-run" ? 10 : 100_000,
      procs,
    },
    async () => {
      cpu0 = await server.cpuMicros();
    },
  );
  const cpu1 = await server.cpuMicros();
  if (r.errors > 0) throw new Error(`${ep.label}: ${r.errors} of ${r.requests} requests failed (first: ${r.firstError})`);
  if (r.requests === 0) throw new Error(`${ep.label}: no request completed`);
  const s = summarize(r.latenciesUs);
  return { rps: (r.requests / r.elapsedMs) * 1000, p50: s.p50, p99: s.p99, cpuPerReq: (cpu1 - cpu0) / r.requests, clientCpuPerReq: r.clientCpuUs / r.requests, n: r.requests, procs: r.procs };
}

/**
 * REST: the gateway's uWS router against the same handlers on node:http, loopback, closed-loop load from autocannon
 * in its own process(es) (bench/rest/load.ts), whose CPU per request is reported beside the ratios.
 */
export const restSuite: Suite = {
  name: "rest",
  title: "REST endpoint: uWS (the gateway's router) vs the same handlers on node:http, loopback",
  budgetMs: { full: 90_000, quick: 25_000, "dry-run": 30_000 },
  async run({ mode, progress }) {
    const concurrency = mode === "dry-run" ? 2 : 16;
    const procs = loadProcs();
    const results: Record<string, Record<Kind, Measured>> = {};
    let native = true;
    for (const kind of ["uws", "node"] as const) {
      progress.step("rest", `starting the ${kind === "uws" ? "uWS" : "node:http"} server`);
      const server = await startServer(kind);
      if (kind === "uws") native = server.native;
      try {
        for (const ep of ENDPOINTS) {
          progress.step("rest", `${kind === "uws" ? "uWS" : "node:http"}: ${ep.label}, ${concurrency} connections`);
          (results[ep.id] ??= {} as Record<Kind, Measured>)[kind] = await measure(server, ep, mode, concurrency, procs);
        }
      } finally {
        await server.stop();
      }
    }
    const figures: Figure[] = [];
    const nodeLabel = "node:http, same handlers";
    for (const ep of ENDPOINTS) {
      const { uws, node } = results[ep.id]!;
      const gen = `autocannon, ${uws.procs} process${uws.procs === 1 ? "" : "es"}`;
      const note = `${concurrency} keep-alive connections (${gen}); ${uws.n.toLocaleString("en-US")} / ${node.n.toLocaleString("en-US")} requests${native ? "" : "; uWS NOT native"}`;
      figures.push(
        figure(`rest-${ep.id}-cpu`, `${ep.label}: server CPU per request (uWS)`, uws.cpuPerReq, { unit: "us", baseline: { label: nodeLabel, value: node.cpuPerReq }, note }),
        figure(`rest-${ep.id}-rps`, `${ep.label}: throughput (uWS)`, uws.rps, { unit: "req/s", better: "higher", baseline: { label: nodeLabel, value: node.rps }, note: `load generator: ${gen}` }),
        figure(`rest-${ep.id}-p50`, `${ep.label}: p50 latency (uWS)`, uws.p50, { unit: "us", baseline: { label: nodeLabel, value: node.p50 } }),
        figure(`rest-${ep.id}-p99`, `${ep.label}: p99 latency (uWS)`, uws.p99, { unit: "us", baseline: { label: nodeLabel, value: node.p99 } }),
        // The generator's own cost, against the server it loads: near or above 1 means the client, not the server,
        // bounds throughput and latency. The node:http run's generator figure is in the note.
        figure(`rest-${ep.id}-client-cpu`, `${ep.label}: load-generator CPU per request (${gen}, uWS run)`, uws.clientCpuPerReq, {
          unit: "us",
          baseline: { label: "uWS server CPU per request", value: uws.cpuPerReq },
          note: `node:http run: ${round(node.clientCpuPerReq)} us generator vs ${round(node.cpuPerReq)} us server per request`,
        }),
      );
    }
    return figures;
  },
};
