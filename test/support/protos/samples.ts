/**
 * Sample shop.v1.Order values in proto3 canonical JSON (keys in field-number order, exactly as a conformant writer
 * prints them), shared by the codec tests and bench/codec.ts.
 */

/** An Order using every kind of field of shop.proto once, in canonical form. */
export function richOrder(): Record<string, unknown> {
  return {
    orderId: "ord-1",
    bigSigned: "-9007199254740993",
    bigUnsigned: "18446744073709551615",
    fixedBig: "9007199254740995",
    zigzagBig: "-9223372036854775808",
    sfixedBig: "9223372036854775807",
    smallSigned: -42,
    smallUnsigned: 4294967295,
    paid: true,
    total: 1234.5,
    ratio: 0.25,
    payload: "AAEC/f7/",
    status: "STATUS_SHIPPED",
    priority: "PRIORITY_HIGH",
    items: [
      {
        sku: "sku-1",
        quantity: 3,
        unitPrice: { currencyCode: "EUR", units: "12", nanos: 500000000 },
        tags: ["a", "b"],
        dimensions: { widthCm: 10.5, heightCm: 2, weightKg: 1.5 },
      },
      { sku: "sku-2" },
    ],
    history: ["1", "-2", "9007199254740993"],
    transitions: ["STATUS_OPEN", "STATUS_SHIPPED"],
    counters: { views: "9007199254740993", clicks: "0" },
    itemsByLine: { "1": { sku: "line-1" }, "-2": { quantity: 7 } },
    states: { eu: "STATUS_OPEN" },
    flags: { true: "yes", false: "no" },
    shipTo: { streetLine: "1 Main St", city: "Springfield", zip: "12345" },
    note: "",
    discountPercent: 0,
    previousStatus: "STATUS_UNSPECIFIED",
    createdAt: "2026-01-02T03:04:05.600Z",
    ttl: "1.500s",
    attributes: { color: "red", size: 3, nested: { ok: true, none: null }, list: [1, "two", false] },
    extra: "plain string value",
    extraList: [1, { a: null }, []],
    wrappedInt64: "9007199254740993",
    wrappedString: "",
    wrappedBool: false,
    wrappedDouble: 2.5,
    wrappedBytes: "aGk=",
    wrappedUint64: "18446744073709551615",
    wrappedFloat: 1.5,
    wrappedInt32: -7,
    wrappedUint32: 7,
    updateMask: "orderId,items.unitPrice,shipTo.streetLine",
    detail: { "@type": "type.googleapis.com/shop.v1.Item", sku: "in-any", quantity: 1 },
    details: [
      { "@type": "type.googleapis.com/google.protobuf.Duration", value: "3s" },
      { "@type": "type.googleapis.com/google.protobuf.Timestamp", value: "1970-01-01T00:00:00Z" },
      { "@type": "type.googleapis.com/shop.common.v1.Money", currencyCode: "USD", units: "-1" },
    ],
    nothing: {},
    blobs: ["", "AA==", "/w=="],
    samples: ["NaN", "Infinity", "-Infinity", 0.1],
    events: ["2026-01-02T03:04:05Z", "1999-12-31T23:59:59.999999999Z"],
    labels: { k: { deep: [1, 2] }, n: null },
    title: "Rich order",
  };
}

/** An Order of roughly `bytes` bytes of JSON text: repeated items with prices, tags and dimensions. */
export function orderOfJsonSize(bytes: number): Record<string, unknown> {
  const items: unknown[] = [];
  const order: Record<string, unknown> = {
    orderId: "ord-bench",
    bigSigned: "9007199254740993",
    status: "STATUS_OPEN",
    createdAt: "2026-01-02T03:04:05.600Z",
    items,
  };
  let i = 0;
  while (JSON.stringify(order).length < bytes) {
    items.push({
      sku: `sku-${i}`,
      quantity: i + 1,
      unitPrice: { currencyCode: "EUR", units: String(100 + i), nanos: 990000000 },
      tags: ["red", `t${i}`],
      dimensions: { widthCm: 10.5 + i, heightCm: 2, weightKg: 0.5 },
    });
    i++;
    if (items.length === 1 && JSON.stringify(order).length >= bytes) break;
  }
  return order;
}
