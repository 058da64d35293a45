import { create, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

/**
 * A second service on the order backend, `ops.v1.Admin`, in its own file `ops/v1/admin.proto`:
 * `ListOrders(google.protobuf.Empty) returns (google.protobuf.Empty)` makes the short name ListOrders ambiguous
 * across the backend's services; `Ping(PingRequest) returns (PingReply)` is unique.
 */
export const ADMIN_FILE = "ops/v1/admin.proto";

/** The encoded FileDescriptorProto of ops/v1/admin.proto (depends on google/protobuf/empty.proto). */
export function adminFileDescriptor(): Uint8Array {
  const field = (name: string, number: number, type: FieldDescriptorProto_Type) => ({
    name,
    number,
    jsonName: name,
    label: FieldDescriptorProto_Label.OPTIONAL,
    type,
  });
  return toBinary(
    FileDescriptorProtoSchema,
    create(FileDescriptorProtoSchema, {
      name: ADMIN_FILE,
      package: "ops.v1",
      dependency: ["google/protobuf/empty.proto"],
      syntax: "proto3",
      messageType: [
        { name: "PingRequest", field: [field("text", 1, FieldDescriptorProto_Type.STRING)] },
        { name: "PingReply", field: [field("text", 1, FieldDescriptorProto_Type.STRING), field("count", 2, FieldDescriptorProto_Type.INT64)] },
      ],
      service: [
        {
          name: "Admin",
          method: [
            { name: "ListOrders", inputType: ".google.protobuf.Empty", outputType: ".google.protobuf.Empty" },
            { name: "Ping", inputType: ".ops.v1.PingRequest", outputType: ".ops.v1.PingReply" },
          ],
        },
      ],
    }),
  );
}
