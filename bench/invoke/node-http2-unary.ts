/**
 * Bench-only: the node:http2 unary client that carried invoke's backend calls before the raw-frame client
 * (src/backends/h2-unary.ts), kept unchanged as the baseline arm of bench/invoke/client-call.ts.
 */
import http2 from "node:http2";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../src/shared/code.js";

/** The outcome of a unary backend call (never throws for a backend status: the caller reports it in-band). */
export type CallOutcome = { ok: true; bytes: Buffer } | { ok: false; code: Code; message: string };

/** Options of an H2UnaryClient. */
export interface H2UnaryOptions {
  /** "host:port" (IPv6 in brackets). */
  address: string;
  /** HTTP/2 connections, picked round-robin. */
  connections: number;
  /** Largest response message accepted, bytes. */
  maxReceiveBytes: number;
  /** How long a connection has to answer a PING after a call on it ran into its deadline, ms. Default 10000. */
  probeTimeoutMs?: number;
}

/**
 * Unary gRPC calls with raw bytes straight over `node:http2`: one stream per call on a small set of kept connections,
 * none of grpc-js's per-call layers (resolving, load-balancing, retrying and subchannel call objects, filters, the
 * stream decoder). Statuses follow grpc-js's client so callers see the same outcomes: the backend's grpc-status and
 * grpc-message; an HTTP status other than 200 mapped as the gRPC spec says ("Received HTTP status code N"); a second
 * response message UNIMPLEMENTED "Too many responses received"; OK without a message UNIMPLEMENTED "No message
 * received"; a message over the limit RESOURCE_EXHAUSTED "Received message larger than max (N vs M)"; the deadline
 * DEADLINE_EXCEEDED "Deadline exceeded"; the caller's abort CANCELLED "Cancelled on client"; a connection that cannot
 * be made UNAVAILABLE naming the address and the error. A stream the server refused before reading it (REFUSED_STREAM,
 * or a connection that dropped before the request was written) is retried once on a fresh connection, as grpc-js's
 * transparent retry does. Connection health for `/healthz` stays with the grpc-js channel pool; this client only
 * carries unary calls (bench/invoke/client-call.ts measures the difference).
 */
export interface H2UnaryClient {
  call(path: string, request: Buffer, metadata: grpc.Metadata, deadline: number, signal?: AbortSignal): Promise<CallOutcome>;
  close(): void;
}

const HTTP_TO_GRPC: Record<number, Code> = {
  400: Code.INTERNAL,
  401: Code.UNAUTHENTICATED,
  403: Code.PERMISSION_DENIED,
  404: Code.UNIMPLEMENTED,
  429: Code.UNAVAILABLE,
  502: Code.UNAVAILABLE,
  503: Code.UNAVAILABLE,
  504: Code.UNAVAILABLE,
};

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants;

/** How long a connection has to answer a PING after a call on it ran into its deadline. */
const PROBE_MS = 10_000;

/** A stream reset without a gRPC status, as grpc-js reports it. */
const RST_TO_GRPC: Record<number, [Code, string]> = {
  [http2.constants.NGHTTP2_REFUSED_STREAM]: [Code.UNAVAILABLE, "Stream refused by server"],
  [http2.constants.NGHTTP2_CANCEL]: [Code.CANCELLED, "Call cancelled"],
  [http2.constants.NGHTTP2_ENHANCE_YOUR_CALM]: [Code.RESOURCE_EXHAUSTED, "Bandwidth exhausted or memory limit exceeded"],
  [http2.constants.NGHTTP2_INADEQUATE_SECURITY]: [Code.PERMISSION_DENIED, "Protocol not secure enough"],
};

