/**
 * A raw-socket HTTP/2 client for tests that must send what no real client sends (the fuzzer in test/fuzz/, the
 * attack-class suite in test/attack/, the fuzz regressions): bytes written as given, the server's frames parsed and
 * recorded, the close noticed, and every wait bounded. `rawUnary` makes one whole gRPC unary call on a fresh
 * connection with nothing but frames, to check that a server is still serving without a grpc-js client's own retries
 * and reconnects in the way. Frame builders are src/h2's and test/support/h2-fake-server.ts's.
 */
import net from "node:net";
import { HpackDecoder, literalField } from "../../src/h2/hpack.js";
import { PREFACE } from "../../src/h2/frames.js";
import { grpcFrame, rawFrame, settings, u32 } from "./h2-fake-server.js";

export { PREFACE, grpcFrame, rawFrame, settings, u32 };

export const T = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const F = { END_STREAM: 1, ACK: 1, END_HEADERS: 4, PADDED: 8, PRIORITY: 0x20 } as const;

/** A frame as the server sent it. */
export interface RawFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** A header block of plain literals without indexing (any names and values, also invalid ones). */
export function headerBlock(fields: [string, string][]): Buffer {
  const out = Buffer.alloc(fields.reduce((n, [k, v]) => n + 12 + k.length + v.length, 0));
  let p = 0;
  for (const [n, v] of fields) p = literalField(out, p, 0, n, v);
  return out.subarray(0, p);
}

/** The request header fields of a gRPC call to `path` (e.g. "/platform.Config/ListServices"), then `extra`. */
export function grpcRequestFields(path: string, extra: [string, string][] = []): [string, string][] {
  return [[":method", "POST"], [":scheme", "http"], [":path", path], [":authority", "127.0.0.1"], ["content-type", "application/grpc"], ["te", "trailers"], ...extra];
}

/** A raw client connection: `send` writes bytes as given, the server's frames are parsed into `frames`. */
export class RawH2 {
  readonly frames: RawFrame[] = [];
  closed = false;
  /** Bytes received (frames and any trailing partial frame). */
  received = 0;
  readonly socket: net.Socket;
  private buf: Buffer = Buffer.alloc(0);
  private readonly waiters = new Set<() => void>();

