/**
 * Per-file google.protobuf.FileDescriptorProtos of a protobufjs Root, as `protoc` and server reflection produce them:
 * one per .proto file with its real name (relative to a base folder), package and dependency list, fully qualified
 * type names, json_name on every field, map entries, proto3 `optional` as synthetic oneofs, and the well-known types
 * as @bufbuild/protobuf ships them. Used for the gateway's own reflection and for the test protos. (proto-loader's
 * descriptors merge files by package and drop dependencies, which breaks reflection clients that link files.)
 */
import { isAbsolute, relative } from "node:path";
import { create, type DescFile } from "@bufbuild/protobuf";
import * as wkt from "@bufbuild/protobuf/wkt";
import {
  DescriptorProtoSchema,
  EnumDescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FieldDescriptorProtoSchema,
  FileDescriptorProtoSchema,
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
  type FileDescriptorProto,
} from "@bufbuild/protobuf/wkt";
import protobuf from "protobufjs";

/** The well-known files by name, and the file declaring each well-known top-level type ("google.protobuf.Timestamp"). */
const wellKnownFiles: ReadonlyMap<string, FileDescriptorProto> = new Map(
  Object.entries(wkt)
    .filter(([name]) => name.startsWith("file_google_protobuf_"))
    .map(([, file]) => [(file as DescFile).proto.name, (file as DescFile).proto]),
);
const wellKnownFileOfType = new Map<string, string>();
for (const f of wellKnownFiles.values()) {
  for (const t of [...f.messageType, ...f.enumType]) wellKnownFileOfType.set(`${f.package}.${t.name}`, f.name);
}

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

/** The file name of a reflected object: relative to `baseDir`, or the well-known file that declares it. */
function fileOf(obj: protobuf.ReflectionObject, baseDir: string): string {
  let top: protobuf.ReflectionObject = obj;
  while (top.parent instanceof protobuf.Type) top = top.parent;
  const wk = wellKnownFileOfType.get(top.fullName.slice(1));
  if (wk !== undefined) return wk;
  const f = top.filename ?? "";
  if (f === "") throw new Error(`${obj.fullName} has no source file`);
  return isAbsolute(f) ? relative(baseDir, f) : f;
}

/** Files a message type's fields refer to, nested types included. */
function messageDeps(t: protobuf.Type, baseDir: string, out: Set<string>): void {
  for (const field of t.fieldsArray) {
    field.resolve();
    if (field.resolvedType) out.add(fileOf(field.resolvedType, baseDir));
  }
  for (const n of t.nestedArray) if (n instanceof protobuf.Type) messageDeps(n, baseDir, out);
}

/**
 * The FileDescriptorProtos (decoded) of every file `root` holds, dependencies before dependents. File names are the
 * source paths relative to `baseDir`; a file's dependencies are the files its types refer to; well-known types come
 * from @bufbuild/protobuf. `root` must be resolved (`resolveAll()`).
 */
export function fileDescriptorsOfRoot(root: protobuf.Root, baseDir: string): FileDescriptorProto[] {
  const files = new Map<string, { file: FileDescriptorProto; source: string; deps: Set<string> }>();
  const visit = (ns: protobuf.NamespaceBase): void => {
    for (const n of ns.nestedArray) {
      if (n instanceof protobuf.Type || n instanceof protobuf.Enum || n instanceof protobuf.Service) {
        const name = fileOf(n, baseDir);
        if (wellKnownFiles.has(name) || files.has(name)) continue;
        const file = create(FileDescriptorProtoSchema, { name, package: ns instanceof protobuf.Root ? "" : ns.fullName.slice(1), syntax: "proto3" });
        files.set(name, { file, source: n.filename!, deps: new Set() });
      } else if (n instanceof protobuf.Namespace) visit(n);
    }
  };
  visit(root);
  for (const [name, { file, source, deps }] of files) {
    collect(root, source, file);
    const gather = (ns: protobuf.NamespaceBase): void => {
      for (const n of ns.nestedArray) {
        if (n instanceof protobuf.Type) {
          if (n.filename === source) messageDeps(n, baseDir, deps);
        } else if (n instanceof protobuf.Service) {
          if (n.filename !== source) continue;
          for (const m of n.methodsArray) {
            m.resolve();
            if (m.resolvedRequestType) deps.add(fileOf(m.resolvedRequestType, baseDir));
            if (m.resolvedResponseType) deps.add(fileOf(m.resolvedResponseType, baseDir));
          }
        } else if (n instanceof protobuf.Namespace) gather(n);
      }
    };
    gather(root);
    deps.delete(name);
    file.dependency = [...deps].sort();
  }
  const out: FileDescriptorProto[] = [];
  const done = new Set<string>();
  const emit = (name: string): void => {
    if (done.has(name)) return;
    done.add(name);
    const file = wellKnownFiles.get(name) ?? files.get(name)?.file;
    if (file === undefined) throw new Error(`file ${name} is not in the root`);
    for (const dep of file.dependency) emit(dep);
    out.push(file);
  };
  for (const name of files.keys()) emit(name);
  return out;
}
