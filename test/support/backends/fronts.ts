import * as grpc from "@grpc/grpc-js";
import type { TestGateway } from "../gateway.js";
import { unary } from "../gateway.js";

/** An invoke outcome normalised across front ends; `responseData` is always JSON text ("" when failed). */
export interface InvokeOutcome {
  success: boolean;
  status: string;
  message: string;
  responseData: string;
}

/** One way of invoking a backend method through the gateway. */
export interface InvokeFront {
  name: string;
  /** `requestJson` is JSON text; `headers` become gRPC metadata or HTTP headers (or `/v1/grpc/call` metadata). */
  invoke(gw: TestGateway, service: string, method: string, requestJson: string, headers?: Record<string, string>): Promise<InvokeOutcome>;
}

function metadataOf(key: string, headers: Record<string, string>): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("x-api-key", key);
  for (const [k, v] of Object.entries(headers)) {
    if (k.endsWith("-bin")) md.set(k, Buffer.from(v));
    else md.set(k, v);
  }
  return md;
}

async function post(gw: TestGateway, key: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(gw.http + path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key, ...headers },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`POST ${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/** Every invoke front end: gRPC Invoke and InvokeJson, REST invoke, invoke-json and /v1/grpc/call. */
export function invokeFronts(key: string): InvokeFront[] {
  const grpcFront = (method: "Invoke" | "InvokeJson"): InvokeFront => ({
    name: `gRPC ${method}`,
    async invoke(gw, service, m, requestJson, headers = {}) {
      const r = await unary(gw.client("platform.Gateway"), method, { service, method: m, request_data: requestJson }, metadataOf(key, headers));
      return { success: r.success, status: r.status, message: r.message, responseData: r.response_data };
    },
  });
  return [
    grpcFront("Invoke"),
    grpcFront("InvokeJson"),
    {
      name: "REST invoke",
      async invoke(gw, service, method, requestJson, headers = {}) {
        // The object form cannot carry malformed JSON: send it as text inside a hand-built body.
        const res = await fetch(gw.http + "/v1/gateway/invoke", {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": key, ...headers },
          body: `{"service":${JSON.stringify(service)},"method":${JSON.stringify(method)},"requestData":${requestJson || "null"}}`,
        });
        if (res.status === 400) {
          const e = (await res.json()) as { code: number; message: string };
          return { success: false, status: "INVALID_ARGUMENT", message: e.message, responseData: "" };
        }
        const r = (await res.json()) as { success: boolean; status: string; message: string; responseData: unknown };
        return { success: r.success, status: r.status, message: r.message, responseData: r.responseData === null ? "" : JSON.stringify(r.responseData) };
      },
    },
    {
      name: "REST invoke-json",
      async invoke(gw, service, method, requestJson, headers = {}) {
        const r = await post(gw, key, "/v1/gateway/invoke-json", { service, method, request_data: requestJson }, headers);
        return { success: r.success, status: r.status, message: r.message, responseData: r.response_data };
      },
    },
    {
      name: "REST /v1/grpc/call",
      async invoke(gw, service, method, requestJson, headers = {}) {
        const r = await post(gw, key, "/v1/grpc/call", { service, method, request: requestJson, metadata: headers });
        return { success: !r.error, status: r.statusCode, message: r.error ? r.data : "", responseData: r.error ? "" : r.data };
      },
    },
  ];
}
