/**
 * A raw-frame HTTP/2 server for tests of the raw unary client (src/backends/h2-unary.ts): it produces what real gRPC
 * servers will not on demand (GOAWAY mid-flight, MAX_CONCURRENT_STREAMS=1, responses cut into 1-byte DATA frames,
 * CONTINUATION, padding, Huffman and dynamic-table headers, huge header blocks, withheld WINDOW_UPDATEs, malformed
 * frames). It reads the client's preface and frames, decodes request headers, collects each request body and hands
 * the stream to the test's handler; it records every frame the client sent, per connection.
 */
import net from "node:net";
import { HpackDecoder, huffmanEncode, literalField, writeInt } from "../../src/h2/hpack.js";

export const T = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const F = { END_STREAM: 1, ACK: 1, END_HEADERS: 4, PADDED: 8 } as const;

/** A frame as the server received it. */
export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** One request stream, complete (END_STREAM seen). */
export interface FakeRequest {
  conn: FakeConn;
  stream: number;
  headers: [string, string][];
  body: Buffer;
}

export class FakeConn {
  readonly frames: Frame[] = [];
  private readonly decoder = new HpackDecoder();
  private buf = Buffer.alloc(0);
  private preface = false;
  private readonly pending = new Map<number, { headers: [string, string][]; body: Buffer[] }>();
  /** Streams the client has open (HEADERS seen, not yet ended by a response or a reset). */
  readonly open = new Set<number>();
  /** Request DATA bytes received so far, per stream. */
  readonly received = new Map<number, number>();

  constructor(
    readonly socket: net.Socket,
    private readonly server: FakeServer,
  ) {
    socket.on("data", (c: Buffer) => this.onData(c));
    socket.on("error", () => undefined);
    this.send(T.SETTINGS, 0, 0, server.opts.settings ?? Buffer.alloc(0));
  }

  frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
    return rawFrame(type, flags, stream, payload);
  }

  send(type: number, flags: number, stream: number, payload: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(this.frame(type, flags, stream, payload));
  }

  raw(b: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(b);
  }

  /** Response HEADERS (`:status` 200 and content-type as plain literals unless `block` is given). */
  headers(stream: number, block: Buffer = plainBlock([[":status", "200"], ["content-type", "application/grpc"]]), endStream = false): void {
    this.send(T.HEADERS, F.END_HEADERS | (endStream ? F.END_STREAM : 0), stream, block);
    if (endStream) this.open.delete(stream);
  }

  data(stream: number, payload: Buffer, endStream = false): void {
    this.send(T.DATA, endStream ? F.END_STREAM : 0, stream, payload);
    if (endStream) this.open.delete(stream);
  }

  trailers(stream: number, status = 0, message?: string): void {
    const fields: [string, string][] = [["grpc-status", String(status)]];
    if (message !== undefined) fields.push(["grpc-message", message]);
    this.headers(stream, plainBlock(fields), true);
  }

  /** A whole OK response with `message`. */
  reply(stream: number, message: Buffer): void {
    this.headers(stream);
    this.data(stream, grpcFrame(message));
    this.trailers(stream, 0);
  }

  private onData(c: Buffer): void {
    this.buf = Buffer.concat([this.buf, c]);
    if (!this.preface) {
      if (this.buf.length < 24) return;
      this.buf = this.buf.subarray(24);
      this.preface = true;
    }
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) return;
      const f: Frame = { type: this.buf[3]!, flags: this.buf[4]!, stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(this.buf.subarray(9, 9 + len)) };
      this.buf = this.buf.subarray(9 + len);
      this.frames.push(f);
      this.onFrame(f);
    }
  }

  private onFrame(f: Frame): void {
    if (f.type === T.SETTINGS && !(f.flags & F.ACK)) this.send(T.SETTINGS, F.ACK, 0, Buffer.alloc(0));
    if (f.type === T.PING && !(f.flags & F.ACK) && this.server.opts.answerPings !== false) this.send(T.PING, F.ACK, 0, f.payload);
    if (f.type === T.RST_STREAM) this.open.delete(f.stream);
    if (f.type === T.HEADERS) {
      const headers: [string, string][] = [];
      this.decoder.decode(f.payload, 0, f.payload.length, { header: (n, v) => void headers.push([n, v]) });
      this.pending.set(f.stream, { headers, body: [] });
      this.open.add(f.stream);
      this.server.opened(this, f.stream);
    }
    if (f.type === T.DATA) {
      const p = this.pending.get(f.stream);
      p?.body.push(f.payload);
      this.received.set(f.stream, (this.received.get(f.stream) ?? 0) + f.payload.length);
      this.server.opts.onData?.(this, f.stream, this.received.get(f.stream)!);
      if (p && f.flags & F.END_STREAM) {
        this.pending.delete(f.stream);
        this.server.requests.push({ conn: this, stream: f.stream, headers: p.headers, body: Buffer.concat(p.body) });
        this.server.opts.onRequest({ conn: this, stream: f.stream, headers: p.headers, body: Buffer.concat(p.body) });
      }
    }
  }
}

