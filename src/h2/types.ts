/**
 * The contract between the gateway's native gRPC server's two layers:
 *
 * - h2-server.ts (the HTTP/2 layer): accepts cleartext HTTP/2 connections (h2c, prior knowledge, as gRPC clients
 *   connect) on `net.Server`, parses and writes frames directly (no node:http2), HPACK both ways, flow control both
 *   ways, SETTINGS, PING, GOAWAY, RST_STREAM, stream limits; it knows nothing of gRPC.
 * - server.ts (the gRPC layer): turns each H2ServerStream into a gRPC call (path, metadata, grpc-timeout, message
 *   framing, compression, status trailers) and runs the gateway's handlers on it with its own call types
 *   (src/grpc/native/call-types.ts).
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
   * copy what must outlive it. Flow-control credit for these bytes (the stream's and the connection's) is returned to
   * the client when the stream is not paused after this call, else on resume() or when the stream closes (see
   * H2ServerStream.pause), so a handler that cannot keep up pauses the stream, and what paused streams hold is bounded
   * by the connection window (16 MiB), not by streams x stream windows.
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
  /** The request's header list, decoded, in order (pseudo-headers `:method`, `:path`, ... included); empty once taken. */
  readonly headers: HeaderList;
  /**
   * Hand the header list over and forget it: a long-lived stream (an idle subscriber) need not hold its request's
   * headers, which are a few hundred bytes of small arrays per stream.
   */
  takeHeaders(): HeaderList;
  /**
   * Send the response HEADERS (`:status` first). With `endStream` the response is complete (a gRPC "trailers-only"
   * reply) and the stream closes once the frame is written. Once per stream.
   */
  respond(headers: HeaderList, endStream: boolean): void;
  /**
   * Send DATA (no END_STREAM). Frames respect the client's windows and MAX_FRAME_SIZE; what does not fit waits in the
   * stream's buffer. Returns false once `bufferedBytes` exceeds the stream's high-water mark (the caller should wait
   * for `drain`); the bytes are taken either way. The buffer is queued by reference, not copied (a payload over 4 KiB
   * goes to the socket as it is): the caller must never change it afterwards. The gRPC layer writes freshly serialized
   * messages and pub/sub its pre-framed event bytes, shared between subscribers and never changed, so neither copies;
   * a caller that reuses a buffer copies it first (copying every large reply would cost a memcpy per byte sent).
   * After end() or a reset it takes nothing and returns false.
   */
  write(data: Buffer): boolean;
  /** A write() returned false and `drain` has not come yet. */
  readonly needDrain: boolean;
  /**
   * Send the trailers (HEADERS with END_STREAM) after every byte already written. A unary reply is respond() +
   * write() + end() in one event-loop turn, and the HTTP/2 layer sends them in one socket write. An empty list sends
   * no trailers (END_STREAM on an empty DATA frame: a plain HTTP reply) and lets the client finish sending its request,
   * where a reply with trailers that ends first resets the request with NO_ERROR (RFC 9113 8.1).
   */
  end(trailers: HeaderList): void;
  /** Reset the stream (RST_STREAM with `code`); buffered outbound bytes are dropped. close() follows. */
  reset(code: number): void;
  /**
   * Stop returning flow-control credit to the client for this stream's DATA, stream and connection credit both
   * (inbound backpressure). A connection whose paused streams hold its whole window receives no DATA until one resumes.
   */
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
   * Graceful close in two phases (RFC 9113 6.8): GOAWAY NO_ERROR naming every stream, and a PING; on its ACK (or after
   * 1 s) the final GOAWAY NO_ERROR with the highest stream id seen (streams the client sent before it saw the first
   * one still run); the socket ends when the last stream has closed. Idempotent.
   */
  close(): void;
  /** Immediate close: GOAWAY (`code`, default NO_ERROR), every open stream gets close(), the socket is destroyed. */
  destroy(code?: number): void;
  /** Send a PING (not an ACK) with these 8 bytes of payload; its ACK is ignored unless it is one of the server's own. */
  ping(payload: Buffer): void;
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
   * How response header blocks are written: "static" (the default) indexes nothing, so a block depends only on its
   * header list and is cached process-wide; "indexed" writes them as grpc-go and nghttp2 do, each connection's fields
   * inserted into its dynamic table and Huffman-coded (src/h2/server-encode.ts `IndexingEncoder`).
   */
  headerEncoding?: "static" | "indexed";
  /**
   * Name SETTINGS_MAX_FRAME_SIZE in the first SETTINGS, as grpc-go's servers do (its value: the largest frame this
   * server reads, 16,384, which is also the setting's initial value). Default: not named.
   */
  announceMaxFrameSize?: boolean;
  /**
   * A new stream whose complete request HEADERS arrived: return its handler. The stream may be answered from inside
   * this call (respond(), write(), end(), reset()); the handler's callbacks start after it returns.
   */
  onStream(stream: H2ServerStream): H2StreamHandler;
  /** A new connection (after the client preface). */
  onSession?(session: H2ServerSession): void;
  /**
   * A connection ended; `why` in words, for logs: which defence closed it ("idle for 300000 ms (idle timeout)", "max
   * connection age", "keepalive PING not acknowledged ...", "SETTINGS not acknowledged ..."), or the client's GOAWAY
   * and its error code, or a protocol error.
   */
  onSessionClose?(session: H2ServerSession, why: string): void;
  // Connection lifecycle (src/h2/server-lifecycle.ts; defaults there and in docs/operations.md). Times in ms.
  /** A connection with no open stream this long is closed gracefully; 0: never. Default 300000 (5 min). */
  idleTimeoutMs?: number;
  /** After this long without a byte from the client, a PING; 0: never. Default 7200000 (2 h, grpc-go's). */
  keepaliveTimeMs?: number;
  /** A keepalive PING unanswered (and nothing else read) this long ends the connection. Default 20000. */
  keepaliveTimeoutMs?: number;
  /** A connection is closed gracefully at this age (±10%); 0: never (the default). */
  maxConnectionAgeMs?: number;
  /** Streams still open this long after the age's GOAWAY are reset (RST_STREAM CANCEL). Default 30000. */
  maxConnectionAgeGraceMs?: number;
  /** Our SETTINGS not acknowledged this long after the connection opened: GOAWAY SETTINGS_TIMEOUT. Default 10000. */
  settingsAckTimeoutMs?: number;
  /** A header block continued in CONTINUATION frames not ended this long after its HEADERS: GOAWAY PROTOCOL_ERROR. Default 10000. */
  headerBlockTimeoutMs?: number;
  /**
   * Open connections accepted at once; a connection beyond them is closed as soon as it is accepted, before a byte is
   * read or written. Default 10000.
   */
  maxConnections?: number;
  /**
   * Connections the kernel queues on the listening socket before they are accepted (listen(2)'s backlog; the kernel
   * caps it at net.core.somaxconn). Default 4096: a burst of new connections (clients moving over from a replica that
   * failed) queues instead of losing SYNs, each of which costs its client a one-second retransmit.
   */
  acceptBacklog?: number;
  /** A connection was refused for maxConnections (the caller counts it). */
  onConnectionRefused?(): void;
  /**
   * A connection's client used half of its reset budget ("rotated": the connection is being closed gracefully) or all
   * of it ("spent": GOAWAY ENHANCE_YOUR_CALM); src/h2/server-session.ts, RESET_BUDGET. For metrics and logs.
   */
  onResetBudget?(session: H2ServerSession, what: "rotated" | "spent"): void;
  /**
   * This side ended a connection with a connection error (GOAWAY with `code`, not NO_ERROR: a flood, a protocol
   * violation, a timeout), except the reset budget's, which onResetBudget reports. `why` is this layer's own text,
   * never the client's bytes. For metrics and logs.
   */
  onConnectionError?(session: H2ServerSession, code: number, why: string): void;
  /**
   * Serve HTTP/2 over TLS with these Node TLS server options (cert, key, ca, requestCert, minVersion, ...) instead of
   * cleartext; ALPN is always "h2" only. Default: cleartext (h2c with prior knowledge).
   */
  tls?: import("node:tls").TlsOptions;
}

/** A listening HTTP/2 server (h2-server.ts `createH2Server(options)`). */
export interface H2Server {
  /** Listen on host:port (0: ephemeral); resolves the bound port, rejects with the listen error. */
  listen(port: number, host: string): Promise<number>;
  /**
   * Serve new connections with this certificate (TLS servers only; throws otherwise): open connections keep the one
   * they were made with. Absent on transports without TLS.
   */
  setSecureContext?(context: import("node:tls").SecureContextOptions): void;
  /** Stop accepting connections; open sessions are left as they are (close or destroy them through `sessions`). */
  stopListening(): void;
  /**
   * Accept connections on 127.0.0.1 at an ephemeral port as well, served like the others (cleartext only): the gateway's
   * own warm-up calls before it listens (src/main/own-warmup.ts). Resolves the port and a function that stops that
   * listener (its sessions are left open, as stopListening leaves them).
   */
  listenLoopback?(): Promise<{ port: number; stop(): void }>;
  /** The open sessions. */
  readonly sessions: ReadonlySet<H2ServerSession>;
}
