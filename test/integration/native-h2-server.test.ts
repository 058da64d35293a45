/**
 * The native HTTP/2 server layer (src/h2/server.ts) over real sockets on 127.0.0.1: node:http2 and
 * grpc-js clients against it for what a gRPC server needs (request/response with trailers, flow control both ways,
 * backpressure, resets, stream limits, graceful close, destroy, PING), and raw sockets for malformed input, which must
 * end only the offending connection with the right GOAWAY code.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createH2Server } from "../../src/h2/server.js";
import { FLOOD_BURST, RESET_BUDGET } from "../../src/h2/server-session.js";
import type { H2Server, H2ServerOptions, H2ServerSession, H2ServerStream, H2StreamHandler } from "../../src/h2/types.js";
import { HpackDecoder } from "../../src/h2/hpack.js";
import { waitFor } from "../support/gateway.js";
import { rawBytesMethod } from "../support/raw-methods.js";
import { ACK, END_HEADERS, END_STREAM, H, PREFACE, REQ, Raw, block, frame, u32 } from "../support/h2-raw-client.js";

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

const echo = (s: H2ServerStream, rec: Seen): Partial<H2StreamHandler> => ({
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
      // The gRPC layer takes the list; the stream keeps none after that.
      const before = s.stream.headers;
      assert.equal(s.stream.takeHeaders(), before);
      assert.deepEqual(s.stream.headers, []);
      assert.deepEqual(s.stream.takeHeaders(), []);
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

  it("serves a grpc-js bidi stream message by message until the client half-closes; call.cancel() arrives as close(0x8)", async () => {
    const frameMsg = (m: Buffer): Buffer => {
      const f = Buffer.alloc(5 + m.length);
      f.writeUInt32BE(m.length, 1);
      m.copy(f, 5);
      return f;
    };
    const { port, seen } = await start((s) => {
      let pending = Buffer.alloc(0);
      s.respond([[":status", "200"], ["content-type", "application/grpc"]], false);
      return {
        data(buf, start, end) {
          pending = Buffer.concat([pending, buf.subarray(start, end)]);
          while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
            const n = pending.readUInt32BE(1);
            s.write(frameMsg(Buffer.concat([Buffer.from("re:"), pending.subarray(5, 5 + n)])));
            pending = pending.subarray(5 + n);
          }
        },
        end() {
          // "Hold" answers until cancelled (grpc-js's cancel() half-closes before its RST_STREAM).
          if (!s.headers.some(([k, v]) => k === ":path" && v === "/test.Echo/Hold")) s.end([["grpc-status", "0"]]);
        },
      };
    });
    const bidi = { requestStream: true, responseStream: true };
    const Client = grpc.makeGenericClientConstructor({ Chat: rawBytesMethod("/test.Echo/Chat", bidi), Hold: rawBytesMethod("/test.Echo/Hold", bidi) }, "Echo");
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      type Bidi = (md: grpc.Metadata) => grpc.ClientDuplexStream<Buffer, Buffer>;
      const call = (client["Chat"] as Bidi).call(client, new grpc.Metadata());
      const got: string[] = [];
      const done = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
      call.on("data", (b: Buffer) => {
        got.push(b.toString());
        if (got.length < 3) call.write(Buffer.from(`m${got.length}`));
        else call.end();
      });
      call.on("error", () => undefined);
      call.write(Buffer.from("m0"));
      assert.equal((await done).code, grpc.status.OK);
      assert.deepEqual(got, ["re:m0", "re:m1", "re:m2"]);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 0);

      const cancelled = (client["Hold"] as Bidi).call(client, new grpc.Metadata());
      cancelled.on("error", () => undefined);
      cancelled.write(Buffer.from("hello"));
      await new Promise<void>((resolve) => cancelled.once("data", () => resolve()));
      cancelled.cancel();
      await waitFor(() => seen[1]?.closed.length === 1, "the cancelled stream's close");
      assert.deepEqual(seen[1]!.closed[0], { code: 0x8, why: "client reset" });
    } finally {
      client.close();
    }
  });

  it("reassembles the preface and frames sent one byte at a time", async () => {
    const { port } = await start(echo);
    const raw = new Raw(port);
    try {
      const all = Buffer.concat([PREFACE, frame(H.SETTINGS, 0, 0), frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, END_STREAM, 1, Buffer.from("bytewise"))]);
      for (let i = 0; i < all.length; i++) {
        raw.socket.write(all.subarray(i, i + 1));
        if (i % 16 === 0) await new Promise((r) => setImmediate(r));
      }
      await waitFor(() => raw.of(H.HEADERS).length === 2, "the reply");
      assert.equal(Buffer.concat(raw.of(H.DATA).map((f) => f.payload)).toString(), "bytewise");
    } finally {
      raw.destroy();
    }
  });

  it("carries several MB both ways through both windows (the client's 64 KiB stream window, our 4 MiB one)", async () => {
    const { port, seen } = await start(echo);
    const c = await connect(port);
    try {
      const big = Buffer.alloc(6 * 1024 * 1024);
      for (let i = 0; i < big.length; i += 4) big.writeUInt32BE(i, i);
      const r = await request(c, big);
      assert.equal(r.body.length, big.length);
      assert.ok(r.body.equals(big), "the echoed body equals the request body");
      assert.equal(r.trailers["x-trailer"], "done");
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 0);
    } finally {
      await closeClient(c);
    }
  });

  it("write() returns false past the high-water mark and drain follows once the client's window let it all out", async () => {
    const chunk = Buffer.alloc(256 * 1024, 7);
    const results: boolean[] = [];
    const { port, seen } = await start((s) => ({
      end() {
        s.respond([[":status", "200"]], false);
        results.push(s.write(chunk));
        results.push(s.write(chunk));
        assert.ok(s.bufferedBytes > 64 * 1024, "bytes beyond the client's window wait in the stream buffer");
      },
      drain() {
        results.push(true);
        s.end([["x-done", "1"]]);
      },
    }));
    const c = await connect(port);
    try {
      const r = await request(c, Buffer.from("go"));
      assert.equal(r.body.length, 2 * chunk.length);
      assert.equal(r.trailers["x-done"], "1");
      assert.deepEqual(results, [false, false, true]);
      assert.equal(seen[0]!.drains, 1);
      assert.equal(seen[0]!.stream.bufferedBytes, 0);
    } finally {
      await closeClient(c);
    }
  });

  it("a writer that waits for drain after every false streams 12 MiB in 3000 messages, in order", async () => {
    let falses = 0;
    const { port, seen } = await start((s) => {
      let i = 0;
      const pump = (): void => {
        while (i < 3000) {
          const m = Buffer.alloc(4096, i & 0xff);
          m.writeUInt32BE(i++, 0);
          if (!s.write(m)) {
            falses++;
            return;
          }
        }
        s.end([["x-sent", String(i)]]);
      };
      return {
        end() {
          s.respond([[":status", "200"]], false);
          pump();
        },
        drain: pump,
      };
    });
    const c = await connect(port);
    try {
      const r = await request(c, Buffer.from("go"));
      assert.equal(r.trailers["x-sent"], "3000");
      assert.equal(r.body.length, 3000 * 4096);
      for (let i = 0; i < 3000; i++) assert.equal(r.body.readUInt32BE(i * 4096), i);
      assert.ok(falses > 10, `write() turned false ${falses} times`);
      assert.equal(seen[0]!.drains, falses);
    } finally {
      await closeClient(c);
    }
  });

  it("pause() holds back the client at the stream window; resume() returns the credit and the upload completes", async () => {
    let received = 0;
    const { port, seen } = await start((s) => {
      s.pause();
      return {
        data(_b, start, end) {
          received += end - start;
        },
        end() {
          s.respond([[":status", "200"]], false);
          s.end([["x-received", String(received)]]);
        },
      };
    });
    const c = await connect(port);
    try {
      const pending = request(c, Buffer.alloc(10 * 1024 * 1024, 1));
      // The client can send the stream's initial window (4 MiB) and not a byte more while the stream is paused.
      await waitFor(() => received >= 4 * 1024 * 1024, "the first 4 MiB");
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(received, 4 * 1024 * 1024);
      seen[0]!.stream.resume();
      const r = await pending;
      assert.equal(r.trailers["x-received"], String(10 * 1024 * 1024));
    } finally {
      await closeClient(c);
    }
  });

  it("a client reset (RST_STREAM CANCEL) closes the stream with 0x8; later streams are unaffected", async () => {
    const { port, seen } = await start((s, rec) => {
      if (s.headers.some(([k, v]) => k === ":path" && v === "/hold")) return {};
      return echo(s, rec);
    });
    const c = await connect(port);
    try {
      const req = c.request({ ":method": "POST", ":path": "/hold" });
      req.on("error", () => undefined);
      req.write("part");
      await waitFor(() => seen.length === 1 && seen[0]!.body.length === 1, "the held stream's data");
      req.close(http2.constants.NGHTTP2_CANCEL);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.deepEqual(seen[0]!.closed[0], { code: 0x8, why: "client reset" });
      // Methods on a closed stream change nothing.
      seen[0]!.stream.respond([[":status", "200"]], false);
      assert.equal(seen[0]!.stream.write(Buffer.from("late")), false);
      assert.equal((await request(c, Buffer.from("next"))).body.toString(), "next");
    } finally {
      await closeClient(c);
    }
  });

  it("answers PING with its payload, and a graceful close() lets the in-flight stream finish before the socket ends", async () => {
    let session: H2ServerSession | undefined;
    const { port, seen, sessionsClosed } = await start(() => ({}), { onSession: (s) => (session = s) });
    const c = await connect(port);
    try {
      const payload = Buffer.from("12345678");
      const pinged = await new Promise<Buffer>((resolve, reject) => c.ping(payload, (e, _d, p) => (e ? reject(e) : resolve(p))));
      assert.deepEqual(pinged, payload);
      const pending = request(c, Buffer.from("in flight"));
      await waitFor(() => seen[0]?.ended === true, "the request");
      let goaway: number | undefined;
      c.on("goaway", (code) => (goaway = code));
      session!.close();
      await waitFor(() => goaway !== undefined, "the client's goaway event");
      assert.equal(goaway, 0);
      assert.equal(session!.openStreams, 1);
      const s = seen[0]!.stream;
      s.respond([[":status", "200"]], false);
      s.write(Buffer.from("finished"));
      s.end([["x-late", "yes"]]);
      const r = await pending;
      assert.equal(r.body.toString(), "finished");
      assert.equal(r.trailers["x-late"], "yes");
      await waitFor(() => sessionsClosed.length === 1, "onSessionClose");
      await waitFor(() => c.closed || c.destroyed, "the client connection to end");
    } finally {
      c.destroy();
    }
  });

  it("destroy() closes every open stream, tells onSessionClose and drops the connection", async () => {
    let session: H2ServerSession | undefined;
    const { port, seen, server, sessionsClosed } = await start(() => ({}), { onSession: (s) => (session = s) });
    const c = await connect(port);
    c.on("error", () => undefined);
    try {
      const pending = [request(c, Buffer.from("a")), request(c, Buffer.from("b"))];
      await waitFor(() => seen.length === 2 && seen.every((s) => s.ended), "two requests");
      assert.equal(server.sessions.size, 1);
      session!.destroy();
      const rs = await Promise.all(pending);
      assert.ok(rs.every((r) => r.headers[":status"] === undefined), "no response reached the client");
      await waitFor(() => seen.every((s) => s.closed.length === 1) && sessionsClosed.length === 1, "closes");
      assert.deepEqual(
        seen.map((s) => s.closed[0]!.code),
        [0x8, 0x8],
      );
      assert.deepEqual(sessionsClosed, ["destroyed by the server"]);
      assert.equal(server.sessions.size, 0);
      await waitFor(() => c.destroyed, "the client connection to end");
    } finally {
      c.destroy();
    }
  });

  it("refuses a header list over maxHeaderListSize with RST_STREAM ENHANCE_YOUR_CALM and keeps the HPACK table in step", async () => {
    const { port, seen } = await start(echo, { maxHeaderListSize: 1024 });
    const c = await connect(port);
    try {
      // node:http2 indexes these into the dynamic table: the refused block must still be decoded for the next ones.
      const r = await request(c, Buffer.from("x"), { "x-small": "indexed", "x-big": "v".repeat(2000) });
      assert.equal(r.rstCode, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
      assert.equal(seen.length, 0, "the refused stream never reached onStream");
      const ok = await request(c, Buffer.from("y"), { "x-small": "indexed" });
      assert.equal(ok.body.toString(), "y");
      assert.ok(seen[0]!.stream.headers.some(([k, v]) => k === "x-small" && v === "indexed"));
    } finally {
      await closeClient(c);
    }
  });

  it("a handler that throws gets its stream reset (INTERNAL_ERROR) and closed; the connection serves on", async () => {
    const { port, seen } = await start((s, rec) => {
      if (s.headers.some(([k, v]) => k === ":path" && v === "/boom")) {
        return {
          end() {
            throw new Error("handler bug");
          },
        };
      }
      return echo(s, rec);
    });
    const c = await connect(port);
    try {
      const r = await request(c, Buffer.from("x"), { ":path": "/boom" });
      assert.equal(r.rstCode, http2.constants.NGHTTP2_INTERNAL_ERROR);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 2);
      assert.match(seen[0]!.closed[0]!.why, /handler bug/);
      assert.equal((await request(c, Buffer.from("fine"))).body.toString(), "fine");
    } finally {
      await closeClient(c);
    }
  });

  it("respond() + write() + end() in one turn leave in one socket write, HEADERS, DATA and trailers in order", async () => {
    const { port } = await start((s) => ({
      end() {
        s.respond([[":status", "200"], ["content-type", "application/grpc"]], false);
        s.write(Buffer.from([0, 0, 0, 0, 2, 104, 105]));
        s.end([["grpc-status", "0"]]);
      },
    }));
    const raw = new Raw(port).open();
    const writes: Buffer[] = [];
    const orig = net.Socket.prototype.write;
    try {
      await waitFor(() => raw.of(H.SETTINGS).some((f) => f.flags & ACK), "our SETTINGS acknowledged");
      net.Socket.prototype.write = function (this: net.Socket, chunk: unknown, ...rest: unknown[]): boolean {
        if (this.localPort === port) writes.push(Buffer.from(chunk as Buffer));
        return (orig as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
      } as typeof orig;
      raw.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, END_STREAM, 1, Buffer.from([0, 0, 0, 0, 0])));
      await waitFor(() => raw.of(H.HEADERS).length === 2, "the response");
      net.Socket.prototype.write = orig;
      assert.equal(writes.length, 1, "one socket write");
      const types = raw.frames.filter((f) => f.stream === 1).map((f) => [f.type, f.flags]);
      assert.deepEqual(types, [
        [H.HEADERS, END_HEADERS],
        [H.DATA, 0],
        [H.HEADERS, END_HEADERS | END_STREAM],
      ]);
      const d = new HpackDecoder();
      const got: [string, string][] = [];
      for (const f of raw.of(H.HEADERS)) d.decode(f.payload, 0, f.payload.length, { header: (n, v) => got.push([n, v]) });
      assert.deepEqual(got, [
        [":status", "200"],
        ["content-type", "application/grpc"],
        ["grpc-status", "0"],
      ]);
      assert.equal(raw.of(H.HEADERS)[0]!.payload[0], 0x88, ":status 200 is the static index");
    } finally {
      net.Socket.prototype.write = orig;
      raw.destroy();
    }
  });

  it("with indexed headers, stops indexing once the client lowers HEADER_TABLE_SIZE: the update to 0, then literals", async () => {
    const { port } = await start((s) => ({
      end() {
        s.respond([[":status", "200"], ["content-type", "application/grpc"]], false);
        s.end([["grpc-status", "0"]]);
      },
    }), { headerEncoding: "indexed" });
    const raw = new Raw(port);
    try {
      const zero = Buffer.alloc(6);
      zero.writeUInt16BE(1, 0);
      raw.send(PREFACE, frame(H.SETTINGS, 0, 0, zero));
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      await waitFor(() => raw.of(H.HEADERS).length === 2, "the reply and its trailers");
      const [head, trailers] = raw.of(H.HEADERS).map((f) => f.payload);
      assert.equal(head![0], 0x20, "a dynamic table size update to 0 starts the first block");
      // content-type by static name index 31, without indexing (0x0f 0x10), not with incremental indexing (0x5f).
      assert.deepEqual([...head!.subarray(1, 4)], [0x88, 0x0f, 0x10]);
      const d = new HpackDecoder();
      const got: string[] = [];
      for (const b of [head!, trailers!]) d.decode(b, 0, b.length, { header: (n, v) => void got.push(`${n}: ${v}`) });
      assert.deepEqual(got, [":status: 200", "content-type: application/grpc", "grpc-status: 0"]);
      assert.equal(d.tableSize, 0);
    } finally {
      raw.destroy();
    }
  });

  it("applies the client's SETTINGS: INITIAL_WINDOW_SIZE moves open streams' windows, HEADER_TABLE_SIZE 0 is signalled", async () => {
    const { port } = await start((s) => ({
      end() {
        s.respond([[":status", "200"]], false);
        s.write(Buffer.alloc(100, 9));
        s.end([["grpc-status", "0"]]);
      },
    }));
    const settings = (pairs: [number, number][]): Buffer => {
      const b = Buffer.alloc(6 * pairs.length);
      pairs.forEach(([id, v], i) => {
        b.writeUInt16BE(id, 6 * i);
        b.writeUInt32BE(v, 6 * i + 2);
      });
      return b;
    };
    const raw = new Raw(port);
    try {
      raw.send(PREFACE, frame(H.SETTINGS, 0, 0, settings([[1, 0], [4, 10]])));
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      await waitFor(() => raw.of(H.DATA).length === 1, "the first DATA");
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(raw.of(H.DATA)[0]!.payload.length, 10, "only the stream window's 10 bytes");
      assert.equal(raw.of(H.HEADERS).length, 1);
      assert.equal(raw.of(H.HEADERS)[0]!.payload[0], 0x20, "a dynamic table size update to 0 starts the first block");
      raw.send(frame(H.SETTINGS, 0, 0, settings([[4, 100]])));
      await waitFor(() => raw.of(H.HEADERS).length === 2, "the trailers");
      assert.equal(raw.of(H.DATA).reduce((n, f) => n + f.payload.length, 0), 100);
      assert.equal(raw.of(H.SETTINGS).filter((f) => f.flags & ACK).length, 2);
    } finally {
      raw.destroy();
    }
  });

  it("names MAX_FRAME_SIZE in its first SETTINGS only when told to, as grpc-go's server does", async () => {
    const named = async (opts: Partial<H2ServerOptions>): Promise<Array<[number, number]>> => {
      const { port } = await start(() => ({}), opts);
      const raw = new Raw(port).open();
      try {
        await waitFor(() => raw.of(H.SETTINGS).length > 0, "SETTINGS");
        const p = raw.of(H.SETTINGS)[0]!.payload;
        return Array.from({ length: p.length / 6 }, (_, i) => [p.readUInt16BE(6 * i), p.readUInt32BE(6 * i + 2)] as [number, number]);
      } finally {
        raw.destroy();
      }
    };
    assert.deepEqual((await named({})).map(([id]) => id), [3, 4, 6]);
    const told = await named({ announceMaxFrameSize: true });
    assert.deepEqual(told.map(([id]) => id), [3, 4, 6, 5]);
    assert.deepEqual(told[3], [5, 16_384]);
  });

  it("refuses streams beyond MAX_CONCURRENT_STREAMS with RST_STREAM REFUSED_STREAM, which it advertises", async () => {
    const { port, seen } = await start(() => ({}), { maxConcurrentStreams: 2 });
    const raw = new Raw(port).open();
    try {
      await waitFor(() => raw.of(H.SETTINGS).length > 0, "SETTINGS");
      const ours = raw.of(H.SETTINGS)[0]!.payload;
      assert.deepEqual([ours.readUInt16BE(0), ours.readUInt32BE(2)], [3, 2]);
      for (const id of [1, 3, 5]) raw.send(frame(H.HEADERS, END_HEADERS, id, block(REQ)));
      await waitFor(() => raw.of(H.RST_STREAM).length === 1, "a RST_STREAM");
      const rst = raw.of(H.RST_STREAM)[0]!;
      assert.deepEqual([rst.stream, rst.payload.readUInt32BE(0)], [5, 7]);
      assert.equal(seen.length, 2);
      // A stream done frees a slot.
      raw.send(frame(H.RST_STREAM, 0, 1, u32(8)));
      raw.send(frame(H.HEADERS, END_HEADERS, 7, block(REQ)));
      await waitFor(() => seen.length === 3, "the third stream");
      assert.equal(seen[2]!.stream.id, 7);
    } finally {
      raw.destroy();
    }
  });

  it("a client that overruns a paused stream's window gets RST_STREAM FLOW_CONTROL_ERROR on it; the connection goes on", async () => {
    const { port, seen } = await start((s) => {
      s.pause();
      return {};
    });
    const raw = new Raw(port).open();
    try {
      raw.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)));
      const f = frame(H.DATA, 0, 1, Buffer.alloc(16_384));
      raw.send(...Array.from({ length: 4 * 64 + 1 }, () => f));
      await waitFor(() => raw.of(H.RST_STREAM).length === 1, "the RST_STREAM");
      const rst = raw.of(H.RST_STREAM)[0]!;
      assert.deepEqual([rst.stream, rst.payload.readUInt32BE(0)], [1, 0x3]);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.deepEqual(seen[0]!.closed[0], { code: 0x3, why: "the client overran the stream window" });
      assert.equal(Buffer.concat(seen[0]!.body).length, 4 * 1024 * 1024, "exactly the window was delivered");
      raw.send(frame(H.PING, 0, 0, Buffer.from("stillon!")));
      await waitFor(() => raw.of(H.PING).some((p) => p.flags & ACK && p.payload.toString() === "stillon!"), "the PING ACK");
      assert.equal(raw.of(H.GOAWAY).length, 0);
    } finally {
      raw.destroy();
    }
  });

  it("reads a request in padded HEADERS with priority + CONTINUATION, padded and empty DATA frames and client trailers", async () => {
    const { port, seen } = await start(echo);
    const raw = new Raw(port).open();
    try {
      const b = block([...REQ, ["x-long", "z".repeat(300)]]);
      const cut = 20;
      // HEADERS: pad length 4, priority (stream dependency 0, weight 16), the first 20 bytes of the block, 4 pad bytes.
      const first = Buffer.concat([Buffer.from([4, 0, 0, 0, 0, 15]), b.subarray(0, cut), Buffer.alloc(4)]);
      raw.send(frame(H.HEADERS, 0x8 | 0x20, 1, first), frame(H.CONTINUATION, 0, 1, b.subarray(cut, 100)), frame(H.CONTINUATION, END_HEADERS, 1, b.subarray(100)));
      raw.send(frame(H.DATA, 0x8, 1, Buffer.concat([Buffer.from([3]), Buffer.from("abc"), Buffer.alloc(3)])), frame(H.DATA, 0, 1), frame(H.DATA, 0, 1, Buffer.from("def")));
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block([["x-client-trailer", "1"]])));
      await waitFor(() => raw.of(H.HEADERS).length === 2, "the response and trailers");
      assert.equal(seen[0]!.stream.headers.find(([k]) => k === "x-long")![1], "z".repeat(300));
      assert.equal(Buffer.concat(raw.of(H.DATA).map((f) => f.payload)).toString(), "abcdef");
      assert.deepEqual(seen[0]!.events, ["data", "data", "end", "close"]);
    } finally {
      raw.destroy();
    }
  });

  it("after the client's GOAWAY it refuses new streams, finishes the open one, then ends the connection", async () => {
    const { port, seen, sessionsClosed } = await start(() => ({}));
    const raw = new Raw(port).open();
    try {
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      await waitFor(() => seen.length === 1, "stream 1");
      raw.send(frame(H.GOAWAY, 0, 0, Buffer.concat([u32(0), u32(0)])), frame(H.HEADERS, END_HEADERS | END_STREAM, 3, block(REQ)));
      await waitFor(() => raw.of(H.RST_STREAM).length === 1, "stream 3 refused");
      assert.deepEqual([raw.of(H.RST_STREAM)[0]!.stream, raw.of(H.RST_STREAM)[0]!.payload.readUInt32BE(0)], [3, 7]);
      assert.equal(raw.closed, false, "the connection stays while stream 1 is open");
      echo(seen[0]!.stream, seen[0]!).end!();
      await waitFor(() => raw.closed, "the connection to end");
      assert.deepEqual(raw.of(H.HEADERS).map((f) => f.stream), [1, 1], "stream 1 was answered in full");
      await waitFor(() => sessionsClosed.length === 1, "onSessionClose");
      assert.equal(seen.length, 1);
    } finally {
      raw.destroy();
    }
  });

  it("after our GOAWAY, a stream above its last id is refused (REFUSED_STREAM) while the one below finishes", async () => {
    let session: H2ServerSession | undefined;
    const { port, seen } = await start(() => ({}), { onSession: (x) => (session = x) });
    const raw = new Raw(port).open();
    try {
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      await waitFor(() => seen.length === 1, "stream 1");
      session!.close();
      session!.close(); // idempotent: one graceful close
      // Two phases (RFC 9113 6.8): GOAWAY naming every stream and a PING; its ACK brings the final GOAWAY.
      await waitFor(() => raw.of(H.GOAWAY).length === 1 && raw.of(H.PING).length === 1, "the first GOAWAY and its PING");
      const g1 = raw.of(H.GOAWAY)[0]!.payload;
      assert.deepEqual([g1.readUInt32BE(0), g1.readUInt32BE(4)], [0x7fffffff, 0]);
      raw.send(frame(H.PING, ACK, 0, raw.of(H.PING)[0]!.payload));
      await waitFor(() => raw.of(H.GOAWAY).length === 2, "the final GOAWAY");
      const g = raw.of(H.GOAWAY)[1]!.payload;
      assert.deepEqual([g.readUInt32BE(0), g.readUInt32BE(4)], [1, 0]);
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 3, block(REQ)));
      await waitFor(() => raw.of(H.RST_STREAM).length === 1, "stream 3 refused");
      assert.deepEqual([raw.of(H.RST_STREAM)[0]!.stream, raw.of(H.RST_STREAM)[0]!.payload.readUInt32BE(0)], [3, 7]);
      assert.equal(seen.length, 1);
      assert.equal(raw.closed, false, "the connection stays while stream 1 is open");
      seen[0]!.stream.respond([[":status", "200"]], true);
      await waitFor(() => raw.closed, "the connection to end after the last stream");
      assert.equal(raw.of(H.GOAWAY).length, 2);
      assert.deepEqual(raw.of(H.HEADERS).map((f) => [f.stream, f.flags]), [[1, END_HEADERS | END_STREAM]]);
    } finally {
      raw.destroy();
    }
  });

  it("a client that opens huge windows but does not read holds the DATA in the stream buffer, not in the socket", async () => {
    const chunk = Buffer.alloc(1024 * 1024, 5);
    const { port, seen } = await start((s) => ({
      end() {
        s.respond([[":status", "200"]], false);
        for (let i = 0; i < 48; i++) s.write(chunk);
        s.end([["x-done", "1"]]);
      },
    }));
    const raw = new Raw(port);
    try {
      const big = Buffer.alloc(6);
      big.writeUInt16BE(4, 0);
      big.writeUInt32BE(0x7fffffff, 2);
      raw.send(PREFACE, frame(H.SETTINGS, 0, 0, big), frame(H.WINDOW_UPDATE, 0, 0, u32(0x7fffffff - 65_535)));
      await waitFor(() => raw.of(H.SETTINGS).some((f) => f.flags & ACK), "our SETTINGS acknowledged");
      raw.socket.pause();
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      await waitFor(() => seen[0]?.ended === true, "the request");
      await new Promise((r) => setTimeout(r, 200));
      // The windows allow all 48 MiB; the socket backlog is capped (1 MiB beyond what the kernel's buffers took, a
      // few MiB on loopback), so most of it still waits in the stream.
      assert.ok(seen[0]!.stream.bufferedBytes >= 32 * 1024 * 1024, `buffered ${seen[0]!.stream.bufferedBytes}`);
      raw.socket.resume();
      await waitFor(() => raw.of(H.HEADERS).length === 2, "the trailers", 10_000);
      assert.equal(raw.of(H.DATA).reduce((n, f) => n + f.payload.length, 0), 48 * chunk.length);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 0);
    } finally {
      raw.destroy();
    }
  });

  it("takes a burst of cancels and PINGs within the flood limits without complaint", async () => {
    const { port, seen } = await start(() => ({}));
    const raw = new Raw(port).open();
    try {
      const b = block(REQ);
      const frames: Buffer[] = [];
      const n = RESET_BUDGET / 2 - 10;
      for (let i = 0, id = 1; i < n; i++, id += 2) frames.push(frame(H.HEADERS, END_HEADERS, id, b), frame(H.RST_STREAM, 0, id, u32(8)));
      for (let i = 0; i < FLOOD_BURST - 10; i++) frames.push(frame(H.PING, 0, 0, Buffer.concat([u32(0), u32(i)])));
      raw.send(...frames);
      await waitFor(() => raw.of(H.PING).length === FLOOD_BURST - 10, "every PING ACK");
      assert.equal(raw.of(H.GOAWAY).length, 0);
      assert.equal(seen.length, n);
      await waitFor(() => seen.every((x) => x.closed.length === 1 && x.closed[0]!.code === 8), "every stream closed as cancelled");
    } finally {
      raw.destroy();
    }
  });

  it("keeps a connection whose client PINGs after every response it reads (grpc-go's BDP estimator), past the PING flood limit", async () => {
    const { port, seen, sessionsClosed } = await start(echo);
    const raw = new Raw(port).open();
    try {
      const b = block(REQ);
      const batch = 50;
      const calls = FLOOD_BURST * 5;
      const ended = (): number => raw.of(H.HEADERS).filter((f) => (f.flags & END_STREAM) !== 0).length;
      for (let id = 1, done = 0; done < calls; done += batch) {
        const frames: Buffer[] = [];
        for (let i = 0; i < batch; i++, id += 2) frames.push(frame(H.HEADERS, END_HEADERS, id, b), frame(H.DATA, END_STREAM, id, Buffer.from("x")));
        raw.send(...frames);
        await waitFor(() => raw.closed || ended() === done + batch, `the responses of calls ${done}-${done + batch}`);
        assert.equal(raw.of(H.GOAWAY).length, 0, `no GOAWAY after ${done + batch} calls: ${raw.of(H.GOAWAY)[0]?.payload.subarray(8).toString()}`);
        // One PING per response read, as a client estimating bandwidth after each burst of DATA.
        raw.send(...Array.from({ length: batch }, (_, i) => frame(H.PING, 0, 0, Buffer.concat([u32(done), u32(i)]))));
      }
      await raw.sync();
      assert.equal(raw.of(H.GOAWAY).length, 0);
      assert.equal(seen.length, calls);
      assert.equal(raw.of(H.PING).filter((p) => (p.flags & ACK) !== 0).length, calls + 1, "every PING answered");
      assert.deepEqual(sessionsClosed, []);
    } finally {
      raw.destroy();
    }
  });

  it("reads nothing more after a connection error: a client that keeps sending is left blocked, and the socket is closed within about a second", async () => {
    const { port, sessionsClosed } = await start(echo);
    const raw = new Raw(port).open();
    try {
      const t0 = Date.now();
      // DATA on stream 0 is a connection error (RFC 9113 6.1); then 64 MiB more, far beyond what the kernel buffers on
      // loopback.
      raw.send(frame(H.DATA, 0, 0, Buffer.from("x")));
      const chunk = Buffer.alloc(1 << 20, 0x61);
      for (let i = 0; i < 64; i++) raw.socket.write(chunk);
      await new Promise((r) => setTimeout(r, 300));
      // Read and thrown away, all of it would have left by now, and the connection would be closed.
      assert.ok(!raw.closed && raw.socket.writableLength > 32 << 20, `the server went on reading: ${raw.socket.writableLength} bytes still to write, closed ${raw.closed}`);
      const g = await raw.goaway();
      assert.equal(g.code, 0x1);
      await waitFor(() => raw.closed, "the server to close the socket", 5000);
      assert.ok(Date.now() - t0 < 3000, `closed after ${Date.now() - t0} ms`);
      assert.equal(sessionsClosed.length, 1);
    } finally {
      raw.destroy();
    }
  });

  it("closes a connection gracefully at half of its reset budget (nghttp2's), and with ENHANCE_YOUR_CALM when it is spent", async () => {
    const budget: string[] = [];
    const { port, seen } = await start(() => ({}), { onResetBudget: (_s, what) => budget.push(what) });
    const raw = new Raw(port).open();
    try {
      const b = block(REQ);
      const frames: Buffer[] = [];
      // Half of the budget, then a call that is not reset: the graceful close lets it finish.
      let id = 1;
      for (let i = 0; i < RESET_BUDGET / 2; i++, id += 2) frames.push(frame(H.HEADERS, END_HEADERS, id, b), frame(H.RST_STREAM, 0, id, u32(8)));
      raw.send(...frames);
      await waitFor(() => raw.of(H.GOAWAY).length > 0, "the first GOAWAY");
      const first = raw.of(H.GOAWAY)[0]!.payload;
      assert.equal(first.readUInt32BE(4), 0, "NO_ERROR: a graceful close");
      assert.deepEqual(budget, ["rotated"]);
      assert.equal(seen.length, RESET_BUDGET / 2);
      // A client that keeps resetting on the closing connection spends the rest of it.
      const more: Buffer[] = [];
      for (let i = 0; i < RESET_BUDGET / 2 + 10; i++, id += 2) more.push(frame(H.HEADERS, END_HEADERS, id, b), frame(H.RST_STREAM, 0, id, u32(8)));
      raw.send(...more);
      await waitFor(() => raw.of(H.GOAWAY).some((g) => g.payload.readUInt32BE(4) === 0xb) || raw.closed, "ENHANCE_YOUR_CALM or the end");
      const calm = raw.of(H.GOAWAY).find((g) => g.payload.readUInt32BE(4) === 0xb);
      if (calm) {
        assert.match(calm.payload.subarray(8).toString(), /resets/);
        assert.deepEqual(budget, ["rotated", "spent"]);
      } else {
        // The graceful close completed first (its streams were all reset): the connection is gone either way.
        assert.ok(raw.closed);
      }
    } finally {
      raw.destroy();
    }
  });

  it("ends a connection that floods RST_STREAM (rapid reset) with ENHANCE_YOUR_CALM", async () => {
    const { port } = await start(() => ({}));
    const raw = new Raw(port).open();
    try {
      const b = block(REQ);
      const frames: Buffer[] = [];
      // Far past the budget in one burst: at the refill rate (33/s) they would have to take minutes to pass.
      for (let i = 0, id = 1; i < RESET_BUDGET + 11_000; i++, id += 2) frames.push(frame(H.HEADERS, END_HEADERS, id, b), frame(H.RST_STREAM, 0, id, u32(8)));
      raw.send(...frames);
      await waitFor(() => raw.of(H.GOAWAY).some((g) => g.payload.readUInt32BE(4) === 0xb), "GOAWAY ENHANCE_YOUR_CALM");
      const g = raw.of(H.GOAWAY).find((x) => x.payload.readUInt32BE(4) === 0xb)!;
      assert.match(g.payload.subarray(8).toString(), /resets/);
    } finally {
      raw.destroy();
    }
  });

  it("resets malformed requests (RST_STREAM PROTOCOL_ERROR) before onStream: missing :path, upper case, connection-specific, pseudo-header order", async () => {
    const { port, seen } = await start(echo);
    const raw = new Raw(port).open();
    try {
      const bad: [string, string][][] = [
        REQ.filter(([k]) => k !== ":path"),
        [...REQ, ["X-Upper", "1"]],
        [...REQ, ["connection", "keep-alive"]],
        [...REQ, ["te", "gzip"]],
        [...REQ.slice(0, 2), ["x-a", "1"], ...REQ.slice(2)],
        [...REQ, [":path", "/again"]],
        [...REQ, [":protocol", "x"]],
      ];
      bad.forEach((fields, i) => raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1 + 2 * i, block(fields))));
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1 + 2 * bad.length, block([...REQ, ["te", "trailers"]])));
      await waitFor(() => raw.of(H.RST_STREAM).length === bad.length && raw.of(H.HEADERS).length === 2, "the resets and the good reply");
      assert.deepEqual(
        raw.of(H.RST_STREAM).map((f) => [f.stream, f.payload.readUInt32BE(0)]),
        bad.map((_, i) => [1 + 2 * i, 0x1]),
      );
      assert.deepEqual(seen.map((s) => s.stream.id), [1 + 2 * bad.length]);
    } finally {
      raw.destroy();
    }
  });

  it("frames after the client ended a stream: DATA gets RST_STREAM STREAM_CLOSED; late frames on closed streams are ignored", async () => {
    const { port, seen } = await start(() => ({}));
    const raw = new Raw(port).open();
    try {
      raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      await waitFor(() => seen[0]?.ended === true, "stream 1 ended by the client");
      raw.send(frame(H.DATA, 0, 1, Buffer.from("late")));
      await waitFor(() => raw.of(H.RST_STREAM).length === 1, "the RST_STREAM");
      assert.deepEqual([raw.of(H.RST_STREAM)[0]!.stream, raw.of(H.RST_STREAM)[0]!.payload.readUInt32BE(0)], [1, 0x5]);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 0x5);
      assert.deepEqual(seen[0]!.body, [], "the late DATA was not delivered");
      // Stream 1 is closed now: DATA, WINDOW_UPDATE and RST_STREAM in flight for it are dropped without a word.
      raw.send(frame(H.DATA, 0, 1, Buffer.from("x")), frame(H.WINDOW_UPDATE, 0, 1, u32(10)), frame(H.RST_STREAM, 0, 1, u32(8)), frame(H.PING, 0, 0, Buffer.from("afterall")));
      await waitFor(() => raw.of(H.PING).some((p) => p.flags & ACK), "the PING ACK");
      assert.equal(raw.of(H.RST_STREAM).length, 1);
      assert.equal(raw.of(H.GOAWAY).length, 0);
    } finally {
      raw.destroy();
    }
  });

  describe("malformed input: GOAWAY with the code, the connection closed, the server up for others", () => {
    const cases: [string, (raw: Raw) => void, number, RegExp][] = [
      ["a bad preface", (r) => r.send(Buffer.from("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")), 0x1, /preface/],
      ["an HTTP/1.1 request", (r) => r.send(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), 0x1, /preface/],
      ["a first frame other than SETTINGS", (r) => r.send(PREFACE, frame(H.PING, 0, 0, Buffer.alloc(8))), 0x1, /first frame/],
      ["DATA on stream 0", (r) => r.open().send(frame(H.DATA, 0, 0, Buffer.from("x"))), 0x1, /stream 0/],
      ["HEADERS on stream 0", (r) => r.open().send(frame(H.HEADERS, END_HEADERS, 0, block(REQ))), 0x1, /stream 0/],
      ["an even stream id", (r) => r.open().send(frame(H.HEADERS, END_HEADERS, 2, block(REQ))), 0x1, /even/],
      ["a decreasing stream id", (r) => r.open().send(frame(H.HEADERS, END_HEADERS, 5, block(REQ)), frame(H.HEADERS, END_HEADERS, 3, block(REQ))), 0x1, /not above/],
      ["DATA on an idle stream", (r) => r.open().send(frame(H.DATA, 0, 9, Buffer.from("x"))), 0x1, /idle/],
      ["a frame over 16 KiB", (r) => r.open().send(frame(H.DATA, 0, 1, Buffer.alloc(20_000))), 0x6, /exceeds/],
      ["a connection window overflow", (r) => r.open().send(frame(H.WINDOW_UPDATE, 0, 0, u32(0x7fffffff))), 0x3, /overflow/],
      ["a bad HPACK block", (r) => r.open().send(frame(H.HEADERS, END_HEADERS, 1, Buffer.from([0xff, 0xff, 0xff, 0xff, 0x7f]))), 0x9, /header block/],
      ["CONTINUATION on the wrong stream", (r) => r.open().send(frame(H.HEADERS, 0, 1, block(REQ)), frame(H.CONTINUATION, END_HEADERS, 3, Buffer.alloc(0))), 0x1, /CONTINUATION/],
      ["a header block interrupted", (r) => r.open().send(frame(H.HEADERS, 0, 1, block(REQ)), frame(H.PING, 0, 0, Buffer.alloc(8))), 0x1, /interrupted/],
      ["a PING payload of 7 bytes", (r) => r.open().send(frame(H.PING, 0, 0, Buffer.alloc(7))), 0x6, /PING/],
      ["PUSH_PROMISE from a client", (r) => r.open().send(frame(H.PUSH_PROMISE, END_HEADERS, 1, Buffer.alloc(4))), 0x1, /PUSH_PROMISE/],
      ["padding longer than the frame", (r) => r.open().send(frame(H.HEADERS, END_HEADERS | 0x8, 1, Buffer.from([9, 0x82]))), 0x1, /padding/],
      ["a PING flood", (r) => r.open().send(...Array.from({ length: FLOOD_BURST + 2000 }, () => frame(H.PING, 0, 0, Buffer.alloc(8)))), 0xb, /too many/],
    ];
    for (const [name, send, code, debug] of cases) {
      it(name, async () => {
        const { port, sessionsClosed } = await start(echo);
        const raw = new Raw(port);
        try {
          send(raw);
          const g = await raw.goaway();
          assert.equal(g.code, code, `GOAWAY code for ${name} (${g.debug})`);
          assert.match(g.debug, debug);
          await stillServes(port);
          if (!/preface/.test(debug.source)) await waitFor(() => sessionsClosed.some((w) => debug.test(w)), "onSessionClose with the reason");
        } finally {
          raw.destroy();
        }
      });
    }
  });
});
