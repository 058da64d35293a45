/**
 * CPU per unary call of the transparent gRPC proxy (a backend method called on the gateway's port, bytes forwarded)
 * against a bare grpc-js pass-through proxy (bench/invoke/passthru-proxy.ts) in the same run. Backend, gateway and
 * baseline proxy each run in a child process; this process is the load (a raw-bytes client, concurrency 32, 1 KiB
 * PutOrder). Batches alternate baseline / gateway so drift hits both; CPU is read from /proc/<pid>/stat.
 * `npx tsx bench/invoke/proxy-cpu.ts [calls per batch] [batches]`. Linux only; not part of the harness.
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";

const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
const ready = (cp: ReturnType<typeof fork>): Promise<any> => new Promise((r) => cp.once("message", (m: any) => r(m.ready)));
const tsx = { execArgv: ["--import", "tsx"] };
const be = fork(here("./child.ts"), ["backend"], tsx);
const { port } = await ready(be);
const gw = fork(here("./child.ts"), ["gateway", String(port)], tsx);
const { grpcPort } = await ready(gw);
const pt = fork(here("./passthru-proxy.ts"), [String(port)], tsx);
const { port: ptPort } = await ready(pt);

const ticks = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(f[11]) + Number(f[12]);
};
const id = (b: Buffer): Buffer => b;
// shop.v1.Order {order_id: "bench-1", payload: 1 KiB}
const request = Buffer.concat([Buffer.from([0x0a, 7]), Buffer.from("bench-1"), Buffer.from([0x62, 0x80, 0x08]), Buffer.alloc(1024, 7)]);
const path = "/shop.v1.OrderService/PutOrder";
const clientOf = (p: number): grpc.Client => new grpc.Client(`127.0.0.1:${p}`, grpc.credentials.createInsecure());
const call = (c: grpc.Client): Promise<Buffer> =>
  new Promise((res, rej) => c.makeUnaryRequest(path, id, id, request, new grpc.Metadata(), (e, r) => (e ? rej(e) : res(r!))));

const viaGateway = clientOf(grpcPort);
const viaBaseline = clientOf(ptPort);
// The gateway routes the backend's services once its reflection answered.
for (let i = 0; ; i++) {
  try {
    await call(viaGateway);
    break;
  } catch (e) {
    if (i > 200) throw e;
    await new Promise((r) => setTimeout(r, 25));
  }
}
const N = Number(process.argv[2] ?? 4000);
const BATCHES = Number(process.argv[3] ?? 3);
const batch = async (c: grpc.Client, pid: number): Promise<number> => {
  const t0 = ticks(pid);
  let n = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (n < N) {
      n++;
      const r = await call(c);
      if (!r.equals(request)) throw new Error("the echo differs from the request");
    }
  }));
  return ((ticks(pid) - t0) * 10_000) / N; // 100 Hz ticks -> us per call
};
for (let i = 0; i < 500; i++) await Promise.all([call(viaGateway), call(viaBaseline)]);
const base: number[] = [];
const gate: number[] = [];
for (let b = 0; b < BATCHES; b++) {
  base.push(await batch(viaBaseline, pt.pid!));
  gate.push(await batch(viaGateway, gw.pid!));
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const b = median(base);
const g = median(gate);
console.log(JSON.stringify({ callsPerBatch: N, batches: BATCHES, baselineUsPerCall: base.map(Math.round), gatewayUsPerCall: gate.map(Math.round), ratio: Number((g / b).toFixed(2)) }));
viaGateway.close();
viaBaseline.close();
for (const cp of [gw, pt, be]) cp.disconnect();
