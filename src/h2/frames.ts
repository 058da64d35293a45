/**
 * What both raw-frame HTTP/2 endpoints share (RFC 9113): the client in client-connection.ts and the native gRPC server's
 * session in src/h2/server-session.ts. Frame constants and builders, and FrameReader, the reading
 * half both extend: socket chunks reassembled into whole frames, padding, header blocks continued in CONTINUATION
 * frames, the connection's receive window, and the checks of the frame layout that do not depend on the side. What
 * depends on the side (which frames a peer may send, what a frame does to a stream) stays in each subclass.
 */

// Frame types (RFC 9113 6).
export const DATA = 0x0;
export const HEADERS = 0x1;
export const PRIORITY = 0x2;
export const RST_STREAM = 0x3;
export const SETTINGS = 0x4;
export const PUSH_PROMISE = 0x5;
export const PING = 0x6;
export const GOAWAY = 0x7;
export const WINDOW_UPDATE = 0x8;
export const CONTINUATION = 0x9;
// Flags.
export const END_STREAM = 0x1;
export const ACK = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
export const PRIORITY_FLAG = 0x20;

/** HTTP/2 error codes (RFC 9113 7). */
export const H2Error = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

const H2_ERROR_NAMES = new Map<number, string>(Object.entries(H2Error).map(([name, code]) => [code, name]));

/** An HTTP/2 error code's name (RFC 9113 7), or its hex value when it is not one of them. */
export function h2ErrorName(code: number): string {
  return H2_ERROR_NAMES.get(code) ?? `0x${code.toString(16)}`;
}

/** The client connection preface (RFC 9113 3.4). */
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** The largest frame payload either side accepts: the protocol default, so it is never advertised. */
export const MAX_FRAME_IN = 16_384;
/** Receive window of each stream (SETTINGS_INITIAL_WINDOW_SIZE) and of the connection, on both sides. */
export const STREAM_WINDOW = 4 << 20;
export const CONNECTION_WINDOW = 16 << 20;
/** The largest flow-control window (RFC 9113 6.9.1). */
export const MAX_WINDOW = 0x7fffffff;
export const SETTINGS_ACK = Buffer.from([0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]);

/** Write a 9-byte frame header at `pos`; returns where the payload starts. */
export function frameHeader(b: Buffer, pos: number, length: number, type: number, flags: number, stream: number): number {
  b[pos] = length >>> 16;
  b[pos + 1] = (length >>> 8) & 0xff;
  b[pos + 2] = length & 0xff;
  b[pos + 3] = type;
  b[pos + 4] = flags;
  b.writeUInt32BE(stream, pos + 5);
  return pos + 9;
}

/** RST_STREAM (13 bytes) at `pos`; returns its end. */
export function writeRst(b: Buffer, pos: number, id: number, code: number): number {
  const q = frameHeader(b, pos, 4, RST_STREAM, 0, id);
  b.writeUInt32BE(code, q);
  return q + 4;
}

/** WINDOW_UPDATE (13 bytes) at `pos`; returns its end. */
export function writeWindowUpdate(b: Buffer, pos: number, id: number, inc: number): number {
  const q = frameHeader(b, pos, 4, WINDOW_UPDATE, 0, id);
  b.writeUInt32BE(inc, q);
  return q + 4;
}

/** PING ACK (17 bytes) at `pos`, echoing the 8 bytes at src[at]; returns its end. */
export function writePingAck(b: Buffer, pos: number, src: Buffer, at: number): number {
  const q = frameHeader(b, pos, 8, PING, ACK, 0);
  src.copy(b, q, at, at + 8);
  return q + 8;
}

/** GOAWAY (17 bytes + debug) at `pos`; returns its end. */
export function writeGoaway(b: Buffer, pos: number, lastId: number, code: number, debug: Buffer): number {
  const q = frameHeader(b, pos, 8 + debug.length, GOAWAY, 0, 0);
  b.writeUInt32BE(lastId, q);
  b.writeUInt32BE(code, q + 4);
  debug.copy(b, q + 8);
  return q + 8 + debug.length;
}

/**
 * The reading half of one HTTP/2 connection. The subclass feeds socket chunks to readFrames() and gets whole frames
 * back through frame() (a method call, no closure or allocation per frame: a frame wholly inside a chunk is handed
 * over in place, one split across chunks is assembled in one buffer of its size). frame() checks what both sides check
 * the same way and dispatches by type to the subclass's handlers, which use the helpers here; WINDOW_UPDATE and
 * CONTINUATION are handled here up to what is the subclass's own (onStreamWindow, headerBlock).
 */
