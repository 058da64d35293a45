/**
 * CPU per unary gRPC exchange of the native HTTP/2 server layer (src/h2/server.ts) against a
 * node:http2 server doing the same echo (respond + end with the framed reply + trailers, as grpc-js does it), in the
 * same run. Each server runs in a child process with the same tiny hand-written gRPC echo handler; this process is the
 * load: the gateway's raw-frame unary client (src/backends/h2-unary.ts, one connection), concurrency 16, 1 KiB
 * messages; then p50 latency at concurrency 1. Batches alternate node / native so drift hits both; CPU is the child's
 * own process.cpuUsage() (user + system) over the batch.
 *
 * `npx tsx bench/grpc-server/h2-unary.ts [calls per batch] [batches]` (defaults 5000 and 3); prints one JSON line,
 * `cpuRatio` = native / node:http2 CPU per call, `p50Ratio` = native / node:http2 p50 at c=1.
 */
import { fork, type ChildProcess } from "node:child_process";
import http2 from "node:http2";
import { fileURLToPath } from "node:url";
import { createH2UnaryClient, type H2UnaryClient } from "../../src/backends/h2-unary.js";
import { createH2Server } from "../../src/h2/server.js";
import type { H2ServerStream } from "../../src/h2/types.js";

const PATH = "/bench.Echo/Echo";

/** The gRPC reply to a framed request: the same message, framed again (a real server re-encodes it). */
function reply(parts: Buffer[]): Buffer {
  const req = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  const len = req.readUInt32BE(1);
  const out = Buffer.allocUnsafe(5 + len);
  out[0] = 0;
  out.writeUInt32BE(len, 1);
  req.copy(out, 5, 5, 5 + len);
  return out;
}

async function nativeServer(): Promise<number> {
  const RESPONSE: [string, string][] = [
    [":status", "200"],
    ["content-type", "application/grpc"],
  ];
  const TRAILERS: [string, string][] = [["grpc-status", "0"]];
  const server = createH2Server({
    maxConcurrentStreams: 1000,
    maxHeaderListSize: 16 * 1024,
    streamHighWaterMark: 64 * 1024,
    onStream(s: H2ServerStream) {
      const parts: Buffer[] = [];
      return {
        data(buf, start, end) {
          parts.push(Buffer.from(buf.subarray(start, end)));
        },
        end() {
          s.respond(RESPONSE, false);
          s.write(reply(parts));
          s.end(TRAILERS);
        },
        close() {},
        drain() {},
      };
    },
  });
  return server.listen(0, "127.0.0.1");
}

async function nodeServer(): Promise<number> {
  const server = http2.createServer();
  server.on("stream", (stream) => {
    const parts: Buffer[] = [];
    stream.on("data", (c: Buffer) => parts.push(c));
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(reply(parts));
    });
    stream.on("error", () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as { port: number }).port;
}

if (process.argv[2] === "child") {
  const port = await (process.argv[3] === "native" ? nativeServer() : nodeServer());
  process.on("message", () => {
    const u = process.cpuUsage();
    process.send!({ cpu: u.user + u.system });
  });
  process.send!({ port });
} else {
  const N = Number(process.argv[2] ?? 5000);
  const BATCHES = Number(process.argv[3] ?? 3);
  const spawn = async (kind: string): Promise<{ cp: ChildProcess; client: H2UnaryClient }> => {
    const cp = fork(fileURLToPath(import.meta.url), ["child", kind], { execArgv: ["--import", "tsx"] });
    const { port } = await new Promise<{ port: number }>((r) => cp.once("message", (m) => r(m as { port: number })));
    return { cp, client: createH2UnaryClient({ address: `127.0.0.1:${port}`, connections: 1, maxReceiveBytes: 1 << 20 }) };
  };
  const cpuOf = (cp: ChildProcess): Promise<number> =>
    new Promise((r) => {
      cp.once("message", (m) => r((m as { cpu: number }).cpu));
      cp.send("cpu");
    });
  const request = Buffer.alloc(1024, 7);
  const md = new (await import("@grpc/grpc-js")).Metadata();
  const call = async (c: H2UnaryClient): Promise<void> => {
    const r = await c.call(PATH, request, md, Date.now() + 10_000);
    if (!r.ok || !r.bytes.equals(request)) throw new Error(`bad echo: ${JSON.stringify(r.ok ? r.bytes.length : r)}`);
  };
  const cpuBatch = async (s: { cp: ChildProcess; client: H2UnaryClient }): Promise<number> => {
    const t0 = await cpuOf(s.cp);
    let n = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (n < N) {
          n++;
          await call(s.client);
        }
      }),
    );
    return ((await cpuOf(s.cp)) - t0) / N; // us per call
  };
  const p50 = async (s: { client: H2UnaryClient }): Promise<number> => {
    const xs: number[] = [];
    for (let i = 0; i < Math.min(N, 2000); i++) {
      const t = process.hrtime.bigint();
      await call(s.client);
      xs.push(Number(process.hrtime.bigint() - t) / 1000);
    }
    return median(xs);
  };
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const node = await spawn("node");
  const native = await spawn("native");
  for (let i = 0; i < 5000; i++) await Promise.all([call(node.client), call(native.client)]);
  const cpu = { node: [] as number[], native: [] as number[] };
  const lat = { node: [] as number[], native: [] as number[] };
  for (let b = 0; b < BATCHES; b++) {
    cpu.node.push(await cpuBatch(node));
    cpu.native.push(await cpuBatch(native));
    lat.node.push(await p50(node));
    lat.native.push(await p50(native));
  }
  const r2 = (x: number): number => Math.round(x * 10) / 10;
  console.log(
    JSON.stringify({
      callsPerBatch: N,
      batches: BATCHES,
      nodeCpuUsPerCall: cpu.node.map(r2),
      nativeCpuUsPerCall: cpu.native.map(r2),
      cpuRatio: Number((median(cpu.native) / median(cpu.node)).toFixed(2)),
      nodeP50Us: lat.node.map(r2),
      nativeP50Us: lat.native.map(r2),
      p50Ratio: Number((median(lat.native) / median(lat.node)).toFixed(2)),
    }),
  );
  for (const s of [node, native]) {
    s.client.close();
    s.cp.kill();
  }
}
