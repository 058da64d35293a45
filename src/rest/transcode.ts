import { Code, httpStatusOf } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { onAbort } from "../shared/signals.js";
import { statusError } from "../shared/status.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { DispatchOps } from "../ops/dispatch.js";
import { startInvokeStream, type InvokeStreamDeps } from "../ops/invoke-stream.js";
import { transcodeErrorBody, transcodeRequest, transcodeResponse, type TranscodeRule, type TranscodeTable } from "../ops/transcode.js";
import type { DynamicRoutes, RestReply, RestRequest, Route } from "../http/router.js";

/** An error reply in the rule's shape, with grpc-gateway's HTTP status for the code. */
function errorReply(rule: TranscodeRule, e: unknown): RestReply {
  const err = GatewayError.from(e);
  return { status: httpStatusOf(err.code), raw: transcodeErrorBody(rule.errors, err) };
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

  const unary = async (rule: TranscodeRule, req: RestRequest): Promise<RestReply> => {
    let request: string;
    try {
      request = transcodeRequest(rule, valuesOf(req), req.query, req.body);
    } catch (e) {
      return errorReply(rule, e);
    }
    const r = await ops.invoke({ service: rule.service, method: rule.method, requestData: request, metadata: filter.fromHeaders(req.headers), signal: req.signal });
    const failed = statusError(r);
    if (failed) return errorReply(rule, failed);
    try {
      return { raw: transcodeResponse(rule, r.responseData) };
    } catch (e) {
      return errorReply(rule, new GatewayError(Code.INTERNAL, `the response of ${rule.method} could not be read: ${(e as Error).message}`));
    }
  };

  const streaming = async (rule: TranscodeRule, req: RestRequest): Promise<RestReply> => {
    let request: string;
    try {
      request = transcodeRequest(rule, valuesOf(req), req.query, req.body);
    } catch (e) {
      return errorReply(rule, e);
    }
    return {
      contentType: "application/x-ndjson",
      headers: { "cache-control": "no-cache" },
      stream: (out) => {
        const handle = startInvokeStream(
          streamDeps,
          { service: rule.service, method: rule.method, requestData: request, metadata: filter.fromHeaders(req.headers) },
          {
            message(json) {
              if (out.write(`{"result":${transcodeResponse(rule, json)}}\n`)) return true;
              out.onWritable(() => handle.resume());
              return false;
            },
            end(status) {
              const failed = statusError(status);
              if (!failed) return out.end();
              // The last line: grpc-gateway's `{"error": <status>}`; Google's shape has its "error" member already.
              const body = transcodeErrorBody(rule.errors, failed);
              out.end(`${rule.errors === "google" ? body : `{"error":${body}}`}\n`);
            },
          },
        );
        onAbort(req.signal, () => handle.cancel("the client closed the request"));
      },
    };
  };

  const routeOf = (rule: TranscodeRule): Route => {
    let r = routes.get(rule);
    if (!r) {
      const run = rule.serverStreaming ? streaming : unary;
      // The router's Route names only the gateway's own methods; a rule may have PATCH or a custom kind.
      r = { method: rule.httpMethod as Route["method"], path: rule.label, handler: (req) => run(rule, req) };
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
