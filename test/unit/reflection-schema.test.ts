import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { buildSchema, encodeFileDescriptorSet, isReflectionService, messageFields } from "../../src/backends/schema.js";
import { Code } from "../../src/shared/code.js";
import type { GatewayError } from "../../src/shared/gateway-error.js";
import { adminFileDescriptor } from "../support/backends/admin-descriptor.js";
import { encodedFileDescriptorProtos, SHOP_PROTO } from "../support/protos/descriptors.js";

const files = [...encodedFileDescriptorProtos(SHOP_PROTO), adminFileDescriptor()];
const services = ["shop.v1.OrderService", "ops.v1.Admin", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];
const nameOf = (b: Uint8Array) => fromBinary(FileDescriptorProtoSchema, b).name;

describe("backend schema from reflected descriptors", () => {
  const schema = buildSchema(files, services, "service orders");

  it("lists every method of every service except reflection itself", () => {
    assert.deepEqual(schema.services, ["shop.v1.OrderService", "ops.v1.Admin"]);
    assert.ok(isReflectionService("grpc.reflection.v1alpha.ServerReflection"));
    assert.deepEqual(
      schema.methods.map((m) => `${m.fullName} ${m.clientStreaming ? "c" : "-"}${m.serverStreaming ? "s" : "-"}`),
      [
        "shop.v1.OrderService/GetOrder --",
        "shop.v1.OrderService/PutOrder --",
        "shop.v1.OrderService/ListOrders --",
        "shop.v1.OrderService/WatchOrders -s",
        "shop.v1.OrderService/UploadOrders c-",
        "shop.v1.OrderService/SyncOrders cs",
        "ops.v1.Admin/ListOrders --",
        "ops.v1.Admin/Ping --",
      ],
    );
  });

  it("finds methods by unique short name, slash or dotted full name, and the gRPC path", () => {
    for (const n of ["GetOrder", "shop.v1.OrderService/GetOrder", "shop.v1.OrderService.GetOrder", "/shop.v1.OrderService/GetOrder"]) {
      assert.equal(schema.find(n)?.path, "/shop.v1.OrderService/GetOrder", n);
    }
    assert.equal(schema.find("ops.v1.Admin/ListOrders")?.outputType, "google.protobuf.Empty");
    assert.equal(schema.find("Nope"), undefined);
    assert.equal(schema.find("shop.v1.OrderService/Nope"), undefined);
  });

  it("rejects an ambiguous short name listing the candidates", () => {
    assert.throws(() => schema.find("ListOrders"), (e: GatewayError) => {
      assert.equal(e.code, Code.INVALID_ARGUMENT);
      assert.equal(e.message, "method ListOrders is ambiguous on service orders: use one of shop.v1.OrderService/ListOrders, ops.v1.Admin/ListOrders");
      return true;
    });
  });

  it("orders files dependencies first and derives a stable id from their content", () => {
    const names = schema.set.files.map(nameOf);
    assert.ok(names.indexOf("google/protobuf/any.proto") < names.indexOf("shop/v1/shop.proto"));
    assert.ok(names.indexOf("shop/v1/common.proto") < names.indexOf("shop/v1/shop.proto"));
    assert.ok(names.indexOf("google/protobuf/empty.proto") < names.indexOf("ops/v1/admin.proto"));
    const shuffled = buildSchema([...files].reverse(), services, "service orders");
    assert.equal(shuffled.set.id, schema.set.id);
    const fewer = buildSchema(encodedFileDescriptorProtos(SHOP_PROTO), ["shop.v1.OrderService"], "service orders");
    assert.notEqual(fewer.set.id, schema.set.id);
    const dup = buildSchema([...files, ...files], services, "service orders");
    assert.equal(dup.set.files.length, files.length);
  });

  it("fails precisely when a dependency or a service descriptor is missing", () => {
    const noCommon = files.filter((f) => nameOf(f) !== "shop/v1/common.proto");
    assert.throws(() => buildSchema(noCommon, services, "service orders"), (e: GatewayError) => {
      assert.equal(e.code, Code.FAILED_PRECONDITION);
      assert.match(e.message, /shop\/v1\/shop\.proto imports shop\/v1\/common\.proto, which reflection did not serve/);
      return true;
    });
    assert.throws(() => buildSchema(files, ["pkg.Missing"], "service orders"), /lists service pkg\.Missing but serves no descriptor/);
    assert.throws(() => buildSchema([new Uint8Array([0xff, 0xff])], [], "service x"), /undecodable/);
  });

  it("describes message fields in the REST schema form", () => {
    const ping = schema.find("Ping")!;
    assert.deepEqual(messageFields(ping.desc.output), [
      { name: "text", type: "string", typeName: "", isRepeated: false, isOptional: false },
      { name: "count", type: "int64", typeName: "", isRepeated: false, isOptional: false },
    ]);
    const order = Object.fromEntries(messageFields(schema.find("PutOrder")!.desc.input).map((f) => [f.name, f]));
    assert.deepEqual(order["items_by_line"], { name: "items_by_line", type: "map", typeName: "shop.v1.Order.ItemsByLineEntry", isRepeated: false, isOptional: false });
    assert.deepEqual(order["transitions"], { name: "transitions", type: "enum", typeName: "shop.v1.Status", isRepeated: true, isOptional: false });
    assert.deepEqual(order["discount_percent"], { name: "discount_percent", type: "int32", typeName: "", isRepeated: false, isOptional: true });
    assert.deepEqual(order["ship_to"], { name: "ship_to", type: "message", typeName: "shop.common.v1.Address", isRepeated: false, isOptional: false });
  });

  it("encodes a FileDescriptorSet holding exactly the schema's files", () => {
    const set = fromBinary(FileDescriptorSetSchema, encodeFileDescriptorSet(schema.set));
    assert.deepEqual(set.file.map((f) => f.name), schema.set.files.map(nameOf));
    // Each file's bytes as served (tag 0x0a, varint length, the bytes), not re-encoded.
    const expected = Buffer.concat(schema.set.files.flatMap((f) => {
      const len: number[] = [];
      for (let n = f.length; ; n >>>= 7) {
        if (n < 0x80) { len.push(n); break; }
        len.push((n & 0x7f) | 0x80);
      }
      return [Buffer.from([0x0a, ...len]), Buffer.from(f)];
    }));
    assert.ok(Buffer.from(encodeFileDescriptorSet(schema.set)).equals(expected));
  });
});
