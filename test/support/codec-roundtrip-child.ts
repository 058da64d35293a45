/**
 * Child process of the fast-codec test: converts a 1 KB shop Order JSON -> binary -> JSON through codec.ts, and a
 * few invalid inputs, and prints what came out (base64 bytes, text, error code and message) and whether the fast
 * path answered, as one JSON line. The test runs it under `--disallow-code-generation-from-strings`, where the fast
 * path cannot compile.
 */
import { binaryToJson, jsonToBinary } from "../../src/workers/codec.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { fastJsonToBinary } from "../../src/workers/fast-codec/encode.js";
import { compileSchema } from "../../src/workers/schema-registry.js";
import { encodedFileDescriptorProtos, SHOP_PROTO } from "./protos/descriptors.js";
import { orderOfJsonSize } from "./protos/samples.js";

const shop = compileSchema(encodedFileDescriptorProtos(SHOP_PROTO));
const outcome = (f: () => string): { ok: string } | { code: number; message: string } => {
  try {
    return { ok: f() };
  } catch (e) {
    const err = e as GatewayError;
    return { code: err.code, message: err.message };
  }
};
// A 1 KB order of the fields the fast path covers (richOrder also holds an Any and a FieldMask: library path).
const sample = orderOfJsonSize(1000);
const order = JSON.stringify(sample);
// Twice each: the second conversion of a type runs after the first one's failed compile.
const results = [order, order, '{"orderId": 5}', '{"nope": 1}'].map((json) =>
  outcome(() => {
    const bytes = jsonToBinary(shop, "shop.v1.Order", json);
    return `${Buffer.from(bytes).toString("base64")} ${binaryToJson(shop, "shop.v1.Order", bytes)}`;
  }),
);
// Whether the fast path answered (it cannot where code generation is disallowed).
const fastTaken = fastJsonToBinary(shop.getMessage("shop.v1.Order")!, sample as never) !== undefined;
process.stdout.write(`${JSON.stringify({ results, fastTaken })}\n`);
