import http2 from "node:http2";
import type net from "node:net";
import type { H2Server, H2ServerOptions, H2ServerSession, H2ServerStream, HeaderList } from "../../src/h2/types.js";

/**
 * A test double of the native HTTP/2 layer (src/h2/server.ts): the H2Server contract over
 * node:http2, so the gRPC layer can be tested on its own and against a second transport. Not a production path:
 * flow control and buffering are node's, `pause()` maps to the stream's readable pause.
 */
export function createNodeH2Transport(options: H2ServerOptions): H2Server {
  const sessions = new Set<H2ServerSession>();
  const server = http2.createServer({
    settings: { maxConcurrentStreams: options.maxConcurrentStreams, maxHeaderListSize: options.maxHeaderListSize },
  });
  const sessionOf = new WeakMap<http2.ServerHttp2Session, { session: H2ServerSession; open: number }>();

  server.on("session", (s: http2.ServerHttp2Session) => {
    s.on("error", () => undefined);
    const socket = s.socket as net.Socket;
    const entry = { session: undefined as unknown as H2ServerSession, open: 0 };
    const session: H2ServerSession = {
      remoteAddress: socket.remoteAddress ?? "",
      remotePort: socket.remotePort ?? 0,
      get openStreams() {
        return entry.open;
      },
      close: () => s.close(),
      destroy: (code?: number) => s.destroy(undefined, code ?? http2.constants.NGHTTP2_NO_ERROR),
      ping: (payload: Buffer) => void s.ping(payload, () => undefined),
    };
    entry.session = session;
    sessionOf.set(s, entry);
    sessions.add(session);
    options.onSession?.(session);
    s.once("close", () => {
      sessions.delete(session);
      options.onSessionClose?.(session, "connection closed");
    });
  });

  server.on("stream", (st: http2.ServerHttp2Stream, _headers: http2.IncomingHttpHeaders, _flags: number, raw: string[]) => {
    st.on("error", () => undefined);
    const entry = sessionOf.get(st.session as http2.ServerHttp2Session)!;
    const session = entry.session;
    entry.open++;
    let headers: HeaderList = [];
    for (let i = 0; i + 1 < raw.length; i += 2) headers.push([raw[i]!, raw[i + 1]!]);
    let resetByUs = -1;
    let closed = false;
    let trailers: HeaderList | undefined;
    const toObject = (list: HeaderList): http2.OutgoingHttpHeaders => {
      const o: Record<string, string | string[]> = {};
      for (const [k, v] of list) {
        const prev = o[k];
        o[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
      }
      return o;
    };
    const stream: H2ServerStream = {
      id: st.id ?? 0,
      session,
      get headers() {
        return headers;
      },
      takeHeaders() {
        const list = headers;
        headers = [];
        return list;
      },
      respond(list, endStream) {
        st.respond(toObject(list), { endStream, waitForTrailers: !endStream });
      },
      write: (data) => !st.writableEnded && !st.destroyed && st.write(data),
      get needDrain() {
        return st.writableNeedDrain;
      },
      end(list) {
        trailers = list;
        st.end();
      },
      reset(code) {
        resetByUs = code;
        st.close(code);
      },
      pause: () => void st.pause(),
      resume: () => void st.resume(),
      get bufferedBytes() {
        return st.writableLength;
      },
      get headersSent() {
        return st.headersSent;
      },
      get closed() {
        return closed;
      },
    };
    st.on("wantTrailers", () => {
      if (trailers) st.sendTrailers(toObject(trailers));
      else st.close();
    });
    const handler = options.onStream(stream);
    st.on("data", (b: Buffer) => handler.data(b, 0, b.length));
    st.on("end", () => handler.end());
    st.on("drain", () => handler.drain());
    st.once("close", () => {
      closed = true;
      entry.open--;
      const code = resetByUs >= 0 ? resetByUs : (st.rstCode ?? 0);
      handler.close(code, resetByUs >= 0 ? "reset by the server" : code === 0 ? "ended" : "client reset");
    });
  });

  return {
    listen: (port, host) =>
      new Promise<number>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve((server.address() as net.AddressInfo).port);
        });
      }),
    stopListening: () => void server.close(),
    sessions,
  };
}
