/**
 * Compiles a SchemaSet's encoded FileDescriptorProtos into a @bufbuild/protobuf registry, and keeps a bounded cache of
 * compiled registries by schema id. Used on the main thread (inline conversions) and in each worker.
 */
import { fromBinary, type FileRegistry } from "@bufbuild/protobuf";
import * as wkt from "@bufbuild/protobuf/wkt";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { registryOfFiles } from "../shared/file-registry.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";

// Well-known types a backend's reflection may omit (some servers do not serve google/protobuf/*.proto).
const wellKnownFiles: ReadonlyMap<string, FileDescriptorProto> = new Map(
  [
    wkt.file_google_protobuf_any,
    wkt.file_google_protobuf_api,
    wkt.file_google_protobuf_descriptor,
    wkt.file_google_protobuf_duration,
    wkt.file_google_protobuf_empty,
    wkt.file_google_protobuf_field_mask,
    wkt.file_google_protobuf_source_context,
    wkt.file_google_protobuf_struct,
    wkt.file_google_protobuf_timestamp,
    wkt.file_google_protobuf_type,
    wkt.file_google_protobuf_wrappers,
  ].map((f) => [f.proto.name, f.proto]),
);

/**
 * Build a registry of every message, enum and service in `files` (encoded FileDescriptorProtos in any order).
 * Missing google/protobuf/*.proto dependencies are filled from the built-in well-known types.
 * Throws GatewayError FAILED_PRECONDITION naming the file when a descriptor is malformed or a dependency is missing.
 */
export function compileSchema(files: readonly Uint8Array[]): FileRegistry {
  const byName = new Map<string, FileDescriptorProto>();
  for (let i = 0; i < files.length; i++) {
    let file: FileDescriptorProto;
    try {
      file = fromBinary(FileDescriptorProtoSchema, files[i]!);
    } catch (e) {
      throw new GatewayError(Code.FAILED_PRECONDITION, `schema file #${i} is not a valid FileDescriptorProto: ${errorText(e)}`);
    }
    byName.set(file.name, file);
  }
  try {
    // @bufbuild resolves the imports (createFileRegistry(file, resolve)); missing well-known types come from wkt.
    return registryOfFiles(
      [...byName.values()],
      {
        missing: (name, importer) => new GatewayError(Code.FAILED_PRECONDITION, `schema file ${name}, imported by ${importer}, is missing`),
        cycle: (name) => new GatewayError(Code.FAILED_PRECONDITION, `schema file ${name} imports itself (cycle)`),
      },
      (name) => wellKnownFiles.get(name),
    ).registry;
  } catch (e) {
    if (e instanceof GatewayError) throw e;
    throw new GatewayError(Code.FAILED_PRECONDITION, `schema cannot be compiled: ${errorText(e)}`);
  }
}

/**
 * A bounded LRU of compiled registries by schema id. Schema ids change when the files change, so an entry never
 * goes stale; the bound only limits memory when many backends or versions come and go.
 */
export class SchemaCache {
  private readonly entries = new Map<string, FileRegistry>();

  /** @param capacity most registries kept (default 64). */
  constructor(private readonly capacity = 64) {}

  /** The registry for `id`, refreshed as most recently used, or undefined. */
  get(id: string): FileRegistry | undefined {
    const r = this.entries.get(id);
    if (r !== undefined) {
      this.entries.delete(id);
      this.entries.set(id, r);
    }
    return r;
  }

  /** Whether `id` is cached (does not touch recency). */
  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** Cache `registry` under `id`, evicting the least recently used entry past the capacity. */
  set(id: string, registry: FileRegistry): void {
    this.entries.delete(id);
    this.entries.set(id, registry);
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** The registry for `id`, compiling `files` on a miss. */
  getOrCompile(id: string, files: readonly Uint8Array[]): FileRegistry {
    let r = this.get(id);
    if (r === undefined) {
      r = compileSchema(files);
      this.set(id, r);
    }
    return r;
  }

  /** Number of cached registries. */
  get size(): number {
    return this.entries.size;
  }
}

/** Message of anything thrown. */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
