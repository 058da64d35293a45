import { GatewayError } from "../shared/gateway-error.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { DispatchOps } from "../ops/dispatch.js";
import { booleanParam } from "../http/query-params.js";
import { json, type Route } from "../http/router.js";

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
          const err = GatewayError.from(e);
          return json({ error: true, statusCode: err.codeName, data: err.rawMessage });
        }
        const r = await ops.invoke({ service: body["service"], method: body["method"], requestData: body["request"], metadata, signal: req.signal });
        return json({ error: !r.success, statusCode: r.status, data: r.success ? r.responseData : r.message });
      },
    },
  ];
}
