import { createHash } from "node:crypto";
import { fromBinary, type DescField, type DescMessage, type DescMethod, type FileRegistry } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { Code } from "../shared/code.js";
import { registryOfFiles } from "../shared/file-registry.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { FieldSchema } from "../shared/method-schema.js";
import type { SchemaSet } from "../workers/converter-types.js";

/** A backend method as listings report it. */
export interface MethodEntry {
  /** Short name, e.g. "GetOrder". */
  readonly name: string;
  /** "pkg.Service/Method". */
  readonly fullName: string;
  /** The gRPC path, "/pkg.Service/Method". */
  readonly path: string;
  /** Fully qualified input message name, no leading dot. */
  readonly inputType: string;
  readonly outputType: string;
  readonly clientStreaming: boolean;
  readonly serverStreaming: boolean;
  /** The descriptor, for schema listings. */
  readonly desc: DescMethod;
}

/** One version of a backend's schema: the files, their registry, and the methods of every service it hosts. */
export interface BackendSchema {
  /** What the converter gets (id = hash of the files). */
  readonly set: SchemaSet;
  readonly registry: FileRegistry;
  /** Fully qualified service names, reflection itself excluded. */
  readonly services: readonly string[];
  /** Every method of every service, in service then declaration order. */
  readonly methods: readonly MethodEntry[];
  /** Names of every file, for diagnostics. */
  readonly fileNames: readonly string[];
  /**
   * Look a method up by short name (when unique), "pkg.Service/Method" or "pkg.Service.Method". Undefined when
   * nothing matches; throws INVALID_ARGUMENT listing the candidates when a short name is ambiguous. Results are
   * cached per name.
   */
  find(name: string): MethodEntry | undefined;
}

const SCALAR_NAMES: Record<number, string> = {
  1: "double",
  2: "float",
  3: "int64",
  4: "uint64",
  5: "int32",
  6: "fixed64",
  7: "fixed32",
  8: "bool",
  9: "string",
  12: "bytes",
  13: "uint32",
  15: "sfixed32",
  16: "sfixed64",
  17: "sint32",
  18: "sint64",
};

/** True for the server reflection services, which are not part of a backend's own surface. */
export function isReflectionService(name: string): boolean {
  return name.startsWith("grpc.reflection.");
}

/**
 * Build a schema from encoded FileDescriptorProtos (any order, duplicates by name ignored) and the services the
 * backend hosts. Throws FAILED_PRECONDITION when a file is undecodable or a dependency or a service is missing.
 */
