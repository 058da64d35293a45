/**
 * The raw-frame HTTP/2 unary client (src/backends/h2-unary.ts, h2-connection.ts) against a raw-frame fake server
 * (test/support/h2-fake-server.ts) that produces what gRPC servers do not on demand, and against a grpc-js server for
 * flow control beyond the windows. Each test asserts what the caller gets back and what reached the server.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createH2UnaryClient, type H2UnaryClient } from "../../src/backends/h2-unary.js";
import { CONNECTION_WINDOW, H2Connection, H2Stream, QUEUE_LIMIT, STREAM_WINDOW, type ConnectionLoss } from "../../src/h2/client-connection.js";
import { huffmanEncode, literalField } from "../../src/h2/hpack.js";
import { Code } from "../../src/shared/code.js";
import { F, FakeServer, T, grpcFrame, indexedHuffman, plainBlock, settings, u32, type FakeRequest } from "../support/h2-fake-server.js";
import { waitFor } from "../support/gateway.js";
import { rawBytesMethod } from "../support/raw-methods.js";

const soon = (ms = 5000): number => Date.now() + ms;
const md = (): grpc.Metadata => new grpc.Metadata();
const pathOf = (r: FakeRequest): string => r.headers.find(([k]) => k === ":path")?.[1] ?? "";
const client = (s: FakeServer, extra: { connections?: number; maxReceiveBytes?: number } = {}): H2UnaryClient =>
  createH2UnaryClient({ address: `127.0.0.1:${s.port}`, connections: extra.connections ?? 1, maxReceiveBytes: extra.maxReceiveBytes ?? 1 << 20 });

describe("raw-frame h2 unary client", () => {
  it("opens with the preface, SETTINGS (push off, 4 MiB stream window) and a connection WINDOW_UPDATE; sends gRPC headers, metadata and the framed message; answers PING", async () => {
    const s = await new FakeServer({
      onRequest: (r) => {
        r.conn.send(T.PING, 0, 0, Buffer.from("pingpong"));
        r.conn.reply(r.stream, r.body.subarray(5));
      },
    }).listen();
    const c = client(s);
    try {
      const m = md();
      m.set("x-tenant", "acme");
      m.set("x-trace-bin", Buffer.from([0, 1, 2, 250]));
      m.add("x-multi", "a");
      m.add("x-multi", "b");
      m.set("content-type", "text/plain"); // the client's own content-type wins
      assert.deepEqual(await c.call("/pkg.Svc/Echo", Buffer.from("hello"), m, soon()), { ok: true, bytes: Buffer.from("hello") });
      const conn = s.conns[0]!;
      const [first, second] = conn.frames;
      assert.equal(first!.type, T.SETTINGS);
      assert.deepEqual(first!.payload, settings([[2, 0], [4, STREAM_WINDOW], [6, 64 * 1024]]));
      assert.equal(second!.type, T.WINDOW_UPDATE);
      assert.equal(second!.payload.readUInt32BE(0), CONNECTION_WINDOW - 65_535);
      const req = s.requests[0]!;
      assert.equal(req.stream, 1);
      assert.deepEqual(req.body, grpcFrame(Buffer.from("hello")));
      const h = req.headers;
      assert.deepEqual(h.slice(0, 4), [
        [":method", "POST"],
        [":scheme", "http"],
        [":path", "/pkg.Svc/Echo"],
        [":authority", `127.0.0.1:${s.port}`],
      ]);
      assert.deepEqual(h.filter(([k]) => k === "content-type"), [["content-type", "application/grpc"]]);
      assert.deepEqual(h.find(([k]) => k === "te"), ["te", "trailers"]);
      assert.match(h.find(([k]) => k === "grpc-timeout")![1], /^\d{1,8}m$/);
      assert.deepEqual(h.find(([k]) => k === "x-tenant"), ["x-tenant", "acme"]);
      // Binary metadata in grpc-js's wire form (Metadata.toHttp2Headers: base64), repeated keys as repeated fields.
      assert.deepEqual(h.find(([k]) => k === "x-trace-bin"), ["x-trace-bin", Buffer.from([0, 1, 2, 250]).toString("base64")]);
      assert.deepEqual(h.filter(([k]) => k === "x-multi"), [["x-multi", "a"], ["x-multi", "b"]]);
      await waitFor(() => s.sent(T.PING).some((f) => f.flags & F.ACK && f.payload.toString() === "pingpong"), "the PING ACK");
      assert.ok(s.sent(T.SETTINGS).some((f) => f.flags & F.ACK), "the server's SETTINGS acknowledged");
    } finally {
      c.close();
      await s.close();
    }
  });

  it("reads padded frames, a message in 1-byte DATA frames, trailers in HEADERS + CONTINUATION, Huffman strings and the dynamic table", async () => {
    const s = await new FakeServer({
      onRequest: ({ conn, stream, headers }) => {
        const path = headers.find(([k]) => k === ":path")![1];
        if (path === "/one") {
          // :status 200 from the static table; content-type indexed into the dynamic table; a padded HEADERS frame.
          const block = Buffer.concat([Buffer.from([0x88]), indexedHuffman("content-type", "application/grpc")]);
          conn.send(T.HEADERS, F.END_HEADERS | F.PADDED, stream, Buffer.concat([Buffer.from([3]), block, Buffer.alloc(3)]));
          const msg = grpcFrame(Buffer.from("hello, frames"));
          for (let i = 0; i < msg.length; i++) {
            if (i % 2 === 0) conn.send(T.DATA, 0, stream, msg.subarray(i, i + 1));
            else conn.send(T.DATA, F.PADDED, stream, Buffer.concat([Buffer.from([2]), msg.subarray(i, i + 1), Buffer.alloc(2)]));
          }
          const trailers = Buffer.concat([indexedHuffman("grpc-status", "0"), indexedHuffman("grpc-message", "fine")]);
          conn.send(T.HEADERS, F.END_STREAM, stream, trailers.subarray(0, 3));
          conn.send(T.CONTINUATION, 0, stream, trailers.subarray(3, 9));
          conn.send(T.CONTINUATION, F.END_HEADERS, stream, trailers.subarray(9));
        } else if (path === "/two") {
          // Table now (newest first): 62 grpc-message: fine, 63 grpc-status: 0, 64 content-type. A size update first.
          conn.headers(stream, Buffer.from([0x3f, 0xe1, 0x1f, 0x88, 0xc0]));
          const status = Buffer.concat([Buffer.from([0x7f, 0x00, 0x80 | huffmanEncode("5").length]), huffmanEncode("5")]);
          const text = huffmanEncode("n%C3%A4 found");
          // grpc-message by dynamic name index 63 (the new entry moved it up one), literal without indexing.
          const message = Buffer.concat([Buffer.from([0x0f, 63 - 15, 0x80 | text.length]), text]);
          conn.headers(stream, Buffer.concat([status, message]), true);
        } else {
          // Trailers-only: status and grpc-status in the one HEADERS frame that ends the stream.
          conn.headers(stream, plainBlock([[":status", "200"], ["grpc-status", "7"], ["grpc-message", "no%20entry"]]), true);
        }
      },
    }).listen();
    const c = client(s);
    try {
      assert.deepEqual(await c.call("/one", Buffer.alloc(0), md(), soon()), { ok: true, bytes: Buffer.from("hello, frames") });
      assert.deepEqual(await c.call("/two", Buffer.alloc(0), md(), soon()), { ok: false, code: Code.NOT_FOUND, message: "nä found" });
      assert.deepEqual(await c.call("/three", Buffer.alloc(0), md(), soon()), { ok: false, code: Code.PERMISSION_DENIED, message: "no entry" });
      assert.equal(s.conns.length, 1, "one connection carried all three (its HPACK table stayed in step)");
    } finally {
      c.close();
      await s.close();
    }
  });

  it("GOAWAY mid-flight: the stream above the last stream id is sent again on a fresh connection, the one below completes", async () => {
    const held: FakeRequest[] = [];
    const s = await new FakeServer({
      onRequest: (r) => {
        if (r.conn !== s.conns[0]) return r.conn.reply(r.stream, r.body.subarray(5));
        held.push(r);
        if (held.length < 2) return;
        r.conn.send(T.GOAWAY, 0, 0, Buffer.concat([u32(held[0]!.stream), u32(0)]));
        r.conn.reply(held[0]!.stream, held[0]!.body.subarray(5));
      },
    }).listen();
    const c = client(s);
    try {
      const [a, b] = await Promise.all([c.call("/a", Buffer.from("a"), md(), soon()), c.call("/b", Buffer.from("b"), md(), soon())]);
      assert.deepEqual(a, { ok: true, bytes: Buffer.from("a") });
      assert.deepEqual(b, { ok: true, bytes: Buffer.from("b") });
      assert.equal(s.conns.length, 2);
      assert.deepEqual(
        s.requests.filter((r) => r.conn === s.conns[1]).map(pathOf),
        ["/b"],
        "only the unprocessed stream went again",
      );
      assert.deepEqual(await c.call("/c", Buffer.from("c"), md(), soon()), { ok: true, bytes: Buffer.from("c") });
      assert.equal(s.conns.length, 2, "later calls use the new connection");
    } finally {
      c.close();
      await s.close();
    }
  });

  it("GOAWAY refusing every stream in flight: all of them go again, together on one new connection", async () => {
    let held = 0;
    const s = await new FakeServer({
      onRequest: (r) => {
        if (r.conn !== s.conns[0]) return r.conn.reply(r.stream, r.body.subarray(5));
        if (++held === 10) r.conn.send(T.GOAWAY, 0, 0, Buffer.concat([u32(0), u32(0)]));
      },
    }).listen();
    const c = client(s);
    try {
      const outs = await Promise.all(Array.from({ length: 10 }, (_, i) => c.call("/g", Buffer.from(`g${i}`), md(), soon())));
      outs.forEach((o, i) => assert.deepEqual(o, { ok: true, bytes: Buffer.from(`g${i}`) }));
      assert.equal(s.conns.length, 2, "one new connection for the ten retries, not one each");
    } finally {
      c.close();
      await s.close();
    }
  });

  it("MAX_CONCURRENT_STREAMS=1: calls wait their turn (bounded by their deadline and by the queue limit), never more than one stream open", async () => {
    const s = await new FakeServer({
      settings: settings([[3, 1]]),
      onRequest: (r) => setTimeout(() => r.conn.reply(r.stream, r.body.subarray(5)), pathOf(r) === "/hold" ? 600 : 20),
    }).listen();
    const c = client(s);
    try {
      assert.equal((await c.call("/warm", Buffer.from("w"), md(), soon())).ok, true); // the server's SETTINGS are in
      const outs = await Promise.all(Array.from({ length: 5 }, (_, i) => c.call("/x", Buffer.from(`m${i}`), md(), soon())));
      outs.forEach((o, i) => assert.deepEqual(o, { ok: true, bytes: Buffer.from(`m${i}`) }));
      assert.equal(s.maxOpen, 1);
      const hold = c.call("/hold", Buffer.from("h"), md(), soon());
      const t = Date.now();
      const queued = await Promise.all(Array.from({ length: QUEUE_LIMIT + 1 }, () => c.call("/q", Buffer.alloc(0), md(), soon(200))));
      assert.deepEqual(queued[QUEUE_LIMIT], {
        ok: false,
        code: Code.RESOURCE_EXHAUSTED,
        message: `backend 127.0.0.1:${s.port}: ${QUEUE_LIMIT} calls already wait for a stream on the connection`,
      });
      assert.ok(queued.slice(0, QUEUE_LIMIT).every((o) => !o.ok && o.code === Code.DEADLINE_EXCEEDED));
      assert.ok(Date.now() - t < 2000);
      assert.deepEqual(await hold, { ok: true, bytes: Buffer.from("h") });
      assert.equal(s.requests.filter((r) => pathOf(r) === "/q").length, 0, "a call that timed out in the queue never reached the server");
      assert.equal(s.maxOpen, 1);
      assert.deepEqual(await c.call("/x", Buffer.from("after"), md(), soon()), { ok: true, bytes: Buffer.from("after") });
    } finally {
      c.close();
      await s.close();
    }
  });

  it("a request larger than the peer's 65,535-byte window waits for WINDOW_UPDATE; without one it ends at its deadline with RST_STREAM CANCEL", async () => {
    let atUpdate = -1;
    const s = await new FakeServer({
      onData: (conn, stream, received) => {
        if (received === 65_535 && atUpdate < 0) {
          setTimeout(() => {
            atUpdate = conn.received.get(stream)!;
            conn.send(T.WINDOW_UPDATE, 0, 0, u32(1 << 20));
            conn.send(T.WINDOW_UPDATE, 0, stream, u32(1 << 20));
          }, 100);
        }
      },
      onRequest: (r) => r.conn.reply(r.stream, Buffer.from(String(r.body.length))),
    }).listen();
    const c = client(s);
    try {
      const big = Buffer.alloc(200_000, 3);
      assert.deepEqual(await c.call("/big", big, md(), soon()), { ok: true, bytes: Buffer.from(String(big.length + 5)) });
      assert.equal(atUpdate, 65_535, "nothing beyond the window was sent before the WINDOW_UPDATE");
    } finally {
      c.close();
      await s.close();
    }
    const never = await new FakeServer({ onRequest: (r) => r.conn.reply(r.stream, Buffer.from("unexpected")) }).listen();
    const c2 = client(never);
    try {
      const t = Date.now();
      assert.deepEqual(await c2.call("/never", Buffer.alloc(100_000), md(), soon(300)), { ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
      assert.ok(Date.now() - t < 2000);
      await waitFor(() => never.sent(T.RST_STREAM).some((f) => f.stream === 1 && f.payload.readUInt32BE(0) === 8), "RST_STREAM CANCEL");
      assert.equal(never.conns[0]!.received.get(1), 65_535);
    } finally {
      c2.close();
      await never.close();
    }
  });

  it("a malformed frame or header block ends the connection with GOAWAY: UNAVAILABLE before a response, INTERNAL during one; the next call reconnects", async () => {
    const s = await new FakeServer({
      onRequest: ({ conn, stream, headers, body }) => {
        const path = headers.find(([k]) => k === ":path")![1];
        if (path === "/data-on-0") conn.send(T.DATA, 0, 0, Buffer.from("x"));
        else if (path === "/short-ping") {
          conn.headers(stream);
          conn.send(T.PING, 0, 0, Buffer.alloc(7));
        } else if (path === "/huge-headers") {
          conn.send(T.HEADERS, 0, stream, Buffer.alloc(16_000, 0x88));
          for (let i = 0; i < 4; i++) conn.send(T.CONTINUATION, i === 3 ? F.END_HEADERS : 0, stream, Buffer.alloc(16_000, 0x88));
        } else if (path === "/bad-hpack") conn.headers(stream, Buffer.from([0x80]));
        else if (path === "/oversized") {
          conn.headers(stream);
          conn.data(stream, Buffer.alloc(20_000));
        } else conn.reply(stream, body.subarray(5));
      },
    }).listen();
    const c = client(s);
    const addr = `127.0.0.1:${s.port}`;
    try {
      const cases: [string, object, number][] = [
        ["/data-on-0", { ok: false, code: Code.UNAVAILABLE, message: `backend ${addr} is unavailable: protocol error: DATA on stream 0` }, 0x1],
        ["/short-ping", { ok: false, code: Code.INTERNAL, message: `backend ${addr} sent a malformed response: PING payload is not 8 bytes` }, 0x6],
        ["/huge-headers", { ok: false, code: Code.UNAVAILABLE, message: `backend ${addr} is unavailable: protocol error: header block larger than 65536 bytes` }, 0x1],
        ["/bad-hpack", { ok: false, code: Code.UNAVAILABLE, message: `backend ${addr} is unavailable: protocol error: malformed header block: index 0 in an indexed field` }, 0x9],
        ["/oversized", { ok: false, code: Code.INTERNAL, message: `backend ${addr} sent a malformed response: frame of 20000 bytes exceeds 16384` }, 0x6],
      ];
      for (const [i, [path, outcome, goaway]] of cases.entries()) {
        assert.deepEqual(await c.call(path, Buffer.alloc(0), md(), soon()), outcome, path);
        const conn = s.conns[i]!;
        await waitFor(() => conn.frames.some((f) => f.type === T.GOAWAY), `GOAWAY after ${path}`);
        assert.equal(conn.frames.find((f) => f.type === T.GOAWAY)!.payload.readUInt32BE(4), goaway, `error code after ${path}`);
        assert.deepEqual(await c.call("/ok", Buffer.from("ok"), md(), soon()), { ok: true, bytes: Buffer.from("ok") }, `a call after ${path}`);
      }
    } finally {
      c.close();
      await s.close();
    }
  });
});

describe("raw-frame h2 unary client: garbage from the backend", () => {
  it("random frames and random bytes after a request end each call with an outcome by its deadline, and never crash the process", async () => {
    // A small deterministic PRNG (mulberry32), so a failure can be replayed (H2_GARBAGE_SEED picks another seed).
    let seed = Number(process.env["H2_GARBAGE_SEED"] ?? 0x5eed);
    const rnd = (): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const bytes = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => Math.floor(rnd() * 256)));
    const s = await new FakeServer({
      onRequest: ({ conn, stream, body }) => {
        if (body.length > 5) return conn.reply(stream, body.subarray(5)); // the check call after the garbage
        // Each garbage connection is ended shortly after, so what the garbage left half-open does not linger.
        setTimeout(() => conn.socket.end(), 30);
        if (rnd() < 0.3) return conn.raw(bytes(1 + Math.floor(rnd() * 64)));
        const frames = 1 + Math.floor(rnd() * 6);
        for (let i = 0; i < frames; i++) {
          const type = Math.floor(rnd() * 11);
          const flags = Math.floor(rnd() * 256);
          const sid = rnd() < 0.7 ? stream : Math.floor(rnd() * 6);
          conn.send(type, flags, sid, bytes(Math.floor(rnd() * 24)));
        }
      },
    }).listen();
    const c = client(s);
    const seen = new Set<string>();
    try {
      for (let i = 0; i < 40; i++) {
        const t = Date.now();
        const o = await c.call("/garbage", Buffer.alloc(0), md(), soon(150));
        assert.ok(Date.now() - t < 1500, `call ${i} ended in time`);
        if (!o.ok) seen.add(Code[o.code]);
        // Garbage that arrives after the call ended may still break the connection the next call lands on; within a
        // few tries the client is on a clean one.
        let ok = await c.call("/check", Buffer.from(`c${i}`), md(), soon(2000));
        for (let k = 0; k < 5 && !ok.ok; k++) {
          await new Promise((r) => setTimeout(r, 20));
          ok = await c.call("/check", Buffer.from(`c${i}`), md(), soon(2000));
        }
        assert.deepEqual(ok, { ok: true, bytes: Buffer.from(`c${i}`) }, `a good call after garbage ${i}`);
      }
      assert.ok(seen.size >= 1, "the garbage made calls fail");
    } finally {
      c.close();
      await s.close();
    }
  });
});

/** A bare stream for driving H2Connection directly: records what the connection reports. */
class RecordingStream extends H2Stream {
  readonly events: string[] = [];
  readonly fields: [string, string][] = [];
  body = Buffer.alloc(0);
  constructor(
    readonly message: Buffer,
    private readonly path: string,
  ) {
    super();
  }
  headerBlockBound(): number {
    return 64 + this.path.length;
  }
  writeHeaderBlock(out: Buffer, pos: number): number {
    out[pos++] = 0x83;
    out[pos++] = 0x86;
    return literalField(out, pos, 4, "", this.path);
  }
  header(name: string, value: string): void {
    this.fields.push([name, value]);
  }
  headersDone(endStream: boolean): void {
    this.events.push(endStream ? "headers+end" : "headers");
  }
  data(buf: Buffer, start: number, end: number): void {
    this.body = Buffer.concat([this.body, buf.subarray(start, end)]);
  }
  ended(): void {
    this.events.push("ended");
  }
  reset(code: number): void {
    this.events.push(`reset ${code}`);
  }
  refused(): void {
    this.events.push("refused");
  }
  lost(why: ConnectionLoss): void {
    this.events.push(`lost ${JSON.stringify(why)}`);
  }
}

