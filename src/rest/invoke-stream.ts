import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { toInBand } from "../shared/status.js";
import { onAbort } from "../shared/signals.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import { startInvokeStream, type InvokeStreamDeps, type StreamStatus } from "../ops/invoke-stream.js";
import type { Route } from "../http/router.js";
import { echo } from "../shared/echo.js";
import { httpServerSpan } from "../observe/span.js";

const STREAM_SPAN = httpServerSpan("POST", "/v1/gateway/invoke-stream");

const FIELDS = ["service", "method", "requestData"];

/** Whether the Accept header asks for Server-Sent Events. */
function wantsSse(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}

/**
 * `POST /v1/gateway/invoke-stream`: unary and server-streaming methods, body as `/v1/gateway/invoke`. The answer is
 * `application/x-ndjson`, one `{"result": <message>}` line per backend message then one `{"status": {...}}` line, or
 * the same objects as SSE `data:` events when `Accept: text/event-stream`. A client that reads slowly holds the
 * backend stream (the backend is read only after uWS drained the previous line), and one that disconnects cancels it.
 */
export function invokeStreamRoutes(deps: InvokeStreamDeps, filter: MetadataFilter): Route[] {
  return [
    {
      method: "POST",
      path: "/v1/gateway/invoke-stream",
      handler: async (req) => {
        const body = req.json();
        const sse = wantsSse(req.headers["accept"]);
        const frame = sse ? (s: string) => `data: ${s}\n\n` : (s: string) => s + "\n";
        const unknown = Object.keys(body).find((k) => !FIELDS.includes(k));
        const data = body["requestData"];
        let early: StreamStatus | undefined;
        if (unknown !== undefined) early = { code: Code.INVALID_ARGUMENT, message: `${echo(unknown)} is not a field of the invoke-stream request (fields: ${FIELDS.join(", ")})` };
        else if (data !== undefined && data !== null && (typeof data !== "object" || Array.isArray(data))) {
          early = { code: Code.INVALID_ARGUMENT, message: `requestData must be a JSON object (got ${Array.isArray(data) ? "an array" : typeof data})` };
        }
        // Stringified here, where a throw (input nested too deeply for JSON.stringify) is the handler's 400, not a
        // throw out of the stream callback after the status line went.
        const requestData = early || data === undefined || data === null ? "" : JSON.stringify(data);
        return {
          contentType: sse ? "text/event-stream" : "application/x-ndjson",
          headers: { "cache-control": "no-cache" },
          stream: (out) => {
            if (early) return out.end(frame(JSON.stringify({ status: toInBand(early) })));
            const handle = startInvokeStream(
              deps,
              {
                service: body["service"],
                method: body["method"],
                requestData,
                metadata: filter.fromHeaders(req.headers),
                trace: filter.traceOfHeaders(req.headers, STREAM_SPAN),
              },
              {
                start(kind) {
                  if (kind === "client-streaming" || kind === "bidi-streaming") {
                    return new GatewayError(Code.INVALID_ARGUMENT, `method is ${kind}: use the WebSocket front /v1/gateway/invoke-ws`);
                  }
                  return undefined;
                },
                message(json) {
                  if (out.write(frame(`{"result":${json}}`))) return true;
                  out.onWritable(() => handle.resume());
                  return false;
                },
                end(status) {
                  out.end(frame(JSON.stringify({ status: toInBand(status) })));
                },
              },
            );
            onAbort(req.signal, () => handle.cancel("the client closed the request"));
          },
        };
      },
    },
  ];
}