export function buildSchema(files: readonly Uint8Array[], services: readonly string[], label: string): BackendSchema {
  const decoded: FileDescriptorProto[] = [];
  const kept: Uint8Array[] = [];
  const seen = new Set<string>();
  for (const bytes of files) {
    let fd: FileDescriptorProto;
    try {
      fd = fromBinary(FileDescriptorProtoSchema, bytes);
    } catch (e) {
      throw new GatewayError(Code.FAILED_PRECONDITION, `${label}: reflection returned an undecodable FileDescriptorProto: ${(e as Error).message}`);
    }
    if (seen.has(fd.name)) continue;
    seen.add(fd.name);
    decoded.push(fd);
    kept.push(bytes);
  }
  let registry: FileRegistry;
  let ordered: FileDescriptorProto[];
  try {
    ({ registry, ordered } = registryOfFiles(decoded, {
      missing: (name, importer) => new GatewayError(Code.FAILED_PRECONDITION, `${label}: ${importer} imports ${name}, which reflection did not serve`),
      cycle: (name) => new GatewayError(Code.FAILED_PRECONDITION, `${label}: import cycle through ${name}`),
    }));
  } catch (e) {
    if (e instanceof GatewayError) throw e;
    throw new GatewayError(Code.FAILED_PRECONDITION, `${label}: the descriptors served by reflection do not resolve: ${(e as Error).message}`);
  }
  const topo = ordered.map((fd) => decoded.indexOf(fd));
  const methods: MethodEntry[] = [];
  const own = services.filter((s) => !isReflectionService(s));
  for (const name of own) {
    const svc = registry.getService(name);
    if (!svc) throw new GatewayError(Code.FAILED_PRECONDITION, `${label}: reflection lists service ${name} but serves no descriptor for it`);
    for (const m of svc.methods) {
      methods.push({
        name: m.name,
        fullName: `${svc.typeName}/${m.name}`,
        path: `/${svc.typeName}/${m.name}`,
        inputType: m.input.typeName,
        outputType: m.output.typeName,
        clientStreaming: m.methodKind === "client_streaming" || m.methodKind === "bidi_streaming",
        serverStreaming: m.methodKind === "server_streaming" || m.methodKind === "bidi_streaming",
        desc: m,
      });
    }
  }
  const hash = createHash("sha256");
  // Sorted by name so the id does not depend on the order reflection answered in.
  const order = decoded.map((fd, i) => [fd.name, i] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  for (const [, i] of order) hash.update(kept[i]!);
  const set: SchemaSet = Object.freeze({ id: hash.digest("hex").slice(0, 32), files: Object.freeze(topo.map((i) => kept[i]!)) });

  const byShort = new Map<string, MethodEntry[]>();
  const byFull = new Map<string, MethodEntry>();
  for (const m of methods) {
    byShort.set(m.name, [...(byShort.get(m.name) ?? []), m]);
    byFull.set(m.fullName, m);
    byFull.set(m.fullName.replace("/", "."), m);
    byFull.set(m.path, m);
  }
  const cache = new Map<string, MethodEntry | undefined>();
  return {
    set,
    registry,
    services: own,
    methods,
    fileNames: order.map(([n]) => n),
    find(name) {
      if (cache.has(name)) return cache.get(name);
      let found = byFull.get(name);
      if (!found) {
        const candidates = byShort.get(name);
        if (candidates && candidates.length > 1) {
          throw new GatewayError(
            Code.INVALID_ARGUMENT,
            `method ${name} is ambiguous on ${label}: use one of ${candidates.map((c) => c.fullName).join(", ")}`,
          );
        }
        found = candidates?.[0];
      }
      if (cache.size < 10_000) cache.set(name, found);
      return found;
    },
  };
}

function fieldSchema(f: DescField): FieldSchema {
  const isOptional = f.proto.proto3Optional || (f.parent.file.edition === 998 /* proto2 */ && f.proto.label === 1);
  switch (f.fieldKind) {
    case "scalar":
      return { name: f.name, type: SCALAR_NAMES[f.scalar] ?? "unknown", typeName: "", isRepeated: false, isOptional };
    case "enum":
      return { name: f.name, type: "enum", typeName: f.enum.typeName, isRepeated: false, isOptional };
    case "message":
      return { name: f.name, type: "message", typeName: f.message.typeName, isRepeated: false, isOptional };
    case "list":
      if (f.listKind === "scalar") return { name: f.name, type: SCALAR_NAMES[f.scalar] ?? "unknown", typeName: "", isRepeated: true, isOptional: false };
      if (f.listKind === "enum") return { name: f.name, type: "enum", typeName: f.enum.typeName, isRepeated: true, isOptional: false };
      return { name: f.name, type: "message", typeName: f.message.typeName, isRepeated: true, isOptional: false };
    case "map":
      return { name: f.name, type: "map", typeName: f.proto.typeName.replace(/^\./, ""), isRepeated: false, isOptional: false };
  }
}

/** The fields of a message in declaration order, in the REST "Method schema" form. */
export function messageFields(m: DescMessage): FieldSchema[] {
  return m.fields.map(fieldSchema);
}

/**
 * A binary google.protobuf.FileDescriptorSet of the schema's files (field 1, `repeated FileDescriptorProto file`),
 * each file's bytes as reflection served them (not decoded and re-encoded).
 */
export function encodeFileDescriptorSet(set: SchemaSet): Uint8Array {
  const w = new BinaryWriter();
  for (const f of set.files) w.tag(1, WireType.LengthDelimited).bytes(f);
  return w.finish();
}
