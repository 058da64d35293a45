import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../../src/main/cli.ts", import.meta.url));
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** A gateway process started from the CLI (via tsx), as a user would run it. */
export interface GatewayProcess {
  proc: ChildProcess;
  grpcPort: number;
  httpPort: number;
  /** Every stdout line so far. */
  stdout: string[];
  stderr: string[];
  /** Send a signal and resolve with the exit code and the time it took, in ms. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; ms: number }>;
}

/** Result of a CLI run that is expected to exit by itself. */
export interface CliExit {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run the CLI to completion (for --help and startup failures), bounded by `timeoutMs`. */
export async function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<CliExit> {
  const proc = spawn(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const [code] = (await once(proc, "exit")) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/**
 * Start the CLI and wait for its `gateway listening` line (ports 0 unless args say otherwise). No warm-up unless `env`
 * sets GATEWAY_WARMUP_CALLS / GATEWAY_WARMUP_EVENTS (an empty value: the CLI's default): it adds seconds per start,
 * and test/integration/warmup.test.ts and the CLI's defaults test cover it.
 */
export async function startGatewayProcess(args: string[] = [], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<GatewayProcess> {
  const proc = spawn(process.execPath, ["--import", "tsx", CLI, "--grpc-port", "0", "--http-port", "0", ...args], {
    cwd: ROOT,
    env: { ...process.env, GATEWAY_WARMUP_CALLS: "0", GATEWAY_WARMUP_EVENTS: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  proc.stderr!.on("data", (d: Buffer) => stderr.push(d.toString()));
  const lines = createInterface({ input: proc.stdout! });
  const ports = await new Promise<{ grpcPort: number; httpPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`gateway did not log "gateway listening" within ${timeoutMs} ms; stderr: ${stderr.join("")}`));
    }, timeoutMs);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening; stderr: ${stderr.join("")}`));
    });
    lines.on("line", (line) => {
      stdout.push(line);
      if (!line.includes('"msg":"gateway listening"')) return;
      clearTimeout(timer);
      const j = JSON.parse(line) as { grpcPort: number; httpPort: number };
      resolve({ grpcPort: j.grpcPort, httpPort: j.httpPort });
    });
  });
  proc.removeAllListeners("exit");
  return {
    proc,
    ...ports,
    stdout,
    stderr,
    async stop(signal = "SIGTERM") {
      const started = Date.now();
      if (proc.exitCode !== null) return { code: proc.exitCode, ms: 0 };
      const exited = once(proc, "exit");
      proc.kill(signal);
      const [code] = (await exited) as [number | null];
      return { code, ms: Date.now() - started };
    },
  };
}
