import { STATUS_CODES } from "node:http";
import { createServer } from "node:net";
import uws from "uWebSockets.js";
import { Code, httpStatusOf } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { apiKeyRefusal, type Authenticator } from "../ops/auth.js";
import { checkHead } from "./head-limits.js";
import { createUnreadReplies, STREAM_THRESHOLD_BYTES, streamWriter, writeReply, type PendingReply, type StreamWriter } from "./reply-writer.js";
import { freeBuffer } from "./free-buffer.js";
import type { Logger } from "../observe/logger.js";
import type { CounterMetric, HistogramMetric } from "../observe/metrics.js";
import { echo } from "../shared/echo.js";
import { LazyAbort, type CancelSignal } from "../shared/signals.js";
import { loadTls, logServing, watchTls, type LoadedTls, type TlsFiles, type TlsWatch } from "../config/tls.js";
import { decodeUtf8, locateInvalidUtf8InJson } from "../shared/utf8.js";
import { somaxconn } from "../shared/accept-backlog.js";
import { browserRefusal, createOriginPolicy, hostRefusal, originCheck, type OriginPolicy } from "./origin.js";

/** A parsed REST request, valid after the uWS handler returned (headers and body are copied). */
export interface RestRequest {
  /** Upper-case method. */
  method: string;
  /** Raw path, not decoded. */
  path: string;
  /** Path parameters, percent-decoded (`{key+}` parameters keep their `/`). */
  params: Record<string, string>;
  query: URLSearchParams;
  /** Lower-case header names. */
  headers: Record<string, string>;
  /** The whole body (empty for GET). */
  body: Buffer;
  /** Aborted when the client goes away (an AbortController made when first asked for). */
  readonly signal: AbortSignal;
  /** The same without an AbortController, for work that takes a CancelSignal (invoke). */
  readonly cancellation: CancelSignal;
  /** The body parsed as a JSON object; INVALID_ARGUMENT naming the problem when it is not one. */
  json(): Record<string, unknown>;
}

/** What a handler answers. `body` is sent as JSON unless `raw` is given, or `stream` writes the body itself. */
export interface RestReply {
  status?: number;
  body?: unknown;
  raw?: Uint8Array | string;
  /**
   * `raw` bytes are this reply's own (made for it, kept nowhere else): the server frees them as soon as they are
   * written or the client left, rather than at a later garbage collection. Never for a cached or shared buffer.
   */
  rawOwned?: boolean;
  contentType?: string;
  headers?: Record<string, string>;
  /** A streamed body (chunked): called once the status and headers are written; it must call `out.end()`. */
  stream?: (out: RestStream) => void;
}

/** A streamed response body with backpressure (uWS buffers a refused write; `onWritable` says when it drained). */
export interface RestStream {
  /** Write a chunk; false when the client is behind (the chunk is kept: wait for `onWritable` before the next). */
  write(chunk: string): boolean;
  /** Called once, when the buffered output drained after a `write` that returned false. */
  onWritable(cb: () => void): void;
  /** End the body. Safe after the client went away (then it does nothing). */
  end(chunk?: string): void;
}

/** Extra uWS handlers (e.g. WebSocket routes) a facility attaches to the REST server's app before it listens. */
export type AppHook = (app: uws.TemplatedApp, deps: RestServerDeps) => void;

/** One route. `path` segments in braces are parameters; `{name+}` takes the rest of the path. */
export interface Route {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  handler: (req: RestRequest) => Promise<RestReply>;
  /** Require x-api-key. Default true. */
  auth?: boolean;
}

/** A required query parameter; INVALID_ARGUMENT naming it when it is missing or empty. */
export function requiredQuery(req: RestRequest, name: string): string {
  const v = req.query.get(name);
  if (!v) throw new GatewayError(Code.INVALID_ARGUMENT, `query parameter ${name} is required`);
  return v;
}

/** A JSON reply. */
export function json(body: unknown, status = 200): RestReply {
  return { status, body };
}

interface Compiled {
  route: Route;
  segments: Array<{ literal: string } | { param: string; rest: boolean }>;
  literals: number;
}

function compile(route: Route): Compiled {
  const segments = route.path
    .split("/")
    .slice(1)
    .map((s) => {
      const m = /^\{([A-Za-z_]+)(\+?)\}$/.exec(s);
      return m ? { param: m[1]!, rest: m[2] === "+" } : { literal: s };
    });
  return { route, segments, literals: segments.filter((s) => "literal" in s).length };
}

function decode(segment: string, name: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new GatewayError(Code.INVALID_ARGUMENT, `path parameter ${name} is not valid percent-encoding: ${echo(segment)}`);
  }
}

