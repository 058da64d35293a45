/**
 * Web fan-out load bench: the gateway's WebSocket (`/v1/pubsub/ws`) and SSE (`/v1/pubsub/events`)
 * subscribers against a bare uWebSockets.js server using its native topic publish (bench/webfanout/uws-baseline.cjs),
 * plus the gateway's gRPC Subscribe in the same shape, in one run: one connection per subscriber, 1,000 and 10,000
 * subscribers, one topic, 256-byte events.
 *
 * Every server is its own process, started fresh per case (the gateway as `node dist/src/main/cli.js`, built first
 * when `dist/` is stale; a dry run uses `tsx src/main/cli.ts` to skip the build) so that its CPU is measured alone:
 * server CPU per delivery = utime+stime from /proc/<pid>/stat over the measured events / deliveries. Subscribers are
 * spread over several client processes (bench/webfanout/web-subscribers.cjs: raw sockets with a minimal WebSocket
 * frame parser and SSE reader; gRPC Subscribe over node:http2 with one connection per stream), whose CPU
 * is reported per delivery beside the ratios so a client-bound run shows. The schedule is the peers harness'
 * (../shared/peers/README.md): 200 events 5 ms apart at 1,000 subscribers, 60 events 40 ms apart at 10,000; event i
 * goes out at t0 + i x spacing, or when the previous publish was acknowledged if that is later.
 *
 * Each count runs 3 times at 1,000 and twice at 10,000 (once when quick), the order of the systems rotating per
 * repetition; figures are per-field medians.
 *
 * Idle memory is sampled after a full GC in the server (bench/webfanout/gc-preload.cjs, `--expose-gc`, SIGUSR2).
 * `grpc-go` and `grpc-go-nobdp` (not in the default set) run gRPC Subscribe with the peers' Go load client.
 *
 * Run alone: `npx tsx bench/webfanout.ts [--quick | --dry-run] [--subs 1000,10000]
 * [--systems uws,ws,sse,grpc,grpc-go,grpc-go-nobdp] [--reps n]` (uws is needed: every figure is a ratio to it).
 * The gateway runs with `--threads 1` (one uWS thread, as these figures were first measured) unless `--threads n`.
 *
 * Thread scaling: `npx tsx bench/webfanout.ts --threads 1,2 [--subs 10000] [--reps n] [--events n]
 * [--spacing ms]` measures
 * only the gateway WebSocket at each thread count, in the same run (order rotating per repetition), publishing
 * back to back by default (each publish waits for its acknowledgement, no spacing) so the figure is the fan-out
 * capacity, not the publish schedule; figures are each count's deliveries/s and server CPU per delivery against the first count.
 *
 * Many topics: `--topics N` (with `--threads a,b` or `--gateway-dirs`) spreads the subscribers evenly over N topics
 * (subscriber g takes topic g mod N) and publishes each event to every topic, N PublishEvent calls in flight
 * together, so each subscriber still gets every event and the deliveries per event equal the subscribers.
 *
 * Two builds: `npx tsx bench/webfanout.ts --gateway-dirs BASE,NEW [--threads 2] [--subs 10000] [--topics 100]
 * [--reps 2] [--events 200] [--spacing ms]` (those are the defaults) runs the gateway WebSocket from each built
 * checkout's `dist/src/main/cli.js` in turn, the one going first alternating per repetition, and prints a table per
 * build (medians) with the NEW/BASE ratios of each repetition and their median, and the cores the server, the load
 * clients and the publisher (this process) took.
 * Env: WEBFANOUT_NODE_ARGS (extra node flags for the servers), WEBFANOUT_MEMDEBUG=1, FANOUTLOAD (Go client path).
 */
