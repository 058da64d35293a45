import * as grpc from "@grpc/grpc-js";
import { createReflectionAnswerer, reflectionDefinitions, type ReflectionServiceOptions } from "../../src/grpc/reflection-service.js";
import type { ServerReflectionRequest__Output } from "../../src/gen/reflection/grpc/reflection/v1/ServerReflectionRequest.js";
import type { ServerReflectionResponse } from "../../src/gen/reflection/grpc/reflection/v1/ServerReflectionResponse.js";

/**
 * The gateway's reflection answers (src/grpc/reflection-service.ts) served from a grpc-js Server, for the test
 * backends: the same index and answers the gateway serves, on the server those backends are built on.
 */
export function addGrpcJsReflectionService(server: grpc.Server, opts: Omit<ReflectionServiceOptions, "admit"> & { onStream?: () => void }): void {
  const answerOf = createReflectionAnswerer(opts);
  const defs = reflectionDefinitions();
  const handler = (call: grpc.ServerDuplexStream<ServerReflectionRequest__Output, ServerReflectionResponse>): void => {
    opts.onStream?.();
    call.on("data", (req: ServerReflectionRequest__Output) => call.write(answerOf(req)));
    call.on("end", () => call.end());
    call.on("error", () => undefined);
  };
  for (const v of opts.versions ?? ["v1", "v1alpha"]) server.addService(defs[v], { ServerReflectionInfo: handler });
}