export abstract class FrameReader {
  /** The socket is gone (or going, after a connection error): nothing more is read. */
  destroyed = false;
  /** The peer's SETTINGS_INITIAL_WINDOW_SIZE. */
  protected peerInitialWindow = 65_535;
  /** The connection's send window. */
  protected sendWindow = 65_535;
  // The connection's receive window.
  protected recvWindow = CONNECTION_WINDOW;
  protected recvUnacked = 0;
  // Frame assembly across socket chunks: a partial header, then a whole frame in `part`.
  private readonly head = Buffer.allocUnsafe(9);
  private headHave = 0;
  private part: Buffer | null = null;
  private partHave = 0;
  /** The stream whose header block continues in CONTINUATION frames; 0 when none does. */
  protected contStream = 0;
  private contEndStream = false;
  private contParts: Buffer[] = [];
  private contSize = 0;
  private contFrames = 0;

  /**
   * `blockLimit`: the largest header block (HEADERS + CONTINUATION) accepted, a larger one is a connection error with
   * `blockLimitCode`; `maxContinuations`: CONTINUATION frames allowed in one block.
   */
  constructor(
    private readonly blockLimit: number,
    private readonly blockLimitCode: number,
    private readonly maxContinuations: number,
  ) {}

  // The frame handlers frame() dispatches to; p is where the payload starts, sid the stream id.
  protected abstract onDataFrame(buf: Buffer, p: number, size: number, flags: number, sid: number): void;
  protected abstract onHeaders(buf: Buffer, p: number, size: number, flags: number, sid: number): void;
  /** A PRIORITY frame on a stream (advisory); its payload at buf[p] (when `size` is 5: the dependency, then the weight). */
  protected abstract onPriority(size: number, buf: Buffer, p: number, sid: number): void;
  protected abstract onReset(buf: Buffer, p: number, size: number, sid: number): void;
  protected abstract onSettings(buf: Buffer, p: number, size: number, flags: number, sid: number): void;
  /** PUSH_PROMISE: neither side accepts one (the client disables push, a server never receives one). */
  protected abstract onPushPromise(): void;
  protected abstract onPing(buf: Buffer, p: number, size: number, flags: number, sid: number): void;
  protected abstract onGoaway(buf: Buffer, p: number, size: number, sid: number): void;
  /** A WINDOW_UPDATE of stream `sid` (well-formed, any increment); true when its window grew (then flushBlocked()). */
  protected abstract onStreamWindow(sid: number, inc: number): boolean;
  /** A send window opened: send what waits for it. */
  protected abstract flushBlocked(): void;
  /** A frame of a type RFC 9113 does not define: ignored (RFC 9113 4.1), metered or not as the side decides. */
  protected abstract onUnknown(): void;
  /** A connection error (RFC 9113 5.4.1). */
  protected abstract fail(code: number, message: string): void;
  /** A whole header block of stream `sid` at buf[start, end). */
  protected abstract headerBlock(sid: number, buf: Buffer, start: number, end: number, endStream: boolean): void;
  /** Send a WINDOW_UPDATE. */
  protected abstract sendWindowUpdate(id: number, inc: number): void;

  /** Hand the whole frames of chunk[off..] to frame(), keeping a partial one for the next chunk. */
  protected readFrames(chunk: Buffer, off: number): void {
    const len = chunk.length;
    if (this.headHave > 0 || this.part !== null) {
      if (this.part === null) {
        const t = Math.min(9 - this.headHave, len - off);
        chunk.copy(this.head, this.headHave, off, off + t);
        this.headHave += t;
        off += t;
        if (this.headHave < 9) return;
        const size = (this.head[0]! << 16) | (this.head[1]! << 8) | this.head[2]!;
        if (size > MAX_FRAME_IN) return this.fail(H2Error.FRAME_SIZE_ERROR, `frame of ${size} bytes exceeds ${MAX_FRAME_IN}`);
        this.part = Buffer.allocUnsafe(9 + size);
        this.head.copy(this.part, 0);
        this.partHave = 9;
      }
      const part = this.part;
      const t = Math.min(part.length - this.partHave, len - off);
      chunk.copy(part, this.partHave, off, off + t);
      this.partHave += t;
      off += t;
      if (this.partHave < part.length) return;
      this.part = null;
      this.headHave = 0;
      this.frame(part, 0, part.length - 9);
      if (this.destroyed) return;
    }
    while (off < len) {
      if (len - off < 9) {
        chunk.copy(this.head, 0, off, len);
        this.headHave = len - off;
        return;
      }
      const size = (chunk[off]! << 16) | (chunk[off + 1]! << 8) | chunk[off + 2]!;
      if (size > MAX_FRAME_IN) return this.fail(H2Error.FRAME_SIZE_ERROR, `frame of ${size} bytes exceeds ${MAX_FRAME_IN}`);
      if (len - off < 9 + size) {
        this.part = Buffer.allocUnsafe(9 + size);
        chunk.copy(this.part, 0, off, len);
        this.partHave = len - off;
        return;
      }
      this.frame(chunk, off, size);
      if (this.destroyed) return;
      off += 9 + size;
    }
  }

