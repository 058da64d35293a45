/**
 * Should a uWS thread's unary backend calls go over the main thread's connections instead of its own? One backend
 * call (the order backend's PutOrder, a ~600-byte request, in a child process) made from a worker thread two ways,
 * alternating: `own`, on the thread's own raw-frame client (src/backends/h2-unary.ts, what a thread does), and `hop`,
 * asked of the main thread over the gateway's bridge (src/threads/bridge.ts), which makes the call on its client and
 * sends the reply bytes back: the least a thread forwarding its invokes to one set of process channels would add.
 * Reports per arm and concurrency the wall time per call (latency at c=1) and the process CPU per call (every thread).
 * `npx tsx bench/threads/unary-hop.ts [calls per batch, default 3000] [reps, default 3]`. Short; not part of the harness.
 */
import { fork } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import * as grpc from "@grpc/grpc-js";
import { createH2UnaryClient } from "../../src/backends/h2-unary.js";
import { createBridge } from "../../src/threads/bridge.js";

const PATH = "/shop.v1.OrderService/PutOrder";
/** A PutOrder request: shop.v1.Order with an order id and nine items, encoded once by the parent. */
const BRIDGE = { timeoutMs: 30_000, maxPending: 10_000 };

interface Job {
  arm: "own" | "hop";
  concurrency: number;
  calls: number;
}

if (isMainThread) {
  const [calls = 3000, reps = 3] = process.argv.slice(2).map(Number);
  const child = fork(fileURLToPath(new URL("../invoke/child.ts", import.meta.url)), ["backend"], { execArgv: ["--import", "tsx"] });
  const port = await new Promise<number>((r) => child.once("message", (m: { ready: { port: number } }) => r(m.ready.port)));
  const address = `127.0.0.1:${port}`;
  // The main thread's own connections, as the gateway's main thread holds them.
  const main = createH2UnaryClient({ address, connections: 4, maxReceiveBytes: 4 << 20 });
  const md = new grpc.Metadata();
  const body = Buffer.from((await import("./unary-hop-body.js")).putOrderBody());
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const worker = new Worker(`import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(fileURLToPath(import.meta.url)).href)}); })`, {
    eval: true,
    workerData: { address, body },
  });
  const bridge = createBridge(
    worker,
    {
      // The hop: the thread's request bytes, called on the main thread's client; the reply bytes go back.
      call: async (p: { body: Uint8Array }) => {
        const o = await main.call(PATH, Buffer.from(p.body.buffer, p.body.byteOffset, p.body.byteLength), md, Date.now() + 30_000);
        if (!o.ok) throw new Error(o.message);
        return o.bytes;
      },
    },
    { ...BRIDGE, peer: "the bench thread" },
  );
  worker.on("message", (m: unknown) => void bridge.receive(m));
  await new Promise<void>((r) => worker.once("online", () => r()));
  const rows: Record<string, { wall: number[]; cpu: number[] }> = {};
  for (let rep = -1; rep < reps; rep++) {
    for (const concurrency of [1, 16]) {
      for (const arm of ["own", "hop"] as const) {
        const cpu0 = process.cpuUsage();
        const t0 = process.hrtime.bigint();
        await bridge.call<null>("run", { arm, concurrency, calls: rep < 0 ? 500 : calls } satisfies Job, undefined, 120_000);
        const wall = Number(process.hrtime.bigint() - t0) / 1e3 / calls;
        const u = process.cpuUsage(cpu0);
        if (rep < 0) continue; // warm-up
        const row = (rows[`${arm} c=${concurrency}`] ??= { wall: [], cpu: [] });
        row.wall.push(wall);
        row.cpu.push((u.user + u.system) / calls);
      }
    }
  }
  const med = (x: number[]): string => [...x].sort((a, b) => a - b)[x.length >> 1]!.toFixed(1);
  console.log(`${calls} calls per batch, ${reps} reps, median; us per call (wall, then gateway-process CPU incl. every thread)`);
  for (const [k, v] of Object.entries(rows)) console.log(`${k.padEnd(10)} wall ${med(v.wall).padStart(7)} us   cpu ${med(v.cpu).padStart(7)} us`);
  await bridge.call("exit", {}).catch(() => undefined);
  await worker.terminate();
  main.close();
  child.disconnect();
} else {
  const { address, body } = workerData as { address: string; body: Uint8Array };
  const own = createH2UnaryClient({ address, connections: 4, maxReceiveBytes: 4 << 20 });
  const md = new grpc.Metadata();
  const request = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const bridge = createBridge(
    parentPort!,
    {
      run: async (job: Job) => {
        let left = job.calls;
        const one = async (): Promise<void> => {
          if (job.arm === "own") {
            const o = await own.call(PATH, request, md, Date.now() + 30_000);
            if (!o.ok) throw new Error(o.message);
          } else await bridge.call("call", { body: request });
        };
        await Promise.all(Array.from({ length: job.concurrency }, async () => {
          while (left-- > 0) await one();
        }));
        return null;
      },
      exit: async () => {
        own.close();
        return null;
      },
    },
    { ...BRIDGE, peer: "the main thread" },
  );
  parentPort!.on("message", (m: unknown) => void bridge.receive(m));
}
