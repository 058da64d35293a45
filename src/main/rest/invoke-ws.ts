import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { MetadataFilter } from "../forward-metadata.js";
import { startInvokeStream, type InvokeStreamDeps, type InvokeStreamHandle, type StreamStatus } from "../ops/invoke-stream.js";
import { apiKeyRefusal } from "../auth.js";
import { errorBody, requestHeaders, type AppHook } from "./router.js";

/** The WebSocket path of streamed invocations (every method kind). */
export const INVOKE_WS_PATH = "/v1/gateway/invoke-ws";
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
 * `GET /v1/gateway/invoke-ws` (WebSocket, `x-api-key` on the upgrade request): one invocation per connection,
 * any method kind. Text frames, JSON objects:
 * - in: `{"op":"start","service","method","requestData"?}` first; then `{"op":"send","requestData"}` (client and bidi
 *   streaming), `{"op":"end"}` (no more requests), `{"op":"cancel"}`.
 * - out: `{"op":"result","result":{...}}` per backend message, then `{"op":"status","status":{success,status,message}}`
 *   and a normal close (1000).
 * A protocol error (bad JSON, unknown op, a second start) ends the invocation INVALID_ARGUMENT in-band. Flow control:
 * the backend is not read while more than 64 KiB wait for the client; more than 64 unsent requests end the call
 * RESOURCE_EXHAUSTED (uWS cannot pause reading a WebSocket). Closing the socket cancels the backend call.
 */
export function invokeWsHook(deps: InvokeStreamDeps, filter: MetadataFilter): AppHook {
  return (app, rest) => {
    app.ws<Conn>(INVOKE_WS_PATH, {
      // uWS drops a connection past its own limit with no close frame (the client sees 1006 and no reason): it gets
      // twice ours, so a frame over our limit (up to twice it) gets a status and a proper 1009 close, as on
      // /v1/pubsub/ws.
      maxPayloadLength: rest.maxBodyBytes * 2,
      // Far above the high-water mark: a frame is never dropped, the high-water mark is what throttles.
      maxBackpressure: 64 * 1024 * 1024,
      // uWS pings an idle socket (sendPingsAutomatically), so a quiet watch stays open and a dead peer is dropped.
      idleTimeout: 120,
      upgrade(res, req, context) {
        const { headers } = requestHeaders(req);
        const refused = rest.isClosing() ? new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down") : apiKeyRefusal(rest.auth, headers["x-api-key"]);
        if (refused) {
          res.cork(() => res.writeStatus(refused.code === Code.UNAVAILABLE ? "503 Service Unavailable" : "401 Unauthorized").writeHeader("content-type", "application/json").end(JSON.stringify(errorBody(refused))));
          return;
        }
        res.upgrade<Conn>({ headers, pending: 0, closed: false, blocked: false }, headers["sec-websocket-key"]!, headers["sec-websocket-protocol"] ?? "", headers["sec-websocket-extensions"] ?? "", context);
      },
      message(ws, message) {
        const c = ws.getUserData();
        if (c.closed) return;
        if (message.byteLength > rest.maxBodyBytes) {
          const reason = `frame larger than ${rest.maxBodyBytes} bytes`;
          c.closed = true;
          c.handle?.cancel(reason);
          ws.cork(() => {
            ws.send(JSON.stringify({ op: "status", status: { success: false, status: "RESOURCE_EXHAUSTED", message: reason } }));
            ws.end(1009, reason);
          });
          return;
        }
        const finishEarly = (status: StreamStatus): void => {
          c.closed = true;
          ws.cork(() => {
            ws.send(JSON.stringify({ op: "status", status }));
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
          return finishEarly({ success: false, status: "INVALID_ARGUMENT", message: msg });
        }
        const op = frame["op"];
        const data = frame["requestData"];
        if (data !== undefined && data !== null && (typeof data !== "object" || Array.isArray(data))) {
          const err = new GatewayError(Code.INVALID_ARGUMENT, `requestData must be a JSON object (got ${Array.isArray(data) ? "an array" : typeof data})`);
          return c.handle ? c.handle.fail(err) : finishEarly({ success: false, status: err.codeName, message: err.rawMessage });
        }
        const text = data === undefined || data === null ? "" : JSON.stringify(data);
        if (op === "start") {
          if (c.handle) return c.handle.fail(new GatewayError(Code.INVALID_ARGUMENT, "op start was sent twice; one invocation per connection"));
          c.handle = startInvokeStream(
            deps,
            { service: frame["service"], method: frame["method"], requestData: text, metadata: filter.fromHeaders(c.headers) },
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
                  ws.send(JSON.stringify({ op: "status", status }));
                  ws.end(1000);
                });
              },
            },
          );
          return;
        }
        if (!c.handle) return finishEarly({ success: false, status: "INVALID_ARGUMENT", message: `the first frame must be {"op":"start",...} (got op ${JSON.stringify(op)?.slice(0, 40)})` });
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
