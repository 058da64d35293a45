/**
 * The codec's compiled fast path (src/workers/fast-codec/) against the library path it falls back to, in the same
 * run: CPU time per conversion of `codec.ts` (JSON.parse + fast path) and of the library (JSON.parse + fromJson +
 * toBinary; fromBinary + toJsonString), both directions, on shop.v1.Order messages of several sizes and on a
 * PutItem-like order (the well-known types of the peers' invoke load: Struct, StringValue, Timestamp, Duration, a map,
 * a oneof, proto3 optional, bytes).
 *
 *   npx tsx bench/codec/fast-path.ts [--quick]      (also a section of bench/codec.ts)
 *
 * CPU per conversion = process.cpuUsage() (user + system) over a batch / batch size; the arms alternate batch by
 * batch and each figure is the minimum over the batches (the least disturbed by other work on a shared machine).
 * binary->JSON includes reading the text's UTF-8 length (Buffer.byteLength), which a caller does when writing it.
 * Ratio = library / fast path: above 1, the fast path costs less CPU.
 */
import { fromBinary, fromJson, toBinary, toJsonString, type DescMessage, type FileRegistry, type JsonValue } from "@bufbuild/protobuf";
import { binaryToJson, jsonToBinary } from "../../src/workers/codec.js";
import { fastBinaryToJson } from "../../src/workers/fast-codec/decode.js";
import { fastJsonToBinary } from "../../src/workers/fast-codec/encode.js";
import { compileSchema } from "../../src/workers/schema-registry.js";
import { encodedFileDescriptorProtos, SHOP_PROTO } from "../../test/support/protos/descriptors.js";
import { orderOfJsonSize } from "../../test/support/protos/samples.js";

const ORDER = "shop.v1.Order";

/** A shop.v1.Order shaped like the peers harness' 1 KB PutItem (acme.inventory.v1.Item) in the shop schema. */
export function putItemLikeOrder(): Record<string, unknown> {
  const order: Record<string, unknown> = {
    orderId: "BENCH-1",
    bigSigned: "9007199254740993",
    bigUnsigned: "18446744073709551615",
    status: "STATUS_OPEN",
    counters: { north: "12", south: "0", east: "7" },
    pickupStore: "store-1299",
    createdAt: "2026-01-02T03:04:05.600Z",
    ttl: "90s",
    attributes: { color: "red", fragile: true, weight: 1.5 },
    payload: "AAEC+v8=",
    discountPercent: 3,
    wrappedString: "handle replaced",
    items: [{ sku: "BENCH-1", quantity: 3, tags: [] as string[], dimensions: { widthCm: 3.5, heightCm: 30 } }],
    title: "Bench claw hammer",
  };
  const tags = (order.items as Array<{ tags: string[] }>)[0]!.tags;
  for (let i = 0; JSON.stringify(order).length < 1024; i++) tags.push(`tag-${String(i).padStart(3, "0")}`);
  return order;
}

export interface FastPathRow {
  label: string;
  jsonBytes: number;
  binaryBytes: number;
  direction: "JSON->binary" | "binary->JSON";
  libraryUs: number;
  fastUs: number;
  /** JSON->binary: the JSON.parse both arms include (same run), to show what is left to the conversion. */
  parseUs?: number;
}

function cpuUsPer(fn: () => void, n: number): number {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / n;
}

/** Alternating batches of the two arms; the minimum CPU us per call of each. */
function compare(a: () => void, b: () => void, budgetMs: number): [number, number] {
  // Warm up both (JIT tiers), then batches of about 20 ms of the slower arm, so each spans several scheduler ticks.
  for (const end = Date.now() + budgetMs / 4; Date.now() < end; ) {
    cpuUsPer(a, 10);
    cpuUsPer(b, 10);
  }
  const probe = Math.max(cpuUsPer(a, 20), cpuUsPer(b, 20), 1);
  const n = Math.max(20, Math.round(20_000 / probe));
  let bestA = Infinity;
  let bestB = Infinity;
  const until = Date.now() + budgetMs;
  for (let round = 0; round < 3 || (Date.now() < until && round < 40); round++) {
    bestA = Math.min(bestA, cpuUsPer(a, n));
    bestB = Math.min(bestB, cpuUsPer(b, n));
  }
  return [bestA, bestB];
}