import { fork, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import * as http2 from "node:http2";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { gatewayPackageDefinition } from "../src/shared/protos.js";
import { cpuUs, rssBytes } from "./lib/proc.js";
import { quantile } from "./lib/stats.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const TOPIC = "bench.web";
/** Subscribers per client process: 10,000 sockets become 4 processes, well under 20,000 open files each. */
const PER_CLIENT = 2500;
const PAD = "x".repeat(256);

/** The systems measured, in run order. */
export type WebSystem = "uws" | "ws" | "sse" | "grpc" | GoSystem;
/**
 * gRPC Subscribe measured by the peers harness' Go load client (../shared/peers/go/fanoutload, built at
 * FANOUTLOAD or /tmp/perf/build/bin/fanoutload), invoked as ../shared/peers/run_fanout.py does: grpc-go clients, one
 * connection per subscriber. "grpc-go" keeps grpc-go's default BDP estimation, which sends a PING with the window
 * updates after data arrives, so the server reads and ACKs pings while delivering (the shape of the issue's 30 us
 * figure); "grpc-go-nobdp" passes -grpc-static-window (fixed 1 MiB windows, no BDP pings).
 */
export type GoSystem = "grpc-go" | "grpc-go-nobdp";
const GO_SYSTEMS: readonly WebSystem[] = ["grpc-go", "grpc-go-nobdp"];
const FANOUTLOAD = process.env["FANOUTLOAD"] ?? "/tmp/perf/build/bin/fanoutload";

/** Options of runWebFanoutBench. */
export interface WebFanoutOptions {
  /** 1,000 subscribers and 40 events. Default false. */
  quick?: boolean;
  /** Wiring only: tiny counts, gateway run from source. Default false. */
  dryRun?: boolean;
  /** Subscriber counts. Default [1000, 10000] ([1000] when quick, [20] on a dry run). */
  subs?: number[];
  /** Progress lines. */
  log?: (line: string) => void;
  /** Systems to measure (default all; figures need "uws" and, for the gRPC comparison, "ws" and "grpc"). */
  systems?: WebSystem[];
  /** Repetitions per subscriber count, system order rotating, medians reported. Default 3 at 1,000 and 2 at 10,000
   * (1 when quick or dry). */
  reps?: number;
  /** Aborted by the harness past the suite's budget: no new case starts. */
  signal?: AbortSignal;
  /** `--threads` of the gateway servers. Default 1. */
  threads?: number;
}

/** What one case measured. */
export interface WebMeasured {
  system: WebSystem;
  subs: number;
  serverCpuUsPerDelivery: number;
  clientCpuUsPerDelivery: number;
  /** CPU of this process (the publisher, and the polling of the clients) per delivery; absent for the Go client. */
  publisherCpuUsPerDelivery?: number;
  deliveriesPerSec: number;
  p50Us: number;
  p99Us: number;
  idleBytesPerSubscriber: number;
  /** V8 heap in use per idle subscriber after a full GC (0 where not measured: the Go-client cases). */
  idleHeapBytesPerSubscriber?: number;
  delivered: number;
  expected: number;
  /** Bytes of one delivered message (WebSocket payload, SSE data line, gRPC message), 0 when not sampled. */
  msgBytes: number;
}

interface ClientStats {
  ready: number;
  delivered: number;
  failed: number;
  msgBytes: number;
  latencies: number[];
}

/** Processes this module started and has not stopped yet: killed by pid if the harness exits mid-run. */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** `npm run build` when dist/ is missing or older than src/, so the gateway measured is the code checked out. */
function ensureBuilt(log: (l: string) => void): void {
  const cli = join(root, "dist/src/main/cli.js");
  if (existsSync(cli) && statSync(cli).mtimeMs >= newestMtime(join(root, "src"))) return;
  log("dist/ is stale: npm run build");
  const r = spawnSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"], timeout: 180_000 });
  if (r.status !== 0) throw new Error(`npm run build failed (${r.status ?? r.signal})`);
}

interface Server {
  proc: ChildProcess;
  pid: number;
  /** uWS port (the gateway's HTTP port). */
  httpPort: number;
  /** The gateway's gRPC port (0 for the bare uWS server). */
  grpcPort: number;
  /** Where gc-preload.cjs writes process.memoryUsage() on SIGUSR2. */
  memFile: string;
}

/**
 * Start a server process and read its ports from its first lines of stdout. gatewayDir: the checkout whose built
 * `dist/src/main/cli.js` is the gateway (default this one), run with that checkout as its working directory.
 */
async function startServer(system: WebSystem, dryRun: boolean, threads = 1, gatewayDir = root): Promise<Server> {
  const gatewayArgs = ["--grpc-port", "0", "--http-port", "0", "--log-level", "info", "--threads", String(threads)];
  // Every server gets the same GC hook (bench/webfanout/gc-preload.cjs), so idle memory is sampled after a full GC.
  const memDir = mkdtempSync(join(tmpdir(), "webfanout-"));
  // WEBFANOUT_NODE_ARGS: extra node flags for the servers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile them.
  const gcArgs = ["--expose-gc", "--require", join(here, "webfanout/gc-preload.cjs"), ...(process.env["WEBFANOUT_NODE_ARGS"]?.split(" ").filter(Boolean) ?? [])];
  const args =
    system === "uws"
      ? [...gcArgs, join(here, "webfanout/uws-baseline.cjs")]
      : dryRun
        ? [...gcArgs, "--import", "tsx", join(root, "src/main/cli.ts"), ...gatewayArgs]
        : [...gcArgs, join(gatewayDir, "dist/src/main/cli.js"), ...gatewayArgs];
  const env: NodeJS.ProcessEnv = { ...process.env, TOPIC, GATEWAY_CONFIG: "", BENCH_MEM_FILE: join(memDir, "mem.json") };
  delete env["GATEWAY_API_KEYS"];
  const proc = spawn(process.execPath, args, { cwd: system === "uws" ? root : gatewayDir, stdio: ["ignore", "pipe", "inherit"], env });
  live.add(proc);
  proc.once("exit", () => {
    live.delete(proc);
    rmSync(memDir, { recursive: true, force: true });
  });
  const ports = await new Promise<{ httpPort: number; grpcPort: number }>((resolve, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error(`${system} server did not report its port`)), 30_000);
    proc.stdout!.on("data", (c: Buffer) => {
      buf += c.toString();
      for (const line of buf.split("\n")) {
        const uws = /^\{"port":(\d+)\}/.exec(line);
        const gw = /"grpcPort":(\d+),"httpPort":(\d+)/.exec(line);
        if (uws || gw) {
          clearTimeout(t);
          resolve(uws ? { httpPort: Number(uws[1]), grpcPort: 0 } : { grpcPort: Number(gw![1]), httpPort: Number(gw![2]) });
        }
      }
      buf = buf.slice(buf.lastIndexOf("\n") + 1);
    });
    proc.once("exit", (code) => {
      clearTimeout(t);
      reject(new Error(`${system} server exited with ${code}`));
    });
  });
  return { proc, pid: proc.pid!, memFile: env["BENCH_MEM_FILE"]!, ...ports };
}

/** Idle memory of a server after a full GC (gc-preload.cjs): RSS from /proc, V8 heap in use from the process. */
async function memoryAfterGc(s: Server): Promise<{ rss: number; heap: number }> {
  rmSync(s.memFile, { force: true });
  s.proc.kill("SIGUSR2");
  const by = Date.now() + 10_000;
  while (!existsSync(s.memFile)) {
    if (Date.now() > by) throw new Error("the server did not answer the GC signal in 10 s");
    await sleep(50);
  }
  // Let the allocator hand freed pages back before sampling RSS.
  await sleep(300);
  const m = JSON.parse(readFileSync(s.memFile, "utf8")) as { heapUsed: number; heapTotal: number; external: number };
  if (process.env["WEBFANOUT_MEMDEBUG"]) process.stderr.write(`[mem] ${JSON.stringify(m)} rss ${rssBytes(s.pid)}\n`);
  return { rss: rssBytes(s.pid), heap: m.heapUsed };
}

async function stopServer(s: Server): Promise<void> {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null) return;
  const exited = new Promise((r) => s.proc.once("exit", r));
  s.proc.kill("SIGTERM");
  await Promise.race([exited, sleep(15_000)]);
  if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill("SIGKILL");
}

/**
 * A publisher: resolves once the server acknowledged the event (gRPC PublishEvent reply, the uWS server's "ok").
 * topic: the gateway's topic (default TOPIC); the bare uWS server publishes every message to its one TOPIC.
 */
type Publisher = { publish(seq: number, topic?: string): Promise<void>; close(): void };

function eventId(): string {
  return `ts-${process.hrtime.bigint()}`;
}