  /** One whole frame: header at buf[at], payload of `size` bytes after it; to its handler. */
  protected frame(buf: Buffer, at: number, size: number): void {
    const type = buf[at + 3]!;
    const flags = buf[at + 4]!;
    const sid = buf.readUInt32BE(at + 5) & 0x7fffffff;
    const p = at + 9;
    if (this.contStream !== 0 && type !== CONTINUATION) return this.fail(H2Error.PROTOCOL_ERROR, "a header block was interrupted by another frame");
    switch (type) {
      case DATA:
        return this.onDataFrame(buf, p, size, flags, sid);
      case HEADERS:
        return this.onHeaders(buf, p, size, flags, sid);
      case PRIORITY:
        if (sid === 0) return this.fail(H2Error.PROTOCOL_ERROR, "PRIORITY on stream 0");
        return this.onPriority(size, buf, p, sid);
      case RST_STREAM:
        return this.onReset(buf, p, size, sid);
      case SETTINGS:
        return this.onSettings(buf, p, size, flags, sid);
      case PUSH_PROMISE:
        return this.onPushPromise();
      case PING:
        return this.onPing(buf, p, size, flags, sid);
      case GOAWAY:
        return this.onGoaway(buf, p, size, sid);
      case WINDOW_UPDATE:
        return this.onWindowUpdate(buf, p, size, sid);
      case CONTINUATION:
        return this.continuationFrame(buf, p, size, flags, sid);
      default:
        return this.onUnknown();
    }
  }

  /** The padding length of a PADDED frame (0 when not padded), or -1 after a connection error. */
  protected unpad(buf: Buffer, p: number, size: number, flags: number): number {
    if ((flags & PADDED) === 0) return 0;
    if (size < 1 || buf[p]! >= size) {
      this.fail(H2Error.PROTOCOL_ERROR, "padding exceeds the frame");
      return -1;
    }
    return buf[p]!;
  }

  /**
   * A DATA frame of `size` bytes against the connection's receive window (padding included, RFC 9113 6.9.1); the
   * credit goes back as frames arrive (the stream windows bound what each stream holds). False after a connection error.
   */
  protected connectionData(size: number): boolean {
    this.recvWindow -= size;
    if (this.recvWindow < 0) {
      this.fail(H2Error.FLOW_CONTROL_ERROR, "DATA beyond the connection window");
      return false;
    }
    this.recvUnacked += size;
    if (this.recvUnacked >= CONNECTION_WINDOW / 2) {
      this.sendWindowUpdate(0, this.recvUnacked);
      this.recvWindow += this.recvUnacked;
      this.recvUnacked = 0;
    }
    return true;
  }

  /**
   * Let go of a partly read frame and a header block still being continued: the connection is done, and what they
   * hold (views of the socket's read buffers, up to the block limit) need not live as long as the socket lingers.
   */
  protected dropPartial(): void {
    this.part = null;
    this.headHave = 0;
    this.contStream = 0;
    this.contParts = [];
    this.contSize = 0;
  }

  /** A HEADERS frame whose stream id the subclass accepted: its block to headerBlock(), or the start of a continued one. */
  protected headersFrame(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    const pad = this.unpad(buf, p, size, flags);
    if (pad < 0) return;
    let start = (flags & PADDED) !== 0 ? p + 1 : p;
    if ((flags & PRIORITY_FLAG) !== 0) start += 5;
    const end = p + size - pad;
    if (start > end) return this.fail(H2Error.PROTOCOL_ERROR, "HEADERS too short for its flags");
    const endStream = (flags & END_STREAM) !== 0;
    if ((flags & END_HEADERS) !== 0) return this.headerBlock(sid, buf, start, end, endStream);
    if (end - start > this.blockLimit) return this.fail(this.blockLimitCode, `header block larger than ${this.blockLimit} bytes`);
    this.contStream = sid;
    this.contEndStream = endStream;
    this.contParts = [buf.subarray(start, end)];
    this.contSize = end - start;
    this.contFrames = 0;
  }

