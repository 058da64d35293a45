import net from "node:net";
import { HEADER_BLOCK_LIMIT } from "./client-connection.js";
import { ServerSession, serverGreeting, type SessionShared } from "./server-session.js";
import { lifecycleSettings, MAX_CONNECTIONS } from "./server-lifecycle.js";
import type { H2Server, H2ServerOptions, H2ServerSession } from "./types.js";

/**
 * The HTTP/2 layer of the native gRPC server: cleartext HTTP/2 with prior knowledge on a `net.Server`, frames parsed
 * and written directly (src/h2/server-session.ts), HPACK through src/h2/hpack.ts. The contract with the gRPC layer
 * is src/h2/types.ts.
 */

function checkCount(name: string, v: unknown, max: number): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > max) {
    throw new RangeError(`H2ServerOptions.${name} must be an integer from 1 to ${max}, got ${String(v).slice(0, 40)}`);
  }
}

/** Create a native HTTP/2 server; `listen` starts it. Throws a RangeError naming the field for a bad option. */
export function createH2Server(options: H2ServerOptions): H2Server {
  checkCount("maxConcurrentStreams", options.maxConcurrentStreams, 0x7fffffff);
  checkCount("maxHeaderListSize", options.maxHeaderListSize, 0x7fffffff);
  checkCount("streamHighWaterMark", options.streamHighWaterMark, Number.MAX_SAFE_INTEGER);
  const maxConnections = options.maxConnections ?? MAX_CONNECTIONS;
  checkCount("maxConnections", maxConnections, 0x7fffffff);
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
  const server = net.createServer({ noDelay: true }, (socket) => {
    new ServerSession(socket, shared);
  });
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
        server.listen(port, host, () => {
          server.off("error", onError);
          listening = true;
          resolve((server.address() as net.AddressInfo).port);
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