async function uwsPublisher(port: number): Promise<Publisher> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/pub`);
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  let waiting: (() => void) | null = null;
  ws.on("message", () => {
    const w = waiting;
    waiting = null;
    w?.();
  });
  return {
    // The frame the gateway would send, so both deliver messages of about the same size.
    publish: (seq) =>
      new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error("uWS publish not acknowledged in 10 s")), 10_000);
        waiting = () => {
          clearTimeout(t);
          resolve();
        };
        const cloudevent = { specversion: "1.0", id: eventId(), source: "urn:bench:web-fanout", type: "bench", datacontenttype: "text/plain", data: PAD };
        ws.send(JSON.stringify({ op: "event", topic: TOPIC, id: `1763893000000-${seq}`, cloudevent }));
      }),
    close: () => ws.close(),
  };
}

/**
 * The gateway's gRPC PublishEvent over one node:http2 session, the request serialized with the gateway's own proto
 * definition. Not a grpc-js client: with many topics the publisher makes one call per topic per event (one per 100
 * deliveries at 10,000 subscribers over 100 topics), and grpc-js's CPU per call then took a sizeable share of the two
 * cores beside the server being measured.
 */
async function gatewayPublisher(grpcPort: number): Promise<Publisher> {
  const service = gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as Record<string, { requestSerialize(value: object): Buffer }>;
  const serialize = service["PublishEvent"]!.requestSerialize;
  const session = http2.connect(`http://127.0.0.1:${grpcPort}`);
  session.on("error", () => undefined); // a failed session fails its calls, below
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("the gateway's gRPC port did not accept the publisher in 10 s")), 10_000);
    session.once("connect", () => {
      clearTimeout(t);
      resolve();
    });
    session.once("error", (e) => {
      clearTimeout(t);
      reject(e);
    });
  });
  const headers = { ":method": "POST", ":path": "/io.cloudevents.v1.Pubsub/PublishEvent", "content-type": "application/grpc", te: "trailers" };
  return {
    publish: (_seq, topic = TOPIC) =>
      new Promise<void>((resolve, reject) => {
        const body = serialize({ topic, cloudevent: { id: eventId(), source: "urn:bench:web-fanout", type: "bench", text_data: PAD } });
        const frame = Buffer.alloc(5 + body.length);
        frame.writeUInt32BE(body.length, 1);
        body.copy(frame, 5);
        const req = session.request(headers);
        let status: string | undefined;
        let message = "";
        const t = setTimeout(() => req.close(http2.constants.NGHTTP2_CANCEL), 10_000);
        const read = (h: http2.IncomingHttpHeaders): void => {
          if (h["grpc-status"] !== undefined) {
            status = String(h["grpc-status"]);
            message = String(h["grpc-message"] ?? "");
          }
        };
        req.on("response", read); // a trailers-only answer carries the status in the headers
        req.on("trailers", read);
        req.on("data", () => undefined);
        req.on("error", () => undefined); // the status check below reports it
        req.on("close", () => {
          clearTimeout(t);
          if (status === "0") resolve();
          else reject(new Error(`PublishEvent to ${topic}: ${status === undefined ? "no answer in 10 s or the stream failed" : `grpc-status ${status} ${decodeURIComponent(message)}`}`));
        });
        req.end(frame);
      }),
    close: () => session.close(),
  };
}

/**
 * The topics of a case: TOPIC alone, or TOPIC.0 ... TOPIC.(n-1).
 */
export function topicNames(n: number): string[] {
  return n <= 1 ? [TOPIC] : Array.from({ length: n }, (_, i) => `${TOPIC}.${i}`);
}

/**
 * Start the subscriber processes for one case. Subscriber g (counted over all processes) takes topic g mod the
 * topics' count: each process gets the list rotated by its first subscriber's index (web-subscribers.cjs).
 */
function startClients(system: WebSystem, server: Server, subs: number, topics: string[] = [TOPIC]): ChildProcess[] {
  const procs = Math.max(2, Math.ceil(subs / PER_CLIENT));
  const children: ChildProcess[] = [];
  let first = 0;
  for (let p = 0; p < procs; p++) {
    const n = Math.floor(subs / procs) + (p < subs % procs ? 1 : 0);
    const at = first % topics.length;
    const list = [...topics.slice(at), ...topics.slice(0, at)].join(",");
    first += n;
    const kind = system === "uws" ? "ws" : system;
    const port = system === "grpc" ? server.grpcPort : server.httpPort;
    const path = system === "uws" ? "/sub" : system === "ws" ? "/v1/pubsub/ws" : system === "sse" ? "/v1/pubsub/events" : "-";
    children.push(fork(join(here, "webfanout/web-subscribers.cjs"), [kind, String(port), path, list, String(n), "10"], { stdio: "inherit", execArgv: [] }));
  }
  for (const c of children) {
    live.add(c);
    c.once("exit", () => live.delete(c));
  }
  return children;
}

function ask(child: ChildProcess): Promise<ClientStats> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve({ ready: 0, delivered: 0, failed: 0, msgBytes: 0, latencies: [] }), 10_000);
    child.once("message", (m) => {
      clearTimeout(t);
      resolve(m as ClientStats);
    });
    child.send({ cmd: "stats" });
  });
}

async function totals(children: ChildProcess[]): Promise<ClientStats> {
  const all = await Promise.all(children.map(ask));
  return {
    ready: all.reduce((a, s) => a + s.ready, 0),
    delivered: all.reduce((a, s) => a + s.delivered, 0),
    failed: all.reduce((a, s) => a + s.failed, 0),
    msgBytes: Math.max(...all.map((s) => s.msgBytes)),
    latencies: all.flatMap((s) => s.latencies),
  };
}

/** Events and spacing per subscriber count (the peers harness' schedule). */
export function schedule(subs: number, quick: boolean, dryRun: boolean): { events: number; spacingMs: number } {
  if (dryRun) return { events: 10, spacingMs: 5 };
  if (subs >= 10_000) return { events: quick ? 20 : 60, spacingMs: 40 };
  return { events: quick ? 40 : 200, spacingMs: 5 };
}