describe("raw-frame h2 connection lifecycle", () => {
  it("close() lets the call in flight finish, refuses new calls, and says GOAWAY", async () => {
    const s = await new FakeServer({ onRequest: (r) => setTimeout(() => r.conn.reply(r.stream, r.body.subarray(5)), 100) }).listen();
    const c = client(s);
    try {
      const p = c.call("/slow", Buffer.from("in flight"), md(), soon());
      await waitFor(() => s.conns[0]?.open.size === 1, "the stream open at the server");
      c.close();
      assert.deepEqual(await c.call("/new", Buffer.alloc(0), md(), soon()), { ok: false, code: Code.UNAVAILABLE, message: `backend 127.0.0.1:${s.port} is closed` });
      assert.deepEqual(await p, { ok: true, bytes: Buffer.from("in flight") });
      const goaway = s.sent(T.GOAWAY);
      assert.equal(goaway.length, 1);
      assert.equal(goaway[0]!.payload.readUInt32BE(4), 0, "NO_ERROR");
      await waitFor(() => s.conns[0]!.socket.readableEnded, "the client ended the socket after its last stream");
    } finally {
      await s.close();
    }
  });

  it("a connection whose next stream id would pass 2^31-1 takes no new streams and ends after its last one", async () => {
    const s = await new FakeServer({ onRequest: (r) => r.conn.reply(r.stream, Buffer.from(String(r.stream))) }).listen();
    const retired: H2Connection[] = [];
    const conn = new H2Connection("127.0.0.1", s.port, { retired: (x) => void retired.push(x), requeue: () => assert.fail("nothing was queued") }, 0x7fffffff);
    try {
      const st = new RecordingStream(Buffer.from("last"), "/last");
      assert.equal(conn.open(st), true);
      assert.deepEqual(retired, [conn], "retired as soon as the last id is used");
      assert.equal(conn.usable, false);
      assert.equal(conn.open(new RecordingStream(Buffer.alloc(0), "/refused")), false);
      await waitFor(() => st.events.includes("ended"), "the last stream's response");
      assert.deepEqual(st.events, ["headers", "headers+end", "ended"]);
      assert.deepEqual(st.body, grpcFrame(Buffer.from(String(0x7fffffff))));
      assert.deepEqual(s.requests.map((r) => r.stream), [0x7fffffff]);
      await waitFor(() => s.conns[0]!.socket.readableEnded, "the socket ended");
    } finally {
      conn.destroy("test over");
      await s.close();
    }
  });
});

