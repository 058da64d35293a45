import { Code } from "../shared/code.js";
import { toInBand } from "../shared/status.js";
import type { MetadataFilter } from "../ops/forward-metadata.js";
import type { DispatchOps, InvokeResult } from "../ops/dispatch.js";
import { json, requiredQuery, type Route } from "../http/router.js";
import { booleanParam } from "../http/query-params.js";
import { echo } from "../shared/echo.js";
import { httpServerSpan } from "../observe/span.js";

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function failure(field: string, problem: string): InvokeResult {
  return { code: Code.INVALID_ARGUMENT, message: `${field} ${problem}`, responseData: "" };
}

const INVOKE_FIELDS = ["service", "method", "requestData"];
/** invoke-json also takes `requestData` as an alias of `request_data`. */
const INVOKE_JSON_FIELDS = ["service", "method", "request_data", "requestData"];

/** The first member of `body` not in `allowed`: a typo such as `request_data` on invoke must not be dropped silently. */
function unknownField(body: Record<string, unknown>, allowed: readonly string[]): string | undefined {
  return Object.keys(body).find((k) => !allowed.includes(k));
}

const INVOKE_SPAN = httpServerSpan("POST", "/v1/gateway/invoke");
const INVOKE_JSON_SPAN = httpServerSpan("POST", "/v1/gateway/invoke-json");

/** `/v1/gateway/...` routes: list-services, list-methods, invoke (object payloads), invoke-json (JSON text payloads). */
export function gatewayRoutes(ops: DispatchOps, filter: MetadataFilter): Route[] {
  return [
    { method: "GET", path: "/v1/gateway/list-services", handler: async () => json({ services: ops.listServices() }) },
    {
      method: "GET",
      path: "/v1/gateway/list-methods",
      handler: async (req) => {
        const service = requiredQuery(req, "service");
        const methods = await ops.listMethods(service, { refresh: booleanParam("refresh", req.query.get("refresh")), signal: req.signal });
        return json({
          methods: methods.map((m) => ({
            name: m.name,
            fullName: m.fullName,
            inputType: m.inputType,
            outputType: m.outputType,
            isClientStreaming: m.clientStreaming,
            isServerStreaming: m.serverStreaming,
          })),
        });
      },
    },
    {
      method: "POST",
      path: "/v1/gateway/invoke",
      handler: async (req) => {
        const body = req.json();
        const data = body["requestData"];
        const unknown = unknownField(body, INVOKE_FIELDS);
        let r: InvokeResult;
        if (unknown !== undefined) r = failure(echo(unknown), `is not a field of the invoke request (fields: ${INVOKE_FIELDS.join(", ")})`);
        else if (data !== undefined && data !== null && !isPlainObject(data)) r = failure("requestData", `must be a JSON object (got ${Array.isArray(data) ? "an array" : typeof data})`);
        else {
          r = await ops.invoke({
            service: body["service"],
            method: body["method"],
            requestData: data === undefined || data === null ? "" : JSON.stringify(data),
            metadata: filter.fromHeaders(req.headers),
            signal: req.cancellation,
            trace: filter.traceOfHeaders(req.headers, INVOKE_SPAN),
          });
        }
        return json({ ...toInBand(r), responseData: r.code === Code.OK ? JSON.parse(r.responseData) : null });
      },
    },
    {
      method: "POST",
      path: "/v1/gateway/invoke-json",
      handler: async (req) => {
        const body = req.json();
        const unknown = unknownField(body, INVOKE_JSON_FIELDS);
        if (unknown !== undefined) {
          const f = failure(echo(unknown), `is not a field of the invoke-json request (fields: service, method, request_data)`);
          return json({ ...toInBand(f), response_data: f.responseData });
        }
        const r = await ops.invoke({
          service: body["service"],
          method: body["method"],
          requestData: body["request_data"] ?? body["requestData"],
          metadata: filter.fromHeaders(req.headers),
          signal: req.cancellation,
          trace: filter.traceOfHeaders(req.headers, INVOKE_JSON_SPAN),
        });
        return json({ ...toInBand(r), response_data: r.responseData });
      },
    },
  ];
}
