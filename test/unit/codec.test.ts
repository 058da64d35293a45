import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { binaryToJson, jsonToBinary, jsonValueToBinary } from "../../src/workers/codec.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { compileSchema, SchemaCache } from "../../src/workers/schema-registry.js";
import { encodedFileDescriptorProtos, fileDescriptorProtos, SHOP_PROTO } from "../support/protos/descriptors.js";
import { richOrder } from "../support/protos/samples.js";

const registry = compileSchema(encodedFileDescriptorProtos(SHOP_PROTO));
const ORDER = "shop.v1.Order";

/** JSON text -> binary -> JSON value. */
function roundTrip(value: unknown, type = ORDER): unknown {
  return JSON.parse(binaryToJson(registry, type, jsonToBinary(registry, type, JSON.stringify(value))));
}

function failure(json: string, type = ORDER): GatewayError {
  try {
    jsonToBinary(registry, type, json);
  } catch (e) {
    assert.ok(e instanceof GatewayError, `expected a GatewayError, got ${String(e)}`);
    return e;
  }
  assert.fail(`expected ${json} to be rejected`);
}

describe("codec: proto3 JSON round trips", () => {
  it("reproduces a canonical Order using every field kind exactly, key order included", () => {
    const order = richOrder();
    const text = binaryToJson(registry, ORDER, jsonToBinary(registry, ORDER, JSON.stringify(order)));
    assert.equal(text, JSON.stringify(order));
  });

  it("keeps 64-bit integers past 2^53 exact (written as strings)", () => {
    const out = roundTrip({ bigSigned: "9223372036854775807", bigUnsigned: "18446744073709551615", history: ["-9223372036854775808"] });
    assert.deepEqual(out, { bigSigned: "9223372036854775807", bigUnsigned: "18446744073709551615", history: ["-9223372036854775808"] });
  });

  it("accepts 64-bit integers as JSON numbers and strings, writes strings", () => {
    assert.deepEqual(roundTrip({ bigSigned: 12, fixedBig: "13", counters: { a: 5 } }), {
      bigSigned: "12",
      fixedBig: "13",
      counters: { a: "5" },
    });
  });

  it("accepts proto field names and json_name, writes lowerCamelCase / json_name", () => {
    assert.deepEqual(roundTrip({ order_id: "x", display_name: "t", ship_to: { street_line: "s", postal_code: "1" } }), {
      orderId: "x",
      shipTo: { streetLine: "s", zip: "1" },
      title: "t",
    });
  });

  it("accepts enum numbers and writes names; unknown numbers of an open enum survive", () => {
    assert.deepEqual(roundTrip({ status: 2, transitions: [1, "STATUS_CANCELLED"], previousStatus: 0 }), {
      status: "STATUS_SHIPPED",
      transitions: ["STATUS_OPEN", "STATUS_CANCELLED"],
      previousStatus: "STATUS_UNSPECIFIED",
    });
    assert.deepEqual(roundTrip({ status: 99 }), { status: 99 });
  });

  it("accepts base64url and unpadded bytes, writes padded standard base64", () => {
    assert.deepEqual(roundTrip({ payload: "_-8", blobs: ["AA", "/w=="] }), { payload: "/+8=", blobs: ["AA==", "/w=="] });
  });

  it("accepts NaN and infinities as strings", () => {
    assert.deepEqual(roundTrip({ total: "NaN", ratio: "-Infinity", samples: ["Infinity", 1] }), {
      total: "NaN",
      ratio: "-Infinity",
      samples: ["Infinity", 1],
    });
  });

  it("treats null as unset and omits implicit defaults, but writes set fields with presence", () => {
    assert.deepEqual(roundTrip({ orderId: null, total: 0, paid: false, items: [], counters: {}, status: "STATUS_UNSPECIFIED" }), {});
    assert.deepEqual(roundTrip({ note: "", discountPercent: 0, previousStatus: "STATUS_UNSPECIFIED", nothing: {}, pickupStore: "" }), {
      pickupStore: "",
      note: "",
      discountPercent: 0,
      previousStatus: "STATUS_UNSPECIFIED",
      nothing: {},
    });
    assert.deepEqual(roundTrip({ note: null, shipTo: null }), {});
  });

  it("converts the well-known types to and from their JSON forms", () => {
    assert.deepEqual(
      roundTrip({
        createdAt: "2026-01-02T03:04:05.6+01:00",
        ttl: "90s",
        wrappedDouble: "NaN",
        wrappedInt64: 5,
        updateMask: "a.fooBar,b",
        extra: null,
        attributes: {},
      }),
      {
        createdAt: "2026-01-02T02:04:05.600Z",
        ttl: "90s",
        attributes: {},
        extra: null,
        wrappedInt64: "5",
        wrappedDouble: "NaN",
        updateMask: "a.fooBar,b",
      },
    );
  });

  it("resolves Any through the schema, for messages and for special-form types", () => {
    const detail = { "@type": "type.googleapis.com/shop.common.v1.Address", city: "Paris", zip: "75001" };
    const details = [
      { "@type": "type.googleapis.com/google.protobuf.Struct", value: { a: [1] } },
      { "@type": "type.googleapis.com/google.protobuf.Any", value: { "@type": "type.googleapis.com/google.protobuf.Empty" } },
    ];
    assert.deepEqual(roundTrip({ detail, details }), { detail, details });
  });

  it("converts well-known types at the top level in their JSON forms", () => {
    assert.equal(roundTrip("1.5s", "google.protobuf.Duration"), "1.500s");
    assert.equal(roundTrip("hi", "google.protobuf.StringValue"), "hi");
    assert.deepEqual(roundTrip([1, "a"], "google.protobuf.ListValue"), [1, "a"]);
    assert.deepEqual(roundTrip({}, "google.protobuf.Empty"), {});
    assert.equal(failure('"5m"', "google.protobuf.Duration").message, 'invalid google.protobuf.Duration: got "5m"');
  });

  it("converts a parsed JSON value the same as its text", () => {
    const order = richOrder();
    assert.deepEqual(jsonValueToBinary(registry, ORDER, order as never), jsonToBinary(registry, ORDER, JSON.stringify(order)));
  });

  it("round trips other message types of the schema, imported and nested ones included", () => {
    assert.deepEqual(roundTrip({ currencyCode: "EUR", units: "-5" }, "shop.common.v1.Money"), { currencyCode: "EUR", units: "-5" });
    assert.deepEqual(roundTrip({ widthCm: 1.5 }, "shop.v1.Item.Dimensions"), { widthCm: 1.5 });
    assert.deepEqual(roundTrip({ orders: [{ orderId: "a" }] }, ".shop.v1.ListOrdersResponse"), { orders: [{ orderId: "a" }] });
  });
});

