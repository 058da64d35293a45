import type * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { H2Connection, H2Error, H2Stream, QUEUE_LIMIT, type ConnectionEvents, type ConnectionLoss } from "../h2/client-connection.js";
import { literalField } from "../h2/hpack.js";
import { h2ConnectOptions, type BackendTls } from "./backend-tls.js";
import { callDeadlines, type Expiring } from "../shared/deadline-queue.js";
import type { CancelSignal } from "../shared/signals.js";
import type { Status } from "../shared/status.js";

/** The outcome of a unary backend call (never throws for a backend status: the caller reports it in-band). */
export type CallOutcome = { ok: true; bytes: Buffer } | ({ ok: false } & Status);

/** Options of an H2UnaryClient. */
export interface H2UnaryOptions {
  /** "host:port" (IPv6 in brackets). */
  address: string;
  /** Connect over TLS (ALPN h2) with these settings. Default: cleartext with prior knowledge. */
  tls?: BackendTls;
  /** Most HTTP/2 connections: a new call takes the first with fewer than 16 calls open (pick in createH2UnaryClient). */
  connections: number;
  /** Largest response message accepted, bytes. */
  maxReceiveBytes: number;
  /** How long a connection has to answer a PING after a call on it ran into its deadline, ms. Default 10000. */
  probeTimeoutMs?: number;
}

/**
 * Unary gRPC calls with raw bytes over HTTP/2 frames this client writes and parses itself (src/h2/client-connection.ts: h2c
 * with prior knowledge over `net.Socket`; hpack.ts), one stream per call on a small set of kept connections: none of
 * grpc-js's per-call layers (resolving, load-balancing, retrying and subchannel call objects, filters, the stream
 * decoder) and none of node:http2's (Http2Stream duplexes, per-request AsyncResource, header objects); per call one
 * write of HEADERS and DATA, and the response parsed from the connection's one 'data' listener. Statuses follow
 * grpc-js's client so callers see the same outcomes: the backend's grpc-status and grpc-message; an HTTP status other
 * than 200 mapped as the gRPC spec says ("Received HTTP status code N"); a second response message UNIMPLEMENTED "Too
 * many responses received"; OK without a message UNIMPLEMENTED "No message received"; a message over the limit
 * RESOURCE_EXHAUSTED "Received message larger than max (N vs M)"; the deadline DEADLINE_EXCEEDED "Deadline exceeded";
 * the caller's abort CANCELLED "Cancelled on client"; a connection that cannot be made UNAVAILABLE naming the address
 * and the error; a stream reset without a status as grpc-js maps the reset code; a connection that drops mid-call
 * UNAVAILABLE "Connection dropped"; a malformed frame or header block from the backend ends its connection (GOAWAY),
 * INTERNAL for the calls that had a response under way, UNAVAILABLE for the others. A stream the server did not
 * process (REFUSED_STREAM, above a GOAWAY's last stream id, or on a connection that dropped before it connected) is
 * retried once on a fresh connection, as grpc-js's transparent retry does. Calls beyond the backend's
 * MAX_CONCURRENT_STREAMS wait on their connection (at most QUEUE_LIMIT, then RESOURCE_EXHAUSTED) within their deadline.
 * Connection health for `/healthz` stays with the grpc-js channel pool; this client only carries unary calls
 * (bench/invoke/client-call.ts measures the difference).
 */
