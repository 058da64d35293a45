import * as grpc from "@grpc/grpc-js";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";

/** A gRPC status object for grpc-js callbacks and stream errors. */
export function status(code: Code, details: string): Partial<grpc.StatusObject> {
  return { code: code as number as grpc.status, details, metadata: new grpc.Metadata() };
}

/** The status of anything thrown (GatewayError codes kept, anything else INTERNAL like daprd). */
export function statusOf(e: unknown): Partial<grpc.StatusObject> {
  const err = GatewayError.from(e);
  return status(err.code, err.rawMessage);
}

/** Checks `dapr-api-token` the way daprd does when it runs with DAPR_API_TOKEN. */
export function tokenError(expected: string | undefined, md: grpc.Metadata): Partial<grpc.StatusObject> | undefined {
  if (!expected) return undefined;
  const given = md.get("dapr-api-token")[0];
  if (given === expected) return undefined;
  return status(Code.UNAUTHENTICATED, "authentication error: api token mismatch");
}

/** A unary grpc-js handler around an async function, with the token check in front. */
export function unaryHandler(token: () => string | undefined, fn: (req: any, md: grpc.Metadata) => Promise<object>): grpc.handleUnaryCall<any, any> {
  return (call, callback) => {
    const denied = tokenError(token(), call.metadata);
    if (denied) return callback(denied);
    fn(call.request, call.metadata).then(
      (res) => callback(null, res),
      (e: unknown) => callback(statusOf(e)),
    );
  };
}