export interface FakeServerOptions {
  /** SETTINGS payload the server sends first (6-byte entries). */
  settings?: Buffer;
  /** Default true. */
  answerPings?: boolean;
  onRequest(r: FakeRequest): void;
  /** Each DATA frame of a request: bytes received on the stream so far. */
  onData?(c: FakeConn, stream: number, received: number): void;
}

export class FakeServer {
  readonly conns: FakeConn[] = [];
  readonly requests: FakeRequest[] = [];
  /** Most streams the client had open at once on one connection. */
  maxOpen = 0;
  private server!: net.Server;
  port = 0;

  constructor(readonly opts: FakeServerOptions) {}

  async listen(): Promise<this> {
    this.server = net.createServer((s) => this.conns.push(new FakeConn(s, this)));
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  opened(c: FakeConn, _stream: number): void {
    this.maxOpen = Math.max(this.maxOpen, c.open.size);
  }

  /** Frames of `type` the client sent, over all connections. */
  sent(type: number): Frame[] {
    return this.conns.flatMap((c) => c.frames.filter((f) => f.type === type));
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.socket.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** A header block of plain literals without indexing. */
export function plainBlock(fields: [string, string][]): Buffer {
  const out = Buffer.alloc(fields.reduce((n, [k, v]) => n + 12 + k.length + v.length, 0));
  let p = 0;
  for (const [k, v] of fields) p = literalField(out, p, 0, k, v);
  return out.subarray(0, p);
}

/** A literal with incremental indexing, new name, both strings Huffman-coded (what nghttp2 and grpc-go send). */
export function indexedHuffman(name: string, value: string): Buffer {
  const n = huffmanEncode(name);
  const v = huffmanEncode(value);
  const out = Buffer.alloc(12 + n.length + v.length);
  out[0] = 0x40;
  let p = writeInt(out, 1, n.length, 7, 0x80);
  p += n.copy(out, p);
  p = writeInt(out, p, v.length, 7, 0x80);
  p += v.copy(out, p);
  return out.subarray(0, p);
}

/** The 5-byte gRPC prefix and the message. */
export function grpcFrame(message: Buffer, flag = 0): Buffer {
  const p = Buffer.alloc(5);
  p[0] = flag;
  p.writeUInt32BE(message.length, 1);
  return Buffer.concat([p, message]);
}

/** A SETTINGS payload. */
export function settings(entries: [number, number][]): Buffer {
  const b = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, v], i) => {
    b.writeUInt16BE(id, i * 6);
    b.writeUInt32BE(v, i * 6 + 2);
  });
  return b;
}

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** One HTTP/2 frame: the 9-byte header, then `payload`. */
export function rawFrame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}
