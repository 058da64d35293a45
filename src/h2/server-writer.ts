import type net from "node:net";
import { CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, PING, frameHeader, writeGoaway, writePingAck, writeRst, writeWindowUpdate } from "./frames.js";
import { headerBlock } from "./server-encode.js";
import type { HeaderList } from "./types.js";

/** Output slab size: many small frames per allocation. */
const SLAB = 16 * 1024;
/**
 * DATA payloads up to this size are copied next to their frame header; larger ones go to the socket as they are, by
 * reference (the write() contract in types.ts: a buffer handed to write() is never changed afterwards).
 */
const COPY_MAX = 4096;
const EMPTY = Buffer.alloc(0);

/** Told after each batched flush (the session checks the socket's backlog there). */
export interface FlushOwner {
  flushed(): void;
}

function flushLater(w: FrameWriter): void {
  w.flushScheduled();
}

/**
 * The frames one server connection writes. Frames are written into a slab (no Buffer per frame) and leave in one
 * socket write per event-loop turn: the flush runs from setImmediate, after every request the poll phase read has been
 * answered, so respond() + write() + end() of a unary reply, and the replies of every call that arrived in the same
 * read, are one syscall. Slab segments handed to the socket are never written again (the slab only moves forward); a
 * large DATA payload goes to the socket as it is, after its frame header (one writev).
 */
export class FrameWriter {
  /** The client's SETTINGS_MAX_FRAME_SIZE: the largest frame payload this side sends. */
  maxFrame = 16_384;
  /** A dynamic table size update (to 0) must start our next header block (the client lowered HEADER_TABLE_SIZE). */
  tableUpdate = false;
  /** Bytes written and not yet handed to the socket. */
  pending = 0;
  /** Drop everything from now on (the connection is gone). */
  closed = false;
  private slab = EMPTY;
  private slabStart = 0;
  private slabPos = 0;
  private chunks: Buffer[] = [];
  private flushPending = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly owner: FlushOwner,
  ) {}

  /** The setImmediate flush. */
  flushScheduled(): void {
    this.flushPending = false;
    if (this.closed) {
      this.chunks = [];
      this.pending = 0;
      return;
    }
    this.flush();
    this.owner.flushed();
  }

  /** Hand everything written so far to the socket now. */
  flush(): void {
    this.cut();
    const c = this.chunks;
    if (c.length === 0) return;
    this.pending = 0;
    if (this.socket.destroyed || !this.socket.writable) {
      c.length = 0;
      return;
    }
    if (c.length === 1) this.socket.write(c[0]!);
    else {
      this.socket.cork();
      for (let i = 0; i < c.length; i++) this.socket.write(c[i]!);
      this.socket.uncork();
    }
    c.length = 0;
  }

  /** Room for `n` bytes at the returned position of `this.slab`; commit() then moves past what was written. */
  private reserve(n: number): number {
    if (this.slabPos + n > this.slab.length) {
      this.cut();
      this.slab = Buffer.allocUnsafe(Math.max(SLAB, n));
      this.slabStart = 0;
      this.slabPos = 0;
    }
    if (!this.flushPending) {
      this.flushPending = true;
      setImmediate(flushLater, this);
    }
    return this.slabPos;
  }

  private commit(end: number): void {
    this.pending += end - this.slabPos;
    this.slabPos = end;
  }

  private cut(): void {
    if (this.slabPos > this.slabStart) {
      this.chunks.push(this.slab.subarray(this.slabStart, this.slabPos));
      this.slabStart = this.slabPos;
    }
  }

  /** Prebuilt frames (the greeting, a SETTINGS ACK). */
  buffer(b: Buffer): void {
    const p = this.reserve(b.length);
    b.copy(this.slab, p);
    this.commit(p + b.length);
  }

  /** HEADERS (and CONTINUATION frames when the block exceeds the client's MAX_FRAME_SIZE). */
  headers(id: number, list: HeaderList, endStream: boolean): void {
    let block = headerBlock(list);
    if (this.tableUpdate) {
      this.tableUpdate = false;
      block = Buffer.concat([Buffer.from([0x20]), block]);
    }
    const len = block.length;
    const es = endStream ? END_STREAM : 0;
    if (len <= this.maxFrame) {
      const p = this.reserve(9 + len);
      const q = frameHeader(this.slab, p, len, HEADERS, END_HEADERS | es, id);
      block.copy(this.slab, q);
      this.commit(q + len);
      return;
    }
    for (let off = 0; off < len; ) {
      const n = Math.min(this.maxFrame, len - off);
      const last = off + n === len;
      const p = this.reserve(9 + n);
      const q = frameHeader(this.slab, p, n, off === 0 ? HEADERS : CONTINUATION, (off === 0 ? es : 0) | (last ? END_HEADERS : 0), id);
      block.copy(this.slab, q, off, off + n);
      this.commit(q + n);
      off += n;
    }
  }

  /** One DATA frame with buf[from, to) (at most maxFrame bytes; the caller splits). */
  data(id: number, buf: Buffer, from: number, to: number, flags: number): void {
    const n = to - from;
    if (n <= COPY_MAX) {
      const p = this.reserve(9 + n);
      const q = frameHeader(this.slab, p, n, DATA, flags, id);
      buf.copy(this.slab, q, from, to);
      this.commit(q + n);
      return;
    }
    const p = this.reserve(9);
    this.commit(frameHeader(this.slab, p, n, DATA, flags, id));
    this.cut();
    this.chunks.push(from === 0 && to === buf.length ? buf : buf.subarray(from, to));
    this.pending += n;
  }

  rst(id: number, code: number): void {
    const p = this.reserve(13);
    this.commit(writeRst(this.slab, p, id, code));
  }

  windowUpdate(id: number, inc: number): void {
    const p = this.reserve(13);
    this.commit(writeWindowUpdate(this.slab, p, id, inc));
  }

  /** PING ACK echoing the 8 bytes at buf[at]. */
  pingAck(buf: Buffer, at: number): void {
    const p = this.reserve(17);
    this.commit(writePingAck(this.slab, p, buf, at));
  }

  /** PING (not an ACK) with an 8-byte payload. */
  ping(payload: Buffer): void {
    const p = this.reserve(17);
    const q = frameHeader(this.slab, p, 8, PING, 0, 0);
    payload.copy(this.slab, q, 0, 8);
    this.commit(q + 8);
  }

  goaway(lastId: number, code: number, debug: string): void {
    const d = Buffer.from(debug.slice(0, 200), "utf8");
    const p = this.reserve(17 + d.length);
    this.commit(writeGoaway(this.slab, p, lastId, code, d));
  }
}
