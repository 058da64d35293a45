// Subscriber process of bench/webfanout.ts: opens `count` WebSocket or SSE connections (one subscriber each) over raw
// TCP sockets to 127.0.0.1:port, with a minimal RFC 6455 client (handshake, unmasked server frames, masked pong and
// subscribe frames) and a minimal SSE reader, because a full client library (`ws`, EventSource) would cost more CPU
// per delivery than the server under test and make the load generator the bottleneck; or gRPC Subscribe streams
// over node:http2, one connection each (grpc-js channels cost more and fail to open 2,500 at once per process).
// Counts deliveries; on every `sampleEvery`-th connection it also records publish-to-delivery latency from the
// `ts-<ns>` marker in the event (process.hrtime is CLOCK_MONOTONIC, shared by every process on the machine).
// `topic` may be a comma-separated list: subscriber i takes topic i mod the list's length (the parent rotates the list
// per process so the topics stay evenly spread over all processes), and latency is sampled on every `sampleEvery`-th
// round through the list, so every topic is sampled alike (with one topic: every `sampleEvery`-th subscriber).
// Talks to its parent over IPC: {cmd:"stats"} -> {ready, delivered, failed, latencies, msgBytes}; {cmd:"close"}.
// Plain CommonJS so that no TypeScript loader runs in the measured client.
"use strict";
const http2 = require("node:http2");
const net = require("node:net");

const [kind, portArg, path, topicArg, countArg, sampleArg, apiKey] = process.argv.slice(2);
const topics = topicArg.split(",");
const port = Number(portArg);
const count = Number(countArg);
const sampleEvery = Number(sampleArg) || 10;
const MAX_PENDING = 128; // connections being opened at once: keeps the server's accept backlog from overflowing
const MARK = Buffer.from("ts-");
const SSE_DATA = Buffer.from("\ndata:");

let ready = 0;
let delivered = 0;
let failed = 0;
let msgBytes = 0;
let latencies = [];
const sockets = [];
let closing = false;

function latencyFrom(buf, from) {
  const at = buf.indexOf(MARK, from);
  if (at < 0) return;
  let end = at + 3;
  while (end < buf.length && buf[end] >= 0x30 && buf[end] <= 0x39) end++;
  if (end === at + 3 || end >= buf.length) return;
  latencies.push(Number(process.hrtime.bigint() - BigInt(buf.toString("latin1", at + 3, end))) / 1000);
}

/** A masked client frame (mask key 0: allowed, and the payload stays as is). */
function clientFrame(opcode, payload) {
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x80 | opcode, 0x80 | len, 0, 0, 0, 0]) : Buffer.from([0x80 | opcode, 0x80 | 126, len >> 8, len & 255, 0, 0, 0, 0]);
  return Buffer.concat([head, payload]);
}

function headerLines(extra) {
  return `Host: 127.0.0.1:${port}\r\n${apiKey ? `x-api-key: ${apiKey}\r\n` : ""}${extra}\r\n`;
}

function openWs(index, done) {
  const sampled = Math.floor(index / topics.length) % sampleEvery === 0;
  const topic = topics[index % topics.length];
  const s = net.connect(port, "127.0.0.1");
  s.setNoDelay(true);
  let buf = Buffer.alloc(0);
  let upgraded = false;
  let subscribed = false;
  let settled = false;
  const settle = () => {
    if (!settled) {
      settled = true;
      done();
    }
  };
  s.on("connect", () =>
    s.write(`GET ${path} HTTP/1.1\r\n` + headerLines("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")),
  );
  s.on("data", (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    if (!upgraded) {
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      if (!buf.toString("latin1", 0, 12).startsWith("HTTP/1.1 101")) {
        failed++;
        settle();
        s.destroy();
        return;
      }
      upgraded = true;
      buf = buf.subarray(end + 4);
      s.write(clientFrame(1, Buffer.from(JSON.stringify({ op: "subscribe", topics: [topic] }))));
    }
    // Frames: server frames are unmasked; payloads up to 2^32 are enough here.
    let off = 0;
    while (buf.length - off >= 2) {
      const b0 = buf[off];
      let len = buf[off + 1] & 0x7f;
      let hdr = 2;
      if (len === 126) {
        if (buf.length - off < 4) break;
        len = buf.readUInt16BE(off + 2);
        hdr = 4;
      } else if (len === 127) {
        if (buf.length - off < 10) break;
        len = buf.readUInt32BE(off + 6);
        hdr = 10;
      }
      if (buf.length - off < hdr + len) break;
      const opcode = b0 & 0x0f;
      const start = off + hdr;
      off = start + len;
      if (opcode === 1) {
        if (!subscribed) {
          // The first text frame answers the subscribe.
          if (buf.toString("utf8", start, off).includes('"subscribed"')) {
            subscribed = true;
            ready++;
            settle();
          } else {
            failed++;
            settle();
          }
          continue;
        }
        delivered++;
        if (sampled) {
          msgBytes = len;
          latencyFrom(buf.subarray(start, off), 0);
        }
      } else if (opcode === 9) s.write(clientFrame(10, buf.subarray(start, off)));
      else if (opcode === 8) s.end();
    }
    buf = off === buf.length ? Buffer.alloc(0) : buf.subarray(off);
  });
  s.on("error", () => undefined);
  s.on("close", () => {
    if (!settled) failed++;
    settle();
  });
  sockets.push(s);
}

