import { loadSync, type Options, type PackageDefinition } from "@grpc/proto-loader";
import { protoDir } from "./paths.js";

/** The gateway's own proto files, relative to proto/. */
export const GATEWAY_PROTO_FILES = [
  "io/cloudevents/v1/cloudevents.proto",
  "platform/status.proto",
  "platform/gateway.proto",
  "platform/state.proto",
  "platform/config.proto",
  "platform/trigger.proto",
] as const;

/**
 * Loader options shared by the server and the client library, so both see one object shape: snake_case field
 * names as in the protos, int64 as strings, enums as names, defaults filled, `oneofs` naming the set member,
 * bytes as Buffer.
 */
export const LOADER_OPTIONS: Options = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [protoDir()],
});

let cached: PackageDefinition | undefined;

/** The package definition of every gateway service and message (loaded once per process). */
export function gatewayPackageDefinition(): PackageDefinition {
  return (cached ??= loadSync([...GATEWAY_PROTO_FILES], LOADER_OPTIONS));
}
