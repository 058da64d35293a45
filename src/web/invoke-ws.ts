import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { inBandError, statusOf, toInBand } from "../shared/status.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import { startInvokeStream, type InvokeStreamDeps, type InvokeStreamHandle, type StreamStatus } from "../ops/invoke-stream.js";
import { apiKeyRefusal, type Authenticator } from "../ops/auth.js";
import { parseOfferedProtocols, webAdmission, type OriginPolicy } from "./access.js";
import { refuse, uwsFrameLimit } from "./web-deps.js";
import { requestHeaders, type AppHook } from "../http/router.js";
import { httpServerSpan } from "../observe/span.js";

/** The server span of one invocation over the WebSocket, under the upgrade request's trace context. */
const STREAM_SPAN = httpServerSpan("GET", "/v1/gateway/invoke-ws");

/** The WebSocket path of streamed invocations (every method kind). */
export const INVOKE_WS_PATH = "/v1/gateway/invoke-ws";
/** The subprotocol invoke-ws speaks, selected when offered. */
export const INVOKE_WS_PROTOCOL = "invoke.v1";
/** Prefix of the offered subprotocol that carries the API key, base64url-encoded (browsers cannot set x-api-key). */
export const KEY_PROTOCOL_PREFIX = "key.";
/** Request messages accepted but not yet sent to the backend; past it the caller is too far ahead. */
export const WS_MAX_PENDING_REQUESTS = 64;
/** Output buffered for a slow reader before the backend stops being read. */
const HIGH_WATER_BYTES = 64 * 1024;

interface Conn {
  headers: Record<string, string>;
  handle?: InvokeStreamHandle;
  pending: number;
  closed: boolean;
  /** The backend is not being read until `drain`. */
  blocked: boolean;
}

/**
 * `GET /v1/gateway/invoke-ws` (WebSocket): one invocation per connection, any method kind. The API key comes from
 * `x-api-key` on the upgrade request or, for browsers, from an offered subprotocol `key.<base64url(key)>` next to
 * `invoke.v1` (then selected); both at once, or two keys, are refused as ambiguous. A browser Origin must be same-origin
 * or allowed by `--cors-origin`, as on the pub/sub WebSocket. Text frames, JSON objects:
 * - in: `{"op":"start","service","method","requestData"?}` first; then `{"op":"send","requestData"}` (client and bidi
 *   streaming), `{"op":"end"}` (no more requests), `{"op":"cancel"}`.
 * - out: `{"op":"result","result":{...}}` per backend message, then `{"op":"status","status":{success,status,message}}`
 *   and a normal close (1000).
 * A protocol error (bad JSON, unknown op, a second start) ends the invocation INVALID_ARGUMENT in-band. Flow control:
 * the backend is not read while more than 64 KiB wait for the client; more than 64 unsent requests end the call
 * RESOURCE_EXHAUSTED (uWS cannot pause reading a WebSocket). Closing the socket cancels the backend call.
 */