/**
 * Measure one system at one subscriber count with a fresh server. topics > 1 (gateway WebSocket, SSE and node gRPC
 * only): the subscribers are spread evenly over that many topics and each event goes to every topic (one
 * PublishEvent per topic, all in flight together, the next event after all are acknowledged), so every subscriber
 * still receives every event and the deliveries per event equal the subscribers, as with one topic.
 */
export async function measureWeb(
  system: WebSystem,
  subs: number,
  opts: { quick?: boolean; dryRun?: boolean; threads?: number; events?: number; spacingMs?: number; topics?: number; gatewayDir?: string } = {},
): Promise<WebMeasured> {
  const planned = schedule(subs, opts.quick ?? false, opts.dryRun ?? false);
  const events = opts.events ?? planned.events;
  const spacingMs = opts.spacingMs ?? planned.spacingMs;
  const topics = topicNames(opts.topics ?? 1);
  if (topics.length > 1 && (system === "uws" || GO_SYSTEMS.includes(system))) throw new Error(`${system}: one topic only (the bare uWS server and the Go client use one)`);
  if (topics.length > subs) throw new Error(`${topics.length} topics for ${subs} subscribers: some topics would have none`);
  if (GO_SYSTEMS.includes(system)) return measureGo(system as GoSystem, subs, events, spacingMs, opts.dryRun ?? false);
  const server = await startServer(system, opts.dryRun ?? false, opts.threads, opts.gatewayDir);
  const children: ChildProcess[] = [];
  let publisher: Publisher | undefined;
  try {
    publisher = system === "uws" ? await uwsPublisher(server.httpPort) : await gatewayPublisher(server.grpcPort);
    // Warm the publish path (no subscriber yet), then take the idle baseline.
    for (let i = 0; i < 20; i++) await publisher.publish(-1 - i);
    await sleep(300);
    const mem0 = await memoryAfterGc(server);
    children.push(...startClients(system, server, subs, topics));
    const openBy = Date.now() + 60_000 + subs * 5;
    for (let s = await totals(children); s.ready < subs; s = await totals(children)) {
      if (s.failed > 0 || Date.now() > openBy) throw new Error(`${system}: ${s.ready} of ${subs} subscribers ready, ${s.failed} refused or closed`);
      await sleep(100);
    }
    await sleep(500);
    const mem1 = await memoryAfterGc(server);
    // Warm-up events that reach every subscriber before the measured window.
    const warm = 5;
    const publishAll = (seq: number): Promise<unknown> => Promise.all(topics.map((t) => publisher!.publish(seq, t)));
    for (let i = 0; i < warm; i++) await publishAll(i);
    const warmBy = Date.now() + 30_000;
    let base = await totals(children);
    while (base.delivered < warm * subs && Date.now() < warmBy) {
      await sleep(20);
      base = await totals(children);
    }
    if (base.delivered < warm * subs) throw new Error(`${system}: warm-up reached ${base.delivered} of ${warm * subs} deliveries`);
    const cpu0 = cpuUs(server.pid);
    const client0 = children.reduce((a, c) => a + (cpuUs(c.pid!) || 0), 0);
    const self0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < events; i++) {
      await publishAll(warm + i);
      const wait = t0 + (i + 1) * spacingMs - performance.now();
      if (wait > 0) await sleep(wait);
    }
    const expected = events * subs;
    const latencies: number[] = [];
    let s = await totals(children);
    for (const l of s.latencies) latencies.push(l); // not push(...): back-to-back runs sample more than the stack holds
    let delivered = s.delivered - base.delivered;
    let lastAt = performance.now();
    const doneBy = Date.now() + 60_000;
    while (delivered < expected && Date.now() < doneBy && performance.now() - lastAt < 5000) {
      await sleep(20);
      s = await totals(children);
      for (const l of s.latencies) latencies.push(l); // not push(...): back-to-back runs sample more than the stack holds
      if (s.delivered - base.delivered > delivered) {
        delivered = s.delivered - base.delivered;
        lastAt = performance.now();
      }
    }
    const cpu1 = cpuUs(server.pid);
    const client1 = children.reduce((a, c) => a + (cpuUs(c.pid!) || 0), 0);
    const self1 = process.cpuUsage(self0);
    latencies.sort((a, b) => a - b);
    return {
      system,
      subs,
      serverCpuUsPerDelivery: (cpu1 - cpu0) / Math.max(1, delivered),
      clientCpuUsPerDelivery: (client1 - client0) / Math.max(1, delivered),
      publisherCpuUsPerDelivery: (self1.user + self1.system) / Math.max(1, delivered),
      deliveriesPerSec: delivered / ((lastAt - t0) / 1000),
      p50Us: quantile(latencies, 0.5),
      p99Us: quantile(latencies, 0.99),
      idleBytesPerSubscriber: (mem1.rss - mem0.rss) / subs,
      idleHeapBytesPerSubscriber: (mem1.heap - mem0.heap) / subs,
      delivered,
      expected,
      msgBytes: s.msgBytes || base.msgBytes,
    };
  } finally {
    for (const c of children) if (c.connected) c.send({ cmd: "close" });
    await sleep(200);
    for (const c of children) c.kill();
    publisher?.close();
    await stopServer(server);
  }
}

