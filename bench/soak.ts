/**
 * Mixed soak of the gateway, to watch its memory over time: `tsx bench/soak.ts [minutes] [--json-out file]`
 * (default 10 minutes). The gateway runs in a child process (embedded runtime, ports on 127.0.0.1 only) in front of
 * the order test backend in another; this process drives, all at once and each loop bounded:
 *   - subscribe/cancel churn: gRPC Subscribe streams on a few topics, each cancelled after 50-500 ms;
 *   - publish: PublishEvent to those topics;
 *   - state writes with etags: GetState, then SaveState with that etag (some deliberately stale: ABORTED expected);
 *   - invokes with cancellations: InvokeJson to a backend method that sleeps, half cancelled after 20-100 ms.
 * The gateway's RSS is sampled every 10 s. At the end one JSON object is printed: RSS at start and end, and the slope
 * in MiB/min fitted (least squares) over the samples after a warm-up of the first fifth of the run, plus counts of
 * every outcome so an error rate is visible.
 */
import { fork, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
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
  process.on("message", (m) => {
    if (m === "rss") process.send?.({ rss: process.memoryUsage().rss });
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

function rssOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("no RSS reply within 10 s")), 10_000);
    const on = (m: { rss?: number }): void => {
      if (m.rss === undefined) return;
      clearTimeout(t);
      child.off("message", on);
      resolve(m.rss);
    };
    child.on("message", on);
    child.send("rss");
  });
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
  const minutes = Number(args.find((a, i) => !a.startsWith("--") && (outAt < 0 || i !== outAt + 1)) ?? 10);
  if (!(minutes > 0 && minutes <= 120)) throw new Error(`minutes must be in (0, 120], got ${minutes}`);
  const durationMs = minutes * 60_000;

  const backend = fork(INVOKE_CHILD, ["backend"], { execArgv: ["--import", "tsx"] });
  const { port: backendPort } = await ready<{ port: number }>(backend);
  const gateway = fork(SELF, ["--gateway-child", String(backendPort)], { execArgv: ["--import", "tsx"] });
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
  const samples: Array<[number, number]> = [];
  const sampler = (async () => {
    while (running()) {
      samples.push([(Date.now() - started) / 60_000, (await rssOf(gateway)) / (1024 * 1024)]);
      await sleep(Math.min(10_000, Math.max(0, end - Date.now())));
    }
    samples.push([(Date.now() - started) / 60_000, (await rssOf(gateway)) / (1024 * 1024)]);
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
