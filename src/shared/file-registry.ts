import { createFileRegistry, type DescFile, type FileRegistry } from "@bufbuild/protobuf";
import type { FileDescriptorProto } from "@bufbuild/protobuf/wkt";

/** How registryOfFiles reports a broken import graph (each caller words it for its own users). */
export interface ImportErrors {
  /** `name`, imported by `importer`, is neither in the files nor supplied by `fallback`. */
  missing(name: string, importer: string): Error;
  /** `name` imports itself, directly or through other files. */
  cycle(name: string): Error;
}

/**
 * A @bufbuild/protobuf registry of FileDescriptorProtos given in any order (reflection answers in its own order).
 * Each file goes through `createFileRegistry(file, resolve)`, whose `resolve` hands @bufbuild the already built
 * DescFile of every import, so @bufbuild itself resolves the imports and no hand-written sort is needed. `fallback`
 * supplies files the set may leave out (e.g. the well-known types). Also returns the files in the order they were
 * added: every dependency before its dependents. Errors from `errors` propagate as they are; anything else
 * @bufbuild throws (a type that does not resolve, a bad name) propagates as its Error.
 */
export function registryOfFiles(
  files: readonly FileDescriptorProto[],
  errors: ImportErrors,
  fallback?: (name: string) => FileDescriptorProto | undefined,
): { registry: FileRegistry; ordered: FileDescriptorProto[] } {
  const byName = new Map(files.map((f) => [f.name, f]));
  const built = new Map<string, DescFile>();
  const visiting = new Set<string>();
  const ordered: FileDescriptorProto[] = [];
  const registries: FileRegistry[] = [];
  const descOf = (name: string, importer: string | undefined): DescFile => {
    const done = built.get(name);
    if (done) return done;
    if (visiting.has(name)) throw errors.cycle(name);
    const proto = byName.get(name) ?? fallback?.(name);
    if (proto === undefined) throw errors.missing(name, importer ?? "?");
    visiting.add(name);
    const registry = createFileRegistry(proto, (dep) => descOf(dep, name));
    visiting.delete(name);
    const file = registry.getFile(name)!;
    built.set(name, file);
    ordered.push(proto);
    registries.push(registry);
    return file;
  };
  for (const f of files) descOf(f.name, undefined);
  return { registry: createFileRegistry(...registries), ordered };
}