  private continuationFrame(buf: Buffer, p: number, size: number, flags: number, sid: number): void {
    if (this.contStream === 0 || sid !== this.contStream) return this.fail(H2Error.PROTOCOL_ERROR, "CONTINUATION without a header block to continue");
    this.contSize += size;
    if (this.contSize > this.blockLimit) return this.fail(this.blockLimitCode, `header block larger than ${this.blockLimit} bytes`);
    if (++this.contFrames > this.maxContinuations) return this.fail(H2Error.ENHANCE_YOUR_CALM, `more than ${this.maxContinuations} CONTINUATION frames`);
    this.contParts.push(buf.subarray(p, p + size));
    if ((flags & END_HEADERS) === 0) return;
    const block = Buffer.concat(this.contParts, this.contSize);
    this.contStream = 0;
    this.contParts = [];
    this.headerBlock(sid, block, 0, block.length, this.contEndStream);
  }

  /** SETTINGS frame layout: true when it carries settings to apply (not an ACK), false when done or failed. */
  protected settingsToApply(size: number, flags: number, sid: number): boolean {
    if (sid !== 0) {
      this.fail(H2Error.PROTOCOL_ERROR, "SETTINGS on a stream");
      return false;
    }
    if ((flags & ACK) !== 0) {
      if (size !== 0) this.fail(H2Error.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      return false;
    }
    if (size % 6 !== 0) {
      this.fail(H2Error.FRAME_SIZE_ERROR, "SETTINGS payload is not a multiple of 6");
      return false;
    }
    return true;
  }

  /**
   * SETTINGS_INITIAL_WINDOW_SIZE `v`: the open streams' send windows move by its change (RFC 9113 6.9.2). False after
   * a connection error. Called only when a SETTINGS frame carries it, so the iterator costs nothing per call.
   */
  protected initialWindow(v: number, streams: Iterable<{ sendWindow: number }>): boolean {
    if (v > MAX_WINDOW) {
      this.fail(H2Error.FLOW_CONTROL_ERROR, `INITIAL_WINDOW_SIZE ${v} too large`);
      return false;
    }
    const delta = v - this.peerInitialWindow;
    this.peerInitialWindow = v;
    for (const s of streams) {
      s.sendWindow += delta;
      if (s.sendWindow > MAX_WINDOW) {
        this.fail(H2Error.FLOW_CONTROL_ERROR, "a stream window overflowed");
        return false;
      }
    }
    return true;
  }

  /** SETTINGS_MAX_FRAME_SIZE `v` in its range; false after a connection error. */
  protected frameSizeOk(v: number): boolean {
    if (v < 16_384 || v > 16_777_215) {
      this.fail(H2Error.PROTOCOL_ERROR, `MAX_FRAME_SIZE ${v} out of range`);
      return false;
    }
    return true;
  }

  /** PING frame layout; false after a connection error. */
  protected pingOk(size: number, sid: number): boolean {
    if (size !== 8) this.fail(H2Error.FRAME_SIZE_ERROR, "PING payload is not 8 bytes");
    else if (sid !== 0) this.fail(H2Error.PROTOCOL_ERROR, "PING on a stream");
    else return true;
    return false;
  }

  /** GOAWAY frame layout; false after a connection error. */
  protected goawayOk(size: number, sid: number): boolean {
    if (sid !== 0) this.fail(H2Error.PROTOCOL_ERROR, "GOAWAY on a stream");
    else if (size < 8) this.fail(H2Error.FRAME_SIZE_ERROR, "GOAWAY payload shorter than 8 bytes");
    else return true;
    return false;
  }

  /** RST_STREAM frame layout; false after a connection error. */
  protected resetOk(size: number, sid: number): boolean {
    if (size !== 4) this.fail(H2Error.FRAME_SIZE_ERROR, "RST_STREAM payload is not 4 bytes");
    else if (sid === 0) this.fail(H2Error.PROTOCOL_ERROR, "RST_STREAM on stream 0");
    else return true;
    return false;
  }

  private onWindowUpdate(buf: Buffer, p: number, size: number, sid: number): void {
    if (size !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, "WINDOW_UPDATE payload is not 4 bytes");
    const inc = buf.readUInt32BE(p) & 0x7fffffff;
    if (sid === 0) {
      if (inc === 0) return this.fail(H2Error.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      this.sendWindow += inc;
      if (this.sendWindow > MAX_WINDOW) return this.fail(H2Error.FLOW_CONTROL_ERROR, "the connection window overflowed");
    } else if (!this.onStreamWindow(sid, inc)) return;
    this.flushBlocked();
  }
}