/** gRPC Subscribe against a fresh gateway, driven by the Go load client exactly as ../shared/peers/run_fanout.py does. */
async function measureGo(system: GoSystem, subs: number, events: number, spacingMs: number, dryRun: boolean): Promise<WebMeasured> {
  if (!existsSync(FANOUTLOAD)) throw new Error(`${system} needs the peers' Go load client at ${FANOUTLOAD} (build: ../shared/peers/build.sh, or set FANOUTLOAD)`);
  const server = await startServer("grpc", dryRun);
  try {
    const argv = ["-system", "grpc", "-addr", `127.0.0.1:${server.grpcPort}`, "-subs", String(subs), "-conns", String(subs), "-events", String(events), "-spacing-ms", String(spacingMs), "-server-pid", String(server.pid), "-label", `gateway/conn/${subs}`, "-topic", TOPIC];
    if (system === "grpc-go-nobdp") argv.push("-grpc-static-window");
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn(FANOUTLOAD, argv, { stdio: ["ignore", "pipe", "pipe"] });
      live.add(p);
      let stdout = "";
      let stderr = "";
      p.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
      p.stderr!.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
      const t = setTimeout(() => p.kill("SIGKILL"), 600_000);
      p.once("exit", (code) => {
        clearTimeout(t);
        live.delete(p);
        if (code === 0) resolve(stdout);
        else reject(new Error(`fanoutload exited ${code}: ${stderr}`));
      });
    });
    const line = out.split("\n").filter((l) => l.startsWith("{")).pop();
    if (!line) throw new Error("fanoutload printed no result");
    const r = JSON.parse(line) as Record<string, number>;
    return {
      system,
      subs,
      serverCpuUsPerDelivery: r["server_cpu_us_per_delivery"]!,
      clientCpuUsPerDelivery: r["client_cpu_us_per_delivery"]!,
      deliveriesPerSec: r["deliveries_per_s"]!,
      p50Us: r["p50_us"]!,
      p99Us: r["p99_us"]!,
      // fanoutload samples RSS without a GC: comparable with the peers' figures, not with this bench's others.
      idleBytesPerSubscriber: r["server_rss_idle_bytes_per_sub"]!,
      idleHeapBytesPerSubscriber: 0,
      delivered: r["delivered"]!,
      expected: r["expected"]!,
      msgBytes: r["delivered_msg_bytes"]!,
    };
  } finally {
    await stopServer(server);
  }
}

/** Per-field median of repetitions (the spread of CPU per delivery goes into the figure notes). */
export function medianOf(xs: WebMeasured[]): WebMeasured & { cpuRange?: [number, number] } {
  const med = (f: (x: WebMeasured) => number): number => {
    const v = xs.map(f).sort((a, b) => a - b);
    return v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
  };
  const cpu = xs.map((x) => x.serverCpuUsPerDelivery);
  return {
    system: xs[0]!.system,
    subs: xs[0]!.subs,
    serverCpuUsPerDelivery: med((x) => x.serverCpuUsPerDelivery),
    clientCpuUsPerDelivery: med((x) => x.clientCpuUsPerDelivery),
    publisherCpuUsPerDelivery: med((x) => x.publisherCpuUsPerDelivery ?? 0),
    deliveriesPerSec: med((x) => x.deliveriesPerSec),
    p50Us: med((x) => x.p50Us),
    p99Us: med((x) => x.p99Us),
    idleBytesPerSubscriber: med((x) => x.idleBytesPerSubscriber),
    idleHeapBytesPerSubscriber: med((x) => x.idleHeapBytesPerSubscriber ?? 0),
    delivered: xs.reduce((a, x) => a + x.delivered, 0),
    expected: xs.reduce((a, x) => a + x.expected, 0),
    msgBytes: Math.max(...xs.map((x) => x.msgBytes)),
    ...(xs.length > 1 ? { cpuRange: [Math.min(...cpu), Math.max(...cpu)] as [number, number] } : {}),
  };
}

const LABEL: Record<WebSystem, string> = {
  uws: "bare uWS native publish",
  ws: "gateway WebSocket",
  sse: "gateway SSE",
  grpc: "gateway gRPC Subscribe",
  "grpc-go": "gateway gRPC Subscribe (grpc-go clients, BDP pings)",
  "grpc-go-nobdp": "gateway gRPC Subscribe (grpc-go clients, no BDP pings)",
};

/** Figures for one subscriber count: every gateway transport against bare uWS, and WebSocket against gRPC Subscribe. */
export function webFigures(n: number, m: Partial<Record<WebSystem, WebMeasured>> & { uws: WebMeasured }, events: string): object[] {
  const uws = { label: LABEL.uws };
  const figs: object[] = [];
  const range = (x: WebMeasured & { cpuRange?: [number, number] }): string => (x.cpuRange ? ` [${x.cpuRange[0].toFixed(2)}-${x.cpuRange[1].toFixed(2)} us]` : "");
  const note = (x: WebMeasured): string =>
    `median of repetitions: server CPU/delivery ${x.serverCpuUsPerDelivery.toFixed(2)}${range(x)} vs bare uWS ${m.uws.serverCpuUsPerDelivery.toFixed(2)}${range(m.uws)} us; ${LABEL[x.system]} delivered ${x.delivered}/${x.expected} (${m.uws.delivered}/${m.uws.expected} bare uWS), ${x.msgBytes} B per message (${m.uws.msgBytes} B bare uWS); client CPU ${x.clientCpuUsPerDelivery.toFixed(2)} us/delivery (${m.uws.clientCpuUsPerDelivery.toFixed(2)} bare uWS); ${events}`;
  for (const sys of ["ws", "sse", "grpc", "grpc-go", "grpc-go-nobdp"] as const) {
    const x = m[sys];
    if (!x) continue;
    figs.push(
      { id: `${sys}-cpu-per-delivery-${n}`, label: `${LABEL[sys]}: server CPU per delivery, ${n} subscribers`, value: x.serverCpuUsPerDelivery, unit: "us", better: "lower", baseline: { ...uws, value: m.uws.serverCpuUsPerDelivery }, note: note(x) },
      { id: `${sys}-deliveries-per-s-${n}`, label: `${LABEL[sys]}: deliveries per second, ${n} subscribers`, value: x.deliveriesPerSec, unit: "1/s", better: "higher", baseline: { ...uws, value: m.uws.deliveriesPerSec } },
      { id: `${sys}-p50-latency-${n}`, label: `${LABEL[sys]}: p50 publish-to-delivery, ${n} subscribers`, value: x.p50Us, unit: "us", better: "lower", baseline: { ...uws, value: m.uws.p50Us } },
      { id: `${sys}-p99-latency-${n}`, label: `${LABEL[sys]}: p99 publish-to-delivery, ${n} subscribers`, value: x.p99Us, unit: "us", better: "lower", baseline: { ...uws, value: m.uws.p99Us } },
      { id: `${sys}-client-cpu-per-delivery-${n}`, label: `${LABEL[sys]}: load client CPU per delivery, ${n} subscribers`, value: x.clientCpuUsPerDelivery, unit: "us", better: "lower", baseline: { ...uws, value: m.uws.clientCpuUsPerDelivery } },
      {
        id: `${sys}-idle-bytes-per-subscriber-${n}`,
        label: `${LABEL[sys]}: server RSS per idle subscriber, ${n} subscribers`,
        value: x.idleBytesPerSubscriber,
        unit: "bytes",
        better: "lower",
        baseline: { ...uws, value: m.uws.idleBytesPerSubscriber },
        note: GO_SYSTEMS.includes(sys)
          ? "sampled by the Go client without a GC (the peers' method)"
          : `after a full GC (--expose-gc); V8 heap in use ${Math.round(x.idleHeapBytesPerSubscriber ?? 0)} B per subscriber (bare uWS ${Math.round(m.uws.idleHeapBytesPerSubscriber ?? 0)} B)`,
      },
    );
  }
  const clients: Record<string, string> = { grpc: "node:http2 clients, no pings", "grpc-go": "grpc-go clients with BDP pings", "grpc-go-nobdp": "grpc-go clients, static windows" };
  for (const g of ["grpc", "grpc-go", "grpc-go-nobdp"] as const) {
    const x = m[g];
    if (!m.ws || !x) continue;
    figs.push({
      id: `ws-vs-${g}-cpu-per-delivery-${n}`,
      label: `gateway WebSocket vs ${LABEL[g]}: server CPU per delivery, ${n} subscribers`,
      value: m.ws.serverCpuUsPerDelivery,
      unit: "us",
      better: "lower",
      baseline: { label: LABEL[g], value: x.serverCpuUsPerDelivery },
      note: `one connection per subscriber for both (gRPC: ${clients[g]}); ${events}`,
    });
  }
  // A baseline that measured nothing (CPU below the 10 ms clock tick on a dry run, no latency sample) gives no ratio:
  // drop it rather than report a ratio to 0.
  return figs.map((f) => {
    const b = (f as { baseline?: { value: number } }).baseline;
    if (b && Number.isFinite(b.value) && b.value > 0) return f;
    const { baseline: _dropped, ...rest } = f as { baseline?: unknown; note?: string };
    return { ...rest, note: `${rest.note ? `${rest.note}; ` : ""}baseline measured 0 or nothing (below the clock tick), no ratio` };
  });
}

