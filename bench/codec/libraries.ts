/**
 * The two candidate codec libraries behind one shape, built from the same encoded FileDescriptorProtos (what server
 * reflection hands the gateway): @bufbuild/protobuf (the codec in src/workers) and protobufjs with ext/protojson.
 */
import { create, fromJson, toBinary, toJsonString, type JsonValue } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { fromBinary } from "@bufbuild/protobuf";
import protobuf from "protobufjs";
import "protobufjs/ext/descriptor/index.js";
import protojson from "protobufjs/ext/protojson.js";
import { binaryToJson, jsonToBinary } from "../../src/workers/codec.js";
import { compileSchema } from "../../src/workers/schema-registry.js";

/** JSON text <-> binary for one message type. */
export interface LibraryCodec {
  readonly name: string;
  jsonToBinary(json: string): Uint8Array;
  binaryToJson(bytes: Uint8Array): string;
}

/** The gateway's codec (src/workers/codec.ts: its compiled fast path, falling back to @bufbuild/protobuf). */
export function gatewayCodec(files: readonly Uint8Array[], typeName: string): LibraryCodec {
  const registry = compileSchema(files);
  return {
    name: "gateway codec (fast path + @bufbuild)",
    jsonToBinary: (json) => jsonToBinary(registry, typeName, json),
    binaryToJson: (bytes) => binaryToJson(registry, typeName, bytes),
  };
}

/** @bufbuild/protobuf alone: JSON.parse + fromJson + toBinary; fromBinary + toJsonString. */
export function bufbuildCodec(files: readonly Uint8Array[], typeName: string): LibraryCodec {
  const registry = compileSchema(files);
  const desc = registry.getMessage(typeName);
  if (desc === undefined) throw new Error(`${typeName} is not in the schema`);
  return {
    name: "@bufbuild/protobuf",
    jsonToBinary: (json) => toBinary(desc, fromJson(desc, JSON.parse(json) as JsonValue, { registry })),
    binaryToJson: (bytes) => toJsonString(desc, fromBinary(desc, bytes), { registry }),
  };
}

/**
 * protobufjs 8: Root.fromDescriptor + protojson.fromJsonString / toJsonString. `keepCase` keeps proto field names on
 * the reflected types (default false: camelCased, the library's default since 8.6.1).
 */
export function protobufjsCodec(files: readonly Uint8Array[], typeName: string, keepCase = false): LibraryCodec {
  const set = create(FileDescriptorSetSchema, { file: files.map((f) => fromBinary(FileDescriptorProtoSchema, f)) });
  const fromDescriptor = (protobuf.Root as unknown as { fromDescriptor(b: Uint8Array, o: { keepCase: boolean }): protobuf.Root }).fromDescriptor;
  const root = fromDescriptor(toBinary(FileDescriptorSetSchema, set), { keepCase });
  root.resolveAll();
  const type = root.lookupType(typeName);
  return {
    name: keepCase ? "protobufjs (keepCase)" : "protobufjs",
    jsonToBinary: (json) => type.encode(protojson.fromJsonString(type, json)).finish(),
    binaryToJson: (bytes) => protojson.toJsonString(type, type.decode(bytes)),
  };
}
