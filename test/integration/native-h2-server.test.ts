/**
 * The native HTTP/2 server layer (src/main/grpc/native/h2-server.ts) over real sockets on 127.0.0.1: node:http2 and
 * grpc-js clients against it for what a gRPC server needs (request/response with trailers, flow control both ways,
 * backpressure, resets, stream limits, graceful close, destroy, PING), and raw sockets for malformed input, which must
 * end only the offending connection with the right GOAWAY code.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createH2Server } from "../../src/main/grpc/native/h2-server.js";
import type { H2Server, H2ServerOptions, H2ServerSession, H2ServerStream, H2StreamHandler, HeaderList } from "../../src/main/grpc/native/h2-server-types.js";
import { HpackDecoder, literalField } from "../../src/backends/hpack.js";
import { waitFor } from "../support/gateway.js";
import { rawBytesMethod } from "../support/raw-methods.js";

const H = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
const END_STREAM = 1;
const END_HEADERS = 4;
const ACK = 1;
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** What the server did with one stream, for assertions. */
interface Seen {
  stream: H2ServerStream;
  body: Buffer[];
  ended: boolean;
  closed: { code: number; why: string }[];
  events: string[];
  drains: number;
}

type OnStream = (s: H2ServerStream, seen: Seen) => Partial<H2StreamHandler> | void;

/** A server whose every stream is recorded; `behave` adds per-test behaviour (the default echoes on end). */
async function startServer(behave: OnStream, opts: Partial<H2ServerOptions> = {}): Promise<{ server: H2Server; port: number; seen: Seen[]; sessionsClosed: string[] }> {
  const seen: Seen[] = [];
  const sessionsClosed: string[] = [];
  const server = createH2Server({
    maxConcurrentStreams: 100,
    maxHeaderListSize: 16 * 1024,
    streamHighWaterMark: 64 * 1024,
    onSessionClose: (_s, why) => sessionsClosed.push(why),
    ...opts,
    onStream(stream) {
      const rec: Seen = { stream, body: [], ended: false, closed: [], events: [], drains: 0 };
      seen.push(rec);
      const extra = behave(stream, rec) ?? {};
      return {
        data(buf, start, end) {
          rec.events.push("data");
          rec.body.push(Buffer.from(buf.subarray(start, end)));
          extra.data?.(buf, start, end);
        },
        end() {
          rec.events.push("end");
          rec.ended = true;
          extra.end?.();
        },
        close(code, why) {
          rec.events.push("close");
          rec.closed.push({ code, why });
          extra.close?.(code, why);
        },
        drain() {
          rec.drains++;
          extra.drain?.();
        },
      };
    },
  });
  const port = await server.listen(0, "127.0.0.1");
  return { server, port, seen, sessionsClosed };
}

const echo: OnStream = (s, rec) => ({
  end() {
    s.respond([[":status", "200"], ["content-type", "application/octet-stream"]], false);
    s.write(Buffer.concat(rec.body));
    s.end([["x-trailer", "done"], ["x-count", String(rec.body.length)]]);
  },
});

/** A node:http2 request; resolves the response headers, body and trailers. */
function request(client: http2.ClientHttp2Session, body: Buffer, headers: http2.OutgoingHttpHeaders = {}): Promise<{ headers: http2.IncomingHttpHeaders; body: Buffer; trailers: http2.IncomingHttpHeaders; rstCode: number }> {
  return new Promise((resolve, reject) => {
    const req = client.request({ ":method": "POST", ":path": "/echo", ...headers });
    let h: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const parts: Buffer[] = [];
    req.on("response", (x) => (h = x));
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("close", () => resolve({ headers: h, body: Buffer.concat(parts), trailers, rstCode: req.rstCode ?? 0 }));
    req.on("error", (e: Error) => {
      if (!/RST_STREAM|NGHTTP2/.test(e.message)) reject(e);
    });
    req.end(body);
  });
}

function connect(port: number): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const c = http2.connect(`http://127.0.0.1:${port}`);
    c.once("connect", () => resolve(c));
    c.once("error", reject);
  });
}

function closeClient(c: http2.ClientHttp2Session): Promise<void> {
  return new Promise((resolve) => {
    if (c.destroyed) return resolve();
    c.close(() => resolve());
    setTimeout(() => c.destroy(), 2000).unref();
  });
}

// ---- raw frames ----

function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}
const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
function block(fields: [string, string][]): Buffer {
  const out = Buffer.alloc(4096);
  let p = 0;
  for (const [n, v] of fields) p = literalField(out, p, 0, n, v);
  return out.subarray(0, p);
}
const REQ: [string, string][] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/echo"],
  [":authority", "x"],
];