describe("codec: errors name the field and the problem", () => {
  const cases: Array<[string, unknown, string]> = [
    ["unknown top-level field", { itemz: [] }, 'field "itemz" is not a field of shop.v1.Order'],
    ["unknown nested field", { items: [{}, { unitPrice: { unitz: 1 } }] }, 'field "items[1].unitPrice.unitz" is not a field of shop.common.v1.Money'],
    ["unknown field in a map value", { itemsByLine: { "3": { skux: 1 } } }, 'field "itemsByLine["3"].skux" is not a field of shop.v1.Item'],
    ["unknown field inside an Any", { detail: { "@type": "type.googleapis.com/shop.v1.Item", skux: 1 } }, 'field "detail.skux" is not a field of shop.v1.Item'],
    ["bad enum name", { status: "STATUS_LOST" }, 'field "status": "STATUS_LOST" is not a value of enum shop.v1.Status'],
    ["bad enum in a list", { transitions: ["STATUS_OPEN", "NOPE"] }, 'field "transitions[1]": "NOPE" is not a value of enum shop.v1.Status'],
    ["bad enum in a map", { states: { x: "NOPE" } }, 'field "states["x"]": "NOPE" is not a value of enum shop.v1.Status'],
    ["string for a string field given a number", { orderId: 5 }, 'field "orderId": expected string, got 5'],
    ["bool given a string", { paid: "yes" }, 'field "paid": expected boolean, got "yes"'],
    ["int64 not a number", { bigSigned: "12x" }, 'field "bigSigned": expected int64, got 12x'],
    ["int32 out of range", { smallSigned: 3000000000 }, 'field "smallSigned": expected int32, got 3000000000'],
    ["uint32 negative, nested", { items: [{ quantity: -1 }] }, 'field "items[0].quantity": expected uint32, got -1'],
    ["uint64 past the maximum", { bigUnsigned: "18446744073709551616" }, 'field "bigUnsigned": expected uint64, got 18446744073709551616'],
    ["bad base64", { payload: "!!" }, 'field "payload": invalid base64 string'],
    ["list given an object", { items: {} }, 'field "items": must be a JSON array, got an object'],
    ["message given a string", { shipTo: "home" }, 'field "shipTo": must be a JSON object (shop.common.v1.Address), got string "home"'],
    ["null list item", { samples: [1, null] }, 'field "samples[1]": list item must not be null'],
    ["bad map key", { itemsByLine: { one: {} } }, 'field "itemsByLine["one"]": invalid map key: expected number (int32), got "one"'],
    ["bad Timestamp", { createdAt: "yesterday" }, 'field "createdAt": invalid google.protobuf.Timestamp: invalid RFC 3339 string'],
    ["Timestamp on a day that does not exist", { createdAt: "2024-02-30T00:00:00Z" }, 'field "createdAt": invalid google.protobuf.Timestamp: "2024-02-30T00:00:00Z" is not a date-time that exists'],
    ["Timestamp at hour 24, in a list", { events: ["2024-02-01T00:00:00Z", "2024-02-01T24:00:00Z"] }, 'field "events[1]": invalid google.protobuf.Timestamp: "2024-02-01T24:00:00Z" is not a date-time that exists'],
    ["Timestamp on 31 April inside an Any", { detail: { "@type": "type.googleapis.com/google.protobuf.Timestamp", value: "2023-04-31T10:00:00+02:00" } }, 'field "detail.value": invalid google.protobuf.Timestamp: "2023-04-31T10:00:00+02:00" is not a date-time that exists'],
    ["bad Duration in a list of Any", { details: [{ "@type": "type.googleapis.com/google.protobuf.Duration", value: "5m" }] }, 'field "details[0].value": invalid google.protobuf.Duration: got "5m"'],
    ["bad wrapper", { wrappedInt64: "x" }, 'field "wrappedInt64": expected int64, got x'],
    ["Any of an unknown type", { detail: { "@type": "type.googleapis.com/nope.Thing" } }, 'field "detail.@type" names nope.Thing, which is not in the schema'],
    ["Any without @type", { detail: { sku: "x" } }, 'field "detail.@type" is required in a google.protobuf.Any and must be a type URL string'],
    ["two members of a oneof", { shipTo: {}, pickupStore: "a" }, 'field "pickupStore": cannot be set with "shipTo": both belong to oneof destination'],
    ["one field under both names", { order_id: "a", orderId: "b" }, 'field "orderId" is set twice (as "order_id" and "orderId")'],
    ["FieldMask with snake_case", { updateMask: "order_id" }, 'field "updateMask": invalid google.protobuf.FieldMask: path names must be lowerCamelCase'],
  ];
  for (const [name, value, message] of cases) {
    it(name, () => {
      const e = failure(JSON.stringify(value));
      assert.equal(e.codeName, "INVALID_ARGUMENT");
      assert.equal(e.message, message);
    });
  }

  it("a Timestamp on 29 February of a leap year converts, with its offset and nanoseconds", () => {
    assert.deepEqual(roundTrip({ createdAt: "2024-02-29T23:30:00.000000001-01:00" }), { createdAt: "2024-03-01T00:30:00.000000001Z" });
    assert.match(failure(JSON.stringify({ createdAt: "2023-02-29T00:00:00Z" })).message, /^field "createdAt": .* is not a date-time that exists$/);
  });

  it("malformed JSON", () => {
    const e = failure('{"orderId": ');
    assert.equal(e.codeName, "INVALID_ARGUMENT");
    assert.match(e.message, /^malformed JSON for shop\.v1\.Order: /);
  });

  it("JSON that is not an object", () => {
    assert.equal(failure("[1]").message, "JSON for shop.v1.Order must be an object, got an array");
    assert.equal(failure("null").message, "JSON for shop.v1.Order must be an object, got null");
  });

  it("an unknown message type is NOT_FOUND", () => {
    const e = failure("{}", "shop.v1.Nope");
    assert.equal(e.codeName, "NOT_FOUND");
    assert.equal(e.message, "message type shop.v1.Nope is not in the schema");
  });

  it("binary that is not the message is DATA_LOSS", () => {
    assert.throws(
      () => binaryToJson(registry, ORDER, new Uint8Array([0x0a, 0xff, 0xff])),
      (e: unknown) => e instanceof GatewayError && e.codeName === "DATA_LOSS" && /^binary data is not a valid shop\.v1\.Order: /.test(e.message),
    );
  });
});

