import { Code, codeName } from "../shared/code.js";
import { statusOf, type Status } from "../shared/status.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { DispatchOps } from "../ops/dispatch.js";
import { booleanParam } from "../http/query-params.js";
import { json, type Route } from "../http/router.js";
import { httpServerSpan } from "../observe/span.js";

const CALL_SPAN = httpServerSpan("POST", "/v1/grpc/call");

/** `/v1/grpc/call`'s wire form of a status: `data` is the response JSON text on success, else the status message. */
function callReply(st: Status, responseData = ""): ReturnType<typeof json> {
  const ok = st.code === Code.OK;
  return json({ error: !ok, statusCode: codeName(st.code), data: ok ? responseData : st.message });
}

function streamingType(m: { clientStreaming: boolean; serverStreaming: boolean }): "unary" | "server" | "client" | "bidi" {
  if (m.clientStreaming) return m.serverStreaming ? "bidi" : "client";
  return m.serverStreaming ? "server" : "unary";
}

/** `/v1/grpc/...` routes: methods, schema, call (outcome in-band as `{error, statusCode, data}`), protos. */
export function grpcReflectionRoutes(ops: DispatchOps, filter: MetadataFilter): Route[] {
  return [
    {
      method: "GET",
      path: "/v1/grpc/{service}/methods",
      handler: async (req) => {
        const methods = await ops.listMethods(req.params["service"], { refresh: booleanParam("refresh", req.query.get("refresh")), signal: req.signal });
        return json(methods.map((m) => ({ name: m.name, fullName: m.fullName, inputType: m.inputType, outputType: m.outputType, streamingType: streamingType(m) })));
      },
    },
    {
      method: "GET",
      path: "/v1/grpc/{service}/schema/{method+}",
      handler: async (req) => json(await ops.methodSchema(req.params["service"], req.params["method"], req.query.get("type") ?? undefined, req.signal)),
    },
    {
      method: "GET",
      path: "/v1/grpc/{service}/protos",
      handler: async (req) => ({ raw: await ops.protos(req.params["service"], req.signal), contentType: "application/x-protobuf" }),
    },
    {
      method: "POST",
      path: "/v1/grpc/call",
      handler: async (req) => {
        const body = req.json();
        let metadata;
        try {
          metadata = filter.fromObject(body["metadata"]);
        } catch (e) {
          return callReply(statusOf(e));
        }
        const r = await ops.invoke({
          service: body["service"],
          method: body["method"],
          requestData: body["request"],
          metadata,
          signal: req.cancellation,
          trace: filter.traceOfHeaders(req.headers, CALL_SPAN),
        });
        return callReply(r, r.responseData);
      },
    },
  ];
}
