/**
 * Encoded FileDescriptorProtos for the test protos in this folder, as server reflection would serve them
 * (src/shared/file-descriptors.ts: one per .proto file with its real name, package and dependencies, the well-known
 * types as @bufbuild/protobuf ships them). protoc-free: the .proto text is parsed with protobufjs.
 */
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import protobuf from "protobufjs";
import { fileDescriptorsOfRoot } from "../../../src/shared/file-descriptors.js";

/** Folder holding the test .proto files (import paths are relative to it). */
export const protosDir = dirname(fileURLToPath(import.meta.url));

/** FileDescriptorProtos (decoded) of `entry` and everything it imports, dependencies first. */
export function fileDescriptorProtos(entry: string): FileDescriptorProto[] {
  const root = new protobuf.Root();
  // google/protobuf/*.proto resolve to protobufjs's bundled copies; everything else to this folder.
  root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") ? target : join(protosDir, target));
  root.loadSync(entry, { keepCase: true });
  root.resolveAll();
  return fileDescriptorsOfRoot(root, protosDir);
}

/** Each file of fileDescriptorProtos(entry), binary encoded, dependencies first. */
export function encodedFileDescriptorProtos(entry: string): Uint8Array[] {
  return fileDescriptorProtos(entry).map((f) => toBinary(FileDescriptorProtoSchema, f));
}

/** A binary google.protobuf.FileDescriptorSet of fileDescriptorProtos(entry). */
export function encodedFileDescriptorSet(entry: string): Uint8Array {
  return toBinary(FileDescriptorSetSchema, create(FileDescriptorSetSchema, { file: fileDescriptorProtos(entry) }));
}

/** A SchemaSet-shaped value ({id, files}) for `entry`, id = sha256 of the encoded files. */
export function schemaSetOf(entry: string): { id: string; files: Uint8Array[] } {
  const files = encodedFileDescriptorProtos(entry);
  const h = createHash("sha256");
  for (const f of files) h.update(f);
  return { id: h.digest("hex").slice(0, 16), files };
}

/** The rich shop schema: shop/v1/shop.proto (imports shop/v1/common.proto and seven well-known types). */
export const SHOP_PROTO = "shop/v1/shop.proto";
