import { relative, isAbsolute, join } from "node:path";
import { existsSync } from "node:fs";
import protobuf from "protobufjs";
import descriptorExt from "protobufjs/ext/descriptor/index.js";
import { protoDir } from "./paths.js";
import { GATEWAY_PROTO_FILES } from "./protos.js";

type Reflected = protobuf.Type | protobuf.Enum | protobuf.Service;
/** The descriptor extension's additions (its module augmentation does not reach NodeNext resolution). */
const descriptor = descriptorExt as unknown as { FileDescriptorProto: protobuf.Type };
const toDescriptor = (o: Reflected): unknown => (o as unknown as { toDescriptor(edition?: string): unknown }).toDescriptor("proto3");

let root: protobuf.Root | undefined;

/** The gateway's protos as one protobufjs Root (keepCase), e.g. to encode a SubscribeResponse once per event. */
export function gatewayRoot(): protobuf.Root {
  if (root) return root;
  const dir = protoDir();
  const r = new protobuf.Root();
  r.resolvePath = (origin, target) => {
    if (isAbsolute(target)) return target;
    const inDir = join(dir, target);
    return existsSync(inDir) ? inDir : protobuf.util.path.resolve(origin, target);
  };
  r.loadSync(GATEWAY_PROTO_FILES.map((f) => join(dir, f)), { keepCase: true });
  r.resolveAll();
  return (root = r);
}

/** protobufjs bundles the well-known types without file names: give them protoc's. */
const WKT_FILES: Record<string, string> = {
  Any: "any", Timestamp: "timestamp", Duration: "duration", Empty: "empty", FieldMask: "field_mask",
  Struct: "struct", Value: "struct", ListValue: "struct", NullValue: "struct",
  DoubleValue: "wrappers", FloatValue: "wrappers", Int64Value: "wrappers", UInt64Value: "wrappers", Int32Value: "wrappers",
  UInt32Value: "wrappers", BoolValue: "wrappers", StringValue: "wrappers", BytesValue: "wrappers",
};

function fileOf(obj: protobuf.ReflectionObject): string {
  const f = obj.filename ?? "";
  if (!f && obj.fullName.startsWith(".google.protobuf.")) return `google/protobuf/${WKT_FILES[obj.name] ?? obj.name.toLowerCase()}.proto`;
  const rel = isAbsolute(f) ? relative(protoDir(), f) : f;
  return rel.startsWith("..") ? f : rel;
}

/** Files a message type's fields refer to, nested types included. */
function messageDeps(t: protobuf.Type, out: Set<string>): void {
  for (const field of t.fieldsArray) {
    field.resolve();
    if (field.resolvedType) out.add(fileOf(field.resolvedType));
  }
  for (const n of t.nestedArray) if (n instanceof protobuf.Type) messageDeps(n, out);
}

/**
 * Encoded FileDescriptorProtos of the gateway's protos, one per .proto file with its real name
 * ("platform/state.proto") and its imports as dependencies, as `protoc` would produce. (proto-loader's own
 * descriptors merge files by package and drop dependencies, which breaks reflection clients that link files.)
 */
export function gatewayFileDescriptors(): Uint8Array[] {
  const files = new Map<string, { pkg: string; items: Reflected[] }>();
  const visit = (ns: protobuf.NamespaceBase): void => {
    for (const n of ns.nestedArray) {
      if (n instanceof protobuf.Type || n instanceof protobuf.Enum || n instanceof protobuf.Service) {
        const name = fileOf(n);
        const entry = files.get(name) ?? { pkg: ns instanceof protobuf.Root ? "" : ns.fullName.slice(1), items: [] };
        entry.items.push(n);
        files.set(name, entry);
      } else if (n instanceof protobuf.Namespace) visit(n);
    }
  };
  visit(gatewayRoot());
  const out: Uint8Array[] = [];
  for (const [name, { pkg, items }] of files) {
    const deps = new Set<string>();
    const fd = descriptor.FileDescriptorProto.create({ name, package: pkg, syntax: "proto3" }) as unknown as Record<string, unknown[]>;
    fd["messageType"] = [];
    fd["enumType"] = [];
    fd["service"] = [];
    for (const item of items) {
      if (item instanceof protobuf.Type) {
        messageDeps(item, deps);
        fd["messageType"]!.push(toDescriptor(item));
      } else if (item instanceof protobuf.Enum) fd["enumType"]!.push(toDescriptor(item));
      else {
        for (const m of item.methodsArray) {
          m.resolve();
          if (m.resolvedRequestType) deps.add(fileOf(m.resolvedRequestType));
          if (m.resolvedResponseType) deps.add(fileOf(m.resolvedResponseType));
        }
        fd["service"]!.push(toDescriptor(item));
      }
    }
    deps.delete(name);
    fd["dependency"] = [...deps].sort();
    out.push(descriptor.FileDescriptorProto.encode(descriptor.FileDescriptorProto.fromObject(fd)).finish());
  }
  return out;
}
