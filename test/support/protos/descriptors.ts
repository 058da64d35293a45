/**
 * Encoded FileDescriptorProtos for the test protos in this folder, as server reflection would serve them: one per
 * .proto file, with its real name, package and dependency list, fully qualified type names, json_name set on every
 * field, proto3 `optional` as synthetic oneofs, and the well-known types as @bufbuild/protobuf ships them.
 * protoc-free: the .proto text is parsed with protobufjs and the descriptors are built with @bufbuild/protobuf.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  DescriptorProtoSchema,
  EnumDescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FieldDescriptorProtoSchema,
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
  type FileDescriptorProto,
  file_google_protobuf_any,
  file_google_protobuf_duration,
  file_google_protobuf_empty,
  file_google_protobuf_field_mask,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_google_protobuf_wrappers,
} from "@bufbuild/protobuf/wkt";
import protobuf from "protobufjs";

/** Folder holding the test .proto files (import paths are relative to it). */
export const protosDir = dirname(fileURLToPath(import.meta.url));

const wellKnown: ReadonlyMap<string, FileDescriptorProto> = new Map(
  [
    file_google_protobuf_any,
    file_google_protobuf_duration,
    file_google_protobuf_empty,
    file_google_protobuf_field_mask,
    file_google_protobuf_struct,
    file_google_protobuf_timestamp,
    file_google_protobuf_wrappers,
  ].map((f) => [f.proto.name, f.proto]),
);

const scalarTypes: Record<string, FieldDescriptorProto_Type> = {
  double: FieldDescriptorProto_Type.DOUBLE,
  float: FieldDescriptorProto_Type.FLOAT,
  int64: FieldDescriptorProto_Type.INT64,
  uint64: FieldDescriptorProto_Type.UINT64,
  int32: FieldDescriptorProto_Type.INT32,
  fixed64: FieldDescriptorProto_Type.FIXED64,
  fixed32: FieldDescriptorProto_Type.FIXED32,
  bool: FieldDescriptorProto_Type.BOOL,
  string: FieldDescriptorProto_Type.STRING,
  bytes: FieldDescriptorProto_Type.BYTES,
  uint32: FieldDescriptorProto_Type.UINT32,
  sfixed32: FieldDescriptorProto_Type.SFIXED32,
  sfixed64: FieldDescriptorProto_Type.SFIXED64,
  sint32: FieldDescriptorProto_Type.SINT32,
  sint64: FieldDescriptorProto_Type.SINT64,
};