describe("schema registry", () => {
  it("compiles files in any order and fills in missing well-known types", () => {
    const own = fileDescriptorProtos(SHOP_PROTO).filter((f) => !f.name.startsWith("google/"));
    assert.equal(own.length, 2);
    const files = encodedFileDescriptorProtos(SHOP_PROTO).slice(-2).reverse();
    const r = compileSchema(files);
    assert.deepEqual(JSON.parse(binaryToJson(r, ORDER, jsonToBinary(r, ORDER, '{"ttl":"2s","detail":{"@type":"type.googleapis.com/google.protobuf.Empty"}}'))), {
      ttl: "2s",
      detail: { "@type": "type.googleapis.com/google.protobuf.Empty" },
    });
  });

  it("names a missing dependency and an undecodable file", () => {
    const shopOnly = encodedFileDescriptorProtos(SHOP_PROTO).slice(-1);
    assert.throws(() => compileSchema(shopOnly), { message: "schema file shop/v1/common.proto, imported by shop/v1/shop.proto, is missing" });
    assert.throws(() => compileSchema([new Uint8Array([0xff])]), (e: unknown) => e instanceof GatewayError && /^schema file #0 is not a valid FileDescriptorProto/.test(e.message));
  });

  it("keeps at most `capacity` registries, evicting the least recently used", () => {
    const cache = new SchemaCache(2);
    const files = encodedFileDescriptorProtos(SHOP_PROTO);
    const a = cache.getOrCompile("a", files);
    cache.getOrCompile("b", files);
    assert.equal(cache.get("a"), a);
    cache.getOrCompile("c", files);
    assert.equal(cache.size, 2);
    assert.equal(cache.has("b"), false);
    assert.equal(cache.has("a"), true);
  });
});
