/**
 * Fan-out load bench: the gateway (embedded runtime, its own process) against a plain grpc-js server that writes
 * pre-encoded buffers with no broker (bench/fanout/baseline-server.ts), same number of Subscribe streams over many
 * HTTP/2 connections from separate subscriber processes, one publisher, 256-byte events.
 *
 * Reports per stream count: server CPU microseconds per delivery (from /proc/<pid>/stat), deliveries/s, p50/p99
 * publish-to-delivery latency, and RSS bytes per idle subscriber. Run alone: `npx tsx bench/fanout.ts [--quick]
 * [--spacing <ms>]`.
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../src/shared/protos.js";
import { cpuUs, rssBytes } from "./lib/proc.js";
import { quantile } from "./lib/stats.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const TOPIC = "bench.fanout";

/** Options of runFanoutBench. */
export interface FanoutOptions {
  /** Only 1,000 streams and fewer events. Default false. */
  quick?: boolean;
  /** Stream counts. Default [1000, 10000] ([1000] when quick). */
  streams?: number[];
  /**
   * Pause between publishes, ms. Default 5 (1,000 streams) and 40 (10,000). The publisher waits for each publish, so
   * a faster server is offered more events per second; at 10,000 streams and 40 ms that is more than the two
   * subscriber processes read on a 2-core machine, and latency then measures their backlog. Use 200 at 10,000 for a
   * rate every server sustains (`--spacing 200`).
   */
  spacingMs?: number;
}

interface Measured {
  cpuUsPerDelivery: number;
  deliveriesPerSec: number;
  p50Us: number;
  p99Us: number;
  idleBytesPerSubscriber: number;
  delivered: number;
  expected: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Start a server process and resolve its pid and gRPC port (from the "listening" JSON line). */
async function startServer(kind: "gateway" | "baseline"): Promise<{ proc: ChildProcess; port: number }> {
  const args =
    kind === "gateway"
      ? ["--import", "tsx", join(root, "src/main/cli.ts"), "--grpc-port", "0", "--http-port", "0", "--log-level", "info"]
      : ["--import", "tsx", join(here, "fanout/baseline-server.ts")];
  const proc = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, GATEWAY_CONFIG: "" } });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error(`${kind} did not report its port`)), 30_000);
    proc.stdout!.on("data", (c: Buffer) => {
      buf += c.toString();
      for (const line of buf.split("\n")) {
        const m = /"grpcPort":(\d+)/.exec(line);
        if (m) {
          clearTimeout(t);
          resolve(Number(m[1]));
        }
      }
      buf = buf.slice(buf.lastIndexOf("\n") + 1);
    });
    proc.on("exit", (code) => reject(new Error(`${kind} exited with ${code}`)));
  });
  proc.stdout!.resume();
  return { proc, port };
}

interface Stats {
  headers: number;
  delivered: number;
  latencies: number[];
}

function ask(child: ChildProcess): Promise<Stats> {
  return new Promise((resolve) => {
    child.once("message", (m) => resolve(m as Stats));
    child.send({ cmd: "stats" });
  });
}

