import type * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type DescriptorProto } from "@bufbuild/protobuf/wkt";
import { echo } from "../shared/echo.js";
import { protoDir } from "../shared/paths.js";
import type { ServerReflectionRequest__Output } from "../gen/reflection/grpc/reflection/v1/ServerReflectionRequest.js";
import type { ServerReflectionResponse } from "../gen/reflection/grpc/reflection/v1/ServerReflectionResponse.js";
import { Code } from "../shared/code.js";
import type { GatewayError } from "../shared/gateway-error.js";
import type { GrpcServiceHost } from "./front.js";
import type { BidiCall } from "./native/call-types.js";
import type { CallMetadata } from "../shared/metadata.js";

/**
 * A gRPC server reflection service (v1 and v1alpha) over a set of encoded FileDescriptorProtos. Unlike
 * @grpc/reflection 1.0.4 it resolves services whose files import other files (grpc-node #3018), and answers
 * `file_containing_symbol` with the file and all of its transitive dependencies, as grpc-go does.
 */
export interface ReflectionServiceOptions {
  /** Encoded FileDescriptorProtos of every file the services need (duplicates by name are ignored). */
  files: readonly Uint8Array[];
  /** Fully qualified names of the services `list_services` reports. */
  services: readonly string[];
  /** Which protocol versions to serve. Default both. */
  versions?: ReadonlyArray<"v1" | "v1alpha">;
  /**
   * More services and files that change at run time (the proxied backends'), read on every request; the index is
   * rebuilt only when a source's `version` changed. Files whose name is already known are ignored.
   */
  extra?: () => ReadonlyArray<{ version: number; files: readonly Uint8Array[]; services: readonly string[] }>;
  /** Called with each call's metadata; a returned error refuses the call (e.g. a missing x-api-key). */
  admit?: (metadata: CallMetadata) => GatewayError | undefined;
}

interface Index {
  byName: Map<string, Uint8Array>;
  deps: Map<string, string[]>;
  symbolFile: Map<string, string>;
}

function buildIndex(files: readonly Uint8Array[]): Index {
  const byName = new Map<string, Uint8Array>();
  const deps = new Map<string, string[]>();
  const symbolFile = new Map<string, string>();
  for (const bytes of files) {
    const fd = fromBinary(FileDescriptorProtoSchema, bytes);
    if (byName.has(fd.name)) continue;
    byName.set(fd.name, bytes);
    deps.set(fd.name, fd.dependency);
    const prefix = fd.package ? fd.package + "." : "";
    const addMessage = (m: DescriptorProto, scope: string): void => {
      const full = scope + m.name;
      symbolFile.set(full, fd.name);
      for (const f of m.field) symbolFile.set(`${full}.${f.name}`, fd.name);
      for (const n of m.nestedType) addMessage(n, full + ".");
      for (const e of m.enumType) symbolFile.set(`${full}.${e.name}`, fd.name);
    };
    for (const m of fd.messageType) addMessage(m, prefix);
    for (const e of fd.enumType) symbolFile.set(prefix + e.name, fd.name);
    for (const s of fd.service) {
      symbolFile.set(prefix + s.name, fd.name);
      for (const m of s.method) symbolFile.set(`${prefix}${s.name}.${m.name}`, fd.name);
    }
  }
  return { byName, deps, symbolFile };
}

/** The file and its transitive dependencies, the file first. */
function withDeps(index: Index, name: string): Uint8Array[] {
  const out: Uint8Array[] = [];
  const seen = new Set<string>();
  const visit = (n: string): void => {
    if (seen.has(n)) return;
    seen.add(n);
    const bytes = index.byName.get(n);
    if (!bytes) return;
    out.push(bytes);
    for (const d of index.deps.get(n) ?? []) visit(d);
  };
  visit(name);
  return out;
}

/** A reflection request as proto-loader decodes it (generated from grpc/reflection/v1; v1alpha has the same shape). */
type ReflectionRequest = ServerReflectionRequest__Output;