interface RawFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** A raw client socket: sends bytes, parses the server's frames, notices the close. */
class Raw {
  readonly frames: RawFrame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  readonly socket: net.Socket;
  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.on("data", (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        this.frames.push({ type: this.buf[3]!, flags: this.buf[4]!, stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len) });
        this.buf = this.buf.subarray(9 + len);
      }
    });
    this.socket.on("error", () => undefined);
    this.socket.on("close", () => (this.closed = true));
  }
  send(...bufs: Buffer[]): void {
    this.socket.write(Buffer.concat(bufs));
  }
  /** Preface and an empty SETTINGS. */
  open(): this {
    this.send(PREFACE, frame(H.SETTINGS, 0, 0));
    return this;
  }
  of(type: number): RawFrame[] {
    return this.frames.filter((f) => f.type === type);
  }
  async goaway(): Promise<{ last: number; code: number; debug: string }> {
    await waitFor(() => this.of(H.GOAWAY).length > 0, "a GOAWAY");
    const g = this.of(H.GOAWAY)[0]!.payload;
    await waitFor(() => this.closed, "the server to close the connection");
    return { last: g.readUInt32BE(0), code: g.readUInt32BE(4), debug: g.subarray(8).toString() };
  }
  destroy(): void {
    this.socket.destroy();
  }
}

/** After a bad connection, the server still serves a good one. */
async function stillServes(port: number): Promise<void> {
  const c = await connect(port);
  try {
    const r = await request(c, Buffer.from("still up"));
    assert.equal(r.body.toString(), "still up");
  } finally {
    await closeClient(c);
  }
}

describe("native HTTP/2 server", () => {
  const servers: H2Server[] = [];
  after(() => {
    for (const s of servers) {
      s.stopListening();
      for (const x of s.sessions) x.destroy();
    }
  });
  const start = async (behave: OnStream, opts: Partial<H2ServerOptions> = {}): ReturnType<typeof startServer> => {
    const r = await startServer(behave, opts);
    servers.push(r.server);
    return r;
  };

  it("answers a node:http2 request with headers, body and trailers; the stream closes with 0 after end, last", async () => {
    const { port, seen } = await start(echo);
    const c = await connect(port);
    try {
      const r = await request(c, Buffer.from("hello"), { "x-meta": "abc" });
      assert.equal(r.headers[":status"], 200);
      assert.equal(r.headers["content-type"], "application/octet-stream");
      assert.equal(r.body.toString(), "hello");
      assert.equal(r.trailers["x-trailer"], "done");
      assert.equal(r.trailers["x-count"], "1");
      const s = seen[0]!;
      assert.equal(s.stream.id, 1);
      assert.deepEqual(s.stream.headers.slice(0, 2), [
        [":method", "POST"],
        [":path", "/echo"],
      ]);
      assert.ok(s.stream.headers.some(([k, v]) => k === "x-meta" && v === "abc"));
      await waitFor(() => s.closed.length === 1, "close");
      assert.deepEqual(s.closed, [{ code: 0, why: "complete" }]);
      assert.deepEqual(s.events, ["data", "end", "close"]);
      assert.equal(s.stream.closed, true);
      // A second request on the same connection reuses the cached header blocks.
      const r2 = await request(c, Buffer.from("again"));
      assert.equal(r2.body.toString(), "again");
      assert.equal(r2.trailers["x-trailer"], "done");
    } finally {
      await closeClient(c);
    }
  });

  it("serves a grpc-js unary call from a hand-written gRPC echo handler; a grpc-js deadline arrives as close(0x8)", async () => {
    const { port, seen } = await start((s, rec) => {
      const path = s.headers.find(([k]) => k === ":path")![1];
      if (path === "/test.Echo/Slow") return {}; // never answers
      return {
        end() {
          const req = Buffer.concat(rec.body);
          assert.equal(req[0], 0);
          const msg = req.subarray(5, 5 + req.readUInt32BE(1));
          const reply = Buffer.concat([Buffer.from("echo:"), msg]);
          const framed = Buffer.alloc(5 + reply.length);
          framed.writeUInt32BE(reply.length, 1);
          reply.copy(framed, 5);
          s.respond([[":status", "200"], ["content-type", "application/grpc"]], false);
          s.write(framed);
          s.end([["grpc-status", "0"]]);
        },
      };
    });
    const Client = grpc.makeGenericClientConstructor({ Echo: rawBytesMethod("/test.Echo/Echo"), Slow: rawBytesMethod("/test.Echo/Slow") }, "Echo");
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      type Fn = (req: Buffer, md: grpc.Metadata, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: Buffer) => void) => grpc.ClientUnaryCall;
      const call = (name: "Echo" | "Slow", req: Buffer, deadline: number): Promise<Buffer> =>
        new Promise((resolve, reject) => {
          (client[name] as Fn).call(client, req, new grpc.Metadata(), { deadline: Date.now() + deadline }, (e, r) => (e ? reject(e) : resolve(r!)));
        });
      for (let i = 0; i < 3; i++) assert.equal((await call("Echo", Buffer.from(`hi ${i}`), 5000)).toString(), `echo:hi ${i}`);
      await assert.rejects(call("Slow", Buffer.from("x"), 200), (e: grpc.ServiceError) => e.code === grpc.status.DEADLINE_EXCEEDED);
      const slow = seen.find((s) => s.stream.headers.some(([k, v]) => k === ":path" && v === "/test.Echo/Slow"))!;
      await waitFor(() => slow.closed.length === 1, "the slow stream's close");
      assert.equal(slow.closed[0]!.code, 0x8);
      assert.equal(slow.closed[0]!.why, "client reset");
    } finally {
      client.close();
    }
  });
});
