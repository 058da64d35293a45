/**
 * Client-side CPU of one unary backend call at concurrency 64, backend in a child process: grpc-js
 * `Client.makeUnaryRequest`, the grpc-js channel's call object directly (what backend.call used first), the
 * node:http2 unary client (bench/invoke/node-http2-unary.ts, what backend.call used next) and the raw-frame client
 * (src/backends/h2-unary.ts, what backend.call uses now), alternating, 5 batches each; the last line is the raw
 * client's CPU per call over node:http2's, batch by batch. `npx tsx bench/invoke/client-call.ts`. Not part of the harness.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { createBackend } from "../../src/backends/backend.js";
const items = Array.from({ length: 9 }, (_, i) => ({ sku: `sku-${i}`, quantity: i + 1, unitPrice: { currencyCode: "EUR", units: String(i + 10), nanos: 5 }, tags: ["alpha", "beta"] }));
const json = JSON.stringify({ orderId: "bench-1", bigSigned: "9007199254740993", status: "STATUS_OPEN", paid: true, total: 99.5, items, counters: { a: "1" } });
const med = (x: number[]) => x.sort((p, q) => p - q)[x.length >> 1]!.toFixed(2);
const child = fork(fileURLToPath(new URL("./child.ts", import.meta.url)), ["backend"], { execArgv: ["--import", "tsx"] });
const port = await new Promise<number>((r) => child.once("message", (m: any) => r(m.ready.port)));
const be = createBackend({ name: "orders", host: "127.0.0.1", port, channels: 4, maxReceiveBytes: 4 << 20 });
const schema = await be.schema();
const { method } = await be.resolve("PutOrder");
const { jsonToBinary } = await import("../../src/workers/codec.js");
const { SchemaCache } = await import("../../src/workers/schema-registry.js");
const reg = new SchemaCache(4).getOrCompile(schema.set.id, schema.set.files);
const body = Buffer.from(jsonToBinary(reg, method.inputType, json));
const id = (x: any) => x;
const md = new grpc.Metadata();
const viaClient = () => new Promise<void>((res, rej) => be.pool.next().makeUnaryRequest(method.path, id, id, body, md, { deadline: Date.now() + 30000 }, (e) => (e ? rej(e) : res())));
const { createH2UnaryClient } = await import("./node-http2-unary.js");
const h2 = createH2UnaryClient({ address: `127.0.0.1:${port}`, connections: 4, maxReceiveBytes: 4 << 20 });
const viaH2 = () => h2.call(method.path, body, md, Date.now() + 30000).then((o) => { if (!o.ok) throw new Error(o.message); });
const { createH2UnaryClient: createRaw } = await import("../../src/backends/h2-unary.js");
const raw = createRaw({ address: `127.0.0.1:${port}`, connections: 4, maxReceiveBytes: 4 << 20 });
const viaRaw = () => raw.call(method.path, body, md, Date.now() + 30000).then((o) => { if (!o.ok) throw new Error(o.message); });
const viaCall = () => new Promise<void>((res, rej) => {
  const call = be.pool.next().getChannel().createCall(method.path, Date.now() + 30000, undefined, null, undefined);
  let got = false;
  call.start(md, { onReceiveMetadata() {}, onReceiveMessage() { got = true; }, onReceiveStatus(s) { s.code === 0 && got ? res() : rej(new Error(s.details)); } });
  call.startRead(); call.sendMessageWithContext({}, body); call.halfClose();
});
const run = async (f: () => Promise<void>, n: number) => { const t = process.cpuUsage(); let k = 0; await Promise.all(Array.from({ length: 64 }, async () => { while (k < n) { k++; await f(); } })); const u = process.cpuUsage(t); return (u.user + u.system) / n; };
await run(viaClient, 3000); await run(viaCall, 3000); await run(viaH2, 3000); await run(viaRaw, 3000);
const c: number[] = [], d: number[] = [], h: number[] = [], w: number[] = [];
for (let r = 0; r < 5; r++) { c.push(await run(viaClient, 6000)); d.push(await run(viaCall, 6000)); h.push(await run(viaH2, 6000)); w.push(await run(viaRaw, 6000)); }
const ratios = w.map((x, i) => x / h[i]!);
console.log("client CPU per backend call us (c=64): makeUnaryRequest", med(c), "channel call", med(d), "node:http2 unary", med(h), "raw-frame unary", med(w), c.map(Math.round), d.map(Math.round), h.map(Math.round), w.map(Math.round));
console.log("raw-frame / node:http2 CPU per call, per batch:", ratios.map((x) => x.toFixed(2)).join(" "), "median", med([...ratios]));
be.close(); h2.close(); raw.close(); child.disconnect();