export function invokeWsHook(deps: InvokeStreamDeps, filter: MetadataFilter, origins: OriginPolicy): AppHook {
  return (app, rest) => {
    app.ws<Conn>(INVOKE_WS_PATH, {
      // uWS drops a connection past its own limit with no close frame (the client sees 1006 and no reason): it gets
      // more than ours (uwsFrameLimit), so a frame over our limit gets a status and a proper 1009 close, as on
      // /v1/pubsub/ws.
      maxPayloadLength: uwsFrameLimit(rest.maxBodyBytes),
      // Far above the high-water mark: a frame is never dropped, the high-water mark is what throttles.
      maxBackpressure: 64 * 1024 * 1024,
      // uWS pings an idle socket (sendPingsAutomatically), so a quiet watch stays open and a dead peer is dropped.
      idleTimeout: 120,
      upgrade(res, req, context) {
        // Repeated headers arrive joined with ", " (as on REST), so two keys are never mistaken for one.
        const { headers } = requestHeaders(req);
        const offered = parseOfferedProtocols(headers["sec-websocket-protocol"] ?? "", INVOKE_WS_PROTOCOL, KEY_PROTOCOL_PREFIX);
        // It may carry the key: never kept with the headers the metadata allow-list reads.
        delete headers["sec-websocket-protocol"];
        const origin = headers["origin"] || undefined;
        const refused = webAdmission(rest.isClosing(), origins, origin, headers["host"]) ?? checkCredential(rest.auth, headers["x-api-key"], offered.credentials);
        if (refused) return refuse(res, refused);
        // Select invoke.v1 when offered; never echo a key value back as the selected protocol.
        const selected = offered.selected.startsWith(KEY_PROTOCOL_PREFIX) ? "" : offered.selected;
        res.upgrade<Conn>({ headers, pending: 0, closed: false, blocked: false }, headers["sec-websocket-key"]!, selected, headers["sec-websocket-extensions"] ?? "", context);
      },
      message(ws, message) {
        const c = ws.getUserData();
        if (c.closed) return;
        if (message.byteLength > rest.maxBodyBytes) {
          const reason = `frame larger than ${rest.maxBodyBytes} bytes`;
          c.closed = true;
          c.handle?.cancel(reason);
          ws.cork(() => {
            ws.send(JSON.stringify({ op: "status", status: inBandError(Code.RESOURCE_EXHAUSTED, reason) }));
            ws.end(1009, reason);
          });
          return;
        }
        const finishEarly = (status: StreamStatus): void => {
          c.closed = true;
          ws.cork(() => {
            ws.send(JSON.stringify({ op: "status", status: toInBand(status) }));
            ws.end(1000);
          });
        };
        let frame: Record<string, unknown>;
        try {
          const v: unknown = JSON.parse(Buffer.from(message).toString("utf8"));
          if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("a frame must be a JSON object");
          frame = v as Record<string, unknown>;
        } catch (e) {
          const msg = `frame is not a JSON object: ${(e as Error).message}`.slice(0, 200);
          if (c.handle) return c.handle.fail(new GatewayError(Code.INVALID_ARGUMENT, msg));
          return finishEarly({ code: Code.INVALID_ARGUMENT, message: msg });
        }
        const op = frame["op"];
        const data = frame["requestData"];
        if (data !== undefined && data !== null && (typeof data !== "object" || Array.isArray(data))) {
          const err = new GatewayError(Code.INVALID_ARGUMENT, `requestData must be a JSON object (got ${Array.isArray(data) ? "an array" : typeof data})`);
          return c.handle ? c.handle.fail(err) : finishEarly(statusOf(err));
        }
        let text = "";
        try {
          if (data !== undefined && data !== null) text = JSON.stringify(data);
        } catch (e) {
          // Input nested too deeply for JSON.stringify: the caller's error, in band (GatewayError.from names it).
          const err = GatewayError.from(e);
          return c.handle ? c.handle.fail(err) : finishEarly(statusOf(err));
        }
        if (op === "start") {
          if (c.handle) return c.handle.fail(new GatewayError(Code.INVALID_ARGUMENT, "op start was sent twice; one invocation per connection"));
          c.handle = startInvokeStream(
            deps,
            { service: frame["service"], method: frame["method"], requestData: text, metadata: filter.fromHeaders(c.headers), trace: filter.traceOfHeaders(c.headers, STREAM_SPAN) },
            {
              message(json) {
                if (c.closed) return true;
                ws.send(`{"op":"result","result":${json}}`);
                if (ws.getBufferedAmount() < HIGH_WATER_BYTES) return true;
                c.blocked = true;
                return false;
              },
              end(status) {
                if (c.closed) return;
                c.closed = true;
                ws.cork(() => {
                  ws.send(JSON.stringify({ op: "status", status: toInBand(status) }));
                  ws.end(1000);
                });
              },
            },
          );
          return;
        }
        if (!c.handle) return finishEarly({ code: Code.INVALID_ARGUMENT, message: `the first frame must be {"op":"start",...} (got op ${JSON.stringify(op)?.slice(0, 40)})` });
        if (op === "send") {
          if (++c.pending > WS_MAX_PENDING_REQUESTS) {
            return c.handle.fail(new GatewayError(Code.RESOURCE_EXHAUSTED, `more than ${WS_MAX_PENDING_REQUESTS} request messages are waiting for the backend`));
          }
          void c.handle.write(text).finally(() => c.pending--);
        } else if (op === "end") c.handle.end();
        else if (op === "cancel") c.handle.cancel("the caller cancelled the call");
        else c.handle.fail(new GatewayError(Code.INVALID_ARGUMENT, `unknown op ${JSON.stringify(op)?.slice(0, 40)} (ops: start, send, end, cancel)`));
      },
      drain(ws) {
        const c = ws.getUserData();
        if (c.blocked && ws.getBufferedAmount() < HIGH_WATER_BYTES) {
          c.blocked = false;
          c.handle?.resume();
        }
      },
      close(ws) {
        const c = ws.getUserData();
        c.closed = true;
        c.handle?.cancel("the client closed the WebSocket");
      },
    });
  };
}

/**
 * The refusal for an upgrade's credential, or undefined when it is accepted: exactly one of `x-api-key` (one value) and
 * one `key.<base64url>` subprotocol, checked by the authenticator (constant time). Never echoes the key.
 */
export function checkCredential(auth: Authenticator, header: string | undefined, protocolKeys: readonly string[]): GatewayError | undefined {
  const unauthenticated = (why: string): GatewayError => new GatewayError(Code.UNAUTHENTICATED, why);
  if (!auth.enabled) return undefined;
  if (protocolKeys.length > 1) return unauthenticated("the API key is offered more than once as a key.* subprotocol (ambiguous); offer exactly one");
  if (protocolKeys.length === 1 && header !== undefined && header !== "") {
    return unauthenticated("two credentials (x-api-key and a key.* subprotocol) are ambiguous; send exactly one");
  }
  if (protocolKeys.length === 1) {
    const encoded = protocolKeys[0]!;
    if (!/^[A-Za-z0-9_-]+$/.test(encoded)) return unauthenticated("the key.* subprotocol must carry the API key base64url-encoded (A-Z a-z 0-9 - _, no padding)");
    return auth.check(Buffer.from(encoded, "base64url").toString("utf8")) ? undefined : unauthenticated("missing or invalid API key (key.* subprotocol)");
  }
  // Repeated headers arrive joined with ", ": never pick one of two keys (one check for every front).
  return apiKeyRefusal(auth, header, " (browsers: offer the subprotocols invoke.v1 and key.<base64url key>)");
}
