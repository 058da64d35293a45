/**
 * Conformance cases of the proto3 JSON mapping (https://protobuf.dev/programming-guides/json/) the gateway relies on,
 * run against a LibraryCodec for shop.v1.Order. Each case is JSON in, and either the canonical JSON out or a
 * rejection.
 */
import type { LibraryCodec } from "./libraries.js";
import { richOrder } from "../../test/support/protos/samples.js";

interface Case {
  readonly name: string;
  readonly input: unknown;
  /** Expected JSON output (deep-equal), or "reject". */
  readonly expect: unknown;
}

/** The cases (inputs are shop.v1.Order JSON). */
export const conformanceCases: readonly Case[] = [
  { name: "rich order round trip", input: richOrder(), expect: richOrder() },
  { name: "int64 past 2^53 as string", input: { bigSigned: "9007199254740993" }, expect: { bigSigned: "9007199254740993" } },
  { name: "uint64 max", input: { bigUnsigned: "18446744073709551615" }, expect: { bigUnsigned: "18446744073709551615" } },
  { name: "int64 given as number", input: { bigSigned: 12 }, expect: { bigSigned: "12" } },
  { name: "proto field name accepted", input: { order_id: "a" }, expect: { orderId: "a" } },
  { name: "json_name written and accepted", input: { title: "t" }, expect: { title: "t" } },
  { name: "enum by number", input: { status: 1 }, expect: { status: "STATUS_OPEN" } },
  { name: "bytes base64url unpadded", input: { payload: "_-8" }, expect: { payload: "/+8=" } },
  { name: "double NaN/Infinity", input: { total: "NaN", ratio: "-Infinity" }, expect: { total: "NaN", ratio: "-Infinity" } },
  { name: "null is unset", input: { orderId: null, shipTo: null }, expect: {} },
  { name: "implicit defaults omitted", input: { orderId: "", total: 0, items: [] }, expect: {} },
  { name: "proto3 optional set to default is written", input: { note: "", discountPercent: 0 }, expect: { note: "", discountPercent: 0 } },
  { name: "oneof member set to default is written", input: { pickupStore: "" }, expect: { pickupStore: "" } },
  { name: "Timestamp with offset normalised", input: { createdAt: "2026-01-02T03:04:05.6+01:00" }, expect: { createdAt: "2026-01-02T02:04:05.600Z" } },
  { name: "Duration", input: { ttl: "90s" }, expect: { ttl: "90s" } },
  { name: "wrappers as bare values", input: { wrappedInt64: "5", wrappedBool: false }, expect: { wrappedInt64: "5", wrappedBool: false } },
  { name: "Struct/Value/ListValue", input: { attributes: { a: [1, null] }, extra: null, extraList: [true] }, expect: { attributes: { a: [1, null] }, extra: null, extraList: [true] } },
  { name: "FieldMask", input: { updateMask: "a.fooBar,b" }, expect: { updateMask: "a.fooBar,b" } },
  { name: "Empty", input: { nothing: {} }, expect: { nothing: {} } },
  { name: "Any with a message", input: { detail: { "@type": "type.googleapis.com/shop.v1.Item", sku: "x" } }, expect: { detail: { "@type": "type.googleapis.com/shop.v1.Item", sku: "x" } } },
  { name: "Any with a WKT", input: { detail: { "@type": "type.googleapis.com/google.protobuf.Duration", value: "1s" } }, expect: { detail: { "@type": "type.googleapis.com/google.protobuf.Duration", value: "1s" } } },
  { name: "map<int32, message> and map<bool, string>", input: { itemsByLine: { "-1": { sku: "a" } }, flags: { true: "y" } }, expect: { itemsByLine: { "-1": { sku: "a" } }, flags: { true: "y" } } },
  { name: "unknown field rejected", input: { itemz: 1 }, expect: "reject" },
  { name: "unknown enum name rejected", input: { status: "NOPE" }, expect: "reject" },
  { name: "int32 out of range rejected", input: { smallSigned: 3000000000 }, expect: "reject" },
  { name: "two oneof members rejected", input: { shipTo: {}, pickupStore: "a" }, expect: "reject" },
  { name: "string for bool rejected", input: { paid: "yes" }, expect: "reject" },
];

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (typeof v === "object" && v !== null) {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/** Run every case; returns the names of the failed ones with what happened. */
export function checkConformance(codec: LibraryCodec): { passed: number; failed: string[] } {
  const failed: string[] = [];
  for (const c of conformanceCases) {
    let got: unknown;
    try {
      got = JSON.parse(codec.binaryToJson(codec.jsonToBinary(JSON.stringify(c.input))));
    } catch (e) {
      if (c.expect !== "reject") failed.push(`${c.name}: threw ${e instanceof Error ? e.message : String(e)}`);
      continue;
    }
    if (c.expect === "reject") failed.push(`${c.name}: accepted, wrote ${JSON.stringify(got)}`);
    else if (canonical(got) !== canonical(c.expect)) failed.push(`${c.name}: wrote ${JSON.stringify(got)}`);
  }
  return { passed: conformanceCases.length - failed.length, failed };
}
