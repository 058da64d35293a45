/**
 * The fuzzer's target: a gateway started as a child process from the CLI (so a crash shows as an exit and its RSS is
 * its own), an input sent over a raw socket with every wait bounded, and the liveness checks run after each input:
 * the process is up, a second, well-behaved connection gets a correct unary reply (platform.Config/ListServices by raw
 * frames), and the child's RSS stays under a bound. At the end the child's open sockets must fall back to where they
 * were (every connection the fuzzer opened is closed on the server's side too).
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { startGatewayProcess, type GatewayProcess } from "../support/cli.js";
import { RawH2, rawUnary } from "../support/h2-raw-unary.js";
import type { FuzzInput } from "./inputs.js";

/** How long one input may take from connect to close, ms (the server's own timeouts are longer: we close first). */
export const INPUT_TIMEOUT_MS = 1500;
/** A connection that says nothing for this long after the input's last write is done with. */
const QUIET_MS = 40;
/** The liveness call's bound, ms. */
const LIVENESS_TIMEOUT_MS = 5000;

/** A liveness property that failed after an input. */
export class Finding extends Error {}

/** RSS of process `pid` in bytes (Linux /proc), 0 when unreadable. */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Open sockets of process `pid` (Linux /proc), -1 when unreadable. */
export function socketsOf(pid: number): number {
  try {
    let n = 0;
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) n++;
      } catch {
        // closed while listed
      }
    }
    return n;
  } catch {
    return -1;
  }
}

export class FuzzTarget {
  baselineRss = 0;
  baselineSockets = 0;
  connections = 0;
  private constructor(
    readonly gw: GatewayProcess,
    /** RSS may grow this much over the baseline before it is a finding. */
    readonly rssAllowance: number,
  ) {}

  /** Start the gateway child and take its baselines after a first liveness call. */
  static async start(rssAllowance = 256 << 20): Promise<FuzzTarget> {
    const gw = await startGatewayProcess();
    const t = new FuzzTarget(gw, rssAllowance);
    await t.liveness();
    await new Promise((r) => setTimeout(r, 200));
    t.baselineRss = rssOf(gw.proc.pid!);
    t.baselineSockets = socketsOf(gw.proc.pid!);
    return t;
  }

  get pid(): number {
    return this.gw.proc.pid!;
  }

  get port(): number {
    return this.gw.grpcPort;
  }

  rss(): number {
    return rssOf(this.pid);
  }

  /** Send one input on a fresh connection; resolves when the server closed it, it went quiet, or the time is up. */
  async run(input: FuzzInput): Promise<void> {
    const c = new RawH2(this.port);
    this.connections++;
    const deadline = Date.now() + INPUT_TIMEOUT_MS;
    try {
      await c.connected(INPUT_TIMEOUT_MS);
      for (const chunk of input.chunks) {
        if (c.closed || Date.now() > deadline) break;
        // Each chunk its own write, and a turn of the loop between them so they leave as separate TCP segments.
        await Promise.race([c.send(chunk), new Promise((r) => setTimeout(r, Math.max(1, deadline - Date.now())))]);
        if (input.chunks.length > 1) await new Promise((r) => setImmediate(r));
      }
      if (input.halfClose) c.endWrites();
      // Wait for the server to close, or for a quiet spell: answers come within a few ms of the last write.
      let last = -1;
      while (!c.closed && Date.now() < deadline && c.received !== last) {
        last = c.received;
        await c.until(() => c.closed, QUIET_MS);
      }
    } finally {
      c.destroy();
    }
  }

  /** Throw a Finding unless the process is up, serves a unary call on a new connection and its RSS is in bound. */
  async liveness(): Promise<void> {
    this.assertRunning();
    let r;
    try {
      r = await rawUnary(this.port, "/platform.Config/ListServices", Buffer.alloc(0), LIVENESS_TIMEOUT_MS);
    } catch (e) {
      await this.exitSettles();
      throw new Finding(`a well-behaved unary call failed: ${(e as Error).message}`);
    }
    if (r.status !== 0 || r.message === undefined) {
      await this.exitSettles();
      throw new Finding(`a well-behaved unary call got status ${r.status} (${r.grpcMessage ?? ""}), rst ${r.rst}, goaway ${r.goaway}`);
    }
    if (this.baselineRss > 0) {
      const rss = this.rss();
      if (rss > this.baselineRss + this.rssAllowance) throw new Finding(`RSS ${mib(rss)} MiB exceeds the baseline ${mib(this.baselineRss)} MiB + ${mib(this.rssAllowance)} MiB`);
    }
  }

  private assertRunning(): void {
    if (this.gw.proc.exitCode !== null || this.gw.proc.signalCode !== null) {
      throw new Finding(`the gateway exited (code ${this.gw.proc.exitCode}, signal ${this.gw.proc.signalCode}); stderr: ${this.gw.stderr.join("").slice(-2000)}`);
    }
  }

  /** A failed call may be a process that died: give its exit event a moment, and report that instead. */
  private async exitSettles(): Promise<void> {
    await new Promise((r) => setTimeout(r, 300));
    this.assertRunning();
  }

  /** Throw a Finding unless the child's sockets fall back to the baseline (+2) within `timeoutMs`. */
  async socketsReleased(timeoutMs = 8000): Promise<void> {
    const end = Date.now() + timeoutMs;
    let n = socketsOf(this.pid);
    while (n > this.baselineSockets + 2 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      n = socketsOf(this.pid);
    }
    if (n > this.baselineSockets + 2) throw new Finding(`the gateway still holds ${n} sockets ${timeoutMs} ms after the last input (baseline ${this.baselineSockets})`);
  }

  async stop(): Promise<void> {
    const exited = this.gw.proc.exitCode !== null || this.gw.proc.signalCode !== null;
    if (exited) return;
    const t = setTimeout(() => this.gw.proc.kill("SIGKILL"), 10_000);
    await this.gw.stop("SIGTERM");
    clearTimeout(t);
  }
}

export function mib(n: number): number {
  return Math.round((n / (1 << 20)) * 10) / 10;
}