export interface H2UnaryClient {
  /**
   * `trace`: the W3C trace context to send, in place of any `traceparent`/`tracestate` in `metadata` (the gateway's
   * client span; set on the header list directly, not through grpc-js Metadata's per-value validation).
   */
  call(path: string, request: Buffer, metadata: grpc.Metadata, deadline: number, signal?: CancelSignal, trace?: TraceContextHeaders): Promise<CallOutcome>;
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

/** How long a connection has to answer a PING after a call on it ran into its deadline. */
const PROBE_MS = 10_000;

/** A stream reset without a gRPC status, as grpc-js reports it. */
const RST_TO_GRPC: Record<number, [Code, string]> = {
  [H2Error.REFUSED_STREAM]: [Code.UNAVAILABLE, "Stream refused by server"],
  [H2Error.CANCEL]: [Code.CANCELLED, "Call cancelled"],
  [H2Error.ENHANCE_YOUR_CALM]: [Code.RESOURCE_EXHAUSTED, "Bandwidth exhausted or memory limit exceeded"],
  [H2Error.INADEQUATE_SECURITY]: [Code.PERMISSION_DENIED, "Protocol not secure enough"],
};

/** Request headers the client sets itself, and connection-specific ones HTTP/2 forbids (RFC 9113 8.2.2). */
const NOT_FROM_METADATA = new Set(["content-type", "te", "grpc-accept-encoding", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);

const ONCE = { once: true } as const;
const EMPTY = Buffer.alloc(0);

function decodeMessage(v: string | undefined): string {
  if (v === undefined) return "";
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** grpc-timeout: at most 8 digits, in the finest unit that fits. */
function timeoutHeader(ms: number): string {
  const m = Math.max(1, Math.ceil(ms));
  if (m < 1e8) return `${m}m`;
  const s = Math.ceil(m / 1000);
  if (s < 1e8) return `${s}S`;
  const min = Math.ceil(s / 60);
  return min < 1e8 ? `${min}M` : `${Math.min(99_999_999, Math.ceil(min / 60))}H`;
}

type Headers = Record<string, string | string[]>;

/** An upper bound of the HPACK bytes of the metadata's headers. */
function metadataBound(h: Headers): number {
  let n = 0;
  for (const k in h) {
    const v = h[k]!;
    if (typeof v === "string") n += 12 + k.length + v.length;
    else for (const x of v) n += 12 + k.length + x.length;
  }
  return n;
}

/**
 * The headers every call to `path` starts with, HPACK-encoded once (static-table names, literals without indexing):
 * :method POST, :scheme http (https over TLS), :path, :authority, content-type application/grpc, te trailers,
 * grpc-accept-encoding identity (the client takes no compressed messages).
 */
function fixedBlock(path: string, authority: string, secure: boolean): Buffer {
  const out = Buffer.allocUnsafe(128 + path.length + authority.length);
  let p = 0;
  out[p++] = 0x83; // :method POST, static index 3
  out[p++] = secure ? 0x87 : 0x86; // :scheme https / http, static index 7 / 6
  p = literalField(out, p, 4, "", path);
  p = literalField(out, p, 1, "", authority);
  p = literalField(out, p, 31, "", "application/grpc");
  p = literalField(out, p, 0, "te", "trailers");
  p = literalField(out, p, 0, "grpc-accept-encoding", "identity");
  return Buffer.from(out.subarray(0, p));
}

/** The client's side of an attempt: its connections and limits. */
interface Client {
  readonly address: string;
  readonly maxReceiveBytes: number;
  /** maxReceiveBytes, Infinity for none. */
  readonly limit: number;
  readonly probeMs: number;
  /**
   * A connection for slot `index`: the kept one, or a new one when there is none or the kept one is `not` (a retry's
   * failed connection, replaced; a connection made since then is fresh enough).
   */
  connection(index: number, not: H2Connection | null): H2Connection;
  isClosed(): boolean;
}

/**
 * One stream of a call (a retry is a new attempt with the same call fields). It is the connection's stream (the
 * connection calls its methods as frames arrive) and the abort listener of the call's signal (`handleEvent`).
 */
class Attempt extends H2Stream implements Expiring {
  private done = false;
  private gotBytes = false;
  private httpStatus = 0;
  private grpcStatus: number | undefined;
  private grpcMessage = "";
  // The header block being decoded.
  private blockStatus: string | undefined;
  private blockMessage: string | undefined;
  private result: Buffer | null = null;
  private extra = false;
  // Message reassembly: the 5-byte prefix (may be split across frames), then the message.
  private prefix: Buffer | null = null;
  private prefixHave = 0;
  private need = -1;
  private acc: Buffer | null = null;
  private have = 0;
  /** In the thread's deadline queue (callDeadlines). */
  deadlineSlot = -1;
  /** The connection the attempt went out on (for the deadline probe). */
  session: H2Connection | null = null;

  constructor(
    readonly client: Client,
    readonly fixed: Buffer,
    readonly meta: Headers,
    readonly metaBound: number,
    readonly message: Buffer,
    readonly deadline: number,
    readonly signal: CancelSignal | undefined,
    readonly resolve: (o: CallOutcome) => void,
    readonly index: number,
    readonly retried: boolean,
  ) {
    super();
  }

  /** Start: deadline, abort listener, and the stream on slot `index`'s connection. */
  go(not: H2Connection | null): void {
    if (Number.isFinite(this.deadline)) callDeadlines.add(this, this.deadline);
    this.signal?.addEventListener("abort", this, ONCE);
    this.place(not);
  }

  /** Open (or queue) the stream on a connection. Also where a stream queued on a retiring connection comes back. */
  place(not: H2Connection | null): void {
    if (this.done) return;
    if (this.client.isClosed()) return this.finish({ ok: false, code: Code.UNAVAILABLE, message: `backend ${this.client.address} is closed` });
    let conn: H2Connection;
    try {
      conn = this.client.connection(this.index, not);
    } catch (e) {
      return this.finish({ ok: false, code: Code.UNAVAILABLE, message: `backend ${this.client.address} is unavailable: ${(e as Error).message}` });
    }
    this.session = conn;
    if (!conn.open(this)) {
      this.finish({ ok: false, code: Code.RESOURCE_EXHAUSTED, message: `backend ${this.client.address}: ${QUEUE_LIMIT} calls already wait for a stream on the connection` });
    }
  }

  deadlinePassed(): void {
    this.fail(Code.DEADLINE_EXCEEDED, "Deadline exceeded");
    // A connection that does not even answer a PING is replaced rather than timing out every later call.
    this.session?.probe(this.client.probeMs);
  }

  /** The caller's abort. */
  handleEvent(): void {
    this.fail(Code.CANCELLED, "Cancelled on client");
  }

  headerBlockBound(): number {
    return this.fixed.length + 40 + this.metaBound;
  }

  writeHeaderBlock(out: Buffer, pos: number): number {
    let p = pos + this.fixed.copy(out, pos);
    const timed = Number.isFinite(this.deadline);
    // The timeout the backend gets is what is left now (a retry or a queued stream sends less than the first try).
    if (timed) p = literalField(out, p, 0, "grpc-timeout", timeoutHeader(this.deadline - Date.now()));
    const h = this.meta;
    for (const k in h) {
      if (NOT_FROM_METADATA.has(k) || (timed && k === "grpc-timeout")) continue;
      const v = h[k]!;
      if (typeof v === "string") p = literalField(out, p, 0, k, v);
      else for (const x of v) p = literalField(out, p, 0, k, x);
    }
    return p;
  }

  private settle(): boolean {
    if (this.done) return false;
    this.done = true;
    callDeadlines.remove(this);
    this.signal?.removeEventListener("abort", this);
    return true;
  }

  private finish(o: CallOutcome): void {
    if (this.settle()) this.resolve(o);
  }

  fail(code: Code, message: string): void {
    this.finish({ ok: false, code, message });
    this.conn?.cancel(this, H2Error.CANCEL);
  }

  header(name: string, value: string): void {
    if (name === ":status") this.httpStatus = Number(value);
    else if (name === "grpc-status") this.blockStatus = value;
    else if (name === "grpc-message") this.blockMessage = value;
  }

  headersDone(): void {
    this.gotBytes = true;
    if (this.blockStatus !== undefined) {
      this.grpcStatus = Number(this.blockStatus);
      this.grpcMessage = decodeMessage(this.blockMessage);
    }
    this.blockStatus = undefined;
    this.blockMessage = undefined;
  }

  private onMessage(m: Buffer): void {
    if (this.result !== null) this.extra = true;
    else this.result = m;
  }

  data(buf: Buffer, start: number, end: number): void {
    let i = start;
    while (i < end && !this.done && !this.extra) {
      if (this.need < 0) {
        let flag: number;
        if (this.prefixHave === 0 && end - i >= 5) {
          flag = buf[i]!;
          this.need = buf.readUInt32BE(i + 1);
          i += 5;
        } else {
          // Collect the 5-byte prefix across frames.
          this.prefix ??= Buffer.allocUnsafe(5);
          const t = Math.min(5 - this.prefixHave, end - i);
          buf.copy(this.prefix, this.prefixHave, i, i + t);
          this.prefixHave += t;
          i += t;
          if (this.prefixHave < 5) return;
          this.prefixHave = 0;
          flag = this.prefix[0]!;
          this.need = this.prefix.readUInt32BE(1);
        }
        if (flag !== 0) return this.fail(Code.INTERNAL, "Received a compressed message, but no compression was negotiated");
        if (this.need > this.client.limit) return this.fail(Code.RESOURCE_EXHAUSTED, `Received message larger than max (${this.need} vs ${this.client.maxReceiveBytes})`);
        this.have = 0;
        if (this.need === 0) {
          this.need = -1;
          this.onMessage(EMPTY);
          continue;
        }
      }
      const n = Math.min(this.need - this.have, end - i);
      if (this.have === 0 && n === this.need) {
        // The whole message in this frame: no copy.
        this.onMessage(this.result === null ? buf.subarray(i, i + n) : EMPTY);
        this.need = -1;
        i += n;
        continue;
      }
      // Split across frames: one buffer of the announced size (at most the limit), filled as frames arrive. A second
      // message is only counted, not kept.
      if (this.result === null) {
        this.acc ??= Buffer.allocUnsafe(this.need);
        buf.copy(this.acc, this.have, i, i + n);
      }
      this.have += n;
      i += n;
      if (this.have === this.need) {
        this.onMessage(this.acc ?? EMPTY);
        this.acc = null;
        this.need = -1;
      }
    }
  }

  ended(): void {
    this.closed(H2Error.NO_ERROR, null);
  }

  reset(code: number): void {
    this.closed(code, null);
  }

  refused(): void {
    this.closed(H2Error.REFUSED_STREAM, null);
  }

  lost(why: ConnectionLoss): void {
    this.closed(-1, why);
  }

  /** How the stream ended decides the outcome (the order of these rules is grpc-js's). */
  private closed(code: number, lost: ConnectionLoss | null): void {
    if (this.done) return;
    const { client } = this;
    // Retried only when the request provably never reached a handler: the stream was refused (or above a GOAWAY's
    // last id), or the connection never came up. A connection that dropped mid-call is UNAVAILABLE, not retried (the
    // call may have run).
    if (!this.gotBytes && !this.retried && (code === H2Error.REFUSED_STREAM || (lost !== null && !lost.everConnected))) {
      this.settle();
      if (this.signal?.aborted) return this.resolve({ ok: false, code: Code.CANCELLED, message: "Cancelled on client" });
      if (Date.now() >= this.deadline) return this.resolve({ ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
      const again = new Attempt(client, this.fixed, this.meta, this.metaBound, this.message, this.deadline, this.signal, this.resolve, this.index, true);
      return again.go(this.session);
    }
    if (lost !== null && !this.gotBytes) {
      const why = lost.protocolError !== undefined ? `protocol error: ${lost.protocolError}` : lost.socketError || "the connection closed before a response";
      return this.finish({ ok: false, code: Code.UNAVAILABLE, message: `backend ${client.address} is unavailable: ${why}` });
    }
    if (lost?.protocolError !== undefined) {
      return this.finish({ ok: false, code: Code.INTERNAL, message: `backend ${client.address} sent a malformed response: ${lost.protocolError}` });
    }
    if (this.httpStatus !== 200 && this.grpcStatus === undefined && this.gotBytes) {
      return this.finish({ ok: false, code: HTTP_TO_GRPC[this.httpStatus] ?? Code.UNKNOWN, message: `Received HTTP status code ${this.httpStatus}` });
    }
    if (this.grpcStatus === undefined) {
      // No status: grpc-js's mapping of how the stream ended.
      if (lost !== null) return this.finish({ ok: false, code: Code.UNAVAILABLE, message: `Connection dropped (backend ${client.address})` });
      const [c, text] = RST_TO_GRPC[code] ?? [Code.INTERNAL, `Received RST_STREAM with code ${code}`];
      return this.finish({ ok: false, code: c, message: text });
    }
    if (this.grpcStatus !== 0) return this.finish({ ok: false, code: (this.grpcStatus in Code ? this.grpcStatus : Code.UNKNOWN) as Code, message: this.grpcMessage });
    if (this.extra) return this.finish({ ok: false, code: Code.UNIMPLEMENTED, message: "Too many responses received" });
    if (this.result === null) return this.finish({ ok: false, code: Code.UNIMPLEMENTED, message: "No message received" });
    this.finish({ ok: true, bytes: this.result });
  }
}

/** "host:port" or "[v6]:port" split, or what is wrong with it (reported by every call, as a failed dial would be). */
function splitAddress(address: string): { host: string; port: number } | string {
  const at = address.lastIndexOf(":");
  const port = Number(address.slice(at + 1));
  let host = address.slice(0, at);
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (at <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) return `address ${JSON.stringify(address.slice(0, 100))} is not host:port`;
  return { host, port };
}

/** Cached fixed header blocks per path; beyond this many paths the cache starts over. */
const PATH_CACHE_LIMIT = 1024;

/** A W3C trace context to send with a call (valid `traceparent`, optional `tracestate`). */
export interface TraceContextHeaders {
  readonly traceparent: string;
  readonly tracestate: string | undefined;
}
/** Calls open on a connection before the next slot's is used (pick). */
const FILL_STREAMS = 16;

/** Create the client; connections are made on first use and again after one closes. */
export function createH2UnaryClient(opts: H2UnaryOptions): H2UnaryClient {
  const target = splitAddress(opts.address);
  const conns: (H2Connection | undefined)[] = new Array(Math.max(1, opts.connections)).fill(undefined);
  const paths = new Map<string, Buffer>();
  let closed = false;

  /**
   * The slot for a new call: the first whose connection has fewer than FILL_STREAMS calls open (or has no connection
   * yet), else the least loaded. A lone caller stays on one connection and concurrent calls share few, so the frames
   * of a loop turn's calls leave in as few writes as possible (each connection flushes once per turn) and the
   * backend reads them in as few; the other slots open only as concurrency needs them.
   */
  const pick = (): number => {
    let best = 0;
    let bestLoad = Infinity;
    for (let i = 0; i < conns.length; i++) {
      const c = conns[i];
      if (c === undefined || !c.usable) return i;
      const load = c.openStreams;
      if (load < FILL_STREAMS) return i;
      if (load < bestLoad) {
        best = i;
        bestLoad = load;
      }
    }
    return best;
  };

  const client: Client = {
    address: opts.address,
    maxReceiveBytes: opts.maxReceiveBytes,
    limit: opts.maxReceiveBytes < 0 ? Infinity : opts.maxReceiveBytes,
    probeMs: opts.probeTimeoutMs ?? PROBE_MS,
    isClosed: () => closed,
    connection(i, not) {
      const c = conns[i];
      if (c !== undefined && c !== not && c.usable) return c;
      if (c !== undefined) {
        // A connection replaced for a retry finishes its own streams first; the calls queued on it have been placed
        // again, on a new connection made for this slot then, which will do for the retry too.
        c.close();
        const made = conns[i];
        if (made !== undefined && made !== c && made.usable) return made;
      }
      const events: ConnectionEvents = {
        retired(done) {
          if (conns[i] === done) conns[i] = undefined;
        },
        requeue(s) {
          (s as Attempt).place(null);
        },
      };
      if (typeof target === "string") throw new Error(target);
      const made = new H2Connection(target.host, target.port, events, 1, opts.tls ? h2ConnectOptions(opts.tls, target.host) : undefined);
      conns[i] = made;
      return made;
    },
  };

  return {
    call(path, message, metadata, deadline, signal, trace) {
      return new Promise<CallOutcome>((resolve) => {
        if (closed) return resolve({ ok: false, code: Code.UNAVAILABLE, message: `backend ${opts.address} is closed` });
        if (signal?.aborted) return resolve({ ok: false, code: Code.CANCELLED, message: "the caller cancelled the call" });
        const left = deadline - Date.now();
        if (!(left > 0)) return resolve({ ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
        let fixed = paths.get(path);
        if (fixed === undefined) {
          if (paths.size >= PATH_CACHE_LIMIT) paths.clear();
          fixed = fixedBlock(path, opts.tls?.serverName ?? opts.address, opts.tls !== undefined);
          paths.set(path, fixed);
        }
        const meta = metadata.toHttp2Headers() as Headers;
        if (trace) {
          meta["traceparent"] = trace.traceparent;
          if (trace.tracestate) meta["tracestate"] = trace.tracestate;
          else delete meta["tracestate"];
        }
        new Attempt(client, fixed, meta, metadataBound(meta), message, deadline, signal, resolve, pick(), false).go(null);
      });
    },
    close() {
      closed = true;
      for (const c of conns) c?.close();
      conns.fill(undefined);
    },
  };
}