function answer(index: Index, services: readonly string[], req: ReflectionRequest): ServerReflectionResponse {
  const base = { valid_host: req.host ?? "", original_request: req };
  // An error answer repeats the request, so its strings are cut as every error message's are (a 2 MiB symbol made a
  // 4 MiB answer).
  const echoed = (): ReflectionRequest => Object.fromEntries(Object.entries(req).map(([k, v]) => [k, typeof v === "string" ? echo(v) : v])) as ReflectionRequest;
  const notFound = (what: string) => ({ ...base, original_request: echoed(), error_response: { error_code: Code.NOT_FOUND, error_message: what } });
  switch (req.message_request) {
    case "list_services":
      return { ...base, list_services_response: { service: services.map((name) => ({ name })) } };
    case "file_by_filename": {
      const name = req.file_by_filename ?? "";
      if (!index.byName.has(name)) return notFound(`file not found: ${echo(name)}`);
      return { ...base, file_descriptor_response: { file_descriptor_proto: withDeps(index, name) } };
    }
    case "file_containing_symbol": {
      const sym = (req.file_containing_symbol ?? "").replace(/^\./, "");
      const file = index.symbolFile.get(sym);
      if (!file) return notFound(`symbol not found: ${echo(sym)}`);
      return { ...base, file_descriptor_response: { file_descriptor_proto: withDeps(index, file) } };
    }
    case "file_containing_extension":
      return notFound(`extension not found: ${echo(req.file_containing_extension?.containing_type ?? "")}`);
    case "all_extension_numbers_of_type": {
      const type = req.all_extension_numbers_of_type ?? "";
      if (!index.symbolFile.has(type)) return notFound(`type not found: ${echo(type)}`);
      return { ...base, all_extension_numbers_response: { base_type_name: type, extension_number: [] } };
    }
    default:
      return { ...base, original_request: echoed(), error_response: { error_code: Code.UNIMPLEMENTED, error_message: "unsupported reflection request" } };
  }
}

let definitions: Record<"v1" | "v1alpha", grpc.ServiceDefinition> | undefined;

/** The loaded v1 and v1alpha ServerReflection service definitions. */
export function reflectionDefinitions(): Record<"v1" | "v1alpha", grpc.ServiceDefinition> {
  if (definitions) return definitions;
  const load = (v: string) => {
    const pkg = loadSync(`grpc/reflection/${v}/reflection.proto`, { keepCase: true, oneofs: true, defaults: false, includeDirs: [protoDir()] });
    return pkg[`grpc.reflection.${v}.ServerReflection`] as grpc.ServiceDefinition;
  };
  return (definitions = { v1: load("v1"), v1alpha: load("v1alpha") });
}

/** A reflection request as proto-loader decodes it, and the answer. */
export type ReflectionAnswerer = (req: ReflectionRequest) => ServerReflectionResponse;

/** The answer to each reflection request over `opts`' files and services (no transport: any server can host it). */
export function createReflectionAnswerer(opts: Omit<ReflectionServiceOptions, "admit" | "versions">): ReflectionAnswerer {
  const own = { index: buildIndex(opts.files), services: opts.services };
  let merged = own;
  let mergedKey = "";
  // The gateway's own files come first, so a backend cannot replace one of them.
  const current = (): { index: Index; services: readonly string[] } => {
    const extra = opts.extra?.() ?? [];
    if (extra.length === 0) return own;
    const key = extra.map((e) => e.version).join(",");
    if (key !== mergedKey) {
      mergedKey = key;
      merged = {
        index: buildIndex([...opts.files, ...extra.flatMap((e) => e.files)]),
        services: [...opts.services, ...extra.flatMap((e) => e.services)],
      };
    }
    return merged;
  };
  return (req) => {
    const { index, services } = current();
    return answer(index, services, req);
  };
}

/** Add the reflection service(s) to the gateway's gRPC server. */
export function addReflectionService(server: GrpcServiceHost, opts: ReflectionServiceOptions): void {
  const answerOf = createReflectionAnswerer(opts);
  const defs = reflectionDefinitions();
  const handler = async (call: BidiCall<ReflectionRequest, ServerReflectionResponse>): Promise<void> => {
    const refused = opts.admit?.(call.metadata);
    if (refused) return call.end(refused);
    for await (const req of call.messages()) {
      if (!call.write(answerOf(req))) await call.drained();
    }
    call.end();
  };
  for (const v of opts.versions ?? ["v1", "v1alpha"]) {
    server.addService(defs[v], { ServerReflectionInfo: handler });
  }
}

/** Every distinct FileDescriptorProto of a proto-loader package definition. */
export function fileDescriptorsOf(pkg: Record<string, unknown>): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const def of Object.values(pkg)) {
    const files = (def as { fileDescriptorProtos?: Uint8Array[] }).fileDescriptorProtos;
    if (files) out.push(...files);
  }
  return out;
}
