/**
 * The connection-lifecycle defences of the native HTTP/2 server (src/h2/server-lifecycle.ts, docs/operations.md
 * "HTTP/2 connection defences") over real sockets on 127.0.0.1, each asserted as a client sees it: the frames it gets
 * (GOAWAY with its last stream id and code, PING, WINDOW_UPDATE, RST_STREAM) and when the connection ends. Timeouts
 * are set small here; the defaults are the documented ones.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { after, describe, it } from "node:test";
import { createH2Server } from "../../src/h2/server.js";
import { literalField } from "../../src/h2/hpack.js";
import { CONNECTION_WINDOW, STREAM_WINDOW } from "../../src/h2/frames.js";
import { FLOOD_BURST } from "../../src/h2/server-session.js";
import type { H2Server, H2ServerOptions, H2ServerSession, H2ServerStream } from "../../src/h2/types.js";
import { parseCli } from "../../src/main/cli-args.js";
import { defaultConnectionBound, validateGatewayOptions } from "../../src/config/options.js";
import { startTestGateway, waitFor } from "../support/gateway.js";
import { rawFrame as frame, u32 } from "../support/h2-fake-server.js";

const H = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
const END_STREAM = 1;
const ACK = 1;
const END_HEADERS = 4;
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const ANY_STREAM = 0x7fffffff;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function block(fields: [string, string][]): Buffer {
  const out = Buffer.alloc(4096);
  let p = 0;
  for (const [n, v] of fields) p = literalField(out, p, 0, n, v);
  return out.subarray(0, p);
}
const REQ = block([
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/x"],
  [":authority", "x"],
]);

interface RawFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** A raw client socket: sends bytes, parses the server's frames, optionally answers PINGs and SETTINGS. */
class Raw {
  readonly frames: RawFrame[] = [];
  closed = false;
  closedAt = 0;
  /** Connection credit the server granted beyond its initial 65,535 bytes. */
  connectionCredit = 0;
  private buf = Buffer.alloc(0);
  readonly socket: net.Socket;
  constructor(
    port: number,
    private readonly auto: { pingAck?: boolean; settingsAck?: boolean } = { pingAck: true, settingsAck: true },
  ) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.on("data", (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        const f = { type: this.buf[3]!, flags: this.buf[4]!, stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(this.buf.subarray(9, 9 + len)) };
        this.buf = this.buf.subarray(9 + len);
        this.frames.push(f);
        if (f.type === H.PING && (f.flags & ACK) === 0 && this.auto.pingAck) this.send(frame(H.PING, ACK, 0, f.payload));
        if (f.type === H.SETTINGS && (f.flags & ACK) === 0 && this.auto.settingsAck) this.send(frame(H.SETTINGS, ACK, 0));
        if (f.type === H.WINDOW_UPDATE && f.stream === 0) this.connectionCredit += f.payload.readUInt32BE(0);
      }
    });
    this.socket.on("error", () => undefined);
    this.socket.on("close", () => {
      this.closed = true;
      this.closedAt = Date.now();
    });
  }
  send(...bufs: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(bufs));
  }
  open(): this {
    this.send(PREFACE, frame(H.SETTINGS, 0, 0));
    return this;
  }
  of(type: number): RawFrame[] {
    return this.frames.filter((f) => f.type === type);
  }
  goaways(): { last: number; code: number; debug: string }[] {
    return this.of(H.GOAWAY).map((f) => ({ last: f.payload.readUInt32BE(0), code: f.payload.readUInt32BE(4), debug: f.payload.subarray(8).toString() }));
  }
  destroy(): void {
    this.socket.destroy();
  }
}

interface Started {
  server: H2Server;
  port: number;
  streams: H2ServerStream[];
  closes: { id: number; code: number; why: string }[];
  sessions: H2ServerSession[];
  sessionsClosed: string[];
  refused: number;
}