function decodeMessage(v: unknown): string {
  if (typeof v !== "string") return "";
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** grpc-timeout: at most 8 digits, in the coarsest unit that keeps it exact enough. */
function timeoutHeader(ms: number): string {
  const m = Math.max(1, Math.ceil(ms));
  return m < 1e8 ? `${m}m` : `${Math.ceil(m / 1000)}S`;
}

/** What one call carries from attempt to attempt (a refused stream is sent again). */
interface CallState {
  readonly index: number;
  readonly message: Buffer;
  readonly headers: http2.OutgoingHttpHeaders;
  readonly deadline: number;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (o: CallOutcome) => void;
}

/** The client's side of an attempt: its connections and limits. */
interface ClientState {
  readonly address: string;
  readonly maxReceiveBytes: number;
  /** maxReceiveBytes, Infinity for none. */
  readonly limit: number;
  readonly sessionConnected: WeakSet<http2.ClientHttp2Session>;
  /** The last connection error, for the UNAVAILABLE message. */
  lastError: string;
  probe(s: http2.ClientHttp2Session): void;
  start(call: CallState, fresh: boolean, retried: boolean): void;
}

/** The gRPC message prefix of an uncompressed message of `length` bytes. */
function prefixOf(length: number): Buffer {
  const p = Buffer.allocUnsafe(5);
  p[0] = 0;
  p.writeUInt32BE(length, 1);
  return p;
}

const ATTEMPT = Symbol("h2-unary attempt");
type AttemptStream = http2.ClientHttp2Stream & { [ATTEMPT]: Attempt };

// The stream's listeners are shared by every attempt (`this` is the stream, which points at its attempt), so an
// attempt allocates its state object and no closures.
function onResponse(this: AttemptStream, h: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
  this[ATTEMPT].response(h);
}
function onTrailers(this: AttemptStream, h: http2.IncomingHttpHeaders): void {
  this[ATTEMPT].trailers(h);
}
function onData(this: AttemptStream, chunk: Buffer): void {
  this[ATTEMPT].take(chunk);
}
function onClose(this: AttemptStream): void {
  this[ATTEMPT].closed();
}
function ignore(): void {} // a stream error: the outcome is decided on close
function onDeadline(a: Attempt): void {
  a.fail(Code.DEADLINE_EXCEEDED, "Deadline exceeded");
  a.client.probe(a.session);
}

/** One stream of a call. It is also the abort listener of the call's signal (`handleEvent`). */
class Attempt {
  private done = false;
  private httpStatus = 0;
  private grpcStatus: number | undefined;
  private grpcMessage = "";
  private message: Buffer | null = null;
  private extra = false;
  // Frame reassembly: a message may arrive in several DATA chunks.
  private head: Buffer | null = null;
  private need = -1;
  private parts: Buffer[] = [];
  private have = 0;
  private gotBytes = false;
  private readonly timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly client: ClientState,
    readonly call: CallState,
    readonly session: http2.ClientHttp2Session,
    private readonly stream: AttemptStream,
    private readonly retried: boolean,
  ) {
    stream[ATTEMPT] = this;
    this.timer = Number.isFinite(call.deadline) ? setTimeout(onDeadline, Math.max(0, call.deadline - Date.now()), this) : undefined;
    call.signal?.addEventListener("abort", this, { once: true });
    stream.on("response", onResponse);
    stream.on("trailers", onTrailers);
    stream.on("data", onData);
    stream.on("error", ignore);
    stream.on("close", onClose);
    // The 5-byte prefix and the message as they are, no copy into one buffer; corked, so both leave in one write.
    stream.cork();
    stream.write(prefixOf(call.message.length));
    stream.end(call.message);
  }

  /** The caller's abort. */
  handleEvent(): void {
    this.fail(Code.CANCELLED, "Cancelled on client");
  }

  private settle(): boolean {
    if (this.done) return false;
    this.done = true;
    clearTimeout(this.timer);
    this.call.signal?.removeEventListener("abort", this);
    return true;
  }

  private finish(o: CallOutcome): void {
    if (this.settle()) this.call.resolve(o);
  }

  fail(code: Code, message: string): void {
    this.finish({ ok: false, code, message });
    if (!this.stream.closed) this.stream.close(NGHTTP2_CANCEL);
  }

  response(h: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
    this.gotBytes = true;
    this.httpStatus = Number(h[":status"]);
    this.trailers(h);
  }

  trailers(h: http2.IncomingHttpHeaders): void {
    if (h["grpc-status"] !== undefined) {
      this.grpcStatus = Number(h["grpc-status"]);
      this.grpcMessage = decodeMessage(h["grpc-message"]);
    }
  }

  private onMessage(m: Buffer): void {
    if (this.message !== null) this.extra = true;
    else this.message = m;
  }

  take(chunk: Buffer): void {
    while (chunk.length > 0 && !this.done) {
      if (this.need < 0) {
        // Collect the 5-byte prefix (it may be split across chunks).
        const h: Buffer = this.head === null ? chunk : Buffer.concat([this.head, chunk]);
        if (h.length < 5) {
          this.head = h;
          return;
        }
        this.head = null;
        if (h[0] !== 0) return this.fail(Code.INTERNAL, "Received a compressed message, but no compression was negotiated");
        this.need = h.readUInt32BE(1);
        if (this.need > this.client.limit) return this.fail(Code.RESOURCE_EXHAUSTED, `Received message larger than max (${this.need} vs ${this.client.maxReceiveBytes})`);
        chunk = h.subarray(5);
        this.parts = [];
        this.have = 0;
      }
      const n = Math.min(this.need - this.have, chunk.length);
      if (n === chunk.length && this.have === 0 && n === this.need) {
        this.onMessage(chunk);
        this.need = -1;
        return;
      }
      this.parts.push(chunk.subarray(0, n));
      this.have += n;
      chunk = chunk.subarray(n);
      if (this.have === this.need) {
        this.onMessage(this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.have));
        this.need = -1;
      }
    }
  }

  closed(): void {
    if (this.done) return;
    const { client, call, session: sess } = this;
    const code = this.stream.rstCode;
    // Retried only when the request provably never reached a handler: the stream was refused, or the connection
    // never came up. A connection that dropped mid-call is UNAVAILABLE, not retried (the call may have run).
    if (!this.gotBytes && !this.retried && (code === NGHTTP2_REFUSED_STREAM || sess.connecting || !client.sessionConnected.has(sess))) {
      // Never reached the backend's handler: once more on a fresh connection (grpc-js transparent retry).
      this.settle();
      if (call.signal?.aborted) return call.resolve({ ok: false, code: Code.CANCELLED, message: "Cancelled on client" });
      if (Date.now() >= call.deadline) return call.resolve({ ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
      return client.start(call, true, true);
    }
    if (!this.gotBytes && (sess.destroyed || sess.closed || !client.sessionConnected.has(sess))) {
      return this.finish({ ok: false, code: Code.UNAVAILABLE, message: `backend ${client.address} is unavailable: ${client.lastError || "the connection closed before a response"}` });
    }
    if (this.httpStatus !== 200 && this.grpcStatus === undefined && this.gotBytes) {
      return this.finish({ ok: false, code: HTTP_TO_GRPC[this.httpStatus] ?? Code.UNKNOWN, message: `Received HTTP status code ${this.httpStatus}` });
    }
    if (this.grpcStatus === undefined) {
      // No status: grpc-js's mapping of how the stream ended.
      if (sess.destroyed || sess.closed) return this.finish({ ok: false, code: Code.UNAVAILABLE, message: `Connection dropped (backend ${client.address})` });
      const [c, text] = RST_TO_GRPC[code ?? -1] ?? [Code.INTERNAL, `Received RST_STREAM with code ${code}`];
      return this.finish({ ok: false, code: c, message: text });
    }
    if (this.grpcStatus !== 0) return this.finish({ ok: false, code: (this.grpcStatus in Code ? this.grpcStatus : Code.UNKNOWN) as Code, message: this.grpcMessage });
    if (this.extra) return this.finish({ ok: false, code: Code.UNIMPLEMENTED, message: "Too many responses received" });
    if (this.message === null) return this.finish({ ok: false, code: Code.UNIMPLEMENTED, message: "No message received" });
    this.finish({ ok: true, bytes: this.message });
  }
}

/** Create the client; connections are made on first use and again after one closes. */
export function createH2UnaryClient(opts: H2UnaryOptions): H2UnaryClient {
  const authority = `http://${opts.address}`;
  const sessions: (http2.ClientHttp2Session | undefined)[] = new Array(Math.max(1, opts.connections)).fill(undefined);
  let cursor = 0;
  let closed = false;

  const session = (i: number, fresh: boolean): http2.ClientHttp2Session => {
    let s = sessions[i];
    if (s && !fresh && !s.closed && !s.destroyed) return s;
    if (s && !s.closed) s.close();
    // No periodic keep-alive pings: a reset connection fails its streams, and a call that runs into its deadline
    // probes its connection (probe below), so a silently dead one is replaced instead of timing out every call.
    s = http2.connect(authority, { settings: { enablePush: false } });
    const mine = s;
    const drop = (): void => {
      if (sessions[i] === mine) sessions[i] = undefined;
    };
    s.on("error", (e: Error) => {
      client.lastError = e.message;
      drop();
    });
    s.on("close", drop);
    s.on("goaway", drop);
    s.once("connect", () => client.sessionConnected.add(mine));
    s.unref();
    sessions[i] = s;
    return s;
  };

  /** Ping a connection after a call on it timed out; no answer in time and it is closed (the next call reconnects). */
  const probing = new WeakSet<http2.ClientHttp2Session>();
  const client: ClientState = {
    address: opts.address,
    maxReceiveBytes: opts.maxReceiveBytes,
    limit: opts.maxReceiveBytes < 0 ? Infinity : opts.maxReceiveBytes,
    sessionConnected: new WeakSet<http2.ClientHttp2Session>(),
    lastError: "",
    probe(s) {
      if (probing.has(s) || s.closed || s.destroyed) return;
      probing.add(s);
      const timer = setTimeout(() => s.destroy(), opts.probeTimeoutMs ?? PROBE_MS);
      timer.unref();
      try {
        s.ping((err) => {
          clearTimeout(timer);
          probing.delete(s);
          if (err) s.destroy();
        });
      } catch {
        clearTimeout(timer);
        s.destroy();
      }
    },
    start(call, fresh, retried) {
      // The timeout the backend gets is what is left now (a retry sends less than the first attempt did).
      if (Number.isFinite(call.deadline)) call.headers["grpc-timeout"] = timeoutHeader(call.deadline - Date.now());
      let sess: http2.ClientHttp2Session;
      let stream: http2.ClientHttp2Stream;
      try {
        sess = session(call.index, fresh);
        stream = sess.request(call.headers, { endStream: false });
      } catch (e) {
        return call.resolve({ ok: false, code: Code.UNAVAILABLE, message: `backend ${opts.address} is unavailable: ${(e as Error).message}` });
      }
      new Attempt(client, call, sess, stream as AttemptStream, retried);
    },
  };

  return {
    call(path, message, metadata, deadline, signal) {
      return new Promise<CallOutcome>((resolve) => {
        if (closed) return resolve({ ok: false, code: Code.UNAVAILABLE, message: `backend ${opts.address} is closed` });
        if (signal?.aborted) return resolve({ ok: false, code: Code.CANCELLED, message: "the caller cancelled the call" });
        const left = deadline - Date.now();
        if (!(left > 0)) return resolve({ ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
        const headers: http2.OutgoingHttpHeaders = metadata.toHttp2Headers();
        headers[":method"] = "POST";
        headers[":path"] = path;
        headers["content-type"] = "application/grpc";
        headers["te"] = "trailers";
        headers["grpc-accept-encoding"] = "identity";
        cursor = cursor + 1 >= sessions.length ? 0 : cursor + 1;
        client.start({ index: cursor, message, headers, deadline, signal, resolve }, false, false);
      });
    },
    close() {
      closed = true;
      for (const s of sessions) s?.close();
      sessions.fill(undefined);
    },
  };
}
