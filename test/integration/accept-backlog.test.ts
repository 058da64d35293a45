import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { startGatewayProcess, type GatewayProcess } from "../support/cli.js";
import { somaxconn } from "../../src/shared/accept-backlog.js";

/**
 * `--accept-backlog` (default 4096): connections the kernel queues for each port before the gateway accepts them.
 * When a replica fails, its clients reconnect to the others all at once; every SYN the kernel drops for a full queue
 * costs its client a one-second retransmit. The gateway is stopped (SIGSTOP) so it accepts nothing, a burst of
 * connections is opened against each port, and the test counts the handshakes the kernel completed, as a client's
 * `connect` reports them. Then the gateway continues and must serve every queued connection.
 */

const BURST = 1500;
/**
 * A dropped SYN is sent again a second after the first (TCP's initial retransmission timeout): a connection not made
 * this long after the burst began is one whose SYN the kernel dropped, and one made within it is one it queued.
 */
const HANDSHAKE_WAIT_MS = 900;

interface Burst {
  sockets: Socket[];
  connected: number;
}

/**
 * Open `n` connections to `port` at once; resolve with how many completed the TCP handshake before every one did or
 * HANDSHAKE_WAIT_MS after the first was opened, whichever comes first.
 */
async function burst(port: number, n: number): Promise<Burst> {
  const started = Date.now();
  const sockets: Socket[] = [];
  let connected = 0;
  for (let i = 0; i < n; i++) {
    const s = connect({ port, host: "127.0.0.1" });
    s.on("error", () => undefined);
    s.once("connect", () => connected++);
    sockets.push(s);
  }
  while (connected < n && Date.now() - started < HANDSHAKE_WAIT_MS) await new Promise((r) => setTimeout(r, 10));
  return { sockets, connected };
}

/** Resolve with the first `bytes` bytes a socket receives after `send` is written (bounded). */
function firstBytes(s: Socket, send: Buffer | string, bytes: number, timeoutMs = 20_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    const timer = setTimeout(() => reject(new Error(`no ${bytes} bytes within ${timeoutMs} ms (got ${got})`)), timeoutMs);
    s.on("data", (d: Buffer) => {
      chunks.push(d);
      got += d.length;
      if (got < bytes) return;
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).subarray(0, bytes));
    });
    s.write(send);
  });
}

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const HEALTH = "GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n";

describe("accept queue (--accept-backlog)", () => {
  const running: GatewayProcess[] = [];
  const open: Socket[] = [];
  after(async () => {
    for (const s of open) s.destroy();
    for (const g of running) {
      g.proc.kill("SIGCONT");
      await g.stop("SIGKILL");
    }
  });

  it("by default queues a burst of 1,500 connections on each port while the gateway accepts nothing, then serves them all", async () => {
    // Below somaxconn the kernel honours the gateway's backlog; a box whose cap is lower cannot queue the burst anyway.
    assert.ok(somaxconn() >= 512, `net.core.somaxconn is ${somaxconn()}`);
    const n = Math.min(BURST, somaxconn() - 16);
    const gw = await startGatewayProcess(["--threads", "2"]);
    running.push(gw);
    gw.proc.kill("SIGSTOP");
    const http = await burst(gw.httpPort, n);
    const grpc = await burst(gw.grpcPort, n);
    open.push(...http.sockets, ...grpc.sockets);
    assert.equal(http.connected, n, "HTTP port: handshakes completed while the gateway was stopped");
    assert.equal(grpc.connected, n, "gRPC port: handshakes completed while the gateway was stopped");

    gw.proc.kill("SIGCONT");
    // Every queued connection is accepted and served: /health on each HTTP one, the server's SETTINGS on each gRPC one.
    const replies = await Promise.all(http.sockets.map((s) => firstBytes(s, HEALTH, 12)));
    assert.equal(replies.filter((b) => b.toString() === "HTTP/1.1 200").length, n);
    const settings = await Promise.all(grpc.sockets.map((s) => firstBytes(s, H2_PREFACE, 9)));
    // A frame header: 24-bit length, type 0x4 (SETTINGS), flags 0 (not an ACK), stream 0.
    assert.equal(settings.filter((b) => b[3] === 0x4 && b[4] === 0 && b.readUInt32BE(5) === 0).length, n);
    for (const s of [...http.sockets, ...grpc.sockets]) s.destroy();
  });

  it("with --accept-backlog 512 the kernel drops what the smaller queue cannot hold", async () => {
    const gw = await startGatewayProcess(["--threads", "2", "--accept-backlog", "512"]);
    running.push(gw);
    gw.proc.kill("SIGSTOP");
    const http = await burst(gw.httpPort, BURST);
    const grpc = await burst(gw.grpcPort, BURST);
    open.push(...http.sockets, ...grpc.sockets);
    // gRPC: one socket of 512 (Linux admits one past the backlog). HTTP: one uWS socket per thread, 512 each.
    assert.ok(grpc.connected <= 513, `gRPC port: ${grpc.connected} handshakes`);
    assert.ok(http.connected <= 2 * 513, `HTTP port: ${http.connected} handshakes`);
    for (const s of [...http.sockets, ...grpc.sockets]) s.destroy();
  });
});
