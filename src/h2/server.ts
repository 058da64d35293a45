import net from "node:net";
import tls from "node:tls";
import { HEADER_BLOCK_LIMIT } from "./client-connection.js";
import { ServerSession, serverGreeting, type SessionShared } from "./server-session.js";
import { lifecycleSettings, MAX_CONNECTIONS } from "./server-lifecycle.js";
import type { H2Server, H2ServerOptions, H2ServerSession } from "./types.js";
import { DEFAULT_ACCEPT_BACKLOG } from "../shared/accept-backlog.js";

/**
 * The HTTP/2 layer of the native gRPC server: cleartext HTTP/2 with prior knowledge on a `net.Server`, or HTTP/2 over
 * TLS on a `tls.Server` (ALPN "h2" only, options.tls), frames parsed and written directly (src/h2/server-session.ts), HPACK through src/h2/hpack.ts. The contract with the gRPC layer
 * is src/h2/types.ts.
 */

function checkCount(name: string, v: unknown, max: number): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > max) {
    throw new RangeError(`H2ServerOptions.${name} must be an integer from 1 to ${max}, got ${String(v).slice(0, 40)}`);
  }
}

/** A TLS handshake that has not completed in this long is dropped (Node's default is 120 s), ms. */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * HTTP/2 over TLS (RFC 9113 3.2): ALPN offers only "h2", so a client offering other protocols fails the handshake
 * (no_application_protocol); one that offers none completes it and is closed before any frame, since gRPC over TLS
 * without ALPN h2 is not HTTP/2. The session gets the TLSSocket: it only uses net.Socket members TLSSocket has.
 */
function tlsServer(options: tls.TlsOptions, accept: (socket: net.Socket) => void): tls.Server {
  const server = tls.createServer({ ...options, ALPNProtocols: ["h2"], handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS, noDelay: true }, (socket) => {
    if (socket.alpnProtocol !== "h2") return void socket.destroy();
    accept(socket);
  });
  // A failed handshake (wrong version, no client certificate, no common ALPN) only closes that socket.
  server.on("tlsClientError", () => undefined);
  return server;
}

/** Create a native HTTP/2 server; `listen` starts it. Throws a RangeError naming the field for a bad option. */
export function createH2Server(options: H2ServerOptions): H2Server {
  checkCount("maxConcurrentStreams", options.maxConcurrentStreams, 0x7fffffff);
  checkCount("maxHeaderListSize", options.maxHeaderListSize, 0x7fffffff);
  checkCount("streamHighWaterMark", options.streamHighWaterMark, Number.MAX_SAFE_INTEGER);
  const maxConnections = options.maxConnections ?? MAX_CONNECTIONS;
  checkCount("maxConnections", maxConnections, 0x7fffffff);
  const backlog = options.acceptBacklog ?? DEFAULT_ACCEPT_BACKLOG;
  checkCount("acceptBacklog", backlog, 0x7fffffff);
  const life = lifecycleSettings(options);
  if (typeof options.onStream !== "function") throw new TypeError("H2ServerOptions.onStream must be a function");
  const sessions = new Set<ServerSession>();
  const shared: SessionShared = {
    options,
    greeting: serverGreeting(options),
    // A compressed block is rarely larger than its decoded list; twice the list limit leaves room for literal encodings.
    blockLimit: Math.max(HEADER_BLOCK_LIMIT, 2 * options.maxHeaderListSize),
    sessions,
    life,
  };
  // One accept path for both: over TLS a session starts once the handshake chose h2.
  const accept = (socket: net.Socket): void => {
    new ServerSession(socket, shared);
  };
  const server = options.tls ? tlsServer(options.tls, accept) : net.createServer({ noDelay: true }, accept);
  let listening = false;
  // Accept errors after listen (EMFILE, ...) must not become an uncaught 'error'.
  server.on("error", () => undefined);
  // The cap counts sockets, not sessions: a connection ending (GOAWAY written, waiting for the client's FIN) still
  // holds its descriptor. net closes a connection over it at accept ('drop').
  server.maxConnections = maxConnections;
  server.on("drop", () => {
    try {
      options.onConnectionRefused?.();
    } catch {
      // A hook's bug must not become an uncaught exception of the accept path.
    }
  });
  return {
    sessions: sessions as ReadonlySet<H2ServerSession>,
    listen(port: number, host: string): Promise<number> {
      return new Promise((resolve, reject) => {
        if (listening) return reject(new Error("the H2 server is already listening"));
        const onError = (e: Error): void => reject(e);
        server.once("error", onError);
        server.listen({ port, host, backlog }, () => {
          server.off("error", onError);
          listening = true;
          resolve((server.address() as net.AddressInfo).port);
        });
      });
    },
    setSecureContext(context: tls.SecureContextOptions): void {
      if (!(server instanceof tls.Server)) throw new Error("the H2 server was created without TLS");
      server.setSecureContext(context);
    },
    listenLoopback(): Promise<{ port: number; stop(): void }> {
      if (options.tls) return Promise.reject(new Error("the H2 server serves TLS: its loopback listener would too"));
      const loopback = net.createServer({ noDelay: true }, accept);
      loopback.on("error", () => undefined);
      loopback.maxConnections = maxConnections;
      return new Promise((resolve, reject) => {
        loopback.once("error", reject);
        loopback.listen({ port: 0, host: "127.0.0.1" }, () => {
          loopback.off("error", reject);
          resolve({ port: (loopback.address() as net.AddressInfo).port, stop: () => loopback.close() });
        });
      });
    },
    stopListening(): void {
      if (!listening) return;
      listening = false;
      server.close();
    },
  };
}