describe("native HTTP/2 server: connection lifecycle", () => {
  const servers: H2Server[] = [];
  const raws: Raw[] = [];
  after(() => {
    for (const r of raws) r.destroy();
    for (const s of servers) {
      s.stopListening();
      for (const x of s.sessions) x.destroy();
    }
  });

  /** A server whose streams stay open until the test answers them (`answer` ends one with 200). */
  async function start(opts: Partial<H2ServerOptions> = {}, onData?: (s: H2ServerStream, n: number) => void): Promise<Started> {
    const st: Started = { server: undefined as unknown as H2Server, port: 0, streams: [], closes: [], sessions: [], sessionsClosed: [], refused: 0 };
    st.server = createH2Server({
      maxConcurrentStreams: 100,
      maxHeaderListSize: 16 * 1024,
      streamHighWaterMark: 64 * 1024,
      onSession: (s) => st.sessions.push(s),
      onSessionClose: (_s, why) => st.sessionsClosed.push(why),
      onConnectionRefused: () => st.refused++,
      ...opts,
      onStream(stream) {
        st.streams.push(stream);
        return {
          data: (_b, start, end) => onData?.(stream, end - start),
          end() {},
          drain() {},
          close: (code, why) => st.closes.push({ id: stream.id, code, why }),
        };
      },
    });
    servers.push(st.server);
    st.port = await st.server.listen(0, "127.0.0.1");
    return st;
  }
  const raw = (port: number, auto?: { pingAck?: boolean; settingsAck?: boolean }): Raw => {
    const r = new Raw(port, auto);
    raws.push(r);
    return r;
  };
  const answer = (s: H2ServerStream): void => s.respond([[":status", "200"]], true);

  it("closes a connection with no open stream for idleTimeoutMs (two-phase GOAWAY NO_ERROR), and not one with a stream open", async () => {
    const st = await start({ idleTimeoutMs: 300 });
    const idle = raw(st.port).open();
    const busy = raw(st.port).open();
    idle.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, REQ));
    busy.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, REQ));
    await waitFor(() => st.streams.length === 2, "both streams");
    const busyStream = st.streams.find((s) => s.session === st.sessions[1])!;
    answer(st.streams.find((s) => s.session === st.sessions[0])!);
    const answeredAt = Date.now();
    await waitFor(() => idle.closed, "the idle connection to close", 3000);
    const ms = idle.closedAt - answeredAt;
    assert.ok(ms >= 250 && ms < 2000, `closed ${ms} ms after its last stream`);
    assert.deepEqual(
      idle.goaways().map((g) => [g.last, g.code]),
      [
        [ANY_STREAM, 0],
        [1, 0],
      ],
    );
    await waitFor(() => st.sessionsClosed.length === 1, "onSessionClose");
    assert.match(st.sessionsClosed[0]!, /idle timeout/);
    // Three idle periods later the connection with an open stream has had no GOAWAY.
    await sleep(600);
    assert.equal(busy.of(H.GOAWAY).length, 0);
    assert.equal(busy.closed, false);
    answer(busyStream);
    await waitFor(() => busy.closed, "the other connection to close once idle", 3000);
  });

  it("closes a connection whose header block is kept open by CONTINUATION frames past headerBlockTimeoutMs", async () => {
    const st = await start({ headerBlockTimeoutMs: 400 });
    const r = raw(st.port).open();
    // Our SETTINGS ACK first: nothing may come between HEADERS and its CONTINUATIONs.
    await waitFor(() => r.of(H.SETTINGS).some((f) => (f.flags & ACK) === 0), "the server's SETTINGS");
    r.send(frame(H.HEADERS, 0, 1, REQ.subarray(0, 4)));
    let at = 4;
    const started = Date.now();
    // One CONTINUATION byte every 100 ms, never END_HEADERS (bounded: 30 frames, 3 s).
    for (let i = 0; i < 30 && !r.closed && at < REQ.length - 1; i++) {
      await sleep(100);
      r.send(frame(H.CONTINUATION, 0, 1, REQ.subarray(at, at + 1)));
      at++;
    }
    await waitFor(() => r.closed, "the connection to close", 3000);
    const ms = r.closedAt - started;
    assert.ok(ms >= 350 && ms < 2000, `closed after ${ms} ms`);
    assert.deepEqual(
      r.goaways().map((g) => g.code),
      [1],
    );
    assert.match(r.goaways()[0]!.debug, /header block was left open/);
    assert.equal(st.streams.length, 0);
  });

  it("sends a keepalive PING after keepaliveTimeMs of silence: a client that ACKs it stays, one that does not is closed after keepaliveTimeoutMs", async () => {
    const st = await start({ keepaliveTimeMs: 200, keepaliveTimeoutMs: 300 });
    const good = raw(st.port).open();
    const dead = raw(st.port, { settingsAck: true, pingAck: false }).open();
    dead.send(frame(H.HEADERS, END_HEADERS, 1, REQ)); // a call open on it
    const started = Date.now();
    await waitFor(() => dead.closed, "the silent client's connection to close", 3000);
    const ms = dead.closedAt - started;
    assert.ok(ms >= 450 && ms < 2000, `closed after ${ms} ms`);
    assert.equal(dead.of(H.PING).length, 1);
    assert.deepEqual(
      dead.goaways().map((g) => g.code),
      [0],
    );
    assert.match(dead.goaways()[0]!.debug, /keepalive PING not acknowledged/);
    await waitFor(() => st.closes.length === 1, "the open call closed");
    assert.deepEqual([st.closes[0]!.id, st.closes[0]!.code], [1, 8], "the open call is cancelled");
    await sleep(500);
    assert.equal(good.closed, false, "the client that answers PINGs is kept");
    assert.ok(good.of(H.PING).length >= 2, `${good.of(H.PING).length} keepalive PINGs`);
    assert.equal(good.of(H.GOAWAY).length, 0);
    await waitFor(() => st.sessionsClosed.length === 1, "onSessionClose");
    assert.match(st.sessionsClosed[0]!, /keepalive/);
  });

  it("node:http2 answers keepalive PINGs: its connection and its calls go on", async () => {
    const st = await start({ keepaliveTimeMs: 100, keepaliveTimeoutMs: 200 });
    const c = http2.connect(`http://127.0.0.1:${st.port}`);
    c.on("error", () => undefined);
    try {
      await sleep(700);
      assert.equal(c.closed || c.destroyed, false);
      const req = c.request({ ":method": "POST", ":path": "/x" });
      req.end();
      await waitFor(() => st.streams.length === 1, "the stream");
      answer(st.streams[0]!);
      await new Promise<void>((resolve) => req.on("close", () => resolve()).resume());
      assert.equal(req.rstCode, 0);
      assert.equal(st.sessionsClosed.length, 0);
    } finally {
      c.destroy();
    }
  });

  it("closes a connection that does not acknowledge our SETTINGS within settingsAckTimeoutMs (GOAWAY SETTINGS_TIMEOUT)", async () => {
    const st = await start({ settingsAckTimeoutMs: 300 });
    const lazy = raw(st.port, { pingAck: true, settingsAck: false }).open();
    const polite = raw(st.port).open();
    await waitFor(() => lazy.closed, "the connection to close", 3000);
    assert.deepEqual(
      lazy.goaways().map((g) => g.code),
      [4],
    );
    await sleep(300);
    assert.equal(polite.closed, false);
    assert.equal(st.sessionsClosed.length, 1);
  });

  it("at maxConnectionAgeMs: GOAWAY(2^31-1) + PING, streams sent before the ACK still run, final GOAWAY with the last id, then streams past the grace are reset", async () => {
    const st = await start({ maxConnectionAgeMs: 300, maxConnectionAgeGraceMs: 400 });
    const r = raw(st.port, { settingsAck: true, pingAck: false }).open();
    r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, REQ));
    await waitFor(() => r.of(H.GOAWAY).length === 1, "the first GOAWAY", 3000);
    const firstAt = Date.now();
    assert.deepEqual(r.goaways()[0], { last: ANY_STREAM, code: 0, debug: "" });
    await waitFor(() => r.of(H.PING).length === 1, "the PING after it");
    // A stream the client sends before it acknowledges the PING is one it sent before it saw the GOAWAY: served.
    r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 3, REQ));
    await waitFor(() => st.streams.length === 2, "stream 3 accepted");
    r.send(frame(H.PING, ACK, 0, r.of(H.PING)[0]!.payload));
    await waitFor(() => r.of(H.GOAWAY).length === 2, "the final GOAWAY");
    assert.deepEqual(r.goaways()[1], { last: 3, code: 0, debug: "" });
    r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 5, REQ));
    answer(st.streams[1]!); // stream 3 finishes normally
    await waitFor(() => r.closed, "the connection to end after the grace", 3000);
    const ms = r.closedAt - firstAt;
    assert.ok(ms >= 300 && ms < 2000, `ended ${ms} ms after the first GOAWAY`);
    const rst = r.of(H.RST_STREAM).map((f) => [f.stream, f.payload.readUInt32BE(0)]);
    assert.deepEqual(rst, [
      [5, 7],
      [1, 8],
    ]);
    assert.deepEqual(
      r.of(H.HEADERS).map((f) => f.stream),
      [3],
    );
    assert.deepEqual(
      st.closes.map((c) => [c.id, c.code]).sort(),
      [
        [1, 8],
        [3, 0],
      ],
    );
    await waitFor(() => st.sessionsClosed.length === 1, "onSessionClose");
    assert.match(st.sessionsClosed[0]!, /max connection age/);
  });

  it("close() is two-phase too: without the PING's ACK the final GOAWAY follows within about 1 s", async () => {
    const st = await start();
    const r = raw(st.port, { settingsAck: true, pingAck: false }).open();
    r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, REQ));
    await waitFor(() => st.streams.length === 1, "the stream");
    const at = Date.now();
    st.sessions[0]!.close();
    await waitFor(() => r.of(H.GOAWAY).length === 2, "two GOAWAYs", 3000);
    const ms = Date.now() - at;
    assert.ok(ms >= 900 && ms < 2000, `final GOAWAY after ${ms} ms`);
    assert.deepEqual(
      r.goaways().map((g) => [g.last, g.code]),
      [
        [ANY_STREAM, 0],
        [1, 0],
      ],
    );
    answer(st.streams[0]!);
    await waitFor(() => r.closed, "the connection to end");
  });

  it("refuses connections beyond maxConnections at accept and counts them; a freed slot is used again", async () => {
    const st = await start({ maxConnections: 2 });
    const a = raw(st.port).open();
    const b = raw(st.port).open();
    await waitFor(() => st.sessions.length === 2, "two sessions");
    const c = raw(st.port).open();
    await waitFor(() => c.closed, "the third connection to be closed");
    assert.equal(c.frames.length, 0, "nothing was written to it");
    assert.equal(st.refused, 1);
    assert.equal(a.closed || b.closed, false);
    a.destroy();
    await waitFor(() => st.server.sessions.size === 1, "the first session gone");
    await sleep(50);
    const d = raw(st.port).open();
    await waitFor(() => d.of(H.SETTINGS).length > 0, "the server's SETTINGS on a new connection");
    assert.equal(st.refused, 1);
  });

  it("returns connection credit when a stream's bytes are consumed: paused streams hold at most the connection window, resume gives it back", async () => {
    const held = new Map<number, number>();
    const st = await start({}, (s, n) => {
      held.set(s.id, (held.get(s.id) ?? 0) + n);
      s.pause(); // a handler that cannot keep up
    });
    const r = raw(st.port).open();
    const ids = [1, 3, 5, 7, 9, 11];
    const sent = new Map<number, number>(ids.map((id) => [id, 0]));
    for (const id of ids) r.send(frame(H.HEADERS, END_HEADERS, id, REQ));
    await waitFor(() => r.of(H.WINDOW_UPDATE).some((f) => f.stream === 0), "the server's connection window");
    const chunk = Buffer.alloc(16_384, 7);
    /** Send on every stream what the windows the server granted allow (each stream up to its whole window). */
    const pump = (): number => {
      const window = 65_535 + r.connectionCredit - [...sent.values()].reduce((a, b) => a + b, 0);
      let room = window;
      let n = 0;
      for (const id of ids) {
        const credit = r.of(H.WINDOW_UPDATE).filter((f) => f.stream === id).reduce((a, f) => a + f.payload.readUInt32BE(0), 0);
        while (room > 0 && sent.get(id)! < STREAM_WINDOW + credit) {
          const k = Math.min(chunk.length, room, STREAM_WINDOW + credit - sent.get(id)!);
          r.send(frame(H.DATA, 0, id, chunk.subarray(0, k)));
          sent.set(id, sent.get(id)! + k);
          room -= k;
          n += k;
        }
      }
      return n;
    };
    // Keep sending while the server grants credit (bounded: 200 rounds).
    for (let i = 0; i < 200; i++) {
      const n = pump();
      await sleep(n > 0 ? 20 : 100);
      if (n === 0 && pump() === 0) break;
    }
    const total = (): number => [...held.values()].reduce((a, b) => a + b, 0);
    await waitFor(() => total() === [...sent.values()].reduce((a, b) => a + b, 0), "the server to read what was sent");
    assert.equal(total(), CONNECTION_WINDOW, `the paused streams hold ${total()} bytes: the connection window`);
    assert.equal(r.closed, false);
    // Resuming a stream hands its bytes' credit back: the client may send that much again.
    const before = r.connectionCredit;
    st.streams.find((s) => s.id === 1)!.resume();
    await waitFor(() => r.connectionCredit > before, "connection credit after resume");
    assert.equal(r.connectionCredit - before, held.get(1));
  });

  it("a client's GOAWAY with an error code ends the connection at once, its streams closed with that code; its debug data reaches onSessionClose", async () => {
    const st = await start();
    const r = raw(st.port).open();
    r.send(frame(H.HEADERS, END_HEADERS, 1, REQ));
    await waitFor(() => st.streams.length === 1, "the stream");
    r.send(frame(H.GOAWAY, 0, 0, Buffer.concat([u32(0), u32(1), Buffer.from("client bug\n")])));
    await waitFor(() => r.closed, "the connection to end", 3000);
    assert.deepEqual(
      st.closes.map((c) => [c.id, c.code]),
      [[1, 1]],
    );
    await waitFor(() => st.sessionsClosed.length === 1, "onSessionClose");
    assert.match(st.sessionsClosed[0]!, /GOAWAY with error code 1: client bug\?/);
  });

  it("rejects lifecycle options out of range, naming the field", () => {
    const base = { maxConcurrentStreams: 1, maxHeaderListSize: 1024, streamHighWaterMark: 1, onStream: () => ({ data() {}, end() {}, close() {}, drain() {} }) };
    assert.throws(() => createH2Server({ ...base, idleTimeoutMs: -1 }), /idleTimeoutMs/);
    assert.throws(() => createH2Server({ ...base, keepaliveTimeMs: 2 ** 31 }), /keepaliveTimeMs/);
    assert.throws(() => createH2Server({ ...base, maxConnections: 0 }), /maxConnections/);
    assert.throws(() => createH2Server({ ...base, maxConnectionAgeMs: 1.5 }), /maxConnectionAgeMs/);
  });
});

