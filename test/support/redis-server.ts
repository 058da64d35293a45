import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./client-helpers.js";

/** A `redis-server` child on 127.0.0.1 (the Debian package's binary on PATH), with its data in a temp directory. */
export interface RedisServer {
  port: number;
  /** e.g. "redis://127.0.0.1:40123" */
  url: string;
  /** The data directory (the append-only file lives here and survives restart()). */
  dir: string;
  /** Every output line so far (redis logs to stdout). */
  output: string[];
  /** Stop it: "graceful" is SIGTERM (redis flushes and exits), "kill9" is SIGKILL. Resolves once it exited. */
  stop(mode?: "graceful" | "kill9"): Promise<void>;
  /** Start it again on the same port and directory (after stop(), or stop(mode) first when it is running). */
  restart(mode?: "graceful" | "kill9"): Promise<void>;
  /** SIGKILL it now, synchronously (for a process "exit" handler); the directory stays. */
  killNow(): void;
  /** Stop it and remove its directory; safe to call twice and after a failed start. */
  close(): Promise<void>;
}

/** How long redis-server may take to accept connections or to exit. */
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 10_000;

/**
 * Start a redis-server with no RDB snapshots and the append-only file fsynced on every write, so a restart, even
 * after SIGKILL, comes back with every write it acknowledged (what "nothing acknowledged lost" is measured against).
 */
export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "gw-redis-"));
  const output: string[] = [];
  let proc: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", dir];
    const p = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
    proc = p;
    const onData = (d: Buffer): void => {
      for (const line of d.toString().split("\n")) if (line) output.push(line);
    };
    p.stdout!.on("data", onData);
    p.stderr!.on("data", onData);
    const spawnFailed = new Promise<never>((_, reject) => p.once("error", (e) => reject(new Error(`redis-server could not be started (is the Debian package redis-server installed?): ${e.message}`))));
    spawnFailed.catch(() => undefined);
    const end = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (p.exitCode !== null) throw new Error(`redis-server exited with ${p.exitCode} at start:\n${output.slice(-20).join("\n")}`);
      if (await Promise.race([ping(port), spawnFailed])) return;
      if (Date.now() > end) {
        p.kill("SIGKILL");
        throw new Error(`redis-server did not answer PING within ${START_TIMEOUT_MS} ms:\n${output.slice(-20).join("\n")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const stop = async (mode: "graceful" | "kill9" = "graceful"): Promise<void> => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = once(p, "exit");
    p.kill(mode === "kill9" ? "SIGKILL" : "SIGTERM");
    const timer = setTimeout(() => p.kill("SIGKILL"), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };

  try {
    await launch();
  } catch (e) {
    await stop("kill9");
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    output,
    stop,
    async restart(mode = "graceful") {
      await stop(mode);
      await launch();
    },
    killNow() {
      if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    },
    async close() {
      await stop("kill9");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** True when a Redis on `port` answers PING within a second (ioredis, no retries: one attempt per call). */
async function ping(port: number): Promise<boolean> {
  const r = new Redis({ host: "127.0.0.1", port, lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  r.on("error", () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}
