import { STATUS_CODES } from "node:http";
import type * as grpc from "@grpc/grpc-js";
import type uws from "uWebSockets.js";
import type { Backend } from "../backends/backend.js";
import type { MethodEntry } from "../backends/schema.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import { httpServerSpan } from "../observe/span.js";
import { apiKeyRefusal } from "../ops/auth.js";
import { kindOf, type DispatchOps } from "../ops/dispatch.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import { startInvokeStream, type InvokeStreamDeps, type InvokeStreamHandle } from "../ops/invoke-stream.js";
import { readBody, requestHeaders, type AppHook, type RestServerDeps } from "../http/router.js";
import { streamWriter, type StreamWriter } from "../http/reply-writer.js";
import { answerPreflight, type PreflightPolicy } from "../http/preflight.js";
import { FLAG_END_STREAM, decodeBase64Body, envelope, parseEnvelopes, percentEncode, singleMessage, trailersFrame } from "./framing.js";
import { compressionRefusal, connectEndStream, connectErrorJson, connectHttpStatus, protocolOf, timeoutMs, type WireProtocol } from "./protocols.js";

/** The uWS route of browser RPC: the gRPC path, `/{fully.qualified.Service}/{Method}`. */
export const RPC_WEB_ROUTE = "/:service/:method";
/** The route's label in the request metrics. */
const METRIC_ROUTE = "/{service}/{method}";

/** The server span of a browser RPC call (Connect or gRPC-Web, unary or streaming), named with the route label like the REST routes' spans. */
const CONNECT_SPAN = httpServerSpan("POST", METRIC_ROUTE);

/** Response headers a cross-origin page may read (the statuses and encodings both protocols send as headers). */
const EXPOSED_HEADERS = "grpc-status, grpc-message, grpc-status-details-bin, grpc-encoding, connect-content-encoding, content-encoding";
/** Request headers Connect and gRPC-Web clients send, allowed in a preflight besides the forwarding allow-list. */
const PROTOCOL_HEADERS = [
  "content-type",
  "connect-protocol-version",
  "connect-timeout-ms",
  "connect-accept-encoding",
  "connect-content-encoding",
  "content-encoding",
  "x-grpc-web",
  "x-user-agent",
  "grpc-timeout",
  "x-api-key",
];

/** Where the calls to one service go: a registered backend, or the gateway's own gRPC port. */
export interface RpcTarget {
  /** The backend's registered name (what the operations take as `service`). */
  backend: string;
  ops: Pick<DispatchOps, "invoke" | "invokeBytes">;
  stream: InvokeStreamDeps;
  /** The method at a gRPC path (`pkg.Service/Method`), or undefined when the target has none (after one refresh). */
  methodOf(path: string, signal: AbortSignal): Promise<MethodEntry | undefined>;
  /**
   * Pass the caller's `x-api-key` on: only to the gateway's own gRPC port, which checks it again. A backend never
   * gets it.
   */
  passKey: boolean;
}

/** RpcTarget.methodOf over a backend: its resolve, with NOT_FOUND (no such method) as undefined. */
export function methodLookup(backend: Backend): RpcTarget["methodOf"] {
  return async (path, signal) => {
    try {
      return (await backend.resolve(path, signal)).method;
    } catch (e) {
      if (GatewayError.from(e).code === Code.NOT_FOUND) return undefined;
      throw e;
    }
  };
}

/** What the browser RPC front needs. */
export interface RpcWebDeps {
  /** The target serving a fully qualified service (for backends, the transparent gRPC proxy's routing), or undefined. */
  route(service: string): RpcTarget | undefined;
  filter: MetadataFilter;
  /** The `--cors-origin` policy (same origin always passes). */
  origins: { allowed(origin: string | undefined, host?: string): boolean };
  /** The forwarding allow-list, for the preflight's allowed headers. */
  forwardHeaders: readonly string[];
  /** Bound on a unary call's deadline (and its default), ms. */
  invokeDeadlineMs: number;
}

