/**
 * The strict wire pass run on every request to the gateway's own gRPC services (src/shared/wire-check.ts): the
 * refusals no other test reached (a wrong or undefined wire type, field number 0, nesting past the depth limit), by
 * their exact texts. Over real sockets: raw HTTP/2 gRPC requests whose bytes no well-behaved client would send. The
 * depth limit cannot be reached through the gateway's own protos (none is recursive), so it is checked on the public
 * function with a recursive well-known type.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, it } from "node:test";
import { create, createFileRegistry } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Label, FieldDescriptorProto_Type, FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { checkWire, MAX_WIRE_DEPTH } from "../../src/shared/wire-check.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const KEY = "k1";

/** A recursive message type, `message Node { Node child_node = 1; }`, as checkWire takes it: the one place here that depends on the protobuf library. */
function recursiveType(): Parameters<typeof checkWire>[0] {
  const file = create(FileDescriptorProtoSchema, {
    name: "t/node.proto",
    package: "t",
    syntax: "proto3",
    messageType: [
      {
        name: "Node",
        field: [{ name: "child_node", jsonName: "childNode", number: 1, label: FieldDescriptorProto_Label.OPTIONAL, type: FieldDescriptorProto_Type.MESSAGE, typeName: ".t.Node" }],
      },
    ],
  });
  const type = createFileRegistry(file, () => undefined).getMessage("t.Node");
  assert.ok(type, "t.Node is in the registry");
  return type;
}

/** A length-delimited field: tag byte(s), varint length, bytes. */
function field(tag: number[], body: Buffer): Buffer {
  const len: number[] = [];
  let n = body.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from(tag), Buffer.from(len), body]);
}

/** A t.Node whose innermost message is `depth` messages deep. */
function nested(depth: number): Buffer {
  let inner: Buffer = Buffer.alloc(0);
  for (let d = 0; d < depth; d++) inner = field([0x0a], inner);
  return inner;
}

describe("strict wire pass over gRPC", () => {
  let gw: TestGateway;
  let session: http2.ClientHttp2Session;

  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "svc", state: { storeName: "s", keys: [] }, pubsub: { pubsubName: "pubsub" } }] });
    session = http2.connect(`http://${gw.grpcAddress}`);
    session.on("error", () => undefined);
  });
  after(async () => {
    session.close();
    await gw.close();
  });

  /** One unary call with a raw request message; the status code and message from the trailers. */
  function call(path: string, message: Buffer): Promise<{ code: number; message: string }> {
    return new Promise((resolve, reject) => {
      const st = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", "x-api-key": KEY });
      const frame = Buffer.alloc(5 + message.length);
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, 5);
      const t = setTimeout(() => reject(new Error(`${path}: no status`)), 5000);
      let status: { code: number; message: string } | undefined;
      const take = (h: http2.IncomingHttpHeaders): void => {
        if (h["grpc-status"] !== undefined) status = { code: Number(h["grpc-status"]), message: decodeURIComponent(String(h["grpc-message"] ?? "")) };
      };
      st.on("response", take);
      st.on("trailers", take);
      st.on("data", () => undefined);
      st.on("error", () => undefined);
      st.on("close", () => {
        clearTimeout(t);
        if (status) resolve(status);
        else reject(new Error(`${path}: the stream closed without a status (rst ${st.rstCode})`));
      });
      st.end(frame);
    });
  }
  const invalid = (message: string) => ({ code: 3, message });

  it("a string or message field sent with another wire type is refused, naming the field and both types", async () => {
    // SaveStateRequest.service (1, string) as a varint; .change (7, message) as a fixed32.
    assert.deepEqual(
      await call("/platform.State/SaveState", Buffer.from([0x08, 0x01])),
      invalid("the request message is malformed: field service has wire type 0, expected 2 (length-delimited)"),
    );
    assert.deepEqual(
      await call("/platform.State/SaveState", Buffer.from([0x3d, 1, 2, 3, 4])),
      invalid("the request message is malformed: field change has wire type 5, expected 2 (length-delimited)"),
    );
    // Inside a nested message: PublishRequest.cloudevent (2) with CloudEvent.id (1) as a fixed64.
    assert.deepEqual(
      await call("/io.cloudevents.v1.Pubsub/PublishEvent", field([0x12], Buffer.from([0x09, 1, 2, 3, 4, 5, 6, 7, 8]))),
      invalid("the request message is malformed: field cloudevent.id has wire type 1, expected 2 (length-delimited)"),
    );
  });

  it("the group and undefined wire types (3, 4, 6, 7) are refused, known field or not", async () => {
    for (const wire of [3, 4, 6, 7]) {
      assert.deepEqual(
        await call("/platform.State/SaveState", Buffer.from([(5 << 3) | wire])),
        invalid(`the request message is malformed: field publish_change uses wire type ${wire}, which proto3 messages do not have`),
      );
      assert.deepEqual(
        await call("/platform.State/SaveState", Buffer.from([(15 << 3) | wire])),
        invalid(`the request message is malformed: field number 15 uses wire type ${wire}, which proto3 messages do not have`),
      );
    }
    assert.deepEqual(
      await call("/io.cloudevents.v1.Pubsub/PublishEvent", field([0x12], Buffer.from([(13 << 3) | 7]))),
      invalid("the request message is malformed: field number 13 inside cloudevent uses wire type 7, which proto3 messages do not have"),
    );
  });

  it("field number 0 is refused, at the top and inside a nested message", async () => {
    assert.deepEqual(await call("/platform.State/SaveState", Buffer.from([0x00, 0x01])), invalid("the request message is malformed: field number 0"));
    assert.deepEqual(await call("/platform.State/SaveState", Buffer.from([0x02, 0x00])), invalid("the request message is malformed: field number 0"));
    assert.deepEqual(
      await call("/io.cloudevents.v1.Pubsub/PublishEvent", field([0x12], Buffer.from([0x02, 0x00]))),
      invalid("the request message is malformed: field number 0 inside cloudevent"),
    );
  });

  it("a well-formed request still passes (the refusals above changed nothing)", async () => {
    const ok = await call("/platform.State/SaveState", Buffer.concat([field([0x0a], Buffer.from("svc")), field([0x12], Buffer.from("k")), field([0x1a], Buffer.from("v"))]));
    assert.equal(ok.code, 0, ok.message);
  });
});

describe("strict wire pass: nesting depth", () => {
  const node = recursiveType();

  it(`accepts messages nested ${MAX_WIRE_DEPTH} deep and refuses one more, naming where`, () => {
    assert.equal(MAX_WIRE_DEPTH, 100);
    assert.equal(checkWire(node, nested(MAX_WIRE_DEPTH)), undefined);
    const err = checkWire(node, nested(MAX_WIRE_DEPTH + 1));
    assert.equal(err?.code, 3);
    // The message is bounded (GatewayError cuts long texts): its start names the limit and the path.
    const path = Array.from({ length: MAX_WIRE_DEPTH + 1 }, () => "child_node").join(".");
    assert.ok(err!.rawMessage.startsWith(`the request message nests more than ${MAX_WIRE_DEPTH} messages deep at ${path.slice(0, 500)}`), err!.rawMessage.slice(0, 200));
  });
});
