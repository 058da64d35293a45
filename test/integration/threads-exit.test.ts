import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request as httpRequest, Agent } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startGatewayProcess, type GatewayProcess } from "../support/cli.js";
import { connectSse, connectWs, type SseTestClient, type WsTestClient } from "../support/web.js";

/**
 * A gateway whose HTTP port is served by uWS worker threads must exit at shutdown with its documented code, never with
 * Node's native abort (`uv_loop_close() while having open handles`, SIGABRT) from a thread whose loop still held
 * uWS sockets or other handles. Each test starts the gateway (the CLI with `--threads 2`, and `--threads 1` for
 * comparison; last, a program embedding it), leaves connections of every kind open on it (kept-alive HTTP, WebSocket
 * subscribers, SSE streams, idle and half-sent requests, clients that stopped reading, REST and WebSocket invokes
 * still in flight at the backend), stops it the way a user would (SIGTERM, SIGINT, a second signal, destroy() then
 * process.exit()), and checks the exit code and stderr.
 */

const KEY = "exit-key";
const dir = mkdtempSync(join(tmpdir(), "gw-threads-exit-"));
/** What Node prints when a thread's loop closes with open handles (and the abort that follows). */
const ABORT = /uv_loop_close|Assertion failed|open handles|Native stack trace|core dumped/i;

interface Load {
  /** In-flight invokes that finish within the shutdown timeout: each must answer (drained). */
  drained: Array<Promise<{ status: number; body: string } | Error>>;
  /** In-flight invokes that outlast it: each must end (answered or its connection closed), never hang. */
  stuck: Array<Promise<{ status: number; body: string } | Error>>;
  ws: WsTestClient[];
  sse: SseTestClient[];
  sockets: import("node:net").Socket[];
  invokeWs: WebSocket[];
  agent: Agent;
}

function post(port: number, path: string, body: object, agent: Agent): Promise<{ status: number; body: string } | Error> {
  return new Promise((resolve) => {
    const data = JSON.stringify(body);
    const req = httpRequest({ host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data), "x-api-key": KEY } }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on("error", (e) => resolve(e));
    });
    req.on("error", (e) => resolve(e));
    req.end(data);
  });
}

function getOrder(port: number, orderId: string, agent: Agent): Promise<{ status: number; body: string } | Error> {
  return post(port, "/v1/gateway/invoke-json", { service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId }) }, agent);
}