/** Run the web fan-out bench; resolves figures (value: a gateway transport, baseline: bare uWS or gRPC Subscribe). */
export async function runWebFanoutBench(options: WebFanoutOptions = {}): Promise<{ figures: object[] }> {
  const log = options.log ?? ((l: string) => process.stderr.write(`[web-fanout] ${l}\n`));
  const dryRun = options.dryRun ?? false;
  const quick = options.quick ?? false;
  const counts = options.subs ?? (dryRun ? [20] : quick ? [1000] : [1000, 10_000]);
  if (!dryRun) ensureBuilt(log);
  const figures: object[] = [];
  for (const n of counts) {
    const systems = options.systems ?? (["uws", "ws", "sse", "grpc"] as const);
    const reps = options.reps ?? (dryRun || quick ? 1 : n >= 10_000 ? 2 : 3);
    const runs = new Map<WebSystem, WebMeasured[]>(systems.map((s) => [s, []]));
    for (let rep = 0; rep < reps; rep++) {
      // Rotate the order per repetition so that a noisy neighbour does not always hit the same system.
      for (let k = 0; k < systems.length; k++) {
        const sys = systems[(k + rep) % systems.length]!;
        options.signal?.throwIfAborted();
        const x = await measureWeb(sys, n, { quick, dryRun, ...(options.threads ? { threads: options.threads } : {}) });
        runs.get(sys)!.push(x);
        log(
          `${LABEL[sys]}, ${n} subscribers${reps > 1 ? ` (${rep + 1}/${reps})` : ""}: ${x.serverCpuUsPerDelivery.toFixed(2)} us server CPU/delivery, ${x.clientCpuUsPerDelivery.toFixed(2)} us client, ${Math.round(x.deliveriesPerSec)}/s, p50 ${Math.round(x.p50Us)} us, p99 ${Math.round(x.p99Us)} us, ${Math.round(x.idleBytesPerSubscriber)} B/idle sub (heap ${Math.round(x.idleHeapBytesPerSubscriber ?? 0)} B), ${x.delivered}/${x.expected}`,
        );
      }
    }
    const m = Object.fromEntries([...runs].map(([sys, xs]) => [sys, medianOf(xs)])) as Partial<Record<WebSystem, WebMeasured>> & { uws: WebMeasured };
    const { events, spacingMs } = schedule(n, quick, dryRun);
    figures.push(...webFigures(n, m, `${events} events of 256 B, ${spacingMs} ms apart, after 5 warm-up events`));
  }
  return { figures };
}

/** Options of runThreadScalingBench. */
export interface ThreadScalingOptions {
  /** Thread counts, the first one the baseline. Default [1, 2]. */
  threads?: number[];
  /** Subscribers. Default 10,000 (20 on a dry run). */
  subs?: number;
  /** Repetitions, the order of thread counts rotating; medians reported. Default 2 (1 on a dry run). */
  reps?: number;
  /** Events published per case. Default 200 (10 on a dry run). */
  events?: number;
  /** Spacing of the publishes, ms (each also waits for its acknowledgement). Default 0: back to back. */
  spacingMs?: number;
  /** Topics the subscribers are spread over, each event published to all (measureWeb). Default 1. */
  topics?: number;
  dryRun?: boolean;
  log?: (line: string) => void;
}

/**
 * WebSocket fan-out capacity by uWS thread count: a fresh gateway per case with `--threads n`, the same
 * subscribers and events, events published back to back. Figures: deliveries/s and server CPU per delivery of each
 * count against the first.
 */