describe("raw-frame h2 unary client against grpc-js: flow control beyond the windows", () => {
  let server: grpc.Server;
  let port: number;
  before(async () => {
    server = new grpc.Server({ "grpc.max_receive_message_length": 16 << 20, "grpc.max_send_message_length": 16 << 20 });
    server.addService(
      { Echo: rawBytesMethod("/t.T/Echo"), Big: rawBytesMethod("/t.T/Big") },
      {
        Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
        Big: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(6 << 20, 9)),
      },
    );
    port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  });
  after(() => server.forceShutdown());

  it("receives a 6 MiB response past the 4 MiB stream window and sends a 6 MiB request in flow-controlled frames", async () => {
    const c = createH2UnaryClient({ address: `127.0.0.1:${port}`, connections: 1, maxReceiveBytes: 8 << 20 });
    try {
      const o = await c.call("/t.T/Big", Buffer.alloc(0), md(), soon(20_000));
      assert.equal(o.ok && o.bytes.length, 6 << 20);
      assert.equal(o.ok && o.bytes.every((b) => b === 9), true);
      const req = Buffer.alloc(6 << 20);
      for (let i = 0; i < req.length; i += 4096) req[i] = i & 0xff;
      const e = await c.call("/t.T/Echo", req, md(), soon(20_000));
      assert.equal(e.ok && e.bytes.equals(req), true);
      const two = await Promise.all([c.call("/t.T/Echo", req, md(), soon(20_000)), c.call("/t.T/Big", Buffer.alloc(0), md(), soon(20_000))]);
      assert.equal(two[0].ok && two[0].bytes.equals(req), true);
      assert.equal(two[1].ok && two[1].bytes.length, 6 << 20);
    } finally {
      c.close();
    }
  });
});