function match(c: Compiled, parts: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < c.segments.length; i++) {
    const seg = c.segments[i]!;
    if ("literal" in seg) {
      if (parts[i] !== seg.literal) return undefined;
      continue;
    }
    if (seg.rest) {
      const rest = parts.slice(i);
      if (rest.length === 0 || rest.some((p) => p === "")) return undefined;
      params[seg.param] = rest.map((p) => decode(p, seg.param)).join("/");
      return params;
    }
    if (parts[i] === undefined || parts[i] === "") return undefined;
    params[seg.param] = decode(parts[i]!, seg.param);
  }
  return parts.length === c.segments.length ? params : undefined;
}

/**
 * Routes decided by a table of their own, rebuilt at run time (the REST transcoding routes): asked only when no route
 * of the static table has the request's method and path, so the gateway's own routes always win.
 */
export interface DynamicRoutes {
  /** The route and its parameters; or the methods the path has (405 with Allow); or undefined (404). May throw INVALID_ARGUMENT. */
  resolve(method: string, path: string): { route: Route; params: Record<string, string> } | { allowed: readonly string[] } | undefined;
}

/** Where a request goes: a route and its parameters, or a reply to send at once (404, 405, 503, 401). */
export interface RouteDecision {
  /** The matched route (also set with a 503/401 reply, for the metrics label). */
  route?: Route;
  params: Record<string, string>;
  /** When set, answer with this and run no handler. */
  reply?: RestReply;
}

/**
 * The transport-independent part of routing, shared by the uWS server and the `node:http` baseline in bench/rest:
 * match the path (literal segments win over parameters; a wrong method is 405 with Allow), then the shutdown gate and
 * x-api-key, and with no API key (a `loopbackOnly` origin policy) the Host rule in its place: a route that would need
 * the key is refused 403 for a Host that is not loopback (DNS rebinding). Throws INVALID_ARGUMENT for a path
 * parameter that is not valid percent-encoding.
 */
