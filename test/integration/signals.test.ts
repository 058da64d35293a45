import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { connect } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/**
 * The documented ways to run the gateway (`npm start`, the `platform-gateway` bin) must each hand SIGINT/SIGTERM to
 * the gateway, so its graceful shutdown runs and nothing is left serving. Each test signals the process a user or a
 * supervisor would signal, then checks what they would see: the shutdown log, the ports closed, no process left.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = "dist/src/main/cli.js";

interface Started {
  proc: ChildProcess;
  pgid: number;
  httpPort: number;
  grpcPort: number;
  lines: string[];
}

/** Spawn `cmd` in its own process group (as a shell or supervisor would) and wait for "gateway listening". */
async function start(cmd: string, args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<Started> {
  const proc = spawn(cmd, args, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, GATEWAY_GRPC_PORT: "0", GATEWAY_HTTP_PORT: "0", GATEWAY_SHUTDOWN_TIMEOUT_MS: "5000", ...env },
  });
  const lines: string[] = [];
  createInterface({ input: proc.stderr! }).on("line", (l) => lines.push(l));
  const out = createInterface({ input: proc.stdout! });
  const ports = await new Promise<{ httpPort: number; grpcPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "gateway listening" within ${timeoutMs} ms: ${lines.join("\n")}`)), timeoutMs);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${cmd} exited with ${code} before listening: ${lines.join("\n")}`));
    });
    out.on("line", (l) => {
      lines.push(l);
      if (!l.includes('"msg":"gateway listening"')) return;
      clearTimeout(timer);
      resolve(JSON.parse(l) as { httpPort: number; grpcPort: number });
    });
  }).catch((e: unknown) => {
    killGroup(proc.pid!);
    throw e;
  });
  proc.removeAllListeners("exit");
  return { proc, pgid: proc.pid!, ...ports, lines };
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // already gone
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

/** Send `signal` to `target` ("leader": the process started; "group": every process of it, as a terminal's Ctrl-C does). */
async function signalAndCheck(s: Started, signal: NodeJS.Signals, target: "leader" | "group"): Promise<void> {
  try {
    assert.equal(await portOpen(s.httpPort), true);
    const exited = once(s.proc, "exit");
    process.kill(target === "group" ? -s.pgid : s.pgid, signal);
    await Promise.race([exited, new Promise((_, reject) => setTimeout(() => reject(new Error("did not exit within 15 s")), 15_000))]);
    // Whatever was started is gone: no gateway left serving on its own.
    const end = Date.now() + 5000;
    while (groupAlive(s.pgid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.equal(groupAlive(s.pgid), false, `a process of the group is still running after ${signal}: ${s.lines.join("\n")}`);
    assert.equal(await portOpen(s.httpPort), false, "REST port closed");
    assert.equal(await portOpen(s.grpcPort), false, "gRPC port closed");
    const text = s.lines.join("\n");
    assert.match(text, /"msg":"gateway shutting down"/, "the graceful shutdown ran");
    assert.match(text, /"msg":"gateway stopped"/, "the graceful shutdown finished");
    assert.doesNotMatch(text, /exiting now/, "one signal is one graceful shutdown, not a forced exit");
  } finally {
    killGroup(s.pgid);
  }
}

/** A REST request whose body never completes: it stays in flight, so a graceful shutdown waits for it (bounded). */
async function holdRequest(port: number): Promise<() => void> {
  const sock = connect(port, "127.0.0.1");
  await once(sock, "connect");
  sock.on("error", () => undefined);
  sock.write("POST /v1/trigger/held HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"target");
  // Let the server read the head (the request is in flight from then on) before the test signals.
  await new Promise((r) => setTimeout(r, 300));
  return () => sock.destroy();
}

/**
 * The first test runs `npm start` exactly as the README does, warm-up included; the others are about where a signal
 * goes, which the warm-up does not change, so they skip its few seconds (GATEWAY_WARMUP_*).
 */
const NO_WARMUP = { GATEWAY_WARMUP_CALLS: "0", GATEWAY_WARMUP_EVENTS: "0" };

describe("signals reach the gateway", () => {
  before(async () => {
    // npm start's prestart compiles dist/ when it is out of date; do it once here so the tests time signals, not tsc.
    await promisify(execFile)(process.execPath, ["scripts/build-if-needed.mjs"], { cwd: ROOT, timeout: 170_000 });
  });

  it("SIGTERM to `npm start` (npm's pid) shuts the gateway down gracefully and leaves nothing running", async () => {
    await signalAndCheck(await start("npm", ["start"]), "SIGTERM", "leader");
  });

  it("SIGINT to `npm start` (npm's pid) shuts the gateway down gracefully", async () => {
    await signalAndCheck(await start("npm", ["start"], NO_WARMUP), "SIGINT", "leader");
  });

  it("Ctrl-C at a terminal running `npm start` (SIGINT to npm and the gateway at once) is one graceful shutdown", async () => {
    await signalAndCheck(await start("npm", ["start"], NO_WARMUP), "SIGINT", "group");
  });

  it("SIGTERM to the platform-gateway bin shuts it down gracefully", async () => {
    await signalAndCheck(await start(process.execPath, [BIN], NO_WARMUP), "SIGTERM", "leader");
  });

  it("SIGINT to the platform-gateway bin shuts it down gracefully", async () => {
    await signalAndCheck(await start(process.execPath, [BIN], NO_WARMUP), "SIGINT", "leader");
  });

  it("the same signal delivered twice at once (terminal + npm forwarding) is one graceful shutdown, not a forced exit", async () => {
    const s = await start(process.execPath, [BIN], { ...NO_WARMUP, GATEWAY_SHUTDOWN_TIMEOUT_MS: "1500" });
    const release = await holdRequest(s.httpPort);
    try {
      const exited = once(s.proc, "exit");
      process.kill(s.pgid, "SIGINT");
      await new Promise((r) => setTimeout(r, 30));
      process.kill(s.pgid, "SIGINT");
      const [code] = (await exited) as [number | null];
      const text = s.lines.join("\n");
      assert.equal(code, 0, text);
      assert.match(text, /"msg":"gateway stopped"/);
      assert.doesNotMatch(text, /exiting now/);
    } finally {
      release();
      killGroup(s.pgid);
    }
  });

  it("a second signal well after the first still exits at once (code 130)", async () => {
    const s = await start(process.execPath, [BIN], { ...NO_WARMUP, GATEWAY_SHUTDOWN_TIMEOUT_MS: "8000" });
    const release = await holdRequest(s.httpPort);
    try {
      const exited = once(s.proc, "exit");
      const t0 = Date.now();
      process.kill(s.pgid, "SIGTERM");
      await new Promise((r) => setTimeout(r, 1300));
      assert.equal(s.proc.exitCode, null, "still draining the held request");
      process.kill(s.pgid, "SIGTERM");
      const [code] = (await exited) as [number | null];
      assert.equal(code, 130);
      assert.ok(Date.now() - t0 < 5000, "did not wait for the shutdown timeout");
      assert.match(s.lines.join("\n"), /second SIGTERM, exiting now/);
    } finally {
      release();
      killGroup(s.pgid);
    }
  });
});
