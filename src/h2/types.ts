/**
 * The contract between the gateway's native gRPC server's two layers:
 *
 * - h2-server.ts (the HTTP/2 layer): accepts cleartext HTTP/2 connections (h2c, prior knowledge, as gRPC clients
 *   connect) on `net.Server`, parses and writes frames directly (no node:http2), HPACK both ways, flow control both
 *   ways, SETTINGS, PING, GOAWAY, RST_STREAM, stream limits; it knows nothing of gRPC.
 * - server.ts (the gRPC layer): turns each H2ServerStream into a gRPC call (path, metadata, grpc-timeout, message
 *   framing, compression, status trailers) and runs the gateway's handlers on it with its own call types
 *   (src/main/grpc/native/call-types.ts).
 *
 * Every callback below is invoked from a socket event (never synchronously from a method the gRPC layer called,
 * unless stated), and a callback that throws is caught by the HTTP/2 layer, which then resets that stream
 * (RST_STREAM INTERNAL_ERROR): a bug in one call never takes the connection or the process down.
 */

/** A header field list in wire order: [name, value] pairs, names lower-case, pseudo-headers first. */
export type HeaderList = Array<[string, string]>;

/** What the HTTP/2 layer calls on the gRPC layer for one stream. Set by `H2ServerOptions.onStream` before it returns. */
export interface H2StreamHandler {
  /**
   * A DATA payload buf[start, end) (padding already removed). The buffer may be reused after the call returns:
   * copy what must outlive it. Flow-control credit for these bytes is returned to the client when the stream is not
   * paused (see H2ServerStream.pause), so a handler that cannot keep up pauses the stream.
   */
  data(buf: Buffer, start: number, end: number): void;
  /** The client ended its side (END_STREAM on HEADERS or DATA). Trailers from a client are ignored (gRPC has none). */
  end(): void;
  /**
   * The stream is closed and gone: `code` is the RST_STREAM code the client sent (e.g. 0x8 CANCEL), or the code of a
   * reset this side sent, or 0 (NO_ERROR) when both sides ended it normally; `why` says what happened in words for
   * logs ("client reset", "connection lost", ...). Called exactly once per stream, last. The code alone does not say
   * which side reset: the gRPC layer tracks its own reset() calls (a reset the HTTP/2 layer sends itself, e.g. for a
   * stream's flow-control error, looks like the client's).
   */
  close(code: number, why: string): void;
  /** The stream's outbound buffer fell to zero after a write() returned false. */
  drain(): void;
}

/** One client-initiated stream as the gRPC layer sees it. */
export interface H2ServerStream {
  /** The HTTP/2 stream id (odd). */
  readonly id: number;
  readonly session: H2ServerSession;
  /** The request's header list, decoded, in order (pseudo-headers `:method`, `:path`, ... included). */
  readonly headers: HeaderList;
  /**
   * Send the response HEADERS (`:status` first). With `endStream` the response is complete (a gRPC "trailers-only"
   * reply) and the stream closes once the frame is written. Once per stream.
   */
  respond(headers: HeaderList, endStream: boolean): void;
  /**
   * Send DATA (no END_STREAM). Frames respect the client's windows and MAX_FRAME_SIZE; what does not fit waits in the
   * stream's buffer. Returns false once `bufferedBytes` exceeds the stream's high-water mark (the caller should wait
   * for `drain`); the bytes are taken either way. The buffer must not be changed by the caller afterwards.
   */
  write(data: Buffer): boolean;
  /**
   * Send the trailers (HEADERS with END_STREAM) after every byte already written. A unary reply is respond() +
   * write() + end() in one event-loop turn, and the HTTP/2 layer sends them in one socket write.
   */
  end(trailers: HeaderList): void;
  /** Reset the stream (RST_STREAM with `code`); buffered outbound bytes are dropped. close() follows. */
  reset(code: number): void;
  /** Stop returning flow-control credit to the client for this stream (inbound backpressure). */
  pause(): void;
  /** Return the credit held back while paused and continue. */
  resume(): void;
  /** Outbound bytes taken by write() and not yet handed to the socket. */
  readonly bufferedBytes: number;
  /** respond() was called. */
  readonly headersSent: boolean;
  /** close() has been delivered (the stream is gone). */
  readonly closed: boolean;
}

/** One client connection. */
export interface H2ServerSession {
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** Streams open on this connection right now. */
  readonly openStreams: number;
  /**
   * Graceful close: GOAWAY NO_ERROR with the highest stream id seen so far (streams already on the wire finish),
   * then the socket ends when the last stream has closed. Idempotent.
   */
  close(): void;
  /** Immediate close: GOAWAY (`code`, default NO_ERROR), every open stream gets close(), the socket is destroyed. */
  destroy(code?: number): void;
}

/** Settings and hooks of an H2Server. */
export interface H2ServerOptions {
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised; a HEADERS beyond it is refused (RST_STREAM REFUSED_STREAM). */
  maxConcurrentStreams: number;
  /** The largest decoded request header list accepted (RFC 7541 sizes); larger ones are refused per stream. */
  maxHeaderListSize: number;
  /** Outbound bytes a stream may buffer before write() returns false. */
  streamHighWaterMark: number;
  /**
   * A new stream whose complete request HEADERS arrived: return its handler. The stream may be answered from inside
   * this call (respond(), write(), end(), reset()); the handler's callbacks start after it returns.
   */
  onStream(stream: H2ServerStream): H2StreamHandler;
  /** A new connection (after the client preface). */
  onSession?(session: H2ServerSession): void;
  /** A connection ended; `why` in words, for logs. */
  onSessionClose?(session: H2ServerSession, why: string): void;
}

/** A listening HTTP/2 server (h2-server.ts `createH2Server(options)`). */
export interface H2Server {
  /** Listen on host:port (0: ephemeral); resolves the bound port, rejects with the listen error. */
  listen(port: number, host: string): Promise<number>;
  /** Stop accepting connections; open sessions are left as they are (close or destroy them through `sessions`). */
  stopListening(): void;
  /** The open sessions. */
  readonly sessions: ReadonlySet<H2ServerSession>;
}