  constructor(port: number, host = "127.0.0.1") {
    this.socket = net.connect(port, host);
    this.socket.setNoDelay(true);
    this.socket.on("data", (c: Buffer) => {
      this.received += c.length;
      this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        // Kept frames are bounded by what a test waits for: a client that only sends keeps what the server says.
        if (this.frames.length < 100_000) this.frames.push({ type: this.buf[3]!, flags: this.buf[4]!, stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(this.buf.subarray(9, 9 + len)) });
        this.buf = this.buf.subarray(9 + len);
      }
      this.wake();
    });
    this.socket.on("error", () => undefined);
    this.socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
  }

  /** Resolve once connected; reject after `timeoutMs`. */
  connected(timeoutMs = 5000): Promise<this> {
    if (!this.socket.connecting) return Promise.resolve(this);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no TCP connection within ${timeoutMs} ms`)), timeoutMs);
      this.socket.once("connect", () => {
        clearTimeout(t);
        resolve(this);
      });
      this.socket.once("close", () => {
        clearTimeout(t);
        reject(new Error("the connection closed before it opened"));
      });
    });
  }

  /** Write bytes (a no-op once the socket is gone); resolves when the socket has taken them (or is gone). */
  send(...bufs: Buffer[]): Promise<void> {
    if (this.socket.destroyed || !this.socket.writable) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.write(bufs.length === 1 ? bufs[0]! : Buffer.concat(bufs), () => resolve());
    });
  }

  /** Preface and an empty (or the given) SETTINGS. */
  open(entries: [number, number][] = []): Promise<void> {
    return this.send(PREFACE, rawFrame(T.SETTINGS, 0, 0, settings(entries)));
  }

  of(type: number): RawFrame[] {
    return this.frames.filter((f) => f.type === type);
  }

  /** Resolve true once `pred` holds (checked on each arrival and close), false after `timeoutMs`. */
  until(pred: () => boolean, timeoutMs: number): Promise<boolean> {
    if (pred()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = (): void => {
        if (!pred()) return;
        done(true);
      };
      const done = (v: boolean): void => {
        clearTimeout(t);
        this.waiters.delete(check);
        resolve(v);
      };
      const t = setTimeout(() => done(pred()), timeoutMs);
      this.waiters.add(check);
    });
  }

  /** The first GOAWAY's code, or undefined when none came. */
  goawayCode(): number | undefined {
    const g = this.of(T.GOAWAY)[0];
    return g === undefined ? undefined : g.payload.readUInt32BE(4);
  }

  /** Half-close our side (FIN) without destroying. */
  endWrites(): void {
    if (!this.socket.destroyed) this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}

/** What a raw unary call got. */
export interface RawUnaryResult {
  /** grpc-status from the trailers (or a Trailers-Only reply); undefined when none came. */
  status: number | undefined;
  grpcMessage: string | undefined;
  /** The response message bytes (the gRPC length prefix removed), when there was one. */
  message: Buffer | undefined;
  /** RST_STREAM code when the stream was reset, GOAWAY code when the connection was ended. */
  rst: number | undefined;
  goaway: number | undefined;
}

/**
 * One gRPC unary call on a fresh connection, raw frames only: preface, SETTINGS, HEADERS, one DATA with `message`
 * (length-prefixed) and END_STREAM; resolves once the stream ends (trailers or reset) or the connection closes, and
 * rejects after `timeoutMs`. The connection is destroyed either way.
 */
export async function rawUnary(port: number, path: string, message: Buffer, timeoutMs = 5000, extra: [string, string][] = []): Promise<RawUnaryResult> {
  const c = new RawH2(port);
  try {
    await c.connected(timeoutMs);
    await c.send(
      PREFACE,
      rawFrame(T.SETTINGS, 0, 0),
      rawFrame(T.HEADERS, F.END_HEADERS, 1, headerBlock(grpcRequestFields(path, extra))),
      rawFrame(T.DATA, F.END_STREAM, 1, grpcFrame(message)),
    );
    const ended = (): boolean => c.closed || c.frames.some((f) => f.stream === 1 && (f.type === T.RST_STREAM || (f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0)));
    if (!(await c.until(ended, timeoutMs))) throw new Error(`no reply to ${path} within ${timeoutMs} ms`);
    return readUnary(c.frames, 1);
  } finally {
    c.destroy();
  }
}

/** Decode the reply of stream `sid` from the frames a server sent (one HPACK decoder for the whole connection). */
export function readUnary(frames: RawFrame[], sid: number): RawUnaryResult {
  const decoder = new HpackDecoder();
  const r: RawUnaryResult = { status: undefined, grpcMessage: undefined, message: undefined, rst: undefined, goaway: undefined };
  const data: Buffer[] = [];
  let block: Buffer[] = [];
  let blockStream = 0;
  for (const f of frames) {
    if (f.type === T.GOAWAY) r.goaway = f.payload.readUInt32BE(4);
    if (f.type === T.HEADERS || f.type === T.CONTINUATION) {
      if (f.type === T.HEADERS) {
        block = [];
        blockStream = f.stream;
        let p = f.payload;
        if (f.flags & F.PADDED) p = p.subarray(1, p.length - p[0]!);
        if (f.flags & F.PRIORITY) p = p.subarray(5);
        block.push(p);
      } else block.push(f.payload);
      if (f.flags & F.END_HEADERS) {
        const b = Buffer.concat(block);
        const fields: [string, string][] = [];
        decoder.decode(b, 0, b.length, { header: (n, v) => void fields.push([n, v]) });
        if (blockStream !== sid) continue;
        for (const [n, v] of fields) {
          if (n === "grpc-status") r.status = Number(v);
          if (n === "grpc-message") r.grpcMessage = decodeURIComponent(v);
        }
      }
    }
    if (f.stream !== sid) continue;
    if (f.type === T.DATA) data.push(f.flags & F.PADDED ? f.payload.subarray(1, f.payload.length - f.payload[0]!) : f.payload);
    if (f.type === T.RST_STREAM) r.rst = f.payload.readUInt32BE(0);
  }
  const body = Buffer.concat(data);
  if (body.length >= 5) r.message = body.subarray(5, 5 + body.readUInt32BE(1));
  return r;
}
