/**
 * bench/codec: which codec library, and from which payload size the worker pool pays.
 *
 *   npx tsx bench/codec.ts [--quick]
 *
 * 1. Conformance of @bufbuild/protobuf and protobufjs (ext/protojson) on the proto3 JSON cases the gateway relies on.
 * 2. Speed of both on shop.v1.Order messages of ~300 B, 1 KB, 6 KB and 64 KB of JSON, both directions, with the
 *    ratio against protobufjs measured in the same run (> 1: @bufbuild is faster).
 * 3. Inline vs pool per payload size (latency and main-thread time per conversion) and the crossover: the smallest
 *    size at which a pooled conversion costs the main thread less than converting inline, in both directions.
 * 4. The codec's compiled fast path against the library path it falls back to: CPU per conversion, both directions,
 *    same run (bench/codec/fast-path.ts, also runnable alone).
 */
import { availableParallelism } from "node:os";
import { Bench } from "tinybench";
import { createConverter } from "../src/workers/converter.js";
import { schemaSetOf, SHOP_PROTO } from "../test/support/protos/descriptors.js";
import { orderOfJsonSize } from "../test/support/protos/samples.js";
import { checkConformance } from "./codec/conformance.js";
import { measureFastPath, printFastPath } from "./codec/fast-path.js";
import { bufbuildCodec, gatewayCodec, protobufjsCodec, type LibraryCodec } from "./codec/libraries.js";
import { measurePoolCost, type PoolCostRow } from "./codec/pool-cost.js";

const quick = process.argv.includes("--quick");
// Quick mode keeps every size and figure with shorter measurements (the whole quick bench run stays near a minute).
const TIME_MS = quick ? 80 : 1000;
const ORDER = "shop.v1.Order";
const schema = schemaSetOf(SHOP_PROTO);
const fmt = (n: number): string => (Number.isFinite(n) ? n.toFixed(n < 10 ? 2 : 1) : "n/a");

function section(title: string): void {
  console.log(`\n## ${title}\n`);
}

async function libraries(): Promise<void> {
  const codecs: LibraryCodec[] = [bufbuildCodec(schema.files, ORDER), protobufjsCodec(schema.files, ORDER), protobufjsCodec(schema.files, ORDER, true)];
  section("Conformance (proto3 JSON cases, bench/codec/conformance.ts)");
  for (const c of [gatewayCodec(schema.files, ORDER), ...codecs]) {
    const r = checkConformance(c);
    console.log(`- ${c.name}: ${r.passed}/${r.passed + r.failed.length}${r.failed.length ? ` FAILED: ${r.failed.map((f) => f.slice(0, 120)).join("; ")}` : ""}`);
  }
  const [buf, pbjs] = codecs as [LibraryCodec, LibraryCodec];
  section("Library speed, median (p50) us per conversion (ratio = protobufjs / @bufbuild, same run)");
  console.log("| JSON size | binary size | direction | @bufbuild us | protobufjs us | ratio |");
  console.log("|---|---|---|---|---|---|");
  for (const size of [300, 1024, 6 * 1024, 64 * 1024]) {
    const json = JSON.stringify(orderOfJsonSize(size));
    const bin = buf.jsonToBinary(json);
    if (JSON.stringify(JSON.parse(pbjs.binaryToJson(bin))) !== JSON.stringify(JSON.parse(buf.binaryToJson(bin)))) {
      throw new Error(`the libraries disagree on the ${size} B sample`);
    }
    const bench = new Bench({ time: TIME_MS, warmup: true, ...(quick ? { warmupTime: TIME_MS } : {}), throws: true });
    bench
      .add("buf j2b", () => buf.jsonToBinary(json))
      .add("pbjs j2b", () => pbjs.jsonToBinary(json))
      .add("buf b2j", () => buf.binaryToJson(bin))
      .add("pbjs b2j", () => pbjs.binaryToJson(bin));
    await bench.run();
    const us = (name: string): number => {
      const t = bench.tasks.find((x) => x.name === name)!;
      return t.result.state === "completed" ? t.result.latency.p50 * 1000 : Number.NaN;
    };
    for (const [dir, a, b] of [["JSON->binary", "buf j2b", "pbjs j2b"], ["binary->JSON", "buf b2j", "pbjs b2j"]] as const) {
      console.log(`| ${json.length} | ${bin.byteLength} | ${dir} | ${fmt(us(a))} | ${fmt(us(b))} | ${fmt(us(b) / us(a))} |`);
    }
  }
}

async function pool(): Promise<void> {
  const threads = Math.max(1, availableParallelism() - 1);
  const inline = createConverter({ thresholdBytes: Number.MAX_SAFE_INTEGER, threads });
  const pooled = createConverter({ thresholdBytes: 0, threads });
  section(`Inline vs pool (${threads} worker thread(s), ${availableParallelism()} cores)`);
  console.log("latency: p50 of one call at a time; main: event-loop busy time per call with threads+1 calls in flight (min of 3 alternating batches)");
  console.log("");
  console.log("| direction | payload B | inline latency us | pool latency us | inline main us | pool main us | pool main / inline |");
  console.log("|---|---|---|---|---|---|---|");
  const rows: PoolCostRow[] = [];
  try {
    for (const size of [1024, 2048, 4096, 8192, 16 * 1024, 64 * 1024]) {
      const json = JSON.stringify(orderOfJsonSize(size));
      for (const r of await measurePoolCost(inline, pooled, schema, ORDER, json, TIME_MS, quick ? 50 : 400)) {
        rows.push(r);
        console.log(
          `| ${r.direction} | ${r.bytes} | ${fmt(r.inlineLatencyUs)} | ${fmt(r.poolLatencyUs)} | ${fmt(r.inlineMainUs)} | ${fmt(r.poolMainUs)} | ${fmt(r.poolMainUs / r.inlineMainUs)} |`,
        );
      }
    }
  } finally {
    await Promise.all([inline.close(), pooled.close()]);
  }
  section("Crossover");
  for (const dir of ["json->binary", "binary->json"] as const) {
    const first = rows.filter((r) => r.direction === dir).find((r) => r.poolMainUs < r.inlineMainUs);
    console.log(`- ${dir}: pool cheaper for the main thread from ${first ? `${first.bytes} B` : "no measured size"}`);
  }
}

function fastPath(): void {
  section("Fast path vs library, CPU us per conversion (min of alternating batches; ratio = library / fast path)");
  printFastPath(measureFastPath(quick ? 300 : 2000));
}

await libraries();
await pool();
fastPath();
