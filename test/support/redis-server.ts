import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";

/** A real redis-server on 127.0.0.1 for one test file, in its own temporary directory (append-only file on). */
export interface TestRedisServer {
  readonly port: number;
  readonly url: string;
  /** Stop it: SIGTERM (Redis writes its files and exits) or SIGKILL. Resolves once the process has exited. */
  stop(how?: "graceful" | "kill"): Promise<void>;
  /** Start it again on the same port and directory (what was persisted comes back). */
  restart(): Promise<void>;
  /** Stop it and remove its directory. Safe to call twice. */
  close(): Promise<void>;
}

const REDIS_SERVER = process.env["REDIS_SERVER"] ?? "/usr/bin/redis-server";
const START_TIMEOUT_MS = 10_000;

/** Wait until something accepts TCP connections on `port` (bounded). */
async function waitListening(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode} before listening`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server did not listen on ${port} within ${START_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Spawn redis-server on a free port. */
export async function startTestRedis(): Promise<TestRedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "gw-redis-"));
  let child: ChildProcess | undefined;
  let closed = false;

  const spawnServer = async (): Promise<void> => {
    const c = spawn(REDIS_SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", dir], {
      stdio: "ignore",
    });
    child = c;
    await waitListening(port, c);
  };

  const stop = async (how: "graceful" | "kill" = "graceful"): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    c.kill(how === "kill" ? "SIGKILL" : "SIGTERM");
    const timer = setTimeout(() => c.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  };

  await spawnServer();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    async restart() {
      await stop();
      await spawnServer();
    },
    async close() {
      if (closed) return;
      closed = true;
      await stop("kill");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
