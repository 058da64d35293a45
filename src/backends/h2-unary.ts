import http2 from "node:http2";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";

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

/** Create the client; connections are made on first use and again after one closes. */
export function createH2UnaryClient(opts: H2UnaryOptions): H2UnaryClient {
  const authority = `http://${opts.address}`;
  const sessions: (http2.ClientHttp2Session | undefined)[] = new Array(Math.max(1, opts.connections)).fill(undefined);
  let cursor = 0;
  let closed = false;
  const sessionConnected = new WeakSet<http2.ClientHttp2Session>();
  /** The last connection error, for the UNAVAILABLE message. */
  let lastError = "";
  const limit = opts.maxReceiveBytes < 0 ? Infinity : opts.maxReceiveBytes;

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
      lastError = e.message;
      drop();
    });
    s.on("close", drop);
    s.on("goaway", drop);
    s.once("connect", () => sessionConnected.add(mine));
    s.unref();
    sessions[i] = s;
    return s;
  };

  /** Ping a connection after a call on it timed out; no answer in time and it is closed (the next call reconnects). */
  const probing = new WeakSet<http2.ClientHttp2Session>();
  const probe = (s: http2.ClientHttp2Session): void => {
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
  };

  const attempt = (
    index: number,
    fresh: boolean,
    path: string,
    request: Buffer,
    headers: http2.OutgoingHttpHeaders,
    deadline: number,
    signal: AbortSignal | undefined,
    resolve: (o: CallOutcome) => void,
    retried: boolean,
  ): void => {
    let stream: http2.ClientHttp2Stream;
    let sess: http2.ClientHttp2Session;
    // The timeout the backend gets is what is left now (a retry sends less than the first attempt did).
    if (Number.isFinite(deadline)) headers["grpc-timeout"] = timeoutHeader(deadline - Date.now());
    try {
      sess = session(index, fresh);
      stream = sess.request(headers, { endStream: false });
    } catch (e) {
      return resolve({ ok: false, code: Code.UNAVAILABLE, message: `backend ${opts.address} is unavailable: ${(e as Error).message}` });
    }
    let done = false;
    let httpStatus = 0;
    let grpcStatus: number | undefined;
    let grpcMessage = "";
    let response: Buffer | null = null;
    let extra = false;
    // Frame reassembly: a message may arrive in several DATA chunks.
    let head: Buffer | null = null;
    let need = -1;
    let parts: Buffer[] = [];
    let have = 0;
    let gotBytes = false;

    const finish = (o: CallOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(o);
    };
    const fail = (code: Code, message: string): void => {
      finish({ ok: false, code, message });
      if (!stream.closed) stream.close(NGHTTP2_CANCEL);
    };
    const onAbort = (): void => fail(Code.CANCELLED, "Cancelled on client");
    const timer = Number.isFinite(deadline)
      ? setTimeout(() => {
          fail(Code.DEADLINE_EXCEEDED, "Deadline exceeded");
          probe(sess);
        }, Math.max(0, deadline - Date.now()))
      : undefined;
    signal?.addEventListener("abort", onAbort, { once: true });

    const onMessage = (m: Buffer): void => {
      if (response !== null) extra = true;
      else response = m;
    };
    const take = (chunk: Buffer): void => {
      while (chunk.length > 0 && !done) {
        if (need < 0) {
          // Collect the 5-byte prefix (it may be split across chunks).
          const h: Buffer = head === null ? chunk : Buffer.concat([head, chunk]);
          if (h.length < 5) {
            head = h;
            return;
          }
          head = null;
          if (h[0] !== 0) return fail(Code.INTERNAL, "Received a compressed message, but no compression was negotiated");
          need = h.readUInt32BE(1);
          if (need > limit) return fail(Code.RESOURCE_EXHAUSTED, `Received message larger than max (${need} vs ${opts.maxReceiveBytes})`);
          chunk = h.subarray(5);
          parts = [];
          have = 0;
        }
        const n = Math.min(need - have, chunk.length);
        if (n === chunk.length && have === 0 && n === need) {
          onMessage(chunk);
          need = -1;
          return;
        }
        parts.push(chunk.subarray(0, n));
        have += n;
        chunk = chunk.subarray(n);
        if (have === need) {
          onMessage(parts.length === 1 ? parts[0]! : Buffer.concat(parts, have));
          need = -1;
        }
      }
    };

    stream.on("response", (h) => {
      gotBytes = true;
      httpStatus = Number(h[":status"]);
      if (h["grpc-status"] !== undefined) {
        grpcStatus = Number(h["grpc-status"]);
        grpcMessage = decodeMessage(h["grpc-message"]);
      }
    });
    stream.on("trailers", (h) => {
      if (h["grpc-status"] !== undefined) {
        grpcStatus = Number(h["grpc-status"]);
        grpcMessage = decodeMessage(h["grpc-message"]);
      }
    });
    stream.on("data", (c: Buffer) => take(c));
    stream.on("error", () => undefined); // the outcome is decided on close
    stream.on("close", () => {
      if (done) return;
      const code = stream.rstCode;
      // Retried only when the request provably never reached a handler: the stream was refused, or the connection
      // never came up. A connection that dropped mid-call is UNAVAILABLE, not retried (the call may have run).
      if (!gotBytes && !retried && (code === NGHTTP2_REFUSED_STREAM || sess.connecting || !sessionConnected.has(sess))) {
        // Never reached the backend's handler: once more on a fresh connection (grpc-js transparent retry).
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (signal?.aborted) return resolve({ ok: false, code: Code.CANCELLED, message: "Cancelled on client" });
        if (Date.now() >= deadline) return resolve({ ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
        return attempt(index, true, path, request, headers, deadline, signal, resolve, true);
      }
      if (!gotBytes && (sess.destroyed || sess.closed || !sessionConnected.has(sess))) {
        return finish({ ok: false, code: Code.UNAVAILABLE, message: `backend ${opts.address} is unavailable: ${lastError || "the connection closed before a response"}` });
      }
      if (httpStatus !== 200 && grpcStatus === undefined && gotBytes) {
        return finish({ ok: false, code: HTTP_TO_GRPC[httpStatus] ?? Code.UNKNOWN, message: `Received HTTP status code ${httpStatus}` });
      }
      if (grpcStatus === undefined) {
        // No status: grpc-js's mapping of how the stream ended.
        if (sess.destroyed || sess.closed) return finish({ ok: false, code: Code.UNAVAILABLE, message: `Connection dropped (backend ${opts.address})` });
        const [c, text] = RST_TO_GRPC[code ?? -1] ?? [Code.INTERNAL, `Received RST_STREAM with code ${code}`];
        return finish({ ok: false, code: c, message: text });
      }
      if (grpcStatus !== 0) return finish({ ok: false, code: (grpcStatus in Code ? grpcStatus : Code.UNKNOWN) as Code, message: grpcMessage });
      if (extra) return finish({ ok: false, code: Code.UNIMPLEMENTED, message: "Too many responses received" });
      if (response === null) return finish({ ok: false, code: Code.UNIMPLEMENTED, message: "No message received" });
      finish({ ok: true, bytes: response });
    });
    stream.end(request);
  };

  return {
    call(path, message, metadata, deadline, signal) {
      return new Promise<CallOutcome>((resolve) => {
        if (closed) return resolve({ ok: false, code: Code.UNAVAILABLE, message: `backend ${opts.address} is closed` });
        if (signal?.aborted) return resolve({ ok: false, code: Code.CANCELLED, message: "the caller cancelled the call" });
        const left = deadline - Date.now();
        if (!(left > 0)) return resolve({ ok: false, code: Code.DEADLINE_EXCEEDED, message: "Deadline exceeded" });
        const framed = Buffer.allocUnsafe(5 + message.length);
        framed[0] = 0;
        framed.writeUInt32BE(message.length, 1);
        message.copy(framed, 5);
        const headers: http2.OutgoingHttpHeaders = metadata.toHttp2Headers();
        headers[":method"] = "POST";
        headers[":path"] = path;
        headers["content-type"] = "application/grpc";
        headers["te"] = "trailers";
        headers["grpc-accept-encoding"] = "identity";
        cursor = cursor + 1 >= sessions.length ? 0 : cursor + 1;
        attempt(cursor, false, path, framed, headers, deadline, signal, resolve, false);
      });
    },
    close() {
      closed = true;
      for (const s of sessions) s?.close();
      sessions.fill(undefined);
    },
  };
}
