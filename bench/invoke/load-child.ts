/**
 * One load-generating process of bench/invoke.ts. The parent starts several of these so that the load client is not
 * the bottleneck it measures: each keeps its own connections and issues calls with the cheapest client Node has, raw
 * `node:http2` streams for gRPC (the request bytes are framed once by the parent, the response is checked by its
 * status and, for InvokeJson, its first field) and, for REST, one raw keep-alive TCP connection per caller writing a
 * prebuilt HTTP/1.1 request and reading the response by its Content-Length (`node:http`'s client cost about as much
 * CPU per call as the gateway's REST handling). Each run answers its latency
 * samples (us), its wall time and its own CPU time (process.cpuUsage), so the parent can report client CPU per call.
 *
 * IPC: {init: Target[]} -> {ready}; {run: RunCommand} -> {result: RunResult}. Exits when the parent disconnects.
 */
import http2 from "node:http2";
import net from "node:net";

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

/** One call; `slot` is the caller's index (REST gives each caller its own connection). */
type Call = (slot: number) => Promise<void>;

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

/** A kept-alive HTTP/1.1 connection that carries one request at a time. */
class RawHttpConnection {
  private socket: net.Socket | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private waiter: { resolve: (r: { status: number; body: string }) => void; reject: (e: Error) => void } | undefined;

  constructor(private readonly port: number) {}

  request(bytes: Buffer): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      if (!this.socket || this.socket.destroyed) this.connect();
      this.socket!.write(bytes);
    });
  }

  close(): void {
    this.socket?.destroy();
  }

  private connect(): void {
    const s = net.connect(this.port, "127.0.0.1");
    s.setNoDelay(true);
    this.buf = Buffer.alloc(0);
    s.on("data", (c: Buffer) => {
      this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
      this.parse();
    });
    const fail = (e: Error): void => {
      const w = this.waiter;
      this.waiter = undefined;
      this.socket = undefined;
      w?.reject(e);
    };
    s.on("error", fail);
    s.on("close", () => fail(new Error("connection closed")));
    this.socket = s;
  }

  private parse(): void {
    const end = this.buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const head = this.buf.toString("latin1", 0, end);
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!m) return this.waiter?.reject(new Error(`response without content-length: ${head.slice(0, 200)}`));
    const len = Number(m[1]);
    if (this.buf.length < end + 4 + len) return;
    const body = this.buf.toString("utf8", end + 4, end + 4 + len);
    this.buf = this.buf.subarray(end + 4 + len);
    const w = this.waiter;
    this.waiter = undefined;
    w?.resolve({ status: Number(head.slice(9, 12)), body });
  }
}

const connections: RawHttpConnection[] = [];

function restCall(t: Target): Call {
  const body = Buffer.from(t.body, "base64");
  const request = Buffer.concat([
    Buffer.from(`POST ${t.path} HTTP/1.1\r\nhost: 127.0.0.1:${t.port}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`, "latin1"),
    body,
  ]);
  const conns: RawHttpConnection[] = [];
  return async (slot) => {
    let c = conns[slot];
    if (!c) {
      c = conns[slot] = new RawHttpConnection(t.port);
      connections.push(c);
    }
    const r = await c.request(request);
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.body.slice(0, 200)}`);
    if (t.check === "rest-invoke" && !r.body.startsWith('{"success":true')) throw new Error(`invoke-json failed: ${r.body.slice(0, 200)}`);
  };
}

const calls = new Map<string, Call>();

async function run(cmd: RunCommand): Promise<RunResult> {
  const samples: Record<string, number[]> = Object.fromEntries(cmd.targets.map((t) => [t, []]));
  const busyMs: Record<string, number> = Object.fromEntries(cmd.targets.map((t) => [t, 0]));
  let errors = 0;
  let firstError = "";
  const one = async (name: string, slot: number): Promise<void> => {
    const t = performance.now();
    try {
      await calls.get(name)!(slot);
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
    for (let i = 0; i < cmd.count; i++) for (const name of cmd.targets) await one(name, 0);
  } else {
    const name = cmd.targets[0]!;
    let next = 0;
    await Promise.all(
      Array.from({ length: cmd.concurrency }, async (_, slot) => {
        while (next < cmd.count) {
          next++;
          await one(name, slot);
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
  for (const c of connections) c.close();
  process.exit(0);
});
