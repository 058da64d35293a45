import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { reflectionCall } from "../support/reflection.js";

describe("the gateway's own server reflection", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({});
  });
  after(() => gw.close());

  for (const version of ["v1", "v1alpha"] as const) {
    it(`${version}: lists every gateway service`, async () => {
      const res = await reflectionCall(gw.grpcAddress, version, { list_services: "*" });
      const names = res.list_services_response.service.map((s: { name: string }) => s.name).sort();
      assert.deepEqual(names, ["io.cloudevents.v1.Pubsub", "platform.Config", "platform.Gateway", "platform.State", "platform.Trigger"]);
    });
  }

  it("file_containing_symbol returns the file and its imports, across files", async () => {
    const res = await reflectionCall(gw.grpcAddress, "v1", { file_containing_symbol: "platform.State" });
    const files = res.file_descriptor_response.file_descriptor_proto.map((b: Buffer) => fromBinary(FileDescriptorProtoSchema, b));
    const names = files.map((f: { name: string }) => f.name);
    assert.equal(names[0], "platform/state.proto");
    for (const dep of ["io/cloudevents/v1/cloudevents.proto", "platform/status.proto", "google/protobuf/any.proto", "google/protobuf/timestamp.proto"]) {
      assert.ok(names.includes(dep), `missing ${dep} in ${names.join(", ")}`);
    }
    const state = files[0];
    assert.deepEqual(state.service[0].method.map((m: { name: string }) => m.name), ["SaveState", "GetState", "DeleteState", "QueryState", "GetBulkState", "DeleteBulkState"]);
  });

  it("an unknown symbol is an error_response naming it, not a broken stream", async () => {
    const res = await reflectionCall(gw.grpcAddress, "v1", { file_containing_symbol: "no.such.Thing" });
    assert.equal(res.error_response.error_code, 5);
    assert.match(res.error_response.error_message, /no\.such\.Thing/);
  });
});
