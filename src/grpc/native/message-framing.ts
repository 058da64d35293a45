/**
 * gRPC's message framing (PROTOCOL-HTTP2.md Length-Prefixed-Message: a compressed-flag byte, a 32-bit big-endian
 * length, the message), both ways, for the native server's calls (calls.ts).
 */

export const EMPTY = Buffer.alloc(0);
/** Messages at least this large are written as prefix + body (two writes, no copy) instead of one framed copy. */
const COPY_LIMIT = 16 * 1024;

/** A framed message: one Buffer, or the 5-byte prefix and the message as they are. */
export type Framed = Buffer | [Buffer, Buffer];

/** Frame one serialized message (uncompressed). */
export function frameMessage(bytes: Buffer): Framed {
  const len = bytes.byteLength;
  if (len >= COPY_LIMIT) {
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(len, 1);
    // A serializer may hand back a Uint8Array view; the HTTP/2 layer takes Buffers.
    return [prefix, Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes)];
  }
  const out = Buffer.allocUnsafe(len + 5);
  out[0] = 0;
  out.writeUInt32BE(len, 1);
  out.set(bytes, 5);
  return out;
}

/**
 * Reads length-prefixed messages out of DATA payloads that split them anywhere: the 5-byte prefix, then the message,
 * copied once out of the HTTP/2 layer's buffer (which it reuses). A subclass (the call) gets each message, and a length
 * over `maxReceive` before any of it is buffered.
 */
export abstract class MessageDecoder {
  // The 5-byte prefix, then `need` more body bytes collected in `parts`.
  private prefix: Buffer | undefined;
  private prefixFill = 0;
  private flag = 0;
  private need = -1;
  private parts: Buffer[] | undefined;

  /** `maxReceive`: largest message length accepted, bytes; -1: no limit. */
  constructor(private readonly maxReceive: number) {}

  /** Nothing more is read (the call ended). */
  protected abstract get stopped(): boolean;
  /** A message declared `len` bytes, over `max` (the subclass ends the call, which stops the reading). */
  protected abstract tooLarge(len: number, max: number): void;
  /** One whole message: its flag byte and payload (its own Buffer). */
  protected abstract receive(flag: number, payload: Buffer): void;

  /** Read buf[start, end). */
  protected decode(buf: Buffer, start: number, end: number): void {
    const max = this.maxReceive;
    while (start < end && !this.stopped) {
      if (this.need < 0) {
        let len: number;
        if (this.prefixFill === 0 && end - start >= 5) {
          this.flag = buf[start]!;
          len = buf.readUInt32BE(start + 1);
          start += 5;
        } else {
          const p = (this.prefix ??= Buffer.allocUnsafe(5));
          const n = Math.min(5 - this.prefixFill, end - start);
          buf.copy(p, this.prefixFill, start, start + n);
          this.prefixFill += n;
          start += n;
          if (this.prefixFill < 5) return;
          this.prefixFill = 0;
          this.flag = p[0]!;
          len = p.readUInt32BE(1);
        }
        if (max !== -1 && len > max) {
          this.tooLarge(len, max);
          return;
        }
        if (end - start >= len) {
          // The whole message is in this chunk (the usual case): one copy, the chunk's buffer may be reused.
          let msg = EMPTY;
          if (len > 0) {
            msg = Buffer.allocUnsafe(len);
            buf.copy(msg, 0, start, start + len);
          }
          start += len;
          this.receive(this.flag, msg);
          continue;
        }
        this.need = len;
        this.parts = [];
      }
      const n = Math.min(this.need, end - start);
      const part = Buffer.allocUnsafe(n);
      buf.copy(part, 0, start, start + n);
      this.parts!.push(part);
      this.need -= n;
      start += n;
      if (this.need === 0) {
        const msg = this.parts!.length === 1 ? this.parts![0]! : Buffer.concat(this.parts!);
        this.parts = undefined;
        this.need = -1;
        this.receive(this.flag, msg);
      }
    }
  }
}
