/**
 * A raw HTTP/2 client for tests of the native HTTP/2 server (src/h2/): it writes frames byte for byte (so a test can
 * send what no real client would), parses the server's frames as they arrive and notices the close. Every wait is
 * bounded (waitFor's timeout).
 */
import net from "node:net";
import { literalField } from "../../src/h2/hpack.js";
import { waitFor } from "./gateway.js";
import { rawFrame } from "./h2-fake-server.js";

export const H = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const END_STREAM = 1;
export const ACK = 1;
export const END_HEADERS = 4;
export const PADDED = 8;
export const PRIORITY_FLAG = 0x20;
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export const frame = rawFrame;

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** A SETTINGS payload from [id, value] pairs. */
export function settings(...pairs: [number, number][]): Buffer {
  const b = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([id, v], i) => {
    b.writeUInt16BE(id, 6 * i);
    b.writeUInt32BE(v, 6 * i + 2);
  });
  return b;
}

/** A header block of literal fields without indexing (the HPACK table is left alone). */
export function block(fields: [string, string][]): Buffer {
  const out = Buffer.alloc(64 + fields.reduce((n, [k, v]) => n + 2 * (k.length + v.length) + 16, 0));
  let p = 0;
  for (const [n, v] of fields) p = literalField(out, p, 0, n, v);
  return out.subarray(0, p);
}

/** A plain request's pseudo-headers. */
export const REQ: [string, string][] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", "/echo"],
  [":authority", "x"],
];

export interface RawFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
  /** performance.now() when the bytes that completed the frame were read. */
  at: number;
}

/** A raw client socket: sends bytes, parses the server's frames, notices the close. */
export class Raw {
  readonly frames: RawFrame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  readonly socket: net.Socket;
  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.setNoDelay(true);
    this.socket.on("data", (c: Buffer) => {
      const at = performance.now();
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        this.frames.push({ type: this.buf[3]!, flags: this.buf[4]!, stream: this.buf.readUInt32BE(5) & 0x7fffffff, payload: this.buf.subarray(9, 9 + len), at });
        this.buf = this.buf.subarray(9 + len);
      }
    });
    this.socket.on("error", () => undefined);
    this.socket.on("close", () => (this.closed = true));
  }
  send(...bufs: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(bufs));
  }
  /** Preface and a SETTINGS frame (empty unless given). */
  open(settingsPayload: Buffer = Buffer.alloc(0)): this {
    this.send(PREFACE, frame(H.SETTINGS, 0, 0, settingsPayload));
    return this;
  }
  of(type: number): RawFrame[] {
    return this.frames.filter((f) => f.type === type);
  }
  /** [stream, code] of every RST_STREAM received. */
  resets(): [number, number][] {
    return this.of(H.RST_STREAM).map((f) => [f.stream, f.payload.readUInt32BE(0)]);
  }
  /** Waits for a RST_STREAM on `stream`; its code. */
  async reset(stream: number): Promise<number> {
    await waitFor(() => this.resets().some(([s]) => s === stream), `a RST_STREAM on stream ${stream}`);
    return this.resets().find(([s]) => s === stream)![1];
  }
  /** Waits for the answer to a PING sent now: every frame the server sent before it has arrived. */
  async sync(): Promise<void> {
    const data = Buffer.from(String(Math.random()).slice(2, 10).padEnd(8, "0"));
    this.send(frame(H.PING, 0, 0, data));
    await waitFor(() => this.closed || this.of(H.PING).some((p) => (p.flags & ACK) !== 0 && p.payload.equals(data)), "the PING ACK");
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
