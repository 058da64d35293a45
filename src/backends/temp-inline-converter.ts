// TEMPORARY: inline @bufbuild converter used until src/workers/converter.ts lands. Delete afterwards.
import { create, createFileRegistry, fromBinary, fromJsonString, toBinary, toJsonString, type FileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { Converter, SchemaSet } from "../workers/converter-types.js";

export function createTempConverter(): Converter {
  const regs = new Map<string, FileRegistry>();
  const reg = (s: SchemaSet): FileRegistry => {
    let r = regs.get(s.id);
    if (!r) {
      r = createFileRegistry(create(FileDescriptorSetSchema, { file: s.files.map((f) => fromBinary(FileDescriptorProtoSchema, f)) }));
      regs.set(s.id, r);
    }
    return r;
  };
  return {
    async jsonToBinary(s, typeName, json) {
      const r = reg(s);
      const d = r.getMessage(typeName)!;
      try {
        return toBinary(d, fromJsonString(d, json, { registry: r }));
      } catch (e) {
        throw new GatewayError(Code.INVALID_ARGUMENT, (e as Error).message);
      }
    },
    async binaryToJson(s, typeName, bytes) {
      const r = reg(s);
      const d = r.getMessage(typeName)!;
      return toJsonString(d, fromBinary(d, bytes), { registry: r });
    },
    async close() {},
    destroy() {},
  };
}
