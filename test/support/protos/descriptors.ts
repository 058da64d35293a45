/**
 * Encoded FileDescriptorProtos for the test protos in this folder, as server reflection would serve them: one per
 * .proto file with its real name, package and dependencies, the well-known types included. `buf build` made them
 * (scripts/gen-protos.mjs writes gen/shop.binpb; `npm test` runs it through `npm run typecheck`, and this module
 * runs it when the file is missing, e.g. for a single `node --test` run on a fresh clone).
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";

/** Folder holding the test .proto files (import paths are relative to it). */
export const protosDir = dirname(fileURLToPath(import.meta.url));

/** The rich shop schema: shop/v1/shop.proto (imports shop/v1/common.proto and seven well-known types). */
export const SHOP_PROTO = "shop/v1/shop.proto";

/** Every field kind of proto3 (kinds/v1/kinds.proto, imports well-known types only): the fast-codec test's schema. */
export const KINDS_PROTO = "kinds/v1/kinds.proto";

/**
 * An API with google.api.http annotations on every method (library/v1/library.proto, with googleapis' annotations.proto
 * and http.proto), built with source info: the transcoding and OpenAPI tests' schema.
 */
export const LIBRARY_PROTO = "library/v1/library.proto";

/** Envoy's transcoder bookstore example as an annotated API (bookstore/v1/bookstore.proto): the differential test's. */
export const BOOKSTORE_PROTO = "bookstore/v1/bookstore.proto";

const builtSets: Record<string, string> = {
  [SHOP_PROTO]: join(protosDir, "gen", "shop.binpb"),
  [KINDS_PROTO]: join(protosDir, "gen", "kinds.binpb"),
  [LIBRARY_PROTO]: join(protosDir, "gen", "library.binpb"),
  [BOOKSTORE_PROTO]: join(protosDir, "gen", "bookstore.binpb"),
};

let cache: Map<string, FileDescriptorProto[]> | undefined;

/** FileDescriptorProtos (decoded) of `entry` and everything it imports, dependencies first. */
export function fileDescriptorProtos(entry: string): FileDescriptorProto[] {
  cache ??= new Map();
  const hit = cache.get(entry);
  if (hit) return hit;
  const path = builtSets[entry];
  if (path === undefined) throw new Error(`no buf-built descriptor set for ${entry} (scripts/gen-protos.mjs builds ${Object.keys(builtSets).join(", ")})`);
  if (!existsSync(path)) execFileSync(process.execPath, [join(protosDir, "..", "..", "..", "scripts", "gen-protos.mjs")], { stdio: "inherit" });
  const files = fromBinary(FileDescriptorSetSchema, readFileSync(path)).file;
  cache.set(entry, files);
  return files;
}

/** Each file of fileDescriptorProtos(entry), binary encoded, dependencies first. */
export function encodedFileDescriptorProtos(entry: string): Uint8Array[] {
  return fileDescriptorProtos(entry).map((f) => toBinary(FileDescriptorProtoSchema, f));
}

/** A binary google.protobuf.FileDescriptorSet of fileDescriptorProtos(entry). */
export function encodedFileDescriptorSet(entry: string): Uint8Array {
  fileDescriptorProtos(entry);
  return readFileSync(builtSets[entry]!);
}

/** A SchemaSet-shaped value ({id, files}) for `entry`, id = sha256 of the encoded files. */
export function schemaSetOf(entry: string): { id: string; files: Uint8Array[] } {
  const files = encodedFileDescriptorProtos(entry);
  const h = createHash("sha256");
  for (const f of files) h.update(f);
  return { id: h.digest("hex").slice(0, 16), files };
}