export async function runThreadScalingBench(options: ThreadScalingOptions = {}): Promise<{ figures: object[] }> {
  const log = options.log ?? ((l: string) => process.stderr.write(`[web-fanout threads] ${l}\n`));
  const dryRun = options.dryRun ?? false;
  const counts = options.threads ?? [1, 2];
  const subs = options.subs ?? (dryRun ? 20 : 10_000);
  const reps = options.reps ?? (dryRun ? 1 : 2);
  const events = options.events ?? (dryRun ? 10 : 200);
  const spacingMs = options.spacingMs ?? 0;
  const topics = options.topics ?? 1;
  if (!dryRun) ensureBuilt(log);
  const runs = new Map<number, WebMeasured[]>(counts.map((t) => [t, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < counts.length; k++) {
      const t = counts[(k + rep) % counts.length]!;
      const x = await measureWeb("ws", subs, { dryRun, threads: t, events, spacingMs, topics });
      runs.get(t)!.push(x);
      log(`--threads ${t}, ${subs} WebSocket subscribers (${rep + 1}/${reps}): ${Math.round(x.deliveriesPerSec)} deliveries/s, ${x.serverCpuUsPerDelivery.toFixed(2)} us server CPU/delivery, ${x.clientCpuUsPerDelivery.toFixed(2)} us client, p50 ${Math.round(x.p50Us)} us, ${x.delivered}/${x.expected}`);
    }
  }
  const med = new Map([...runs].map(([t, xs]) => [t, medianOf(xs)]));
  const base = med.get(counts[0]!)!;
  const figures: object[] = [];
  for (const t of counts.slice(1)) {
    const x = med.get(t)!;
    const note = `median of ${reps}; ${events} events of 256 B${topics > 1 ? ` to each of ${topics} topics` : ""} published ${spacingMs > 0 ? `${spacingMs} ms apart` : "back to back"}; delivered ${x.delivered}/${x.expected} (${base.delivered}/${base.expected} at --threads ${counts[0]}); client CPU ${x.clientCpuUsPerDelivery.toFixed(2)} us/delivery (${base.clientCpuUsPerDelivery.toFixed(2)})`;
    figures.push(
      { id: `ws-threads-${t}-deliveries-per-s-${subs}`, label: `gateway WebSocket --threads ${t}: deliveries per second, ${subs} subscribers`, value: x.deliveriesPerSec, unit: "1/s", better: "higher", baseline: { label: `--threads ${counts[0]}`, value: base.deliveriesPerSec }, note },
      { id: `ws-threads-${t}-cpu-per-delivery-${subs}`, label: `gateway WebSocket --threads ${t}: server CPU per delivery, ${subs} subscribers`, value: x.serverCpuUsPerDelivery, unit: "us", better: "lower", baseline: { label: `--threads ${counts[0]}`, value: base.serverCpuUsPerDelivery } },
    );
  }
  return { figures };
}

/** Options of runBuildsBench. */
export interface BuildsOptions {
  /** Two built checkouts, BASE first: each runs its own `dist/src/main/cli.js`. */
  dirs: [string, string];
  /** `--threads` of the gateway. Default 2. */
  threads?: number;
  /** Subscribers. Default 10,000. */
  subs?: number;
  /** Topics the subscribers are spread over (each event goes to every topic). Default 100. */
  topics?: number;
  /** Repetitions; which build goes first alternates. Default 2. */
  reps?: number;
  /** Events per case (each to every topic). Default 200. */
  events?: number;
  /** Spacing of the events, ms. Default 0: back to back (each waits for its acknowledgements). */
  spacingMs?: number;
  log?: (line: string) => void;
}

/** What runBuildsBench reports: per build the per-field medians, and the per-repetition ratios NEW/BASE. */
export interface BuildsResult {
  base: WebMeasured & { cpuRange?: [number, number] };
  new: WebMeasured & { cpuRange?: [number, number] };
  /** Per repetition, NEW/BASE of the same repetition, per figure. */
  ratios: Record<BuildsFigure, number[]>;
  table: string;
}

type BuildsFigure = "deliveriesPerSec" | "serverCpuUsPerDelivery" | "p50Us" | "p99Us" | "clientCpuUsPerDelivery" | "idleBytesPerSubscriber";
const BUILDS_FIGURES: ReadonlyArray<[BuildsFigure, string, "higher" | "lower", number]> = [
  ["deliveriesPerSec", "deliveries/s", "higher", 0],
  ["serverCpuUsPerDelivery", "server CPU per delivery, us", "lower", 2],
  ["p50Us", "p50 publish-to-delivery, us", "lower", 0],
  ["p99Us", "p99 publish-to-delivery, us", "lower", 0],
  ["clientCpuUsPerDelivery", "load-client CPU per delivery, us", "lower", 2],
  ["idleBytesPerSubscriber", "server RSS per idle subscriber after a full GC, B", "lower", 0],
];

/**
 * Gateway WebSocket fan-out of two builds in one run: a fresh gateway per case from each checkout in turn (the one
 * that goes first alternating per repetition), the same subscribers, topics and events. Figures per build are
 * per-field medians; the ratios are NEW/BASE of the same repetition, their median in the table. The share of the two
 * cores the load clients and the server took is CPU per delivery x deliveries/s (a client share near the cores left
 * by the server means the clients bounded deliveries/s).
 */
export async function runBuildsBench(options: BuildsOptions): Promise<BuildsResult> {
  const log = options.log ?? ((l: string) => process.stderr.write(`[web-fanout builds] ${l}\n`));
  const [baseDir, newDir] = options.dirs;
  const threads = options.threads ?? 2;
  const subs = options.subs ?? 10_000;
  const topics = options.topics ?? 100;
  const reps = options.reps ?? 2;
  const events = options.events ?? 200;
  const spacingMs = options.spacingMs ?? 0;
  for (const d of options.dirs) {
    if (!existsSync(join(d, "dist/src/main/cli.js"))) throw new Error(`${d}: no dist/src/main/cli.js (bench/peers/prepare.sh REF ${d} builds one)`);
  }
  const runs: Record<"base" | "new", WebMeasured[]> = { base: [], new: [] };
  for (let rep = 0; rep < reps; rep++) {
    const order = rep % 2 === 0 ? (["base", "new"] as const) : (["new", "base"] as const);
    for (const side of order) {
      const x = await measureWeb("ws", subs, { threads, events, spacingMs, topics, gatewayDir: side === "base" ? baseDir : newDir });
      runs[side].push(x);
      log(
        `${side.toUpperCase()} (${rep + 1}/${reps}): ${Math.round(x.deliveriesPerSec)} deliveries/s, ${x.serverCpuUsPerDelivery.toFixed(2)} us server CPU/delivery, ${x.clientCpuUsPerDelivery.toFixed(2)} us client, p50 ${Math.round(x.p50Us)} us, p99 ${Math.round(x.p99Us)} us, ${x.delivered}/${x.expected}; cores server / clients / publisher ${coreSplit(x)}`,
      );
    }
  }
  const ratios = Object.fromEntries(
    BUILDS_FIGURES.map(([f]) => [f, runs.base.map((b, i) => (b[f] > 0 ? runs.new[i]![f] / b[f] : Number.NaN))]),
  ) as Record<BuildsFigure, number[]>;
  const base = medianOf(runs.base);
  const neu = medianOf(runs.new);
  const med = (xs: number[]): number => {
    const v = xs.filter((x) => x === x).sort((a, b) => a - b);
    return v.length === 0 ? Number.NaN : v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
  };
  const lines = [
    `Gateway WebSocket fan-out, --threads ${threads}, ${subs} subscribers over ${topics} topic${topics > 1 ? "s" : ""}, ${events} events of 256 B${topics > 1 ? " to every topic" : ""} ${spacingMs > 0 ? `${spacingMs} ms apart` : "back to back"}, ${reps} repetition${reps > 1 ? "s" : ""} (BASE ${baseDir}, NEW ${newDir})`,
    "",
    "| figure | BASE | NEW | NEW/BASE (median of reps) | per rep |",
    "|---|---:|---:|---:|---|",
    ...BUILDS_FIGURES.map(([f, label, better, nd]) => {
      const r = ratios[f];
      return `| ${label} (${better} is better) | ${base[f].toFixed(nd)} | ${neu[f].toFixed(nd)} | ${med(r).toFixed(2)} | ${r.map((x) => x.toFixed(2)).join(", ")} |`;
    }),
    `| delivered / expected | ${base.delivered}/${base.expected} | ${neu.delivered}/${neu.expected} | | |`,
    `| cores used: server / load clients / publisher (of ${availableParallelism()}) | ${coreSplit(base)} | ${coreSplit(neu)} | | |`,
  ];
  return { base, new: neu, ratios, table: lines.join("\n") };
}

/** Cores the server, the load clients and the publisher took while delivering: CPU per delivery x deliveries/s. */
function coreSplit(x: WebMeasured): string {
  const cores = (usPerDelivery: number): string => ((usPerDelivery * x.deliveriesPerSec) / 1e6).toFixed(2);
  return `${cores(x.serverCpuUsPerDelivery)} / ${cores(x.clientCpuUsPerDelivery)} / ${cores(x.publisherCpuUsPerDelivery ?? 0)}`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const argv = process.argv.slice(2);
  const usage = (message: string): never => {
    console.error(`bench/webfanout.ts: ${message}`);
    process.exit(2);
  };
  const tat = argv.indexOf("--threads");
  const threadCounts = tat >= 0 ? argv[tat + 1]!.split(",").map(Number) : undefined;
  const at = argv.indexOf("--subs");
  const subs = at >= 0 ? argv[at + 1]!.split(",").map(Number) : undefined;
  const rat = argv.indexOf("--reps");
  const reps = rat >= 0 ? Number(argv[rat + 1]) : undefined;
  const sat = argv.indexOf("--systems");
  const systems = sat >= 0 ? (argv[sat + 1]!.split(",") as WebSystem[]) : undefined;
  const eat = argv.indexOf("--events");
  const events = eat >= 0 ? Number(argv[eat + 1]) : undefined;
  const toat = argv.indexOf("--topics");
  const topics = toat >= 0 ? Number(argv[toat + 1]) : undefined;
  if (topics !== undefined && !(Number.isInteger(topics) && topics >= 1)) usage(`--topics: a whole number of at least 1, not ${argv[toat + 1]}`);
  const dat = argv.indexOf("--gateway-dirs");
  const dirs = dat >= 0 ? argv[dat + 1]!.split(",") : undefined;
  if (dirs && dirs.length !== 2) usage("--gateway-dirs BASE,NEW: two built checkouts");
  const spacingMs = argv.includes("--spacing") ? Number(argv[argv.indexOf("--spacing") + 1]) : undefined;
  const scaling = threadCounts !== undefined && threadCounts.length > 1;
  if (topics !== undefined && topics > 1 && !dirs && !scaling) {
    usage("--topics applies to --threads a,b and --gateway-dirs runs (the bare uWS baseline publishes to one topic)");
  }
  const figureLines = (r: { figures: object[] }): string =>
    (r.figures as Array<{ label: string; value: number; unit: string; baseline?: { value: number } }>)
      .map((f) => {
        const b = f.baseline?.value;
        const ratio = b ? (f.value / b).toFixed(2) : "-";
        return `${f.label.padEnd(80)} ${f.value.toFixed(2).padStart(12)} ${f.unit.padEnd(6)} baseline ${(b ?? NaN).toFixed(2).padStart(12)}  ratio ${ratio}`;
      })
      .join("\n");
  const run: Promise<string> = dirs
    ? runBuildsBench({
        dirs: [dirs[0]!, dirs[1]!],
        ...(threadCounts ? { threads: threadCounts[0]! } : {}),
        ...(subs ? { subs: subs[0]! } : {}),
        ...(topics ? { topics } : {}),
        ...(reps ? { reps } : {}),
        ...(events ? { events } : {}),
        ...(spacingMs !== undefined ? { spacingMs } : {}),
      }).then((r) => r.table)
    : scaling
      ? runThreadScalingBench({
          threads: threadCounts,
          dryRun: argv.includes("--dry-run"),
          ...(subs ? { subs: subs[0]! } : {}),
          ...(reps ? { reps } : {}),
          ...(events ? { events } : {}),
          ...(spacingMs !== undefined ? { spacingMs } : {}),
          ...(topics ? { topics } : {}),
        }).then(figureLines)
      : runWebFanoutBench({
          quick: argv.includes("--quick"),
          dryRun: argv.includes("--dry-run"),
          ...(subs ? { subs } : {}),
          ...(systems ? { systems } : {}),
          ...(reps ? { reps } : {}),
          ...(threadCounts ? { threads: threadCounts[0]! } : {}),
        }).then(figureLines);
  run.then(
    (text) => {
      console.log(text);
      process.exit(0);
    },
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
