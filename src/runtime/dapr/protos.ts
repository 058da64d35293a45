import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { loadSync, type PackageDefinition } from "@grpc/proto-loader";

/**
 * Folder of the Dapr protos shipped in `@dapr/dapr` (`dapr/proto/...` plus the `google/protobuf` well-known types
 * they import). Resolved through the package so a hoisted install works too.
 */
export function daprProtoDir(): string {
  const pkg = createRequire(import.meta.url).resolve("@dapr/dapr/package.json");
  return join(dirname(pkg), "proto");
}

let cached: PackageDefinition | undefined;

/**
 * Dapr's runtime API (`dapr.proto.runtime.v1.Dapr`) and app callback services, loaded with the same options as the
 * gateway's protos: snake_case fields, int64 as strings, enums as names, defaults filled, `oneofs` naming the set
 * member, bytes as Buffer.
 */
export function daprPackageDefinition(): PackageDefinition {
  return (cached ??= loadSync(["dapr/proto/runtime/v1/dapr.proto", "dapr/proto/runtime/v1/appcallback.proto"], {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [daprProtoDir()],
  }));
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
