import { Code, httpStatusOf } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo, MAX_ERROR_MESSAGE_CHARS } from "../shared/echo.js";
import { onAbort } from "../shared/signals.js";
import { statusError } from "../shared/status.js";
import { httpServerSpan, type ServerSpanInfo } from "../observe/span.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { DispatchOps } from "../ops/dispatch.js";
import { startInvokeStream, type InvokeStreamDeps } from "../ops/invoke-stream.js";
import { transcodeRequest } from "../ops/transcode/request.js";
import { transcodeErrorBody, transcodeResponse } from "../ops/transcode/response.js";
import type { TranscodeRule } from "../ops/transcode/rule.js";
import type { TranscodeTable } from "../ops/transcode/table.js";
import type { DynamicRoutes, RestReply, RestRequest, RestStream, Route } from "../http/router.js";

const NDJSON = "application/x-ndjson";

/** Characters that would split a header line. */
const CONTROL = /[\x00-\x1f\x7f]/g;

/**
 * An error reply in the rule's shape, with grpc-gateway's HTTP status for the code. UNAUTHENTICATED also carries the
 * message as `WWW-Authenticate`, as grpc-gateway's DefaultHTTPErrorHandler sets it (control characters, which would
 * split the header, as spaces).
 */
function errorReply(rule: TranscodeRule, e: unknown): RestReply {
  const err = GatewayError.from(e);
  const reply: RestReply = { status: httpStatusOf(err.code), raw: transcodeErrorBody(rule.errors, err) };
  if (err.code === Code.UNAUTHENTICATED) reply.headers = { "www-authenticate": echo(err.rawMessage, MAX_ERROR_MESSAGE_CHARS).replace(CONTROL, " ") };
  return reply;
}

/**
 * The REST transcoding routes (docs/transcoding.md) for the router, answered on the thread that took the request:
 * unary methods through the invoke op (conversion, deadline, metrics, cancellation), server-streaming ones as NDJSON
 * through the streamed invoke (`{"result": ...}` per message, `{"error": ...}` as the last line on failure; the
 * backend is read only as the client reads, and a client that leaves cancels the backend call).
 */
export function transcodeRoutes(table: TranscodeTable, ops: DispatchOps, streamDeps: InvokeStreamDeps, filter: MetadataFilter): DynamicRoutes {
  // One Route per rule (the metrics label is the rule's template), made on its first request.
  const routes = new WeakMap<TranscodeRule, Route>();

  const unary = async (rule: TranscodeRule, req: RestRequest, request: string, span: ServerSpanInfo): Promise<RestReply> => {
    const r = await ops.invoke({
      service: rule.service,
      method: rule.method,
      requestData: request,
      metadata: filter.fromHeaders(req.headers),
      signal: req.cancellation,
      trace: filter.traceOfHeaders(req.headers, span),
    });
    const failed = statusError(r);
    if (failed) return errorReply(rule, failed);
    try {
      return { raw: transcodeResponse(rule, r.responseData) };
    } catch (e) {
      return errorReply(rule, new GatewayError(Code.INTERNAL, `the response of ${rule.method} could not be read: ${(e as Error).message}`));
    }
  };

  /**
   * The reply waits for the first message or the end, as grpc-gateway's: a call that fails before any message answers
   * the error's HTTP status (with the `{"error": ...}` line as its body); once a message came it is 200 and streamed.
   */
  const streaming = (rule: TranscodeRule, req: RestRequest, request: string): Promise<RestReply> =>
    new Promise((resolve) => {
      let out: RestStream | undefined;
      /** The first line, held (the backend paused) until the stream is writable. */
      let first: string | undefined;
      /** The last line (empty for success) when the call ended before the stream was writable. */
      let last: string | undefined;
      const errorLine = (failed: GatewayError): string => {
        // grpc-gateway's `{"error": <status>}`; Google's shape has its "error" member already.
        const body = transcodeErrorBody(rule.errors, failed);
        return `${rule.errors === "google" ? body : `{"error":${body}}`}\n`;
      };
      const handle = startInvokeStream(
        streamDeps,
        { service: rule.service, method: rule.method, requestData: request, metadata: filter.fromHeaders(req.headers) },
        {
          message(json) {
            const line = `{"result":${transcodeResponse(rule, json)}}\n`;
            if (!out) {
              first = line;
              resolve(streamed);
              return false;
            }
            if (out.write(line)) return true;
            out.onWritable(() => handle.resume());
            return false;
          },
          end(status) {
            const failed = statusError(status);
            const line = failed ? errorLine(failed) : "";
            if (out) return out.end(line);
            if (first !== undefined) last = line;
            else resolve({ status: failed ? httpStatusOf(failed.code) : 200, contentType: NDJSON, raw: line });
          },
        },
      );
      const streamed: RestReply = {
        contentType: NDJSON,
        headers: { "cache-control": "no-cache" },
        stream: (o) => {
          out = o;
          const wrote = o.write(first!);
          if (last !== undefined) return o.end(last);
          if (wrote) handle.resume();
          else o.onWritable(() => handle.resume());
        },
      };
      onAbort(req.signal, () => handle.cancel("the client closed the request"));
    });

  const routeOf = (rule: TranscodeRule): Route => {
    let r = routes.get(rule);
    if (!r) {
      // The server span is named with the rule's template, as the route label ("GET /v1/{name=shelves/*}").
      const span = httpServerSpan(rule.httpMethod, rule.label);
      // The router's Route names only the gateway's own methods; a rule may have PATCH or a custom kind.
      r = {
        method: rule.httpMethod as Route["method"],
        path: rule.label,
        handler: async (req) => {
          let request: string;
          try {
            request = transcodeRequest(rule, valuesOf(req), req.query, req.body);
          } catch (e) {
            return errorReply(rule, e);
          }
          return rule.serverStreaming ? streaming(rule, req, request) : unary(rule, req, request, span);
        },
      };
      routes.set(rule, r);
    }
    return r;
  };

  return {
    resolve(method, path) {
      const m = table.match(method, path);
      if (m === undefined || "allowed" in m) return m;
      const { entry, values } = m.match;
      const params: Record<string, string> = {};
      for (let i = 0; i < values.length; i++) params[i] = values[i]!;
      return { route: routeOf(entry), params };
    },
  };
}

/** The captured path values, in the rule's variable order (the router's params keep them by index). */
function valuesOf(req: RestRequest): string[] {
  const out: string[] = [];
  for (let i = 0; req.params[i] !== undefined; i++) out.push(req.params[i]!);
  return out;
}
