/**
 * Why grpc-js keeps proto-loader's codec for the gateway's own messages: encode and decode of the hot messages with
 * proto-loader's serializers (protobufjs under the hood, the object shapes every handler sees) against
 * @bufbuild/protobuf `toBinary`/`fromBinary` on the `buf build` descriptors (src/gen/protos.ts), measured in the same
 * run. The @bufbuild side gets its messages ready made with `create` (its best case: no shape conversion counted).
 *
 *   npx tsx bench/codec/hot-messages.ts [--quick]     (also part of `npm run bench -- --only micro`)
 *
 * Ratio = @bufbuild / proto-loader per operation: above 1, proto-loader is faster.
 */
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import { gatewayPackageDefinition, gatewayRegistry } from "../../src/shared/protos.js";
import { figure } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { timeTasks } from "../lib/tiny.js";

interface HotMessage {
  id: string;
  label: string;
  /** The proto-loader method and side whose codec carries the message. */
  service: string;
  method: string;
  side: "request" | "response";
  /** The message in proto-loader's shape (what handlers build and receive). */
  loader: Record<string, unknown>;
  /** The same message in @bufbuild's init shape. */
  buf: Record<string, unknown>;
}

const orderJson = JSON.stringify({
  id: "ord-1042",
  customer: { id: "c-77", email: "ada@example.com", tier: "GOLD" },
  items: Array.from({ length: 4 }, (_, i) => ({ sku: `sku-${i}`, quantity: i + 1, price: { currency: "EUR", units: "12", nanos: 500000000 } })),
  placedAt: "2026-11-23T12:00:00.123Z",
});

const event = {
  loader: {
    id: "6f1c2a4e-2f4b-4c1e-9d7a-0b1e2c3d4e5f",
    source: "https://shop.example.com/orders",
    spec_version: "1.0",
    type: "com.example.order.created",
    attributes: {
      datacontenttype: { ce_string: "application/json", attr: "ce_string" },
      traceparent: { ce_string: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", attr: "ce_string" },
    },
    text_data: orderJson,
    data: "text_data",
  },
  buf: {
    id: "6f1c2a4e-2f4b-4c1e-9d7a-0b1e2c3d4e5f",
    source: "https://shop.example.com/orders",
    specVersion: "1.0",
    type: "com.example.order.created",
    attributes: {
      datacontenttype: { attr: { case: "ceString", value: "application/json" } },
      traceparent: { attr: { case: "ceString", value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } },
    },
    data: { case: "textData", value: orderJson },
  },
};

const items = Array.from({ length: 16 }, (_, i) => ({ key: `cart:${1000 + i}`, value: JSON.stringify({ items: i + 1, total: 12.5 * (i + 1) }), etag: String(i + 1) }));

/** The gateway's hot messages: InvokeJson request and reply, a PublishEvent, a 16-item state batch. */
export function hotMessages(): HotMessage[] {
  return [
    {
      id: "invoke-json-request",
      label: "InvokeJson request (500 B order JSON)",
      service: "platform.Gateway",
      method: "InvokeJson",
      side: "request",
      loader: { service: "orders", method: "GetOrder", request_data: orderJson },
      buf: { service: "orders", method: "GetOrder", requestData: orderJson },
    },
    {
      id: "invoke-json-reply",
      label: "InvokeJson reply",
      service: "platform.Gateway",
      method: "InvokeJson",
      side: "response",
      loader: { success: true, status: "OK", message: "", response_data: orderJson },
      buf: { success: true, status: "OK", message: "", responseData: orderJson },
    },
    {
      id: "publish-event",
      label: "PublishEvent request (CloudEvent, text data)",
      service: "io.cloudevents.v1.Pubsub",
      method: "PublishEvent",
      side: "request",
      loader: { topic: "orders.created", cloudevent: event.loader },
      buf: { topic: "orders.created", cloudevent: event.buf },
    },
    {
      id: "state-batch",
      label: "GetBulkState reply (16 items)",
      service: "platform.State",
      method: "GetBulkState",
      side: "response",
      loader: { items },
      buf: { items },
    },
  ];
}

interface Codecs {
  loaderEncode: (v: unknown) => Buffer;
  loaderDecode: (b: Buffer) => unknown;
  schema: DescMessage;
}

function codecsOf(m: HotMessage): Codecs {
  const def = (gatewayPackageDefinition()[m.service] as grpc.ServiceDefinition)[m.method]!;
  const desc = gatewayRegistry().getService(m.service)!.methods.find((x) => x.name === m.method)!;
  return m.side === "request"
    ? { loaderEncode: def.requestSerialize, loaderDecode: def.requestDeserialize, schema: desc.input }
    : { loaderEncode: def.responseSerialize, loaderDecode: def.responseDeserialize, schema: desc.output };
}

/** One figure per message and direction: @bufbuild ns/op with proto-loader's ns/op as the baseline. */
export async function hotMessageFigures(mode: RunMode): Promise<Figure[]> {
  const figures: Figure[] = [];
  const reps = 16;
  let sink = 0;
  for (const m of hotMessages()) {
    const c = codecsOf(m);
    const msg = create(c.schema, m.buf as MessageInitShape<DescMessage>);
    const bytes = c.loaderEncode(m.loader);
    // Same message both ways: @bufbuild reads proto-loader's bytes back to the same content and vice versa.
    const round = toBinary(c.schema, fromBinary(c.schema, bytes));
    if (!Buffer.from(toBinary(c.schema, msg)).equals(Buffer.from(round))) throw new Error(`${m.id}: @bufbuild and proto-loader encode different messages`);
    const t = await timeTasks(mode, {
      loaderEncode() {
        for (let r = 0; r < reps; r++) sink += c.loaderEncode(m.loader).length;
      },
      bufEncode() {
        for (let r = 0; r < reps; r++) sink += toBinary(c.schema, msg).length;
      },
      loaderDecode() {
        for (let r = 0; r < reps; r++) sink += c.loaderDecode(bytes) ? 1 : 0;
      },
      bufDecode() {
        for (let r = 0; r < reps; r++) sink += fromBinary(c.schema, bytes) ? 1 : 0;
      },
    });
    for (const dir of ["Encode", "Decode"] as const) {
      figures.push(
        figure(`hot-${m.id}-${dir.toLowerCase()}`, `${dir} ${m.label}, ${bytes.length} B: @bufbuild ${dir === "Encode" ? "toBinary" : "fromBinary"}`, t[`buf${dir}`]!.meanNs / reps, {
          unit: "ns",
          baseline: { label: `proto-loader ${m.side}${dir === "Encode" ? "Serialize" : "Deserialize"}`, value: t[`loader${dir}`]!.meanNs / reps },
        }),
      );
    }
  }
  if (sink === 0) throw new Error("hot-message benchmark did no work");
  return figures;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await hotMessageFigures(process.argv.includes("--quick") ? "quick" : "full");
  console.log("| message, direction | @bufbuild ns | proto-loader ns | @bufbuild / proto-loader |");
  console.log("|---|---|---|---|");
  for (const f of figures) console.log(`| ${f.label.replace(/: @bufbuild.*/, "")} | ${f.value.toFixed(0)} | ${f.baseline!.value.toFixed(0)} | ${(f.value / f.baseline!.value).toFixed(2)} |`);
}
