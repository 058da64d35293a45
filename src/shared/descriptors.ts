import { isAbsolute, join } from "node:path";
import { existsSync } from "node:fs";
import { toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import protobuf from "protobufjs";
import { fileDescriptorsOfRoot } from "./file-descriptors.js";
import { protoDir } from "./paths.js";
import { GATEWAY_PROTO_FILES } from "./protos.js";

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

/**
 * Encoded FileDescriptorProtos of the gateway's protos, one per .proto file with its real name
 * ("platform/state.proto") and its imports as dependencies, as `protoc` would produce (see fileDescriptorsOfRoot).
 */
export function gatewayFileDescriptors(): Uint8Array[] {
  return fileDescriptorsOfRoot(gatewayRoot(), protoDir()).map((f) => toBinary(FileDescriptorProtoSchema, f));
}
