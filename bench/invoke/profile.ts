/**
 * Profiling aid for the invoke hot path: backend in a child process, gateway and client in this one, so
 * `node --cpu-prof --import tsx bench/invoke/profile.ts [calls]` shows the gateway's own functions. Prints mean
 * latency at c=1, throughput at c=64 and CPU per call (client + gateway). Not part of the harness.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { Writable } from "node:stream";
import { createGateway } from "../../src/main/gateway.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
const child = fork(fileURLToPath(new URL("./child.ts", import.meta.url)), ["backend"], { execArgv: ["--import", "tsx"] });
const port = await new Promise<number>((r) => child.once("message", (m: any) => r(m.ready.port)));
const gw = await createGateway({ grpcPort: 0, httpPort: 0, logLevel: "error", logDestination: new Writable({ write: (_c, _e, cb) => cb() }), services: [{ name: "orders", grpc: { host: "127.0.0.1", port } }] });
const Gw = grpc.makeGenericClientConstructor(gatewayPackageDefinition()["platform.Gateway"] as grpc.ServiceDefinition, "Gateway");
const c = new Gw(`127.0.0.1:${gw.grpcPort}`, grpc.credentials.createInsecure()) as any;
const items = Array.from({ length: 9 }, (_, i) => ({ sku: `sku-${i}`, quantity: i + 1, unitPrice: { currencyCode: "EUR", units: String(i + 10), nanos: 5 }, tags: ["alpha", "beta"] }));
const json = JSON.stringify({ orderId: "bench-1", bigSigned: "9007199254740993", status: "STATUS_OPEN", paid: true, total: 99.5, items, counters: { a: "1" } });
console.log("bytes", json.length);
const call = () => new Promise((res, rej) => c.InvokeJson({ service: "orders", method: "PutOrder", request_data: json }, (e: any, r: any) => (e ? rej(e) : r.success ? res(r) : rej(new Error(r.message)))));
for (let i = 0; i < 500; i++) await call();
const N = Number(process.argv[2] ?? 3000);
const t = performance.now();
for (let i = 0; i < N; i++) await call();
console.log("c=1 mean us", ((performance.now() - t) * 1000) / N);
const cpu = process.cpuUsage();
const t2 = performance.now();
let n = 0;
await Promise.all(Array.from({ length: 64 }, async () => { while (n < N * 2) { n++; await call(); } }));
const u = process.cpuUsage(cpu);
console.log("c=64 rps", (N * 2) / ((performance.now() - t2) / 1000), "cpu us/call (client+gateway)", (u.user + u.system) / (N * 2));
// The same client cost without the gateway: a direct call (pre-encoded bytes, echoed) from this process.
const { loadSync } = await import("@grpc/proto-loader");
const { protosDir, SHOP_PROTO } = await import("../../test/support/protos/descriptors.js");
const shop = loadSync(SHOP_PROTO, { includeDirs: [protosDir], longs: String, enums: String, oneofs: true });
const Direct = grpc.makeGenericClientConstructor(shop["shop.v1.OrderService"] as grpc.ServiceDefinition, "OrderService");
const d = new Direct(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as any;
const order = JSON.parse(json);
const direct = () => new Promise((res, rej) => d.PutOrder(order, (e: any, r: any) => (e ? rej(e) : res(r))));
for (let i = 0; i < 500; i++) await direct();
const cpu2 = process.cpuUsage();
let m = 0;
await Promise.all(Array.from({ length: 64 }, async () => { while (m < N * 2) { m++; await direct(); } }));
const u2 = process.cpuUsage(cpu2);
console.log("direct client cpu us/call", (u2.user + u2.system) / (N * 2), "=> gateway cpu us/call", (u.user + u.system - u2.user - u2.system) / (N * 2));
d.close(); c.close(); gw.destroy(); child.disconnect();
