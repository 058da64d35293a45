/**
 * The leading comments of descriptors, read from their file's `source_code_info` (present when the backend's protos
 * were built with source info and its reflection serves them so). @bufbuild/protobuf 2 exposes `sourceCodeInfo` on the
 * FileDescriptorProto but no lookup by descriptor (that lives in @bufbuild/protoplugin), so the location path is
 * computed here from the descriptor's position in its parent, as descriptor.proto numbers it.
 */
import type { DescEnum, DescEnumValue, DescField, DescFile, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";

type Commented = DescMessage | DescField | DescEnum | DescEnumValue | DescService | DescMethod;

/** Per file: location path ("4,0,2,1") -> leading comment, built on first use. */
const byFile = new WeakMap<DescFile, Map<string, string>>();

function commentsOf(file: DescFile): Map<string, string> {
  let map = byFile.get(file);
  if (map) return map;
  map = new Map();
  for (const loc of file.proto.sourceCodeInfo?.location ?? []) {
    const text = clean(loc.leadingComments ?? "");
    if (text !== "") map.set(loc.path.join(","), text);
  }
  byFile.set(file, map);
  return map;
}

/** A comment as protoc keeps it: one leading space per line, trailing newline. */
function clean(raw: string): string {
  return raw
    .split("\n")
    .map((l) => (l.startsWith(" ") ? l.slice(1) : l).trimEnd())
    .join("\n")
    .trim();
}

// Field numbers of descriptor.proto: FileDescriptorProto message_type 4, enum_type 5, service 6; DescriptorProto
// field 2, nested_type 3, enum_type 4; EnumDescriptorProto value 2; ServiceDescriptorProto method 2.
function pathOf(d: Commented): number[] {
  switch (d.kind) {
    case "message":
      return d.parent ? [...pathOf(d.parent), 3, d.parent.proto.nestedType.indexOf(d.proto)] : [4, d.file.proto.messageType.indexOf(d.proto)];
    case "enum":
      return d.parent ? [...pathOf(d.parent), 4, d.parent.proto.enumType.indexOf(d.proto)] : [5, d.file.proto.enumType.indexOf(d.proto)];
    case "field":
      return [...pathOf(d.parent), 2, d.parent.proto.field.indexOf(d.proto)];
    case "enum_value":
      return [...pathOf(d.parent), 2, d.parent.proto.value.indexOf(d.proto)];
    case "service":
      return [6, d.file.proto.service.indexOf(d.proto)];
    case "rpc":
      return [...pathOf(d.parent), 2, d.parent.proto.method.indexOf(d.proto)];
  }
}

function fileOf(d: Commented): DescFile {
  switch (d.kind) {
    case "field":
    case "enum_value":
    case "rpc":
      return d.parent.file;
    default:
      return d.file;
  }
}

/** The leading comment of `d`, cleaned; undefined when the file carries no source info or `d` has none. */
export function leadingComment(d: Commented): string | undefined {
  return commentsOf(fileOf(d)).get(pathOf(d).join(","));
}
