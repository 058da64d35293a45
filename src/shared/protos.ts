import { fromJSON, type Options, type PackageDefinition } from "@grpc/proto-loader";
import { createFileRegistry, fromBinary, type FileRegistry } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { GATEWAY_DESCRIPTOR_SET, GATEWAY_LOADER_JSON, WARMUP_DESCRIPTOR_SET, WARMUP_LOADER_JSON } from "../gen/protos.js";

/**
 * The gateway's protos at run time, all generated from proto/ at build time by scripts/gen-protos.mjs (src/gen/,
 * docs/conversion.md "Generated code"): grpc-js's codecs come from proto-loader, reflection and the wire checks from
 * the `buf build` FileDescriptorSet through @bufbuild/protobuf. No .proto text is parsed in the process.
 */

/**
 * Loader options shared by the server and the client library, so both see one object shape: snake_case field
 * names as in the protos, int64 as strings, enums as names, defaults filled, `oneofs` naming the set member,
 * bytes as Buffer. scripts/gen-protos.mjs passes the same to proto-loader-gen-types, so the generated types
 * (src/gen/gateway, src/gen/dapr) describe exactly these shapes.
 */
export const LOADER_OPTIONS: Options = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** The gateway's own gRPC services, as the package definition names them. */
export const GATEWAY_SERVICES = ["platform.Gateway", "platform.State", "platform.Config", "platform.Trigger", "io.cloudevents.v1.Pubsub"] as const;

let cached: PackageDefinition | undefined;

/** The package definition of every gateway service and message (built once per process). */
export function gatewayPackageDefinition(): PackageDefinition {
  return (cached ??= fromJSON(JSON.parse(GATEWAY_LOADER_JSON), LOADER_OPTIONS));
}

let setBytes: Uint8Array | undefined;
let files: Uint8Array[] | undefined;
let registry: FileRegistry | undefined;

function descriptorSetBytes(): Uint8Array {
  return (setBytes ??= Buffer.from(GATEWAY_DESCRIPTOR_SET, "base64"));
}

/**
 * Encoded FileDescriptorProtos of the gateway's protos and the well-known types they import, one per .proto file
 * with its real name ("platform/state.proto") and its imports as dependencies, dependencies first: the bytes
 * `buf build` wrote, as reflection serves them.
 */
export function gatewayFileDescriptors(): Uint8Array[] {
  return (files ??= splitDescriptorSet(descriptorSetBytes()));
}

/** The encoded FileDescriptorProtos of a FileDescriptorSet, as they are (not re-encoded), in the set's order. */
function splitDescriptorSet(set: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  // FileDescriptorSet is `repeated FileDescriptorProto file = 1`.
  const reader = new BinaryReader(set);
  while (reader.pos < reader.len) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WireType.LengthDelimited) out.push(reader.bytes());
    else reader.skip(wire);
  }
  return out;
}

/**
 * The warm-up's echo backend (proto/platform/warmup/echo.proto, src/main/warmup-invoke.ts): its package definition
 * (LOADER_OPTIONS) and its encoded FileDescriptorProtos with their imports, for its reflection service.
 */
export function warmupEchoProtos(): { pkg: PackageDefinition; files: Uint8Array[] } {
  return { pkg: fromJSON(JSON.parse(WARMUP_LOADER_JSON), LOADER_OPTIONS), files: splitDescriptorSet(Buffer.from(WARMUP_DESCRIPTOR_SET, "base64")) };
}

/** The gateway's messages, enums and services as a @bufbuild/protobuf registry (wire checks, encoders, benches). */
export function gatewayRegistry(): FileRegistry {
  return (registry ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSetBytes())));
}