/** protoc's json_name: lowerCamelCase of the proto name. */
function jsonNameOf(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function typeOf(
  f: protobuf.Field,
  type: string,
  resolved: protobuf.Type | protobuf.Enum | null,
): Pick<FieldDescriptorProto, "type"> & { typeName?: string } {
  const scalar = scalarTypes[type];
  if (scalar !== undefined) return { type: scalar };
  if (resolved === null) throw new Error(`field ${f.fullName}: unresolved type ${type}`);
  return {
    type: resolved instanceof protobuf.Enum ? FieldDescriptorProto_Type.ENUM : FieldDescriptorProto_Type.MESSAGE,
    typeName: resolved.fullName,
  };
}

function enumDescriptor(e: protobuf.Enum): EnumDescriptorProto {
  return create(EnumDescriptorProtoSchema, {
    name: e.name,
    value: Object.entries(e.values).map(([name, number]) => ({ name, number })),
  });
}

function messageDescriptor(t: protobuf.Type): DescriptorProto {
  const d = create(DescriptorProtoSchema, { name: t.name });
  // protoc order: real oneofs first, synthetic (proto3 optional) ones after.
  const real = t.oneofsArray.filter((o) => !o.fieldsArray.some((f) => f.options?.["proto3_optional"] === true));
  const synthetic = t.oneofsArray.filter((o) => !real.includes(o));
  const oneofs = [...real, ...synthetic];
  d.oneofDecl = oneofs.map((o) => ({ $typeName: "google.protobuf.OneofDescriptorProto", name: o.name }));
  for (const f of t.fieldsArray) {
    const fd = create(FieldDescriptorProtoSchema, {
      name: f.name,
      number: f.id,
      jsonName: (f.options?.["json_name"] as string | undefined) ?? jsonNameOf(f.name),
      label: f.repeated || f.map ? FieldDescriptorProto_Label.REPEATED : FieldDescriptorProto_Label.OPTIONAL,
    });
    if (f.map) {
      const mf = f as unknown as protobuf.MapField;
      const entryName = jsonNameOf(f.name).replace(/^./, (c) => c.toUpperCase()) + "Entry";
      d.nestedType.push(
        create(DescriptorProtoSchema, {
          name: entryName,
          options: { mapEntry: true },
          field: [
            create(FieldDescriptorProtoSchema, { name: "key", number: 1, jsonName: "key", label: FieldDescriptorProto_Label.OPTIONAL, ...typeOf(f, mf.keyType, null) }),
            create(FieldDescriptorProtoSchema, { name: "value", number: 2, jsonName: "value", label: FieldDescriptorProto_Label.OPTIONAL, ...typeOf(f, mf.type, mf.resolvedType) }),
          ],
        }),
      );
      fd.type = FieldDescriptorProto_Type.MESSAGE;
      fd.typeName = `${t.fullName}.${entryName}`;
    } else {
      Object.assign(fd, typeOf(f, f.type, f.resolvedType));
    }
    if (f.partOf) fd.oneofIndex = oneofs.indexOf(f.partOf);
    if (f.options?.["proto3_optional"] === true) fd.proto3Optional = true;
    d.field.push(fd);
  }
  for (const n of t.nestedArray) {
    if (n instanceof protobuf.Type) d.nestedType.push(messageDescriptor(n));
    else if (n instanceof protobuf.Enum) d.enumType.push(enumDescriptor(n));
  }
  return d;
}

function collect(ns: protobuf.NamespaceBase, filename: string, file: FileDescriptorProto): void {
  for (const n of ns.nestedArray) {
    if (n instanceof protobuf.Type) {
      if (n.filename === filename) file.messageType.push(messageDescriptor(n));
    } else if (n instanceof protobuf.Enum) {
      if (n.filename === filename) file.enumType.push(enumDescriptor(n));
    } else if (n instanceof protobuf.Service) {
      if (n.filename === filename)
        file.service.push({
          $typeName: "google.protobuf.ServiceDescriptorProto",
          name: n.name,
          method: n.methodsArray.map((m) => ({
            $typeName: "google.protobuf.MethodDescriptorProto",
            name: m.name,
            inputType: m.resolvedRequestType!.fullName,
            outputType: m.resolvedResponseType!.fullName,
            clientStreaming: m.requestStream === true,
            serverStreaming: m.responseStream === true,
          })),
        });
    } else if (n instanceof protobuf.Namespace) {
      collect(n, filename, file);
    }
  }
}

/** FileDescriptorProtos (decoded) of `entry` and everything it imports, dependencies first. */
export function fileDescriptorProtos(entry: string): FileDescriptorProto[] {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (wellKnown.has(target) ? target : join(protosDir, target));
  root.loadSync(entry, { keepCase: true });
  root.resolveAll();
  const out: FileDescriptorProto[] = [];
  const seen = new Set<string>();
  const visit = (name: string): void => {
    if (seen.has(name)) return;
    seen.add(name);
    const wkt = wellKnown.get(name);
    if (wkt) {
      out.push(wkt);
      return;
    }
    const parsed = protobuf.parse(readFileSync(join(protosDir, name), "utf8"), { keepCase: true });
    const deps = parsed.imports ?? [];
    for (const dep of deps) visit(dep);
    const file = create(FileDescriptorProtoSchema, { name, package: parsed.package ?? "", dependency: deps, syntax: "proto3" });
    collect(root, join(protosDir, name), file);
    out.push(file);
  };
  visit(entry);
  return out;
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