describe("the gateway's gRPC connection defences", () => {
  it("--grpc-max-connections refuses one more connection and counts it in platform_grpc_connections_refused_total; --grpc-idle-timeout closes an idle one", async () => {
    const gw = await startTestGateway({ grpcMaxConnections: 1, grpcIdleTimeoutMs: 400 });
    const a = new Raw(gw.gateway.grpcPort).open();
    const b = new Raw(gw.gateway.grpcPort);
    try {
      await waitFor(() => a.of(H.SETTINGS).length > 0, "the first connection served");
      b.open();
      await waitFor(() => b.closed, "the second connection closed at accept");
      assert.equal(b.frames.length, 0);
      const text = await (await fetch(`${gw.http}/metrics`)).text();
      assert.match(text, /# HELP platform_grpc_connections_refused_total .+/);
      assert.match(text, /^platform_grpc_connections_refused_total 1$/m);
      // The first connection, idle since it opened, gets the two GOAWAYs and is closed.
      await waitFor(() => a.closed, "the idle connection closed", 3000);
      assert.deepEqual(
        a.goaways().map((g) => [g.last, g.code]),
        [
          [ANY_STREAM, 0],
          [0, 0],
        ],
      );
    } finally {
      a.destroy();
      b.destroy();
      await gw.gateway.close();
    }
  });

  it("a connection ended for a flood is counted by code in platform_grpc_connection_errors_total and logged, one line per 10 s", async () => {
    const gw = await startTestGateway({});
    const flooders = [new Raw(gw.gateway.grpcPort).open(), new Raw(gw.gateway.grpcPort).open()];
    try {
      for (const r of flooders) {
        r.send(...Array.from({ length: FLOOD_BURST + 500 }, (_, i) => frame(H.PING, 0, 0, Buffer.concat([u32(0), u32(i)]))));
        await waitFor(() => r.closed, "the flooding connection closed");
        const calm = r.goaways().find((g) => g.code === 0xb);
        assert.ok(calm, `GOAWAY ENHANCE_YOUR_CALM: ${JSON.stringify(r.goaways())}`);
      }
      const text = await (await fetch(`${gw.http}/metrics`)).text();
      assert.match(text, /# HELP platform_grpc_connection_errors_total .+/);
      assert.match(text, /^platform_grpc_connection_errors_total\{code="ENHANCE_YOUR_CALM"\} 2$/m);
      const lines = gw.logs.filter((l) => typeof l["msg"] === "string" && (l["msg"] as string).includes("HTTP/2 connection error"));
      assert.equal(lines.length, 1, "the second within 10 s is counted, not logged");
      assert.equal(lines[0]!["level"], "warn");
      assert.equal(lines[0]!["code"], "ENHANCE_YOUR_CALM");
      assert.equal(lines[0]!["why"], "too many control frames");
      assert.match(String(lines[0]!["peer"]), /^127\.0\.0\.1:\d+$/);
    } finally {
      for (const r of flooders) r.destroy();
      await gw.gateway.close();
    }
  });

  it("flags and environment variables set the connection policy; bad values are refused naming the option", () => {
    const env = { GATEWAY_GRPC_IDLE_TIMEOUT_MS: "1000", GATEWAY_GRPC_MAX_CONNECTION_AGE_MS: "2000", GATEWAY_GRPC_MAX_CONNECTIONS: "3" };
    assert.deepEqual(parseCli([], env), { grpcIdleTimeoutMs: 1000, grpcMaxConnectionAgeMs: 2000, grpcMaxConnections: 3 });
    assert.deepEqual(parseCli(["--grpc-idle-timeout", "0", "--grpc-max-connection-age", "5", "--grpc-max-connections", "6"], env), {
      grpcIdleTimeoutMs: 0,
      grpcMaxConnectionAgeMs: 5,
      grpcMaxConnections: 6,
    });
    const d = validateGatewayOptions({});
    assert.deepEqual([d.grpcIdleTimeoutMs, d.grpcMaxConnectionAgeMs, d.grpcMaxConnections], [300_000, 0, defaultConnectionBound()]);
    // The connection bound's default: three quarters of the soft open-files limit, 10,000 when it cannot be read.
    const limits = (soft: string) => () => `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                20000                files\n`;
    assert.equal(defaultConnectionBound(limits("20000")), 15_000);
    assert.equal(defaultConnectionBound(limits("1024")), 768);
    assert.equal(defaultConnectionBound(limits("unlimited")), 10_000);
    assert.equal(
      defaultConnectionBound(() => {
        throw new Error("ENOENT");
      }),
      10_000,
    );
    assert.throws(() => validateGatewayOptions({ grpcIdleTimeoutMs: -1 }), /grpcIdleTimeoutMs/);
    assert.throws(() => validateGatewayOptions({ grpcMaxConnectionAgeMs: 2 ** 31 }), /grpcMaxConnectionAgeMs/);
    assert.throws(() => validateGatewayOptions({ grpcMaxConnections: 0 }), /grpcMaxConnections/);
  });
});
