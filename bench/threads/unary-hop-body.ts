/** The PutOrder request of bench/threads/unary-hop.ts, encoded with the gateway's codec from the shop test schema. */
import { jsonToBinary } from "../../src/workers/codec.js";
import { SchemaCache } from "../../src/workers/schema-registry.js";
import { schemaSetOf, SHOP_PROTO } from "../../test/support/protos/descriptors.js";

export function putOrderBody(): Uint8Array {
  const items = Array.from({ length: 9 }, (_, i) => ({ sku: `sku-${i}`, quantity: i + 1, unitPrice: { currencyCode: "EUR", units: String(i + 10), nanos: 5 }, tags: ["alpha", "beta"] }));
  const json = JSON.stringify({ orderId: "bench-1", bigSigned: "9007199254740993", status: "STATUS_OPEN", paid: true, total: 99.5, items, counters: { a: "1" } });
  const set = schemaSetOf(SHOP_PROTO);
  return jsonToBinary(new SchemaCache(1).getOrCompile(set.id, set.files), "shop.v1.Order", json);
}