function libraryJsonToBinary(registry: FileRegistry, desc: DescMessage, json: string): Uint8Array {
  return toBinary(desc, fromJson(desc, JSON.parse(json) as JsonValue, { registry }));
}

function libraryBinaryToJson(registry: FileRegistry, desc: DescMessage, bytes: Uint8Array): string {
  return toJsonString(desc, fromBinary(desc, bytes), { registry });
}

/** Measure every sample both ways; `budgetMs` per arm pair. Throws if the two paths disagree on a sample. */
export function measureFastPath(budgetMs: number): FastPathRow[] {
  const registry = compileSchema(encodedFileDescriptorProtos(SHOP_PROTO));
  const desc = registry.getMessage(ORDER)!;
  const samples: Array<[string, Record<string, unknown>]> = [
    ["PutItem-like order", putItemLikeOrder()],
    ...[300, 1024, 6 * 1024, 64 * 1024].map((size): [string, Record<string, unknown>] => [`order ~${size} B`, orderOfJsonSize(size)]),
  ];
  const rows: FastPathRow[] = [];
  // Every path on every sample once before measuring, so no arm is measured while the JIT still learns its shapes.
  for (const [, value] of samples) {
    const json = JSON.stringify(value);
    for (const end = Date.now() + budgetMs / 4; Date.now() < end; ) {
      binaryToJson(registry, ORDER, jsonToBinary(registry, ORDER, json));
      libraryBinaryToJson(registry, desc, libraryJsonToBinary(registry, desc, json));
    }
  }
  for (const [label, value] of samples) {
    const json = JSON.stringify(value);
    const bin = libraryJsonToBinary(registry, desc, json);
    // Same answers, and the fast path really taken (not a fallback measured twice).
    const fastBin = fastJsonToBinary(desc, JSON.parse(json) as JsonValue);
    const fastText = fastBinaryToJson(desc, bin);
    if (fastBin === undefined || fastText === undefined) throw new Error(`the fast path does not take the ${label} sample`);
    if (Buffer.compare(Buffer.from(fastBin), Buffer.from(bin)) !== 0 || fastText !== libraryBinaryToJson(registry, desc, bin)) {
      throw new Error(`the fast path and the library disagree on the ${label} sample`);
    }
    const [libJ2b, fastJ2b] = compare(() => libraryJsonToBinary(registry, desc, json), () => jsonToBinary(registry, ORDER, json), budgetMs);
    const [parseUs] = compare(() => JSON.parse(json), () => undefined, budgetMs / 4);
    rows.push({ label, jsonBytes: json.length, binaryBytes: bin.length, direction: "JSON->binary", libraryUs: libJ2b, fastUs: fastJ2b, parseUs });
    // Both arms measure the text's UTF-8 length, as a caller writing it out would: the library's text is flat (from
    // JSON.stringify), the fast path's is built by concatenation and V8 flattens it on first read; count that here.
    const [libB2j, fastB2j] = compare(
      () => Buffer.byteLength(libraryBinaryToJson(registry, desc, bin)),
      () => Buffer.byteLength(binaryToJson(registry, ORDER, bin)),
      budgetMs,
    );
    rows.push({ label, jsonBytes: json.length, binaryBytes: bin.length, direction: "binary->JSON", libraryUs: libB2j, fastUs: fastB2j });
  }
  return rows;
}

const fmt = (n: number): string => (Number.isFinite(n) ? n.toFixed(n < 10 ? 2 : 1) : "n/a");

/** Print the table (markdown). */
export function printFastPath(rows: readonly FastPathRow[]): void {
  console.log("| message | JSON B | binary B | direction | library CPU us | fast path CPU us | library / fast | of which JSON.parse us | ratio without it |");
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const r of rows) {
    const p = r.parseUs;
    const without = p === undefined ? "" : fmt((r.libraryUs - p) / (r.fastUs - p));
    console.log(
      `| ${r.label} | ${r.jsonBytes} | ${r.binaryBytes} | ${r.direction} | ${fmt(r.libraryUs)} | ${fmt(r.fastUs)} | ${fmt(r.libraryUs / r.fastUs)} | ${p === undefined ? "" : fmt(p)} | ${without} |`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const quick = process.argv.includes("--quick");
  console.log(`## Fast path vs library, CPU us per conversion (min of alternating batches, ${quick ? "quick" : "full"})\n`);
  printFastPath(measureFastPath(quick ? 300 : 2000));
}