function openSse(index, done) {
  const sampled = Math.floor(index / topics.length) % sampleEvery === 0;
  const topic = topics[index % topics.length];
  const s = net.connect(port, "127.0.0.1");
  s.setNoDelay(true);
  let head = Buffer.alloc(0);
  let inBody = false;
  // The last bytes of the previous chunk, shorter than the marker, so a marker split between chunks is counted once.
  let tail = Buffer.alloc(0);
  let line = "";
  let settled = false;
  const settle = () => {
    if (!settled) {
      settled = true;
      done();
    }
  };
  s.on("connect", () => s.write(`GET ${path}?topic=${encodeURIComponent(topic)} HTTP/1.1\r\n` + headerLines("Accept: text/event-stream\r\n")));
  s.on("data", (chunk) => {
    if (!inBody) {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      if (!head.toString("latin1", 0, 12).startsWith("HTTP/1.1 200")) {
        failed++;
        settle();
        s.destroy();
        return;
      }
      inBody = true;
      ready++;
      settle();
      chunk = head.subarray(end + 2); // keep the "\r\n" so that a first "data:" line is preceded by a newline
      head = Buffer.alloc(0);
    }
    const b = tail.length ? Buffer.concat([tail, chunk]) : chunk;
    let at = b.indexOf(SSE_DATA);
    while (at >= 0) {
      delivered++;
      at = b.indexOf(SSE_DATA, at + SSE_DATA.length);
    }
    tail = b.subarray(Math.max(0, b.length - (SSE_DATA.length - 1)));
    if (sampled) {
      // Whole lines only: a latency marker split between chunks is read once the line is complete.
      line += chunk.toString("latin1");
      let nl;
      while ((nl = line.indexOf("\n")) >= 0) {
        const l = line.slice(0, nl);
        line = line.slice(nl + 1);
        if (l.startsWith("data:")) {
          msgBytes = l.length;
          latencyFrom(Buffer.from(l, "latin1"), 0);
        }
      }
    }
  });
  s.on("error", () => undefined);
  s.on("close", () => {
    if (!settled) failed++;
    settle();
  });
  sockets.push(s);
}

// gRPC Subscribe over node:http2, one session (connection) per stream: SubscribeRequest {topics: [topic]} by hand
// (field 1, length-delimited) in one gRPC message; each response message (5-byte prefix) is one delivery.
function openGrpc(index, done) {
  const sampled = Math.floor(index / topics.length) % sampleEvery === 0;
  const topic = topics[index % topics.length];
  let settled = false;
  const settle = () => {
    if (!settled) {
      settled = true;
      done();
    }
  };
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on("error", () => undefined);
  const t = Buffer.from(topic);
  const msg = Buffer.concat([Buffer.from([0x0a, t.length]), t]);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(msg.length, 1);
  const req = session.request({ ":method": "POST", ":path": "/io.cloudevents.v1.Pubsub/Subscribe", "content-type": "application/grpc", te: "trailers", ...(apiKey ? { "x-api-key": apiKey } : {}) });
  req.end(Buffer.concat([prefix, msg]));
  req.on("response", (h) => {
    if (h[":status"] !== 200 || h["grpc-status"] !== undefined) failed++;
    else ready++;
    settle();
  });
  let buf = Buffer.alloc(0);
  req.on("data", (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    let off = 0;
    while (buf.length - off >= 5) {
      const len = buf.readUInt32BE(off + 1);
      if (buf.length - off < 5 + len) break;
      delivered++;
      if (sampled) {
        msgBytes = len;
        latencyFrom(buf.subarray(off + 5, off + 5 + len), 0);
      }
      off += 5 + len;
    }
    buf = off === buf.length ? Buffer.alloc(0) : buf.subarray(off);
  });
  req.on("error", () => undefined);
  req.on("close", () => {
    if (!settled) failed++;
    settle();
  });
  sockets.push(session);
}

// Open the connections with a bounded number in flight.
let next = 0;
let pending = 0;
function pump() {
  while (!closing && pending < MAX_PENDING && next < count) {
    const i = next++;
    pending++;
    (kind === "sse" ? openSse : kind === "grpc" ? openGrpc : openWs)(i, () => {
      pending--;
      setImmediate(pump);
    });
  }
}
pump();

process.on("message", (m) => {
  if (m.cmd === "stats") {
    process.send({ ready, delivered, failed, msgBytes, latencies });
    latencies = [];
  }
  if (m.cmd === "close") {
    closing = true;
    for (const s of sockets) s.destroy();
    setTimeout(() => process.exit(0), 50);
  }
});
process.on("disconnect", () => process.exit(0));
