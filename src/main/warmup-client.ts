import { connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { frameMessage } from "../grpc/native/message-framing.js";

/**
 * The warm-up's gRPC client (src/main/warmup.ts, src/main/warmup-invoke.ts): plain node:http2 streams to a private
 * gateway, framed with the server's own frameMessage, whose requests look like real clients' (docs/warmup.md, "Code
 * that carries over"): code compiled for one kind of request fails at the first request of another.
 */

/**
 * Request headers beyond the gRPC ones, in turn: grpc-go's user agent, and grpc-js's with its accepted encodings. The
 * server reads each header name once per call; code compiled for the names of one client fails ("wrong name") at the
 * first request of another.
 */
const CLIENT_HEADERS: ReadonlyArray<Record<string, string>> = [
  { "user-agent": "grpc-go/1.64.0" },
  { "user-agent": "grpc-node-js/1.14.0", "grpc-accept-encoding": "identity,deflate,gzip" },
];
/**
 * One call in this many sends its message this long after its headers, as a client whose DATA frame arrives in a
 * later read than its HEADERS: the server then arms its wait for the message, a path the other calls never take.
 */
const SPLIT_EVERY = 20;
const SPLIT_DELAY_MS = 2;

/** Calls to one private gateway; every session it opens is kept in `sessions`, which the warm-up destroys at its end. */
export class WarmupClient {
  private calls = 0;

  constructor(
    private readonly url: string,
    /** The private gateway's API key, sent with every call. */
    readonly key: string,
    private readonly sessions: ClientHttp2Session[],
  ) {}

  /** A new connection to the gateway. */
  session(): ClientHttp2Session {
    const s = connect(this.url);
    s.on("error", () => {}); // a failure ends the calls on it, which reject
    this.sessions.push(s);
    return s;
  }

  /** Start a call of `path` with one request message, under a `grpc-timeout` of `timeoutMs` when given. */
  call(s: ClientHttp2Session, path: string, body: Buffer, timeoutMs?: number): ClientHttp2Stream {
    const n = this.calls++;
    const st = s.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      "x-api-key": this.key,
      ...CLIENT_HEADERS[n % CLIENT_HEADERS.length],
      ...(timeoutMs === undefined ? {} : { "grpc-timeout": `${timeoutMs}m` }),
    });
    const framed = frameMessage(body);
    const bytes = Array.isArray(framed) ? Buffer.concat(framed) : framed;
    if (n % SPLIT_EVERY === SPLIT_EVERY - 1) setTimeout(() => st.end(bytes), SPLIT_DELAY_MS);
    else st.end(bytes);
    return st;
  }

  /** A unary call: resolves with the reply message's bytes once it ended with grpc-status 0, rejects otherwise. */
  unary(s: ClientHttp2Session, path: string, body: Buffer, timeoutMs?: number): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      const st = this.call(s, path, body, timeoutMs);
      const chunks: Buffer[] = [];
      let status: string | undefined;
      st.on("trailers", (t) => (status = String(t["grpc-status"])));
      st.on("response", (h) => (status ??= h["grpc-status"] === undefined ? undefined : String(h["grpc-status"])));
      st.on("data", (c: Buffer) => chunks.push(c));
      st.on("close", () => {
        if (status !== "0") return reject(new Error(`warm-up call ${path} ended with grpc-status ${status ?? "none"}`));
        const reply = Buffer.concat(chunks);
        resolve(reply.subarray(5, 5 + (reply.length >= 5 ? reply.readUInt32BE(1) : 0)));
      });
      st.on("error", reject);
    });
  }
}