/**
 * Connect and gRPC-Web on the HTTP port: `POST /{service}/{method}` for every unary and server-streaming method of the
 * registered backends, routed by service as the transparent gRPC proxy routes it, key in `x-api-key`, the metadata
 * allow-list and the request size limit as on REST, CORS by `--cors-origin`. A POST to a two-segment path that is
 * neither a routed service nor in one of the protocols' content types is left to the REST routes (uWS yield), and so is
 * an OPTIONS that is not a CORS preflight for a routed service.
 * docs/browser-rpc.md.
 */
export function rpcWebHook(deps: RpcWebDeps): AppHook {
  const allowHeaders = [...new Set([...PROTOCOL_HEADERS, ...deps.forwardHeaders.map((h) => h.toLowerCase())])].join(", ");
  return (app, rest) => {
    const preflight: PreflightPolicy = { allowed: (o, host) => deps.origins.allowed(o, host), methods: "POST", headers: allowHeaders, maxAgeSeconds: 7200 };
    app.options(RPC_WEB_ROUTE, (res, req) => {
      // Only a CORS preflight for a routed service is browser RPC's: any other two-segment OPTIONS (a transcoded
      // `custom` OPTIONS rule, a preflight for some other route) goes on to the REST routes.
      if (req.getHeader("origin") === "" || req.getHeader("access-control-request-method") === "" || deps.route(req.getParameter(0) ?? "") === undefined) {
        req.setYield(true);
        return;
      }
      rest.requests.inc({ route: METRIC_ROUTE, method: "OPTIONS", status: answerPreflight(res, req, preflight) });
    });
    app.post(RPC_WEB_ROUTE, (res, req) => {
      const service = req.getParameter(0) ?? "";
      const method = req.getParameter(1) ?? "";
      // Decided on two headers, before the rest are read: a REST POST that is no browser RPC goes on untouched.
      const wire = protocolOf(req.getHeader("content-type"));
      // Plain JSON is a Connect call only with Connect's header (connect-es always sends it) or to a routed service.
      const rpc = deps.route(service) !== undefined || (wire !== undefined && !(wire.protocol === "connect-unary" && wire.codec === "json" && req.getHeader("connect-protocol-version") === ""));
      if (!rpc) {
        req.setYield(true);
        return;
      }
      serve(deps, rest, res, requestHeaders(req).headers, service, method, wire);
    });
  };
}