/** Open connections of every kind, spread over both threads (the kernel hashes each new connection to one). */
async function load(gw: Pick<GatewayProcess, "httpPort">, backend: OrderBackend, drainMs: number): Promise<Load> {
  const http = `http://127.0.0.1:${gw.httpPort}`;
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const l: Load = { drained: [], stuck: [], ws: [], sse: [], sockets: [], invokeWs: [], agent };
  // Kept-alive connections that answered once and stay idle.
  await Promise.all(Array.from({ length: 6 }, (_, i) => getOrder(gw.httpPort, `idle-${i}`, agent)));
  const before = backend.received.length;
  for (let i = 0; i < 4; i++) {
    const c = await connectWs(http, { key: KEY });
    c.send({ op: "subscribe", topics: [`exit-${i}`] });
    l.ws.push(c);
    l.sse.push(await connectSse(http, `topic=exit-${i}`, { "x-api-key": KEY }));
  }
  for (let i = 0; i < 4; i++) {
    // A request whose body never completes: in flight on the thread until the shutdown closes it.
    const s = connect(gw.httpPort, "127.0.0.1");
    s.on("error", () => undefined);
    await once(s, "connect");
    s.write(`POST /v1/gateway/invoke-json HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"serv`);
    l.sockets.push(s);
  }
  for (let i = 0; i < 4; i++) {
    // A connection that never sends a byte, and a WebSocket and an SSE stream whose client stops reading and never
    // answers the close handshake: the thread must close these itself.
    const idle = connect(gw.httpPort, "127.0.0.1");
    idle.on("error", () => undefined);
    await once(idle, "connect");
    l.sockets.push(idle);
    for (const head of [
      `GET /v1/pubsub/ws HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
      `GET /v1/pubsub/events?topic=exit-${i} HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`,
    ]) {
      const s = connect(gw.httpPort, "127.0.0.1");
      s.on("error", () => undefined);
      await once(s, "connect");
      s.write(head);
      await once(s, "data");
      s.pause();
      l.sockets.push(s);
    }
  }
  for (let i = 0; i < 3; i++) {
    // A server-streaming invoke over WebSocket, waiting at the backend.
    const ws = new WebSocket(`${http.replace("http:", "ws:")}/v1/gateway/invoke-ws`, { headers: { "x-api-key": KEY } });
    ws.on("error", () => undefined);
    await once(ws, "open");
    ws.send(JSON.stringify({ op: "start", service: "orders", method: "GetOrder", requestData: { orderId: "sleep:4000" } }));
    l.invokeWs.push(ws);
  }
  for (let i = 0; i < 6; i++) l.drained.push(getOrder(gw.httpPort, `sleep:${drainMs}`, agent));
  for (let i = 0; i < 4; i++) l.stuck.push(getOrder(gw.httpPort, "sleep:4000", agent));
  const deadline = Date.now() + 10_000;
  while (backend.received.length < before + 13 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.ok(backend.received.length >= before + 13, "every in-flight invoke reached the backend");
  return l;
}

function release(l: Load): void {
  for (const c of l.ws) c.ws.terminate();
  for (const c of l.sse) c.abort();
  for (const s of l.sockets) s.destroy();
  for (const w of l.invokeWs) w.terminate();
  l.agent.destroy();
}

/** `p`, or null once `ms` have passed (the timer does not outlive it). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<null>((r) => (timer = setTimeout(() => r(null), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Wait for the exit, bounded: the code and signal it died of, and its stderr. */
async function exited(gw: Pick<GatewayProcess, "proc" | "stderr">, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  const { proc } = gw;
  const done = proc.exitCode !== null || proc.signalCode !== null ? [proc.exitCode, proc.signalCode] : await within(once(proc, "exit"), ms);
  if (done === null) {
    proc.kill("SIGKILL");
    assert.fail(`the gateway did not exit within ${ms} ms; stderr: ${gw.stderr.join("")}`);
  }
  const [code, signal] = done as [number | null, NodeJS.Signals | null];
  return { code, signal, stderr: gw.stderr.join("") };
}

describe("threads: the process exits cleanly at shutdown (no native abort from a uWS thread)", () => {
  let backend: OrderBackend;
  let config: string;
  before(async () => {
    backend = await startOrderBackend({ admin: false });
    config = join(dir, "gateway.yaml");
    writeFileSync(config, `services:\n  - name: orders\n    grpc: {host: 127.0.0.1, port: ${backend.port}}\n`);
  });
  after(() => backend.close());

  const start = (timeoutMs = 1500, threads = 2): Promise<GatewayProcess> =>
    startGatewayProcess(["--config", config, "--threads", String(threads), "--api-key", KEY], { GATEWAY_SHUTDOWN_TIMEOUT_MS: String(timeoutMs) }, 60_000);

  /** load(), killing the gateway when it fails (so nothing is left running). */
  const loaded = (gw: Pick<GatewayProcess, "proc" | "httpPort">, drainMs: number): Promise<Load> =>
    load(gw, backend, drainMs).catch((e: unknown) => {
      gw.proc.kill("SIGKILL");
      throw e;
    });

  for (const [signal, threads] of [["SIGTERM", 2], ["SIGINT", 2], ["SIGTERM", 1]] as const) {
    it(`${signal}, --threads ${threads}, with connections of every kind and invokes in flight: exit 0, drained, no abort`, async () => {
      const gw = await start(1500, threads);
      const l = await loaded(gw, 300);
      try {
        const t0 = Date.now();
        gw.proc.kill(signal);
        const r = await exited(gw, 15_000);
        assert.doesNotMatch(r.stderr, ABORT, `native abort at exit:\n${r.stderr}`);
        assert.equal(r.signal, null, `died of ${r.signal}:\n${r.stderr}`);
        assert.equal(r.code, 0, r.stderr);
        assert.ok(Date.now() - t0 < 1500 + 4500, "within the shutdown timeout plus the thread exit grace");
        // The invokes that finish within the timeout were answered, not cut.
        for (const d of await Promise.all(l.drained)) {
          assert.ok(!(d instanceof Error), `a drained invoke failed: ${String(d)}`);
          assert.equal(d.status, 200);
          assert.match(d.body, /"success":true/);
        }
        // The ones that outlast it ended (their connection closed), none hangs.
        await Promise.all(l.stuck);
        // WebSocket subscribers were ended "going away", SSE streams with their shutdown end event.
        for (const c of l.ws) assert.equal((await c.closed(5000)).code, 1001);
        for (const c of l.sse) assert.ok(c.messages.some((m) => m.event === "end"), `SSE end event: ${JSON.stringify(c.messages)}`);
      } finally {
        release(l);
        gw.proc.kill("SIGKILL");
      }
    });
  }

  it("a second SIGTERM while draining: exit 130, no abort", async () => {
    const gw = await start(8000);
    const l = await loaded(gw, 300);
    try {
      gw.proc.kill("SIGTERM");
      await new Promise((r) => setTimeout(r, 1200));
      gw.proc.kill("SIGTERM");
      const r = await exited(gw, 10_000);
      assert.doesNotMatch(r.stderr, ABORT, `native abort at exit:\n${r.stderr}`);
      assert.equal(r.signal, null, `died of ${r.signal}:\n${r.stderr}`);
      assert.equal(r.code, 130, r.stderr);
    } finally {
      release(l);
      gw.proc.kill("SIGKILL");
    }
  });

  for (const [how, code, what] of [
    ["close", 0, "awaits close() then calls process.exit()"],
    ["destroy", 0, "calls destroy() then process.exit() (bench/invoke/child.ts)"],
    ["exit", 0, "calls process.exit() with the gateway still running"],
    ["throw", 1, "dies of an uncaught error on the main thread"],
  ] as const) {
    it(`a program embedding the gateway that ${what}: exit ${code}, no abort`, async () => {
      const proc = fork(fileURLToPath(new URL("../support/embedded-gateway.ts", import.meta.url)), [String(backend.port), KEY, how], {
        execArgv: ["--import", "tsx"],
        stdio: ["ignore", "ignore", "pipe", "ipc"],
      });
      const stderr: string[] = [];
      proc.stderr!.on("data", (d: Buffer) => stderr.push(d.toString()));
      const gw = { proc, stderr, httpPort: 0 };
      try {
        const ready = await within(new Promise<{ ready: { httpPort: number } }>((r) => proc.once("message", (m) => r(m as { ready: { httpPort: number } }))), 60_000);
        assert.ok(ready, `not ready within 60 s: ${stderr.join("")}`);
        gw.httpPort = ready.ready.httpPort;
        const l = await loaded(gw, 300);
        try {
          proc.disconnect();
          const r = await exited(gw, 10_000);
          assert.doesNotMatch(r.stderr, ABORT, `native abort at exit:\n${r.stderr}`);
          assert.equal(r.signal, null, `died of ${r.signal}:\n${r.stderr}`);
          assert.equal(r.code, code, r.stderr);
          const drained = await Promise.all(l.drained);
          // A graceful close() lets the invokes that finish within the shutdown timeout answer.
          if (how === "close") for (const d of drained) assert.ok(!(d instanceof Error) && d.status === 200 && d.body.includes('"success":true'), `a drained invoke failed: ${JSON.stringify(d)}`);
          await Promise.all(l.stuck);
        } finally {
          release(l);
        }
      } finally {
        proc.kill("SIGKILL");
      }
    });
  }
});
