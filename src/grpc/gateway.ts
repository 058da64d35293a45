import { toInBand } from "../shared/status.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { DispatchOps } from "../ops/dispatch.js";
import type { GatewayHandlers } from "../gen/gateway/platform/Gateway.js";
import type { InvokeRequest__Output } from "../gen/gateway/platform/InvokeRequest.js";
import type { InvokeResponse } from "../gen/gateway/platform/InvokeResponse.js";
import type { GrpcImpl, UnaryContext } from "./server.js";
import { grpcServerSpan, type ServerSpanInfo } from "../observe/span.js";

const INVOKE_SPAN = grpcServerSpan("platform.Gateway/Invoke");
const INVOKE_JSON_SPAN = grpcServerSpan("platform.Gateway/InvokeJson");

/** `platform.Gateway` over gRPC: Invoke and InvokeJson (outcome in-band), ListServices, ListMethods, GetMethodSchema. */
export function gatewayGrpc(ops: DispatchOps, filter: MetadataFilter): GrpcImpl<GatewayHandlers> {
  const invoke = (server: ServerSpanInfo) => async (req: InvokeRequest__Output, ctx: UnaryContext): Promise<InvokeResponse> => {
    const r = await ops.invoke({
      service: req.service,
      method: req.method,
      requestData: req.request_data,
      metadata: filter.fromGrpc(ctx.metadata),
      deadline: ctx.deadline,
      signal: ctx.cancellation,
      trace: filter.traceOfGrpc(ctx.metadata, server),
    });
    return { ...toInBand(r), response_data: r.responseData };
  };
  return {
    Invoke: invoke(INVOKE_SPAN),
    InvokeJson: invoke(INVOKE_JSON_SPAN),
    ListServices: async () => ({ services: [...ops.listServices()] }),
    ListMethods: async (req, ctx) => ({
      methods: (await ops.listMethods(req.service, { signal: ctx.signal })).map((m) => ({
        name: m.name,
        full_name: m.fullName,
        input_type: m.inputType,
        output_type: m.outputType,
        is_client_streaming: m.clientStreaming,
        is_server_streaming: m.serverStreaming,
      })),
    }),
    GetMethodSchema: async (req, ctx) => {
      const s = await ops.methodSchema(req.service, req.method, req.type, ctx.signal);
      return {
        input_type_name: s.inputTypeName,
        output_type_name: s.outputTypeName,
        schema_type: s.schemaType,
        fields: s.fields.map((f) => ({ name: f.name, type: f.type, type_name: f.typeName, is_repeated: f.isRepeated, is_optional: f.isOptional })),
      };
    },
  };
}