/** One browser RPC exchange, from the request head to the last byte of its answer. */
function serve(deps: RpcWebDeps, rest: RestServerDeps, res: uws.HttpResponse, headers: Record<string, string>, service: string, method: string, wire: WireProtocol | undefined): void {
  const started = performance.now();
  const ac = new AbortController();
  let done = false;
  let writer: StreamWriter | undefined;
  let handle: InvokeStreamHandle | undefined;
  const count = (status: number): void => {
    rest.requests.inc({ route: METRIC_ROUTE, method: "POST", status });
    rest.latency.observe({ route: METRIC_ROUTE, method: "POST", status }, (performance.now() - started) / 1000);
  };
  res.onAborted(() => {
    writer?.aborted();
    ac.abort(new GatewayError(Code.CANCELLED, "the client closed the request"));
    handle?.cancel("the client closed the request");
    if (done) return;
    done = true;
    count(499);
  });

  const origin = headers["origin"] || undefined;
  const cors: Record<string, string> =
    origin !== undefined && deps.origins.allowed(origin, headers["host"]) ? { "access-control-allow-origin": origin, vary: "origin", "access-control-expose-headers": EXPOSED_HEADERS } : {};

  /** Status line, headers and (unless streamed) the whole body, in one corked write. */
  const reply = (status: number, contentType: string, extra: Record<string, string>, body: Uint8Array | string | undefined, closeConnection = false): void => {
    if (done) return;
    done = true;
    res.cork(() => {
      res.writeStatus(`${status} ${STATUS_CODES[status] ?? ""}`);
      res.writeHeader("content-type", contentType);
      for (const [k, v] of Object.entries({ ...cors, ...extra })) res.writeHeader(k, v);
      res.end(body ?? "", closeConnection || rest.isClosing());
    });
    count(status);
  };

  /** An error in the protocol's own shape; `routeMissing`: no such service or method (Connect unary: HTTP 404). */
  const fail = (e: unknown, routeMissing = false, closeConnection = false): void => {
    const err = GatewayError.from(e);
    if (err.code === Code.INTERNAL || err.code === Code.UNKNOWN) rest.logger.error({ err: e, service, method }, "browser RPC failed");
    if (!wire) {
      return reply(415, "application/json", { "accept-post": "application/proto, application/json, application/connect+proto, application/connect+json, application/grpc-web+proto, application/grpc-web-text+proto" }, JSON.stringify(connectErrorJson(Code.UNIMPLEMENTED, err.rawMessage)), closeConnection);
    }
    switch (wire.protocol) {
      case "connect-unary":
        return reply(routeMissing ? 404 : connectHttpStatus(err.code), "application/json", {}, JSON.stringify(connectErrorJson(err.code, err.rawMessage)), closeConnection);
      case "connect-stream":
        return reply(200, wire.contentType, {}, envelope(FLAG_END_STREAM, connectEndStream(err.code, err.rawMessage)), closeConnection);
      case "grpc-web":
        // Trailers-only: the status in the headers and no body, as a gRPC server answers a call it refuses at once.
        return reply(200, wire.contentType, { "grpc-status": String(err.code), "grpc-message": percentEncode(err.rawMessage) }, undefined, closeConnection);
    }
  };

  try {
    if (origin !== undefined && cors["access-control-allow-origin"] === undefined) {
      throw new GatewayError(Code.PERMISSION_DENIED, `origin ${echo(origin, 100)} is not allowed (same origin or --cors-origin)`);
    }
    if (rest.isClosing()) throw new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down");
    if (!wire) throw new GatewayError(Code.UNIMPLEMENTED, `content-type ${JSON.stringify(echo(headers["content-type"] ?? "", 64))} is neither Connect nor gRPC-Web`);
    const refused = apiKeyRefusal(rest.auth, headers["x-api-key"]) ?? compressionRefusal(wire.protocol, headers);
    if (refused) throw refused;
    const timeout = timeoutMs(wire.protocol, headers);
    const target = deps.route(service);
    if (target === undefined) return fail(new GatewayError(Code.UNIMPLEMENTED, `service ${echo(service)} is not served by any registered backend`), true);
    const tooLarge = (): void => fail(new GatewayError(Code.RESOURCE_EXHAUSTED, `request body exceeds the limit of ${rest.maxBodyBytes} bytes`), false, true);
    readBody(res, rest, Number(headers["content-length"] ?? 0), () => done, (body) => {
      if (body === undefined) return tooLarge();
      run(target, body, timeout).catch((e: unknown) => fail(e));
    });
  } catch (e) {
    fail(e);
  }

  async function run(target: RpcTarget, body: Buffer, timeout: number | undefined): Promise<void> {
    const w = wire!;
    const path = `${service}/${method}`;
    const m = await target.methodOf(path, ac.signal);
    if (done) return;
    if (!m) return fail(new GatewayError(Code.UNIMPLEMENTED, `method ${echo(path)} does not exist on backend ${target.backend}`), true);
    const kind = kindOf(m);
    if (kind === "client-streaming" || kind === "bidi-streaming") {
      return fail(new GatewayError(Code.UNIMPLEMENTED, `method ${m.fullName} is ${kind}: browsers can call unary and server-streaming methods only`));
    }
    if (w.protocol === "connect-unary" && kind !== "unary") {
      return fail(new GatewayError(Code.UNIMPLEMENTED, `method ${m.fullName} is ${kind}: call it with a streaming content type (application/connect+proto or +json)`));
    }
    const metadata = deps.filter.fromHeaders(headers);
    const key = headers["x-api-key"];
    if (target.passKey && key !== undefined) metadata.set("x-api-key", key);
    const common = { service: target.backend, method: path, metadata, signal: ac.signal };
    if (w.protocol === "connect-unary") {
      const deadline = Date.now() + Math.min(timeout ?? deps.invokeDeadlineMs, deps.invokeDeadlineMs);
      if (w.codec === "proto") {
        const r = await target.ops.invokeBytes({ ...common, request: body, deadline, trace: deps.filter.traceOfHeaders(headers, CONNECT_SPAN) });
        return r.code === Code.OK ? reply(200, w.contentType, {}, r.response) : fail(new GatewayError(r.code, r.message));
      }
      const r = await target.ops.invoke({ ...common, requestData: body.toString("utf8"), deadline, trace: deps.filter.traceOfHeaders(headers, CONNECT_SPAN) });
      return r.code === Code.OK ? reply(200, w.contentType, {}, r.responseData) : fail(new GatewayError(r.code, r.message));
    }
    const message = singleMessage(parseEnvelopes(w.text ? decodeBase64Body(body) : body));
    // gRPC-Web text: each frame base64-encoded on its own (padding may then appear mid-stream, which its clients read).
    const encode = (frame: Buffer): Buffer | string => (w.text ? frame.toString("base64") : frame);
    if (w.protocol === "grpc-web" && kind === "unary") {
      const deadline = Date.now() + Math.min(timeout ?? deps.invokeDeadlineMs, deps.invokeDeadlineMs);
      const r = await target.ops.invokeBytes({ ...common, request: message, deadline, trace: deps.filter.traceOfHeaders(headers, CONNECT_SPAN) });
      if (r.code !== Code.OK) return fail(new GatewayError(r.code, r.message));
      return reply(200, w.contentType, {}, encode(Buffer.concat([envelope(0, r.response!), trailersFrame(Code.OK, "")])));
    }
    stream(target.stream, common, message, timeout, encode);
  }

  /** A server-streaming call (or Connect streaming of a unary method): each message as it comes, then the status. */
  function stream(
    streamDeps: InvokeStreamDeps,
    call: { service: string; method: string; metadata: grpc.Metadata },
    message: Buffer,
    timeout: number | undefined,
    encode: (frame: Buffer) => Buffer | string,
  ): void {
    const w = wire!;
    if (done) return;
    // From here the exchange is open until the last frame (counted then); an abort cancels the backend call.
    res.cork(() => {
      res.writeStatus("200 OK");
      res.writeHeader("content-type", w.contentType);
      for (const [k, v] of Object.entries(cors)) res.writeHeader(k, v);
    });
    const out = streamWriter(res, { stallTimeoutMs: rest.writeStallTimeoutMs ?? 10_000, onEnd: () => undefined });
    writer = out;
    const deliver = (data: Uint8Array): boolean => {
      if (out.write(encode(envelope(0, data)))) return true;
      out.onWritable(() => handle?.resume());
      return false;
    };
    const json = w.codec === "json";
    handle = startInvokeStream(
      streamDeps,
      {
        service: call.service,
        method: call.method,
        requestData: json ? message.toString("utf8") : "",
        ...(json ? {} : { requestBytes: message }),
        metadata: call.metadata,
        deadline: timeout === undefined ? undefined : Date.now() + timeout,
        trace: deps.filter.traceOfHeaders(headers, CONNECT_SPAN),
      },
      {
        message: (text) => deliver(Buffer.from(text)),
        bytes: deliver,
        end(status) {
          out.end(encode(w.protocol === "grpc-web" ? trailersFrame(status.code, status.message) : envelope(FLAG_END_STREAM, connectEndStream(status.code, status.message))));
          if (done) return;
          done = true;
          count(200);
        },
      },
    );
    if (ac.signal.aborted) handle.cancel("the client closed the request");
  }
}
