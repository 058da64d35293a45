/**
 * The raw node:http2 unary client that carries invoke's backend calls (src/backends/h2-unary.ts), over real sockets
 * against a grpc-js server and a bare HTTP/2 server: the outcomes must be the ones grpc-js's own client gives.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { createH2UnaryClient, type H2UnaryClient } from "../../src/backends/h2-unary.js";
import { Code } from "../../src/shared/code.js";
import { callDeadlines } from "../../src/shared/deadline-queue.js";
import { rawBytesMethod as method } from "../support/raw-methods.js";
import { freePort } from "../support/ports.js";

const SERVICE: grpc.ServiceDefinition = {
  Echo: method("/t.T/Echo"),
  Slow: method("/t.T/Slow"),
  Fail: method("/t.T/Fail"),
  Big: method("/t.T/Big"),
  Meta: method("/t.T/Meta"),
};

describe("h2-unary client", () => {
  let server: grpc.Server;
  let port: number;
  let client: H2UnaryClient;
  const slowCancelled: string[] = [];

  before(async () => {
    server = new grpc.Server();
    server.addService(SERVICE, {
      Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
      Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const t = setTimeout(() => cb(null, Buffer.from("late")), 5000);
        call.on("cancelled", () => {
          clearTimeout(t);
          slowCancelled.push(call.request.toString());
        });
      },
      Fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        cb({ code: grpc.status.FAILED_PRECONDITION, details: "stock is 0 for sku-1 (ünïcode, 100%)" }),
      Big: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(64 * 1024, 7)),
      Meta: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        cb(null, Buffer.from(JSON.stringify({ tenant: call.metadata.get("x-tenant"), timeout: call.getDeadline() !== Infinity }))),
    });
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    client = createH2UnaryClient({ address: `127.0.0.1:${port}`, connections: 2, maxReceiveBytes: 16 * 1024 });
  });
  after(() => {
    client.close();
    server.forceShutdown();
  });

  const soon = (ms = 5000): number => Date.now() + ms;

  it("returns the response bytes; many concurrent calls over the kept connections", async () => {
    const outs = await Promise.all(Array.from({ length: 50 }, (_, i) => client.call("/t.T/Echo", Buffer.from(`m${i}`), new grpc.Metadata(), soon())));
    outs.forEach((o, i) => assert.deepEqual(o, { ok: true, bytes: Buffer.from(`m${i}`) }));
  });

  it("reassembles a response split across DATA frames and accepts an empty message", async () => {
    const big = createH2UnaryClient({ address: `127.0.0.1:${port}`, connections: 1, maxReceiveBytes: 1 << 20 });
    try {
      const o = await big.call("/t.T/Big", Buffer.alloc(0), new grpc.Metadata(), soon());
      assert.equal(o.ok, true);
      assert.equal(o.ok && o.bytes.length, 64 * 1024);
      assert.equal(o.ok && o.bytes.every((b) => b === 7), true);
      const e = await big.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), soon());
      assert.deepEqual(e, { ok: true, bytes: Buffer.alloc(0) });
    } finally {
      big.close();
    }
  });

  it("forwards metadata and the deadline as grpc-timeout", async () => {
    const md = new grpc.Metadata();
    md.set("x-tenant", "acme");
    const o = await client.call("/t.T/Meta", Buffer.alloc(0), md, soon());
    assert.equal(o.ok, true);
    assert.deepEqual(JSON.parse(o.ok ? o.bytes.toString() : "{}"), { tenant: ["acme"], timeout: true });
  });

  it("reports the backend's status and its (percent-encoded) message", async () => {
    const o = await client.call("/t.T/Fail", Buffer.alloc(0), new grpc.Metadata(), soon());
    assert.deepEqual(o, { ok: false, code: Code.FAILED_PRECONDITION, message: "stock is 0 for sku-1 (ünïcode, 100%)" });
  });

  it("reports UNIMPLEMENTED for a method the backend does not have", async () => {
    const o = await client.call("/t.T/Nope", Buffer.alloc(0), new grpc.Metadata(), soon());
    assert.equal(o.ok, false);
    assert.equal(!o.ok && o.code, Code.UNIMPLEMENTED);
  });

  it("refuses a response over maxReceiveBytes with RESOURCE_EXHAUSTED naming both sizes", async () => {
    const o = await client.call("/t.T/Big", Buffer.alloc(0), new grpc.Metadata(), soon());
    assert.deepEqual(o, { ok: false, code: Code.RESOURCE_EXHAUSTED, message: `Received message larger than max (${64 * 1024} vs ${16 * 1024})` });
  });

  it("ends a call at its deadline with DEADLINE_EXCEEDED and cancels it on the backend", async () => {
    const t = performance.now();
    const o = await client.call("/t.T/Slow", Buffer.from("deadline"), new grpc.Metadata(), soon(150));
    const took = performance.now() - t;
    assert.deepEqual(o, { ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
    assert.ok(took >= 100 && took < 2000, `took ${took} ms`);
    for (let i = 0; i < 100 && !slowCancelled.includes("deadline"); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(slowCancelled.includes("deadline"), "the backend saw the call cancelled");
    // Calls that ended, on time or past their deadline, leave nothing in the thread's deadline queue.
    const done = await Promise.all(Array.from({ length: 20 }, (_, i) => client.call("/t.T/Echo", Buffer.from(`q${i}`), new grpc.Metadata(), soon(60_000 + i))));
    for (const d of done) assert.equal(d.ok, true);
    assert.equal(callDeadlines.size, 0);
  });

  it("answers a deadline already past without calling", async () => {
    const o = await client.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), Date.now() - 1);
    assert.deepEqual(o, { ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
  });

  it("cancels on the caller's abort with CANCELLED, and the backend sees the cancellation", async () => {
    const ac = new AbortController();
    const p = client.call("/t.T/Slow", Buffer.from("abort"), new grpc.Metadata(), soon(), ac.signal);
    setTimeout(() => ac.abort(), 100);
    assert.deepEqual(await p, { ok: false, code: Code.CANCELLED, message: "Cancelled on client" });
    for (let i = 0; i < 100 && !slowCancelled.includes("abort"); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(slowCancelled.includes("abort"), "the backend saw the call cancelled");
    const pre = new AbortController();
    pre.abort();
    const o = await client.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), soon(), pre.signal);
    assert.equal(!o.ok && o.code, Code.CANCELLED);
  });

  it("answers a backend's PING with its next request, or within 20 ms when none follows", async () => {
    // A grpc-go backend PINGs with each response (BDP estimation); the ACK leaves with the next frame on the connection.
    const h = http2.createServer();
    const acks: Array<Promise<number>> = [];
    h.on("stream", (stream) => {
      stream.on("error", () => undefined);
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 1, 9]), () => {
        const sent = performance.now();
        acks.push(new Promise<number>((resolve, reject) => stream.session!.ping((e) => (e ? reject(e) : resolve(performance.now() - sent)))));
      });
    });
    await new Promise<void>((r) => h.listen(0, "127.0.0.1", r));
    const c = createH2UnaryClient({ address: `127.0.0.1:${(h.address() as net.AddressInfo).port}`, connections: 1, maxReceiveBytes: 1024 });
    try {
      const call = () => c.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), soon());
      assert.equal((await call()).ok, true);
      // The next request 8 ms later carries the first ACK (or the hold ends first).
      await new Promise((r) => setTimeout(r, 8));
      assert.equal((await call()).ok, true);
      const first = await acks[0]!;
      // (at most the hold: under load the 8 ms timer can fire after the hold's 20 ms)
      assert.ok(first >= 6 && first < 500, `the ACK was not written alone at once (${first.toFixed(1)} ms)`);
      // Nothing follows the second call: its ACK goes alone after the hold, well before any keepalive would mind.
      const second = await acks[1]!;
      assert.ok(second >= 15 && second < 500, `the ACK left on its own after the hold (${second.toFixed(1)} ms)`);
    } finally {
      c.close();
      await new Promise<void>((r) => h.close(() => r()));
    }
  });

  it("answers a burst of PINGs, more than it holds, each with its own payload and in order", async () => {
    const h = http2.createServer({ maxOutstandingPings: 32 });
    let pinged: Promise<Buffer[]> | undefined;
    h.on("stream", (stream) => {
      stream.on("error", () => undefined);
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 1, 9]), () => {
        // 20 at once: the client holds 8, the 9th goes out at once with them, and so on; the last ones after the hold.
        const session = stream.session!;
        pinged = Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            new Promise<Buffer>((resolve, reject) => session.ping(Buffer.from(`ping-${String(i).padStart(3, "0")}`), (e, _ms, payload) => (e ? reject(e) : resolve(payload)))),
          ),
        );
      });
    });
    await new Promise<void>((r) => h.listen(0, "127.0.0.1", r));
    const c = createH2UnaryClient({ address: `127.0.0.1:${(h.address() as net.AddressInfo).port}`, connections: 1, maxReceiveBytes: 1024 });
    try {
      assert.equal((await c.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), soon())).ok, true);
      for (let i = 0; i < 100 && pinged === undefined; i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(pinged, "the backend wrote its response");
      let timer: NodeJS.Timeout | undefined;
      const payloads = await Promise.race([pinged, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("PINGs not answered in 2 s")), 2000)))]).finally(() => clearTimeout(timer));
      assert.deepEqual(payloads.map((b) => b.toString()), Array.from({ length: 20 }, (_, i) => `ping-${String(i).padStart(3, "0")}`));
      // The connection is still good for calls afterwards.
      assert.equal((await c.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), soon())).ok, true);
    } finally {
      c.close();
      await new Promise<void>((r) => h.close(() => r()));
    }
  });

  it("reports UNAVAILABLE naming the address when nothing listens, within the deadline", async () => {
    const dead = await freePort();
    const c = createH2UnaryClient({ address: `127.0.0.1:${dead}`, connections: 1, maxReceiveBytes: 1024 });
    try {
      const o = await c.call("/t.T/Echo", Buffer.alloc(0), new grpc.Metadata(), soon());
      assert.equal(o.ok, false);
      assert.equal(!o.ok && o.code, Code.UNAVAILABLE);
      assert.match(!o.ok ? o.message : "", new RegExp(`127\\.0\\.0\\.1:${dead} is unavailable: .*ECONNREFUSED`));
    } finally {
      c.close();
    }
  });

  it("reconnects after the backend restarts on the same port", async () => {
    const p2 = await freePort();
    const start = async (): Promise<grpc.Server> => {
      const s = new grpc.Server();
      s.addService(SERVICE, { Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
      await new Promise<void>((resolve, reject) => s.bindAsync(`127.0.0.1:${p2}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
      return s;
    };
    const c = createH2UnaryClient({ address: `127.0.0.1:${p2}`, connections: 1, maxReceiveBytes: 1024 });
    let s = await start();
    try {
      assert.equal((await c.call("/t.T/Echo", Buffer.from("a"), new grpc.Metadata(), soon())).ok, true);
      s.forceShutdown();
      const down = await c.call("/t.T/Echo", Buffer.from("b"), new grpc.Metadata(), soon());
      assert.equal(!down.ok && down.code, Code.UNAVAILABLE);
      s = await start();
      assert.deepEqual(await c.call("/t.T/Echo", Buffer.from("c"), new grpc.Metadata(), soon()), { ok: true, bytes: Buffer.from("c") });
    } finally {
      c.close();
      s.forceShutdown();
    }
  });

  it("replaces a connection that stopped answering after a call on it ran into its deadline", async () => {
    // A TCP relay to the backend whose first connection can be frozen: bytes stop flowing both ways, nothing is closed.
    const pairs: { client: net.Socket; upstream: net.Socket }[] = [];
    const relay = net.createServer((client) => {
      const upstream = net.connect(port, "127.0.0.1");
      client.pipe(upstream);
      upstream.pipe(client);
      client.on("error", () => undefined);
      upstream.on("error", () => undefined);
      pairs.push({ client, upstream });
    });
    await new Promise<void>((r) => relay.listen(0, "127.0.0.1", r));
    const c = createH2UnaryClient({ address: `127.0.0.1:${(relay.address() as net.AddressInfo).port}`, connections: 1, maxReceiveBytes: 1024, probeTimeoutMs: 200 });
    try {
      assert.equal((await c.call("/t.T/Echo", Buffer.from("a"), new grpc.Metadata(), soon())).ok, true);
      const frozen = pairs[0]!;
      frozen.client.unpipe(frozen.upstream);
      frozen.upstream.unpipe(frozen.client);
      frozen.client.pause();
      const t = await c.call("/t.T/Echo", Buffer.from("b"), new grpc.Metadata(), soon(150));
      assert.deepEqual(t, { ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
      // The PING after the timeout goes unanswered; 200 ms later the connection is dropped and the next call dials anew.
      await new Promise((r) => setTimeout(r, 400));
      assert.deepEqual(await c.call("/t.T/Echo", Buffer.from("c"), new grpc.Metadata(), soon()), { ok: true, bytes: Buffer.from("c") });
      assert.equal(pairs.length, 2, "a second connection was made");
    } finally {
      c.close();
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((r) => relay.close(() => r()));
    }
  });

  it("maps a non-200 HTTP status, a reset and a dropped connection without grpc-status as grpc-js does, and refuses a compressed message", async () => {
    const h = http2.createServer();
    h.on("stream", (stream, headers) => {
      stream.on("error", () => undefined); // the resets below are on purpose
      if (headers[":path"] === "/busy") {
        stream.respond({ ":status": 503 });
        stream.end();
      } else if (headers[":path"] === "/reset") {
        stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      } else if (headers[":path"] === "/drop") {
        stream.respond({ ":status": 200, "content-type": "application/grpc" });
        stream.write(Buffer.from([0, 0, 0, 0, 9, 1]), () => stream.session?.destroy());
      } else {
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(Buffer.from([1, 0, 0, 0, 1, 9]));
      }
    });
    await new Promise<void>((r) => h.listen(0, "127.0.0.1", r));
    const c = createH2UnaryClient({ address: `127.0.0.1:${(h.address() as net.AddressInfo).port}`, connections: 1, maxReceiveBytes: 1024 });
    try {
      assert.deepEqual(await c.call("/busy", Buffer.alloc(0), new grpc.Metadata(), soon()), { ok: false, code: Code.UNAVAILABLE, message: "Received HTTP status code 503" });
      const z = await c.call("/zip", Buffer.alloc(0), new grpc.Metadata(), soon());
      assert.equal(!z.ok && z.code, Code.INTERNAL);
      assert.match(!z.ok ? z.message : "", /compressed/);
      assert.deepEqual(await c.call("/reset", Buffer.alloc(0), new grpc.Metadata(), soon()), { ok: false, code: Code.INTERNAL, message: "Received RST_STREAM with code 2" });
      const d = await c.call("/drop", Buffer.alloc(0), new grpc.Metadata(), soon());
      assert.equal(!d.ok && d.code, Code.UNAVAILABLE, JSON.stringify(d));
    } finally {
      c.close();
      await new Promise<void>((r) => h.close(() => r()));
    }
  });

  it("retries a refused stream once on a fresh connection; a second refusal is UNAVAILABLE", async () => {
    const h = http2.createServer();
    let sessions = 0;
    const streams: Record<string, number> = {};
    const bodies: Buffer[] = [];
    h.on("session", () => sessions++);
    h.on("stream", (stream, headers) => {
      stream.on("error", () => undefined);
      const path = String(headers[":path"]);
      streams[path] = (streams[path] ?? 0) + 1;
      // REFUSED_STREAM: the server did not process the request (RFC 9113 8.7), so it is safe to send again.
      if (path === "/refuse" || (path === "/refuse-once" && streams[path] === 1)) return void stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const body = Buffer.concat(chunks);
        bodies.push(body);
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(body); // echo the framed request as the framed response
      });
    });
    await new Promise<void>((r) => h.listen(0, "127.0.0.1", r));
    const c = createH2UnaryClient({ address: `127.0.0.1:${(h.address() as net.AddressInfo).port}`, connections: 1, maxReceiveBytes: 1024 });
    try {
      assert.deepEqual(await c.call("/refuse-once", Buffer.from("again"), new grpc.Metadata(), soon()), { ok: true, bytes: Buffer.from("again") });
      assert.equal(streams["/refuse-once"], 2);
      assert.equal(sessions, 2, "the retry went out on a fresh connection");
      // What reached the server is the gRPC frame: flag 0, the length, then the message.
      assert.deepEqual(bodies[0], Buffer.concat([Buffer.from([0, 0, 0, 0, 5]), Buffer.from("again")]));
      assert.deepEqual(await c.call("/refuse", Buffer.from("x"), new grpc.Metadata(), soon()), { ok: false, code: Code.UNAVAILABLE, message: "Stream refused by server" });
      assert.equal(streams["/refuse"], 2, "retried once, not more");
    } finally {
      c.close();
      await new Promise<void>((r) => h.close(() => r()));
    }
  });

  it("a second response message is UNIMPLEMENTED, a compressed one INTERNAL, OK without a message UNIMPLEMENTED, with grpc-js's texts", async () => {
    const h = http2.createServer();
    h.on("stream", (stream, headers) => {
      stream.on("error", () => undefined);
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      const frame = (flag: number, m: string): Buffer => Buffer.concat([Buffer.from([flag, 0, 0, 0, m.length]), Buffer.from(m)]);
      if (headers[":path"] === "/two") stream.end(Buffer.concat([frame(0, "one"), frame(0, "two")]));
      else if (headers[":path"] === "/zip") stream.end(frame(1, "gz"));
      else if (headers[":path"] === "/split") {
        // The prefix and the message arrive in separate DATA frames, the prefix itself cut in two.
        const f = frame(0, "whole");
        stream.write(f.subarray(0, 2), () => stream.write(f.subarray(2, 5), () => stream.end(f.subarray(5))));
      } else stream.end();
    });
    await new Promise<void>((r) => h.listen(0, "127.0.0.1", r));
    const c = createH2UnaryClient({ address: `127.0.0.1:${(h.address() as net.AddressInfo).port}`, connections: 1, maxReceiveBytes: 1024 });
    try {
      assert.deepEqual(await c.call("/two", Buffer.alloc(0), new grpc.Metadata(), soon()), { ok: false, code: Code.UNIMPLEMENTED, message: "Too many responses received" });
      assert.deepEqual(await c.call("/zip", Buffer.alloc(0), new grpc.Metadata(), soon()), {
        ok: false,
        code: Code.INTERNAL,
        message: "Received a compressed message, but no compression was negotiated",
      });
      assert.deepEqual(await c.call("/none", Buffer.alloc(0), new grpc.Metadata(), soon()), { ok: false, code: Code.UNIMPLEMENTED, message: "No message received" });
      assert.deepEqual(await c.call("/split", Buffer.alloc(0), new grpc.Metadata(), soon()), { ok: true, bytes: Buffer.from("whole") });
    } finally {
      c.close();
      await new Promise<void>((r) => h.close(() => r()));
    }
  });
});
