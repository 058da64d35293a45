import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition, gatewayRegistry } from "../../src/shared/protos.js";
import { figure } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { timeTasks } from "../lib/tiny.js";

/** A typical event: 256 bytes of binary data and two extension attributes. */
export function sampleSubscribeResponse(): { topic: string; cloudevent: Record<string, unknown> } {
  return {
    topic: "orders.created",
    cloudevent: {
      id: "6f1c2a4e-2f4b-4c1e-9d7a-0b1e2c3d4e5f",
      source: "https://shop.example.com/orders",
      spec_version: "1.0",
      type: "com.example.order.created",
      attributes: {
        datacontenttype: { ce_string: "application/octet-stream", attr: "ce_string" },
        traceparent: { ce_string: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", attr: "ce_string" },
      },
      binary_data: Buffer.alloc(256, 7),
      data: "binary_data",
    },
  };
}

/**
 * Encoding one SubscribeResponse (done once per event per topic, shared by every subscriber): the proto-loader
 * serializer of the Subscribe method, which the pub/sub facility runs once per event, against @bufbuild/protobuf
 * `toBinary` on the `buf build` descriptors, including the conversion from the in-process (proto-loader) shape that
 * using it would need. Both must give the same bytes.
 */
export async function encodeFigures(mode: RunMode): Promise<Figure[]> {
  const schema = gatewayRegistry().getMessage("io.cloudevents.v1.SubscribeResponse")!;
  const serialize = (gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as grpc.ServiceDefinition)["Subscribe"]!.responseSerialize;
  const msg = sampleSubscribeResponse();
  const ce = msg.cloudevent as { id: string; source: string; spec_version: string; type: string; attributes: Record<string, { ce_string: string }>; binary_data: Buffer };
  const bufbuild = (): Uint8Array => {
    const attributes: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(ce.attributes)) attributes[k] = { attr: { case: "ceString", value: v.ce_string } };
    const init = { topic: msg.topic, cloudevent: { id: ce.id, source: ce.source, specVersion: ce.spec_version, type: ce.type, attributes, data: { case: "binaryData", value: ce.binary_data } } };
    return toBinary(schema, create(schema, init as MessageInitShape<typeof schema>));
  };
  const a = serialize(msg);
  const b = bufbuild();
  if (!Buffer.from(a).equals(Buffer.from(b))) throw new Error("proto-loader and @bufbuild encodings of the sample SubscribeResponse differ");
  let bytes = 0;
  const reps = 16;
  const t = await timeTasks(mode, {
    protoLoader() {
      for (let r = 0; r < reps; r++) bytes += serialize(msg).length;
    },
    bufbuild() {
      for (let r = 0; r < reps; r++) bytes += bufbuild().length;
    },
  });
  if (bytes === 0) throw new Error("encode benchmark produced no bytes");
  return [
    figure("encode-subscribe-response", `Encode one SubscribeResponse (${a.length} B, 256 B data), proto-loader responseSerialize`, t["protoLoader"]!.meanNs / reps, {
      unit: "ns",
      baseline: { label: "@bufbuild toBinary (with shape conversion)", value: t["bufbuild"]!.meanNs / reps },
    }),
  ];
}