export function createRouteTable(routes: readonly Route[], deps: Pick<RestServerDeps, "auth" | "isClosing" | "dynamic" | "origins">): (method: string, path: string, headers: Record<string, string>) => RouteDecision {
  const compiled = routes.map(compile);
  // Each route's leading literal segments (one or two): a path whose first segment, or first two, are none of them
  // matches no route, so a dynamic route's request skips the scan. A route starting with a parameter turns this off.
  let heads: Set<string> | undefined = new Set();
  for (const c of compiled) {
    const first = c.segments[0]!;
    const second = c.segments[1];
    if (!("literal" in first)) heads = undefined;
    else heads?.add(second && "literal" in second ? `${first.literal}/${second.literal}` : first.literal);
  }
  // "METHOD path" of each route without parameters (the first, as in the scan): such a route is the best match of its
  // own path and method (no route has more literal segments on it), so a request for it skips the scan over every
  // route (the hot path: invoke). Only for a path without '%', where the scan could not fail decoding a parameter.
  const exact = new Map<string, Route>();
  for (const c of compiled) {
    const key = `${c.route.method} ${c.route.path}`;
    if (c.literals === c.segments.length && !exact.has(key)) exact.set(key, c.route);
  }
  const refuse = (e: GatewayError, route?: Route): RouteDecision => ({ ...(route ? { route } : {}), params: {}, reply: { status: httpStatusOf(e.code), body: errorBody(e) } });
  const admit = (route: Route, params: Record<string, string>, headers: Record<string, string>): RouteDecision => {
    if (deps.isClosing()) return refuse(new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down"), route);
    if (route.auth === false) return { route, params };
    const refused = apiKeyRefusal(deps.auth, headers["x-api-key"]);
    if (refused) return refuse(refused, route);
    // No key configured: the Host must be loopback, so a site whose name its DNS re-resolved to 127.0.0.1 cannot use
    // the routes the key would guard (its requests are "same origin" to the browser). Routes without a key (health,
    // metrics, the console's files) answer any Host, as they answer anyone who reaches the port when keys are set.
    const host = headers["host"];
    if (deps.origins && !deps.origins.hostAllowed(host)) return refuse(hostRefusal(host ?? ""), route);
    return { route, params };
  };
  return (method, path, headers) => {
    const literal = path.includes("%") ? undefined : exact.get(`${method} ${path}`);
    if (literal !== undefined) return admit(literal, {}, headers);
    const parts = path.split("/").slice(1);
    let best: { c: Compiled; params: Record<string, string> } | undefined;
    const allowed = new Set<string>();
    const scan = !deps.dynamic || !heads || heads.has(parts[0]!) || heads.has(`${parts[0]}/${parts[1]}`);
    if (scan) for (const c of compiled) {
      const params = match(c, parts);
      if (!params) continue;
      allowed.add(c.route.method);
      if (c.route.method !== method) continue;
      if (!best || c.literals > best.c.literals) best = { c, params };
    }
    if (!best && deps.dynamic) {
      const d = deps.dynamic.resolve(method, path);
      if (d && "route" in d) return admit(d.route, d.params, headers);
      if (d) for (const m of d.allowed) allowed.add(m);
    }
    if (!best) {
      if (allowed.size === 0) return refuse(new GatewayError(Code.NOT_FOUND, `no route for ${echo(method, 16)} ${echo(path)}`));
      const list = [...allowed].join(", ");
      return {
        params: {},
        reply: { status: 405, headers: { allow: list }, body: errorBody(new GatewayError(Code.UNIMPLEMENTED, `method ${echo(method, 16)} is not allowed on ${echo(path)}; allowed: ${list}`)) },
      };
    }
    return admit(best.c.route, best.params, headers);
  };
}

/** The RestRequest a handler gets, once the body has been read. */
export function createRestRequest(
  method: string,
  path: string,
  params: Record<string, string>,
  query: URLSearchParams,
  headers: Record<string, string>,
  body: Buffer,
  cancel: LazyAbort | AbortSignal,
): RestRequest {
  const lazy = cancel instanceof LazyAbort ? cancel : undefined;
  return {
    method,
    path,
    params,
    query,
    headers,
    body,
    get signal() {
      return lazy ? lazy.signal : (cancel as AbortSignal);
    },
    get cancellation() {
      return lazy ? lazy.cancellation : (cancel as AbortSignal);
    },
    json: () => jsonObjectBody(body),
  };
}

/**
 * A uWS request's headers, a repeated header joined as RFC 9110 5.3 says so no copy is silently dropped (uWS
 * `getHeader` returns only the first; a plain `forEach` into an object keeps only the last). Every uWS front (REST,
 * WebSocket upgrades, SSE) reads headers through this, so a repeated x-api-key is refused the same way on each.
 */
export function requestHeaders(req: uws.HttpRequest): { headers: Record<string, string>; count: number; bytes: number } {
  // Without a prototype: a header named `constructor` is a header like any other (on `{}` it found Object.prototype's
  // function and was joined to it), and V8 keeps such an object in dictionary mode from the start,
  // so every request's headers have one hidden class whatever the client's names and order. On `{}` each client's
  // order made a hidden class of its own, and the first request of a client the warm-up had not imitated deoptimized
  // the router's reads of `x-api-key` and `content-length` ("wrong map").
  const headers = Object.create(null) as Record<string, string>;
  let count = 0;
  // Names and values of the joined headers, in bytes (checkHead's limit), counted in the same walk.
  let bytes = 0;
  req.forEach((k, v) => {
    count++;
    const seen = headers[k];
    bytes += (seen === undefined ? k.length : 2) + Buffer.byteLength(v);
    headers[k] = seen === undefined ? v : `${seen}, ${v}`;
  });
  return { headers, count, bytes };
}

/** Dependencies of the REST server. */
export interface RestServerDeps {
  auth: Authenticator;
  logger: Logger;
  maxBodyBytes: number;
  /** How long an oversized body is read and thrown away before its 413 (readBody), ms. Default 5000. */
  bodyDiscardMs?: number;
  /** Close a connection whose client accepts no reply bytes for this long, ms. Default 10000. */
  writeStallTimeoutMs?: number;
  /** Bytes of large replies this server holds for clients that have not read them (reply-writer.ts). Default 64 MiB. */
  maxUnreadReplyBytes?: number;
  isClosing(): boolean;
  requests: CounterMetric<"route" | "method" | "status">;
  latency: HistogramMetric<"route" | "method" | "status">;
  /** Attached to the uWS app before the catch-all HTTP handler (WebSocket routes). Run again for each TLS reload's app. */
  appHooks?: readonly AppHook[];
  /** Serve HTTPS/WSS with these files (checked again here), reloaded on change. Default: cleartext. */
  tls?: TlsFiles;
  /** How often the TLS files are checked for a change, ms. Default 2000. */
  tlsReloadIntervalMs?: number;
  /** Routes decided at run time, after the static ones (REST transcoding). */
  dynamic?: DynamicRoutes;
  /**
   * Which browsers and Hosts are served (src/http/origin.ts; gatewayServerDeps: `--cors-origin`, loopback Hosts only
   * when no API key is configured). A REST request with an Origin the policy does not allow is refused 403 before
   * routing and before its body is read. With a `loopbackOnly` policy, a Host it does not serve is refused 403 on every
   * route that needs x-api-key (in the key's place: keyless routes answer any Host) and on every handler the app hooks
   * attach (WebSocket upgrades, SSE, browser RPC). Default: same-origin pages only, any Host.
   */
  origins?: OriginPolicy;
  /** Listening sockets on the port (SO_REUSEPORT), for a deeper accept queue than one socket's (listenSocketsPerApp). Default 1. */
  listenSockets?: number;
  /**
   * Run before the server listens on its port, with the app already serving on a 127.0.0.1 ephemeral port: the
   * gateway's own warm-up calls (src/main/own-warmup.ts). That listener closes when it settles; `warming.closeAll`
   * closes the app meanwhile (a thread that must exit), and the server then does not listen. Cleartext only.
   */
  beforeListen?(warming: WarmingServer): Promise<void>;
}

/** The REST server while its `beforeListen` runs. */
export interface WarmingServer {
  /** The 127.0.0.1 port it serves on meanwhile. */
  readonly port: number;
  /** Close the app and every connection now; the server will not listen. */
  closeAll(): void;
}

/** A listening REST server. */
export interface RestServer {
  readonly port: number;
  /** Requests being handled right now. */
  readonly inflight: number;
  /**
   * Every route served, as "METHOD /path": the table's routes, then the native uWS handlers the app hooks attached
   * ("WS /path" for a WebSocket route). The route-by-outcome test checks each against src/ops/outcomes.ts.
   */
  readonly routes: readonly string[];
  /** Stop listening (in-flight requests still complete; while closing, responses close their connection). */
  stopListening(): void;
  /** Close the connection of every request still in flight (their handlers see the abort). Safe to call twice. */
  closeInflight(): void;
  /**
   * Stop listening and force-close every connection, WebSockets included (uWS App.close). A uWS worker thread must
   * have closed everything before it exits: Node aborts the process when a thread ends with uWS sockets still open.
   */
  closeAll(): void;
}

const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** The methods the request metrics name; any other is counted as OTHER, so a client cannot add series at will. */
const METRIC_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** The `method` label of a request (upper case): one of METRIC_METHODS, else `OTHER`. */
export function methodLabel(method: string): string {
  return METRIC_METHODS.has(method) ? method : "OTHER";
}

/** RestServerDeps.maxUnreadReplyBytes by default. */
export const DEFAULT_MAX_UNREAD_REPLY_BYTES = 64 * 1024 * 1024;

/** The REST error body: google.rpc.Status JSON. */
export function errorBody(e: GatewayError): { code: number; message: string; details: unknown[] } {
  return { code: e.code, message: e.rawMessage, details: [] };
}

/** A request body parsed as a JSON object (RestRequest.json); INVALID_ARGUMENT saying what is wrong with it. */
export function jsonObjectBody(body: Buffer): Record<string, unknown> {
  if (body.length === 0) throw new GatewayError(Code.INVALID_ARGUMENT, "request body is empty; expected a JSON object");
  const decoded = decodeUtf8(body);
  if ("invalidAt" in decoded) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `request body is not valid UTF-8 (${locateInvalidUtf8InJson(body, decoded.invalidAt)})`);
  }
  let v: unknown;
  try {
    v = JSON.parse(decoded.text);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `request body is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new GatewayError(Code.INVALID_ARGUMENT, "request body must be a JSON object");
  }
  return v as Record<string, unknown>;
}

/**
 * How much of an oversized body is read and thrown away before its 413 goes out. uWS closes a connection at once after
 * the FIN of a reply that closes it; with the client's bytes still unread, the kernel answers them with a reset, and a
 * client still sending reads "connection reset" instead of the 413 (nginx's lingering close exists for the same
 * reason). Past either bound the answer goes out anyway.
 */
export const DISCARD_BYTES = 64 * 1024 * 1024;
export const DEFAULT_DISCARD_MS = 5_000;

/**
 * Read a uWS request's whole body (every uWS front that takes one reads it here): `then` gets it, or undefined when it
 * is larger than `--max-body-bytes`. An oversized body (declared in content-length or found while reading) is read to
 * its end and thrown away first, up to DISCARD_BYTES past the limit and `bodyDiscardMs`; a declared length past that
 * bound is refused at once. Nothing past the limit is kept. Chunks stop being read once `stopped()` (the request was
 * answered or aborted).
 */
export function readBody(
  res: uws.HttpResponse,
  limits: Pick<RestServerDeps, "maxBodyBytes" | "bodyDiscardMs">,
  declared: number,
  stopped: () => boolean,
  then: (body: Buffer | undefined) => void,
): void {
  const max = limits.maxBodyBytes;
  if (declared > max + DISCARD_BYTES) return then(undefined);
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  let timer: NodeJS.Timeout | undefined;
  const refuse = (): void => {
    clearTimeout(timer);
    if (!stopped()) then(undefined);
  };
  const discard = (): void => {
    over = true;
    chunks.length = 0;
    timer = setTimeout(refuse, limits.bodyDiscardMs ?? DEFAULT_DISCARD_MS);
    timer.unref();
  };
  if (declared > max) discard();
  res.onData((chunk, isLast) => {
    if (stopped()) return clearTimeout(timer);
    size += chunk.byteLength;
    if (!over && size > max) discard();
    if (over) {
      if (isLast || size > max + DISCARD_BYTES) refuse();
      return;
    }
    // uWS reuses the chunk's memory after this callback: copy it.
    chunks.push(Buffer.from(Buffer.from(chunk)));
    if (isLast) then(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
}

/**
 * A free port on `host`, for uWS apps that share an ephemeral one (worker threads, a TLS reload's new app): uSockets
 * cannot bind a second SO_REUSEPORT socket to a port the kernel picked for port 0 (the first listen would have to be
 * on the chosen port already).
 */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, host, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** The accept queue of one uWS listening socket: uSockets listens with this backlog, and no option changes it. */
export const UWS_LISTEN_BACKLOG = 512;

/**
 * How many listening sockets each of `apps` uWS apps on one port opens so the port queues `backlog` connections: the
 * kernel spreads new connections over a port's SO_REUSEPORT sockets, each queueing at most UWS_LISTEN_BACKLOG (or
 * somaxconn, when lower). Linux only: elsewhere SO_REUSEPORT does not spread connections, and one socket is opened.
 */
export function listenSocketsPerApp(backlog: number, apps: number): number {
  if (process.platform !== "linux") return 1;
  const perSocket = Math.min(UWS_LISTEN_BACKLOG, somaxconn());
  return Math.max(1, Math.ceil(Math.ceil(backlog / perSocket) / Math.max(1, apps)));
}

/** Listen `count` sockets of `app` on host:port (uWS listens synchronously); on a failure closes those made and returns []. */
function listenAll(app: uws.TemplatedApp, host: string, port: number, count: number): uws.us_listen_socket[] {
  const made: uws.us_listen_socket[] = [];
  for (let i = 0; i < count; i++) {
    let token: uws.us_listen_socket | false = false;
    app.listen(host, i === 0 ? port : uws.us_socket_local_port(made[0]!), (t) => {
      token = t;
    });
    if (!token) {
      for (const t of made) uws.us_listen_socket_close(t);
      return [];
    }
    made.push(token);
  }
  return made;
}

/** Start the uWS REST endpoint on host:port with the given routes. */
export async function startRestServer(host: string, port: number, routes: Route[], deps: RestServerDeps): Promise<RestServer> {
  const sockets = Math.max(1, deps.listenSockets ?? 1);
  // A TLS reload listens a second app on this port (see `reload`), and further listening sockets join the first: both
  // need a port chosen before the first listen.
  if ((deps.tls || sockets > 1) && port === 0) port = await freePort(host);
  const resolve = createRouteTable(routes, deps);
  const origins = deps.origins ?? createOriginPolicy([]);
  /** Bytes of large replies held for clients that have not read them (--max-unread-reply-bytes). */
  const unread = createUnreadReplies(deps.maxUnreadReplyBytes ?? DEFAULT_MAX_UNREAD_REPLY_BYTES);
  let inflight = 0;
  /** Responses not yet ended, so shutdown can close their connections. */
  const open = new Set<uws.HttpResponse>();
  const served = routes.map((r) => `${r.method} ${r.path}`);
  let hooksRun = false;
  /**
   * A uWS app with every route and hook. With TLS, uSockets reads the files itself when the app is made (an SSLApp's
   * certificate cannot be swapped), so a reload is a new app (see `reload` below).
   */
  const build = (tls: LoadedTls | undefined): uws.TemplatedApp => {
    const app = tls ? uws.SSLApp(uwsTlsOptions(tls)) : uws.App();
    const hooked = hooksRun ? app : recordingApp(app, served);
    for (const hook of deps.appHooks ?? []) hook(origins.loopbackOnly ? hostGuardedApp(hooked, app, origins) : hooked, deps);
    hooksRun = true;
    app.any("/*", onRequest);
    return app;
  };

  const onRequest = (res: uws.HttpResponse, req: uws.HttpRequest): void => {
    const started = performance.now();
    const method = req.getMethod().toUpperCase();
    /** The metrics label: bounded whatever method token the client sent. */
    const label = methodLabel(method);
    const path = req.getUrl();
    const query = new URLSearchParams(req.getQuery() ?? "");
    const { headers, count: headerCount, bytes: headerBytes } = requestHeaders(req);
    const cancel = new LazyAbort();
    let done = false;
    let routeName = "unmatched";
    inflight++;
    open.add(res);
    /** The reply still being streamed, if any. */
    let writing: PendingReply | StreamWriter | undefined;
    res.onAborted(() => {
      writing?.aborted();
      if (done) return;
      done = true;
      inflight--;
      open.delete(res);
      cancel.abort(new GatewayError(Code.CANCELLED, "the client closed the request"));
      deps.requests.inc({ route: routeName, method: label, status: 499 });
    });

    const send = (reply: RestReply, closeConnection = false): void => {
      if (done) return;
      // While shutting down, end kept-alive connections after this response instead of waiting for an idle timeout.
      if (deps.isClosing()) closeConnection = true;
      let payload: string | Uint8Array = "";
      let large: Buffer | undefined;
      let owned = false;
      if (!reply.stream) {
        payload = reply.raw ?? JSON.stringify(reply.body ?? null);
        if (payload.length > STREAM_THRESHOLD_BYTES) {
          large = typeof payload === "string" ? Buffer.from(payload) : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
          owned = typeof payload === "string" || reply.rawOwned === true;
          payload = large;
          if (!closeConnection && !unread.admit(large.length)) {
            if (owned) freeBuffer(large);
            const e = new GatewayError(
              Code.UNAVAILABLE,
              `${unread.count} replies of ${unread.held} bytes are waiting for clients to read them, the most this server holds (--max-unread-reply-bytes ${unread.maxBytes}); retry shortly`,
            );
            return send({ status: httpStatusOf(e.code), headers: { "retry-after": "1" }, body: errorBody(e) });
          }
        }
      }
      done = true;
      inflight--;
      open.delete(res);
      const status = reply.status ?? 200;
      if (reply.stream) return void streamReply(reply, status);
      const writeHead = (): void => {
        res.writeStatus(`${status} ${STATUS_CODES[status] ?? ""}`);
        res.writeHeader("content-type", reply.contentType ?? "application/json");
        for (const [k, v] of Object.entries(reply.headers ?? {})) res.writeHeader(k, v);
      };
      if (!closeConnection && large) {
        // A large reply goes out as the client reads it; the response stays open (and closable) until then.
        open.add(res);
        writing = writeReply(res, writeHead, large, { stallTimeoutMs: deps.writeStallTimeoutMs ?? 10_000, unread, free: owned, onFinish: () => open.delete(res) });
      } else {
        res.cork(() => {
          writeHead();
          res.end(payload, closeConnection);
        });
        // end() copied what the socket refused into uWS's own buffer.
        if (large && owned) freeBuffer(large);
      }
      deps.requests.inc({ route: routeName, method: label, status });
      deps.latency.observe({ route: routeName, method: label, status }, (performance.now() - started) / 1000);
    };
    // A streamed body: `done` only once it ends, so the request counts as in flight (and shutdown can close it).
    const streamReply = (reply: RestReply, status: number): void => {
      done = false;
      inflight++;
      open.add(res);
      res.cork(() => {
        res.writeStatus(`${status} ${STATUS_CODES[status] ?? ""}`);
        res.writeHeader("content-type", reply.contentType ?? "application/json");
        for (const [k, v] of Object.entries(reply.headers ?? {})) res.writeHeader(k, v);
      });
      const out = streamWriter(res, {
        stallTimeoutMs: deps.writeStallTimeoutMs ?? 10_000,
        onEnd: () => {
          done = true;
          inflight--;
          open.delete(res);
          deps.requests.inc({ route: routeName, method: label, status });
          deps.latency.observe({ route: routeName, method: label, status }, (performance.now() - started) / 1000);
        },
      });
      writing = out;
      reply.stream!(out);
    };
    const fail = (e: unknown, closeConnection = false): void => {
      const err = GatewayError.from(e);
      if (err.code === Code.INTERNAL || err.code === Code.UNKNOWN) deps.logger.error({ err: e, path, method }, "REST handler failed");
      send({ status: httpStatusOf(err.code), body: errorBody(err) }, closeConnection);
    };

    try {
      const oversized = checkHead(path, req.getQuery() ?? "", headerCount, headerBytes);
      if (oversized) return send({ status: oversized.status, body: errorBody(oversized.error) }, true);
      // A browser Origin that is neither the gateway's own nor on --cors-origin: refused before any route runs or any
      // body is read. A form or a no-cors fetch is a "simple" request that needs no preflight, so this is what stops
      // another site from driving the REST API through a visitor's browser. (The Host rule is in the route table.)
      const refusedOrigin = originCheck(origins, headers["origin"], headers["host"]);
      if (refusedOrigin) return send({ status: httpStatusOf(refusedOrigin.code), body: errorBody(refusedOrigin) });
      const decision = resolve(method, path, headers);
      if (decision.route) routeName = decision.route.path;
      if (decision.reply) return send(decision.reply);
      const route = decision.route!;
      const run = (body: Buffer): void => {
        route.handler(createRestRequest(method, path, decision.params, query, headers, body, cancel)).then(send, fail);
      };
      if (!BODY_METHODS.has(method)) return run(Buffer.alloc(0));
      const declared = Number(headers["content-length"] ?? 0);
      const tooLarge = (): void => {
        const what = declared > deps.maxBodyBytes ? `of ${declared} bytes ` : "";
        send({ status: 413, body: errorBody(new GatewayError(Code.RESOURCE_EXHAUSTED, `request body ${what}exceeds the limit of ${deps.maxBodyBytes} bytes`)) }, true);
      };
      readBody(res, deps, declared, () => done, (body) => (body === undefined ? tooLarge() : run(body)));
    } catch (e) {
      fail(e);
    }
  };

  let tls: LoadedTls | undefined;
  let app: uws.TemplatedApp;
  try {
    tls = deps.tls ? loadTls(deps.tls) : undefined;
    app = build(tls);
  } catch (e) {
    throw GatewayError.from(e, Code.INVALID_ARGUMENT);
  }
  /** Apps replaced by a certificate reload, still serving the connections they accepted (closed by closeAll). */
  const retired: uws.TemplatedApp[] = [];
  /** The listening sockets (empty once stopped). */
  let listening: uws.us_listen_socket[] = [];
  let watch: TlsWatch | undefined;
  /**
   * A new certificate: a new app listens on the same port (uSockets listens with SO_REUSEPORT, as the uWS threads do),
   * then the old app's listen socket closes. New connections reach the new app; the old one keeps its open
   * connections (REST, WebSocket, SSE) until they end. The listen is synchronous in uWS, so `listening` is never stale.
   */
  const reload = (next: LoadedTls, boundPort: number): void => {
    if (listening.length === 0) return;
    const fresh = build(next);
    const tokens = listenAll(fresh, host, boundPort, sockets);
    if (tokens.length === 0) {
      (fresh as unknown as { close?: () => void }).close?.();
      throw new GatewayError(Code.UNAVAILABLE, `the reloaded HTTPS app cannot listen on ${host}:${boundPort}`);
    }
    for (const t of listening) uws.us_listen_socket_close(t);
    listening = tokens;
    retired.push(app);
    app = fresh;
    // Bounded: connections that outlived this many certificate changes are closed (clients reconnect to the new one).
    if (retired.length > MAX_RETIRED_APPS) (retired.shift() as unknown as { close?: () => void }).close?.();
  };

  if (deps.beforeListen) await warmBeforeListening(app, deps.beforeListen, tls !== undefined);
  listening = listenAll(app, host, port, sockets);
  if (listening.length === 0) throw new GatewayError(Code.UNAVAILABLE, `REST server cannot listen on ${host}:${port}`);
  const boundPort = uws.us_socket_local_port(listening[0]!);
  if (tls) {
    logServing(deps.logger.child({ port: "http" }), tls, "HTTP port serves TLS");
    if (tls.ca) deps.logger.warn({ clientCa: tls.files.clientCa }, "HTTP port: a client certificate presented is checked against --tls-client-ca, but uWebSockets.js cannot require one; mutual TLS is enforced on the gRPC port only");
    watch = watchTls(tls, (next) => reload(next, boundPort), deps.logger.child({ port: "http" }), deps.tlsReloadIntervalMs);
  }
  return {
    port: boundPort,
    get inflight() {
      return inflight;
    },
    routes: served,
    stopListening() {
      watch?.stop();
      for (const t of listening) uws.us_listen_socket_close(t);
      listening = [];
    },
    closeInflight() {
      for (const res of [...open]) res.close();
      open.clear();
    },
    closeAll() {
      watch?.stop();
      listening = [];
      open.clear();
      // Typed in newer uWebSockets.js only; present in the native binary this package ships.
      for (const a of [...retired, app]) (a as unknown as { close?: () => void }).close?.();
    },
  };
}

/** Serve `app` on a 127.0.0.1 ephemeral port while `run` runs (RestServerDeps.beforeListen); rejects if it closed the app. */
async function warmBeforeListening(app: uws.TemplatedApp, run: NonNullable<RestServerDeps["beforeListen"]>, tls: boolean): Promise<void> {
  if (tls) throw new GatewayError(Code.INVALID_ARGUMENT, "a REST server over TLS cannot warm up on a cleartext loopback port");
  const [token] = listenAll(app, "127.0.0.1", 0, 1);
  if (token === undefined) throw new GatewayError(Code.UNAVAILABLE, "REST server cannot listen on a 127.0.0.1 ephemeral port for its warm-up");
  let closed = false;
  try {
    await run({
      port: uws.us_socket_local_port(token),
      closeAll() {
        closed = true;
        (app as unknown as { close?: () => void }).close?.();
      },
    });
  } finally {
    if (!closed) uws.us_listen_socket_close(token);
  }
  if (closed) throw new GatewayError(Code.UNAVAILABLE, "the REST server was closed during its warm-up");
}

/** Apps kept serving their connections after a TLS reload replaced them; the oldest beyond this is closed. */
export const MAX_RETIRED_APPS = 4;

/** uSockets' TLS options for a checked pair (the files, read again by uSockets; TLS 1.2 is its floor). */
function uwsTlsOptions(t: LoadedTls): uws.AppOptions {
  return { cert_file_name: t.files.cert, key_file_name: t.files.key, ...(t.files.clientCa ? { ca_file_name: t.files.clientCa } : {}) };
}

const NATIVE_VERBS: Record<string, string> = { get: "GET", post: "POST", put: "PUT", del: "DELETE", options: "OPTIONS", any: "ANY", ws: "WS" };

/** The uWS methods that attach an HTTP handler `(res, req)` as their second argument. */
const HTTP_VERBS = new Set(["get", "post", "put", "patch", "del", "options", "head", "connect", "trace", "any"]);

/**
 * `app` (the view an app hook gets) with the policy's Host rule in front of every HTTP handler and WebSocket upgrade
 * attached through it: a request whose Host the policy does not serve gets 403 and never reaches the hook's handler.
 * Only for a `loopbackOnly` policy (no API key): the web fronts check their Origin themselves, but the DNS-rebinding
 * Host rule must hold for every handler on the port, whichever policy each front was given. `raw` is the uWS app
 * itself, whose methods return it (chaining stays on the guarded view).
 */
function hostGuardedApp(app: uws.TemplatedApp, raw: uws.TemplatedApp, policy: OriginPolicy): uws.TemplatedApp {
  const refused = (res: uws.HttpResponse, req: uws.HttpRequest): boolean => {
    const host = req.getHeader("host");
    if (policy.hostAllowed(host)) return false;
    const e = browserRefusal(policy, undefined, host)!;
    const status = httpStatusOf(e.code);
    res.cork(() => {
      res.writeStatus(`${status} ${STATUS_CODES[status] ?? ""}`);
      res.writeHeader("content-type", "application/json");
      res.end(JSON.stringify(errorBody(e)));
    });
    return true;
  };
  const guarded: uws.TemplatedApp = new Proxy(app, {
    get(target, key) {
      const value = Reflect.get(target, key) as unknown;
      if (typeof value !== "function") return value;
      const verb = typeof key === "string" ? key : "";
      return (...args: unknown[]) => {
        if (HTTP_VERBS.has(verb) && typeof args[1] === "function") {
          const handler = args[1] as (res: uws.HttpResponse, req: uws.HttpRequest) => void;
          args[1] = (res: uws.HttpResponse, req: uws.HttpRequest) => (refused(res, req) ? undefined : handler(res, req));
        } else if (verb === "ws" && typeof args[1] === "object" && args[1] !== null) {
          const behavior = args[1] as uws.WebSocketBehavior<unknown>;
          const upgrade = behavior.upgrade;
          args[1] = {
            ...behavior,
            upgrade(res: uws.HttpResponse, req: uws.HttpRequest, context: uws.us_socket_context_t) {
              if (refused(res, req)) return;
              if (upgrade) return upgrade.call(behavior, res, req, context);
              res.upgrade({}, req.getHeader("sec-websocket-key"), req.getHeader("sec-websocket-protocol"), req.getHeader("sec-websocket-extensions"), context);
            },
          };
        }
        const out = (value as (...a: unknown[]) => unknown).apply(target, args);
        return out === target || out === raw ? guarded : out;
      };
    },
  });
  return guarded;
}

/** `app` for an app hook, noting each path it attaches a handler to (as "GET /path", "WS /path") in `served`. */
function recordingApp(app: uws.TemplatedApp, served: string[]): uws.TemplatedApp {
  return new Proxy(app, {
    get(target, key) {
      const value = Reflect.get(target, key) as unknown;
      if (typeof value !== "function") return value;
      const verb = typeof key === "string" ? NATIVE_VERBS[key] : undefined;
      return (...args: unknown[]) => {
        if (verb !== undefined && typeof args[0] === "string") served.push(`${verb} ${args[0]}`);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** True when uWebSockets.js loaded its native binary rather than the slow JS fallback. */
export function isNativeUws(): boolean {
  return Function.prototype.toString.call(uws.App).includes("[native code]");
}
