/**
 * One load-generating process of bench/invoke.ts. The parent starts several of these so that the load client is not
 * the bottleneck it measures: each keeps its own connections and issues calls with the cheapest client Node has, raw
 * `node:http2` streams for gRPC (the request bytes are framed once by the parent, the response is checked by its
 * status and, for InvokeJson, its first field) and a keep-alive `node:http` agent for REST. Each run answers its latency
 * samples (us), its wall time and its own CPU time (process.cpuUsage), so the parent can report client CPU per call.
 *
 * IPC: {init: Target[]} -> {ready}; {run: RunCommand} -> {result: RunResult}. Exits when the parent disconnects.
 */
import http from "node:http";
import http2 from "node:http2";

/** A path under load: a unary gRPC method (request framed) or a REST POST. */
export interface Target {
  name: string;
  kind: "grpc" | "rest";
  port: number;
  /** gRPC ":path" or REST path. */
  path: string;
  /** base64 of the request: a length-prefixed gRPC message, or the REST JSON body. */
  body: string;
  /** "invoke": the response is an InvokeResponse whose `success` must be true; "rest-invoke": `"success":true`. */
  check: "none" | "invoke" | "rest-invoke";
}

/** `concurrency` callers on one target until `count` calls, or (interleaved) one call per target in turn. */
export interface RunCommand {
  id: number;
  targets: string[];
  concurrency: number;
  count: number;
  interleaved: boolean;
}

/** What one run measured in this process. */
export interface RunResult {
  id: number;
  /** Latency samples per target, microseconds. */
  samples: Record<string, number[]>;
  /** Busy time per target (interleaved runs), ms; else the run's wall time. */
  busyMs: Record<string, number>;
  wallMs: number;
  cpuUs: number;
  errors: number;
  firstError: string;
}

type Call = () => Promise<void>;

const sessions = new Map<number, http2.ClientHttp2Session>();
function session(port: number): http2.ClientHttp2Session {
  let s = sessions.get(port);
  if (!s || s.closed || s.destroyed) {
    s = http2.connect(`http://127.0.0.1:${port}`);
    s.on("error", () => sessions.delete(port));
    s.on("close", () => sessions.delete(port));
    sessions.set(port, s);
  }
  return s;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function grpcCall(t: Target): Call {
  const body = Buffer.from(t.body, "base64");
  const headers = { ":method": "POST", ":path": t.path, "content-type": "application/grpc", te: "trailers" };
  return () =>
    new Promise<void>((resolve, reject) => {
      const req = session(t.port).request(headers, { endStream: false });
      const chunks: Buffer[] = [];
      let status: string | undefined;
      let message = "";
      req.on("response", (h) => {
        if (h["grpc-status"] !== undefined) {
          status = String(h["grpc-status"]);
          message = String(h["grpc-message"] ?? "");
        }
      });
      req.on("trailers", (h) => {
        status = String(h["grpc-status"]);
        message = String(h["grpc-message"] ?? "");
      });
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("error", reject);
      req.on("close", () => {
        if (status !== "0") return reject(new Error(`grpc-status ${status ?? "(none)"} ${decodeURIComponent(message)}`));
        if (t.check === "invoke") {
          const msg = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
          // InvokeResponse field 1 (success, bool) is written first when true: tag 0x08, value 0x01.
          if (msg.length < 7 || msg[5] !== 0x08 || msg[6] !== 0x01) return reject(new Error(`InvokeJson failed: ${msg.subarray(5, 200).toString("latin1")}`));
        }
        resolve();
      });
      req.end(body);
    });
}

function restCall(t: Target): Call {
  const body = Buffer.from(t.body, "base64");
  const opts = { host: "127.0.0.1", port: t.port, method: "POST", path: t.path, agent, headers: { "content-type": "application/json", "content-length": body.length } };
  return () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(opts, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
          if (t.check === "rest-invoke" && !text.startsWith('{"success":true')) return reject(new Error(`invoke-json failed: ${text.slice(0, 200)}`));
          resolve();
        });
      });
      req.on("error", reject);
      req.end(body);
    });
}

const calls = new Map<string, Call>();

async function run(cmd: RunCommand): Promise<RunResult> {
  const samples: Record<string, number[]> = Object.fromEntries(cmd.targets.map((t) => [t, []]));
  const busyMs: Record<string, number> = Object.fromEntries(cmd.targets.map((t) => [t, 0]));
  let errors = 0;
  let firstError = "";
  const one = async (name: string): Promise<void> => {
    const t = performance.now();
    try {
      await calls.get(name)!();
    } catch (e) {
      errors++;
      firstError ||= String((e as Error).message ?? e);
      return;
    }
    const dt = performance.now() - t;
    samples[name]!.push(dt * 1000);
    busyMs[name]! += dt;
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  if (cmd.interleaved) {
    for (let i = 0; i < cmd.count; i++) for (const name of cmd.targets) await one(name);
  } else {
    const name = cmd.targets[0]!;
    let next = 0;
    await Promise.all(
      Array.from({ length: cmd.concurrency }, async () => {
        while (next < cmd.count) {
          next++;
          await one(name);
        }
      }),
    );
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (!cmd.interleaved) busyMs[cmd.targets[0]!] = wallMs;
  return { id: cmd.id, samples, busyMs, wallMs, cpuUs: cpu.user + cpu.system, errors, firstError };
}

process.on("message", (m: { init?: Target[]; run?: RunCommand }) => {
  if (m.init) {
    for (const t of m.init) calls.set(t.name, t.kind === "grpc" ? grpcCall(t) : restCall(t));
    process.send?.({ ready: true });
  } else if (m.run) {
    void run(m.run).then((r) => process.send?.({ result: r }));
  }
});
process.on("disconnect", () => {
  for (const s of sessions.values()) s.destroy();
  agent.destroy();
  process.exit(0);
});
