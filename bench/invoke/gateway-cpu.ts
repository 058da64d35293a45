/**
 * The gateway's own CPU per InvokeJson call, read from /proc/<pid>/stat of a gateway child process (backend and
 * gateway each in a child, load from this one): three batches at concurrency 64 after a warm-up, the first batch
 * still warming up. `npx tsx bench/invoke/gateway-cpu.ts [calls per batch]`; `GW_CPU_PROF=<dir>` writes the
 * gateway's .cpuprofile there. Unlike profile.ts it does not subtract a client estimate. Linux only; not part of the harness.
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
const CHILD = fileURLToPath(new URL("./child.ts", import.meta.url));
const be = fork(CHILD, ["backend"], { execArgv: ["--import", "tsx"] });
const port = await new Promise<number>((r) => be.once("message", (m: any) => r(m.ready.port)));
const prof = process.env["GW_CPU_PROF"];
const gwp = fork(CHILD, ["gateway", String(port)], { execArgv: ["--import", "tsx", ...(prof ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : [])] });
const gport = await new Promise<number>((r) => gwp.once("message", (m: any) => r(m.ready.grpcPort)));
const ticks = (pid: number) => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" "); return Number(f[11]) + Number(f[12]); };
const Gw = grpc.makeGenericClientConstructor(gatewayPackageDefinition()["platform.Gateway"] as grpc.ServiceDefinition, "Gateway");
const c = new Gw(`127.0.0.1:${gport}`, grpc.credentials.createInsecure()) as any;
const items = Array.from({ length: 9 }, (_, i) => ({ sku: `sku-${i}`, quantity: i + 1, unitPrice: { currencyCode: "EUR", units: String(i + 10), nanos: 5 }, tags: ["alpha", "beta"] }));
const json = JSON.stringify({ orderId: "bench-1", bigSigned: "9007199254740993", status: "STATUS_OPEN", paid: true, total: 99.5, items, counters: { a: "1" } });
const call = () => new Promise((res, rej) => c.InvokeJson({ service: "orders", method: "PutOrder", request_data: json }, (e: any, r: any) => (e ? rej(e) : r.success ? res(r) : rej(new Error(r.message)))));
for (let i = 0; i < 1000; i++) await call();
const N = Number(process.argv[2] ?? 8000);
const out: string[] = [];
for (let rep = 0; rep < 3; rep++) {
  const t0 = ticks(gwp.pid!); const t = performance.now(); let n = 0;
  await Promise.all(Array.from({ length: 64 }, async () => { while (n < N) { n++; await call(); } }));
  const dt = (ticks(gwp.pid!) - t0) * 10000 / N; // 100 Hz ticks -> us
  out.push(`gw cpu us/call ${dt.toFixed(0)} rps ${(N / ((performance.now() - t) / 1000)).toFixed(0)}`);
}
console.log(out.join(" | "));
c.close(); gwp.disconnect(); be.disconnect();
