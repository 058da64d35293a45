import { gatewayRoot } from "../../src/shared/descriptors.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
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
 * Encoding one SubscribeResponse (done once per event per topic, shared by every subscriber): protobufjs `encode` on
 * the gateway's Root, against the proto-loader serializer of the Subscribe method (what grpc-js would run per
 * subscriber without pre-encoding). The pub/sub facility encodes with protobufjs `Type.encode`, once per event.
 */
export async function encodeFigures(mode: RunMode): Promise<Figure[]> {
  const type = gatewayRoot().lookupType("io.cloudevents.v1.SubscribeResponse");
  const serialize = (gatewayPackageDefinition()["io.cloudevents.v1.Pubsub"] as unknown as Record<string, { responseSerialize(v: unknown): Buffer }>)["Subscribe"]!
    .responseSerialize;
  const msg = sampleSubscribeResponse();
  const a = type.encode(type.fromObject(msg)).finish();
  const b = serialize(msg);
  if (!Buffer.from(a).equals(Buffer.from(b))) throw new Error("protobufjs and proto-loader encodings of the sample SubscribeResponse differ");
  let bytes = 0;
  const reps = 16;
  const t = await timeTasks(mode, {
    protobufjs() {
      for (let r = 0; r < reps; r++) bytes += type.encode(msg).finish().length;
    },
    protoLoader() {
      for (let r = 0; r < reps; r++) bytes += serialize(msg).length;
    },
  });
  if (bytes === 0) throw new Error("encode benchmark produced no bytes");
  return [
    figure("encode-subscribe-response", `Encode one SubscribeResponse (${a.length} B, 256 B data), protobufjs Type.encode`, t["protobufjs"]!.meanNs / reps, {
      unit: "ns",
      baseline: { label: "proto-loader responseSerialize", value: t["protoLoader"]!.meanNs / reps },
    }),
  ];
}