async function measure(kind: "gateway" | "baseline", streams: number, events: number, spacingMs: number): Promise<Measured> {
  const { proc, port } = await startServer(kind);
  const pid = proc.pid!;
  const address = `127.0.0.1:${port}`;
  const Ctor = grpc.makeGenericClientConstructor(gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as grpc.ServiceDefinition, "Pubsub");
  const publisher = new Ctor(address, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
  const publish = (ce: object): Promise<void> =>
    new Promise((resolve, reject) =>
      (publisher as unknown as Record<string, Function>)["PublishEvent"]!.call(publisher, { topic: TOPIC, cloudevent: ce }, (e: Error | null) => (e ? reject(e) : resolve())),
    );
  const children: ChildProcess[] = [];
  try {
    // Warm the server's publish path, then take the idle baseline.
    for (let i = 0; i < 20; i++) await publish({ id: "warm", source: "urn:bench:fanout", type: "warm", text_data: "x" });
    await sleep(300);
    const rss0 = rssBytes(pid);
    const procs = 2;
    const connections = Math.max(1, Math.ceil(streams / 100 / procs));
    for (let p = 0; p < procs; p++) {
      children.push(fork(join(here, "fanout/subscribers.ts"), [address, TOPIC, String(streams / procs), String(connections)], { execArgv: ["--import", "tsx"], stdio: "inherit" }));
    }
    const total = async (): Promise<Stats> => {
      const all = await Promise.all(children.map(ask));
      return { headers: all.reduce((a, s) => a + s.headers, 0), delivered: all.reduce((a, s) => a + s.delivered, 0), latencies: all.flatMap((s) => s.latencies) };
    };
    const openBy = Date.now() + 60_000;
    while ((await total()).headers < streams) {
      if (Date.now() > openBy) throw new Error(`${kind}: only some of ${streams} streams opened`);
      await sleep(100);
    }
    await sleep(500);
    const rss1 = rssBytes(pid);
    const latencies: number[] = [];
    const cpu0 = cpuUs(pid);
    const t0 = performance.now();
    const pad = "x".repeat(256);
    for (let i = 0; i < events; i++) {
      // 256-byte payload; the id carries the monotonic publish time in ns.
      await publish({ id: `ts-${process.hrtime.bigint()}`, source: "urn:bench:fanout", type: "bench", text_data: pad });
      if (spacingMs > 0) await sleep(spacingMs);
    }
    const expected = events * streams;
    let s = await total();
    latencies.push(...s.latencies);
    const doneBy = Date.now() + 120_000;
    while (s.delivered < expected && Date.now() < doneBy) {
      await sleep(20);
      s = await total();
      latencies.push(...s.latencies);
    }
    const elapsed = (performance.now() - t0) / 1000;
    const cpu1 = cpuUs(pid);
    latencies.sort((a, b) => a - b);
    return {
      cpuUsPerDelivery: (cpu1 - cpu0) / Math.max(1, s.delivered),
      deliveriesPerSec: s.delivered / elapsed,
      p50Us: quantile(latencies, 0.5),
      p99Us: quantile(latencies, 0.99),
      idleBytesPerSubscriber: (rss1 - rss0) / streams,
      delivered: s.delivered,
      expected,
    };
  } finally {
    for (const c of children) c.send({ cmd: "close" });
    await sleep(200);
    for (const c of children) c.kill();
    publisher.close();
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
  }
}

/** Run the fan-out bench; resolves figures (value: gateway, baseline: raw grpc-js). */
export async function runFanoutBench(options: FanoutOptions = {}): Promise<{ figures: object[] }> {
  const counts = options.streams ?? (options.quick ? [1000] : [1000, 10_000]);
  const figures: object[] = [];
  for (const n of counts) {
    const events = options.quick ? 40 : n >= 10_000 ? 60 : 200;
    const spacing = options.spacingMs ?? (n >= 10_000 ? 40 : 5);
    const base = await measure("baseline", n, events, spacing);
    const gw = await measure("gateway", n, events, spacing);
    const label = (s: string): { label: string } => ({ label: `${s}, ${n} streams` });
    const note = `gateway delivered ${gw.delivered}/${gw.expected}, baseline ${base.delivered}/${base.expected}; ${events} events of 256 bytes, ${spacing} ms apart`;
    figures.push(
      { id: `cpu-per-delivery-${n}`, ...label("server CPU per delivery"), value: gw.cpuUsPerDelivery, unit: "us", better: "lower", baseline: { label: "raw grpc-js server", value: base.cpuUsPerDelivery }, note },
      { id: `deliveries-per-s-${n}`, ...label("deliveries per second"), value: gw.deliveriesPerSec, unit: "1/s", better: "higher", baseline: { label: "raw grpc-js server", value: base.deliveriesPerSec } },
      { id: `p50-latency-${n}`, ...label("p50 publish-to-delivery"), value: gw.p50Us, unit: "us", better: "lower", baseline: { label: "raw grpc-js server", value: base.p50Us } },
      { id: `p99-latency-${n}`, ...label("p99 publish-to-delivery"), value: gw.p99Us, unit: "us", better: "lower", baseline: { label: "raw grpc-js server", value: base.p99Us } },
      {
        id: `idle-bytes-per-subscriber-${n}`,
        ...label("RSS per idle subscriber"),
        value: gw.idleBytesPerSubscriber,
        unit: "bytes",
        better: "lower",
        baseline: { label: "raw grpc-js server", value: base.idleBytesPerSubscriber },
      },
    );
  }
  return { figures };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const quick = process.argv.includes("--quick");
  const at = process.argv.indexOf("--spacing");
  const spacingMs = at > 0 ? Number(process.argv[at + 1]) : undefined;
  if (spacingMs !== undefined && !(spacingMs >= 0)) throw new Error("--spacing takes a number of ms");
  runFanoutBench({ quick, ...(spacingMs !== undefined ? { spacingMs } : {}) }).then(
    (r) => {
      for (const f of r.figures as Array<{ label: string; value: number; unit: string; baseline: { value: number } }>) {
        const ratio = f.baseline.value ? (f.value / f.baseline.value).toFixed(2) : "-";
        console.log(`${f.label.padEnd(48)} ${f.value.toFixed(2).padStart(12)} ${f.unit.padEnd(6)} baseline ${f.baseline.value.toFixed(2).padStart(12)}  ratio ${ratio}`);
      }
      process.exit(0);
    },
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
