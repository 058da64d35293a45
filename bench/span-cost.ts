/**
 * What the tracer costs a traced invoke on its own: the five spans of a gRPC InvokeJson (server, schema resolution,
 * two conversions, the backend client span) made, ended and encoded into OTLP protobuf batches, exported to a local
 * sink (another process) that reads and discards them. Prints nanoseconds of this process's CPU (process.cpuUsage) per
 * traced call, the median of several rounds after a warm-up round.
 *
 *   npx tsx bench/span-cost.ts [--calls 200000] [--rounds 7]
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { parseArgs } from "node:util";
import { createTracer } from "../src/observe/tracing.js";
import { sharedAttributes } from "../src/observe/span.js";
import type { Logger } from "../src/observe/logger.js";

const { values } = parseArgs({ options: { calls: { type: "string", default: "200000" }, rounds: { type: "string", default: "7" } } });
const calls = Number(values.calls);
const rounds = Number(values.rounds);

// The sink is another process, so that only the tracer's side is this process's CPU.
const SINK = `const s = require("node:http").createServer((q, r) => { q.resume(); q.on("end", () => r.end()); });
s.listen(0, "127.0.0.1", () => console.log(s.address().port));`;
const sink = spawn(process.execPath, ["-e", SINK], { stdio: ["ignore", "pipe", "inherit"] });
const port = Number((await once(sink.stdout, "data"))[0].toString().trim());
let warnings = 0;
const logger = { warn: (_o: unknown, m: string) => { warnings++; console.error(m); }, info: () => {}, error: () => {}, debug: () => {}, child: () => logger } as unknown as Logger;
const tracer = createTracer({ endpoint: `http://127.0.0.1:${port}/v1/traces`, exportDelayMs: 100, logger });

const ROUTE = Object.freeze({ "rpc.system": "grpc", "rpc.service": "platform.Gateway", "rpc.method": "InvokeJson" });
const HIT = Object.freeze({ "gateway.schema.cache": "hit" });
const client = () =>
  sharedAttributes("acme.inventory.v1.Inventory/PutItem", "127.0.0.1:50051", () => ({
    "rpc.system": "grpc",
    "rpc.service": "acme.inventory.v1.Inventory",
    "rpc.method": "PutItem",
    "server.address": "127.0.0.1",
    "server.port": 50051,
  }));
const conversion = (type: string) => sharedAttributes(type, "inline", () => ({ "gateway.message.type": type, "gateway.conversion": "inline" }));

function tracedCall(): void {
  const server = tracer.start({ traceparent: undefined, tracestate: undefined, server: { name: "platform.Gateway/InvokeJson", attributes: ROUTE } });
  server.set("gateway.service", "inventory");
  server.child("resolve schema", "internal", HIT).end();
  const toBinary = server.child("json to protobuf", "internal");
  toBinary.setShared(conversion("acme.inventory.v1.PutItemRequest"));
  toBinary.end();
  const call = server.child("acme.inventory.v1.Inventory/PutItem", "client", client());
  if (call.headers().traceparent.length !== 55) throw new Error("traceparent");
  call.end();
  const toJson = server.child("protobuf to json", "internal");
  toJson.setShared(conversion("acme.inventory.v1.PutItemResponse"));
  toJson.end();
  server.end(0);
}

const per: number[] = [];
const sys: number[] = [];
for (let r = 0; r < rounds + 1; r++) {
  // Calls in slices of 50 (250 spans) a millisecond apart, so the exports keep up and go out between calls as they
  // would in a gateway; the round's CPU includes them (a pause costs no CPU).
  const t0 = process.cpuUsage();
  for (let i = 0; i < calls; i += 50) {
    for (let j = 0; j < 50; j++) tracedCall();
    await new Promise((res) => setTimeout(res, 1));
  }
  await new Promise((res) => setTimeout(res, 300)); // the last exports (sleeping costs no CPU)
  const d = process.cpuUsage(t0);
  if (r > 0) {
    per.push(((d.user + d.system) * 1000) / calls);
    sys.push((d.system * 1000) / calls);
  }
}
per.sort((a, b) => a - b);
console.log(JSON.stringify({ warnings, calls, rounds, ns_per_traced_call: Math.round(per[per.length >> 1]!), all: per.map(Math.round), system_ns: sys.map(Math.round) }));
await tracer.close();
sink.kill("SIGTERM");
