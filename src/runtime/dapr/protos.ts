import * as grpc from "@grpc/grpc-js";
import { fromJSON, type PackageDefinition } from "@grpc/proto-loader";
import { DAPR_LOADER_JSON } from "../../gen/protos.js";
import { LOADER_OPTIONS } from "../../shared/protos.js";

let cached: PackageDefinition | undefined;

/**
 * Dapr's runtime API (`dapr.proto.runtime.v1.Dapr`) and app callback services from the protos shipped in
 * `@dapr/dapr`, with the same options as the gateway's protos: snake_case fields, int64 as strings, enums as names,
 * defaults filled, `oneofs` naming the set member, bytes as Buffer. scripts/gen-protos.mjs turned the .proto files
 * into proto-loader JSON and types (src/gen/dapr) at build time.
 */
export function daprPackageDefinition(): PackageDefinition {
  return (cached ??= fromJSON(JSON.parse(DAPR_LOADER_JSON), LOADER_OPTIONS));
}

/** The service definition of `dapr.proto.runtime.v1.<name>`. */
export function daprService(name: "Dapr" | "AppCallback" | "AppCallbackAlpha" | "AppCallbackHealthCheck"): grpc.ServiceDefinition {
  return daprPackageDefinition()[`dapr.proto.runtime.v1.${name}`] as grpc.ServiceDefinition;
}

/**
 * `AppCallback` with `OnJobEvent`, which daprd v1.18 calls before falling back to
 * `AppCallbackAlpha.OnJobEventAlpha1`. The protos shipped in @dapr/dapr (v1.17) do not declare it yet, so it is
 * added here with the same request and response messages.
 */
export function appCallbackWithJobEvent(): grpc.ServiceDefinition {
  const base = daprService("AppCallback");
  const alpha = daprService("AppCallbackAlpha")["OnJobEventAlpha1"]!;
  return {
    ...base,
    OnJobEvent: { ...alpha, path: "/dapr.proto.runtime.v1.AppCallback/OnJobEvent", originalName: "onJobEvent" },
  };
}
