import type { H2ServerSession, H2ServerStream, H2StreamHandler, HeaderList } from "./types.js";

/** What a stream holds once its headers were taken. */
const NO_HEADERS: HeaderList = Object.freeze([]) as unknown as HeaderList;

/** The handler of a stream until onStream returns one (and of streams refused before they got one). */
export const NO_HANDLER: H2StreamHandler = {
  data(): void {},
  end(): void {},
  close(): void {},
  drain(): void {},
};

/** What a stream asks of the session that owns it (the session writes every frame; the stream only holds state). */
export interface StreamOwner extends H2ServerSession {
  respond(s: ServerStream, headers: HeaderList, endStream: boolean): void;
  write(s: ServerStream, data: Buffer): boolean;
  end(s: ServerStream, trailers: HeaderList): void;
  resetStream(s: ServerStream, code: number, why: string): void;
  returnCredit(s: ServerStream): void;
}

/**
 * One client stream on the native HTTP/2 server. It holds the stream's state; the frame work is the session's (the
 * methods delegate there), so a stream is one plain object with no closures and no EventEmitter.
 */
export class ServerStream implements H2ServerStream {
  // The fields a DATA write reads come first, next to each other: a subscriber's stream is written once per event,
  // and with thousands of them each cache line of a stream it touches is a likely miss (declaration order is V8's
  // field order).
  readonly session: StreamOwner;
  readonly id: number;
  /** Off the connection: no more frames in or out; close() is queued or delivered. */
  done = false;
  /** Our END_STREAM is written, or queued behind buffered DATA. */
  outEnded = false;
  /** end() was called while DATA was buffered: the trailers to send after it. */
  trailers: HeaderList | null = null;
  /** Outbound DATA waiting for a window: chunks from `outHead`, the first one from `outOff`. */
  out: Buffer[] | null = null;
  /** What this side may still send (the client's stream window; negative after it shrank INITIAL_WINDOW_SIZE). */
  sendWindow: number;
  handler: H2StreamHandler = NO_HANDLER;
  /** What the client may still send. */
  recvWindow: number;
  /** Bytes received whose credit has not been returned (held while paused). */
  recvUnacked = 0;
  /** Connection credit of DATA delivered while paused: returned on resume or when the stream closes. */
  connectionHeld = 0;
  paused = false;
  outHead = 0;
  outOff = 0;
  bufferedBytes = 0;
  /** A write() returned false: `drain` is due when the buffer empties. */
  needDrain = false;
  /** In the session's list of streams waiting for a window. */
  blocked = false;
  headersSent = false;
  /** END_STREAM from the client seen (set before that frame's data is delivered). */
  inEnded = false;
  /** handler.end() delivered. */
  endDelivered = false;
  /**
   * The response ends without trailers (end() with an empty list, a plain HTTP reply such as the gRPC port's 415):
   * a request still being sent is then read to its end rather than reset with NO_ERROR.
   */
  readToEnd = false;
  /** The request's content-length (-1: none) and the DATA payload bytes received, checked against it (RFC 9113 8.1.1). */
  contentLength = -1;
  received = 0;
  closed = false;
  /** What close() will say. */
  closeCode = 0;
  closeWhy = "";
  private headerList: HeaderList;

  constructor(session: StreamOwner, id: number, headerList: HeaderList, sendWindow: number, recvWindow: number) {
    this.session = session;
    this.id = id;
    this.headerList = headerList;
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  get headers(): HeaderList {
    return this.headerList;
  }

  takeHeaders(): HeaderList {
    const list = this.headerList;
    this.headerList = NO_HEADERS;
    return list;
  }

  respond(headers: HeaderList, endStream: boolean): void {
    this.session.respond(this, headers, endStream);
  }

  write(data: Buffer): boolean {
    return this.session.write(this, data);
  }

  end(trailers: HeaderList): void {
    this.session.end(this, trailers);
  }

  reset(code: number): void {
    this.session.resetStream(this, code, "reset by this server");
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.session.returnCredit(this);
  }
}
