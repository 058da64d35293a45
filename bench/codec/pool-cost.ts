/**
 * Inline vs pool, per payload size: median latency of one conversion (sequential calls, tinybench) and the main thread's
 * busy time per conversion under load (event-loop utilisation while `threads + 1` calls are kept in flight). The
 * pool pays off once the main-thread time it costs (dispatch, structured clone, result) is below the time an inline
 * conversion would block the event loop: that size is the crossover.
 */
import { performance } from "node:perf_hooks";
import { Bench } from "tinybench";
import type { SchemaSet } from "../../src/workers/converter-types.js";
import type { PooledConverter } from "../../src/workers/converter.js";

/** Conversion direction measured. */
export type Direction = "json->binary" | "binary->json";

/** Figures of one size and direction (microseconds). */
export interface PoolCostRow {
  readonly direction: Direction;
  readonly bytes: number;
  readonly inlineLatencyUs: number;
  readonly poolLatencyUs: number;
  readonly inlineMainUs: number;
  readonly poolMainUs: number;
}

type Op = (c: PooledConverter) => Promise<unknown>;

async function latencyUs(ops: Record<string, () => Promise<unknown>>, timeMs: number): Promise<Record<string, number>> {
  const bench = new Bench({ time: timeMs, warmup: true, warmupTime: Math.min(200, timeMs), throws: true });
  for (const [name, fn] of Object.entries(ops)) bench.add(name, fn);
  await bench.run();
  const out: Record<string, number> = {};
  for (const t of bench.tasks) out[t.name] = t.result.state === "completed" ? t.result.latency.p50 * 1000 : Number.NaN;
  return out;
}

async function mainThreadUs(c: PooledConverter, op: Op, calls: number, concurrency: number): Promise<number> {
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < calls) {
      started++;
      await op(c);
    }
  };
  const before = performance.eventLoopUtilization();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elu = performance.eventLoopUtilization(before);
  return (elu.active * 1000) / calls;
}

/**
 * Main-thread time per call, inline and pooled, in alternating batches; the minimum of each is kept, the figure
 * least disturbed by other processes on a shared machine.
 */
async function alternate(inline: PooledConverter, pool: PooledConverter, op: Op, calls: number, concurrency: number): Promise<{ inlineMainUs: number; poolMainUs: number }> {
  let inlineMainUs = Infinity;
  let poolMainUs = Infinity;
  for (let i = 0; i < 3; i++) {
    inlineMainUs = Math.min(inlineMainUs, await mainThreadUs(inline, op, calls, concurrency));
    poolMainUs = Math.min(poolMainUs, await mainThreadUs(pool, op, calls, concurrency));
  }
  return { inlineMainUs, poolMainUs };
}

/** Measure one payload for both converters; `inline` and `pool` differ only in thresholdBytes. */
export async function measurePoolCost(
  inline: PooledConverter,
  pool: PooledConverter,
  schema: SchemaSet,
  typeName: string,
  json: string,
  timeMs: number,
  calls: number,
): Promise<PoolCostRow[]> {
  const bytes = await inline.jsonToBinary(schema, typeName, json);
  const rows: PoolCostRow[] = [];
  const directions: Array<[Direction, number, Op]> = [
    ["json->binary", json.length, (c) => c.jsonToBinary(schema, typeName, json)],
    ["binary->json", bytes.byteLength, (c) => c.binaryToJson(schema, typeName, bytes)],
  ];
  for (const [direction, size, op] of directions) {
    const lat = await latencyUs({ inline: () => op(inline), pool: () => op(pool) }, timeMs);
    const concurrency = pool.options.threads + 1;
    await mainThreadUs(pool, op, Math.max(10, calls / 5), concurrency); // warm every worker's schema cache
    rows.push({
      direction,
      bytes: size,
      inlineLatencyUs: lat["inline"]!,
      poolLatencyUs: lat["pool"]!,
      ...(await alternate(inline, pool, op, calls, concurrency)),
    });
  }
  return rows;
}
