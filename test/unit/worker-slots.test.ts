import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createConverter } from "../../src/workers/converter.js";
import { ConversionPool } from "../../src/workers/worker-pool.js";
import { createWorkerSlots, slotsHeld, slotsWanted } from "../../src/workers/worker-slots.js";
import { schemaSetOf, SHOP_PROTO } from "../support/protos/descriptors.js";
import { orderOfJsonSize } from "../support/protos/samples.js";

const schema = schemaSetOf(SHOP_PROTO);
const ORDER = "shop.v1.Order";

async function until(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("the process's conversion-worker slots", () => {
  it("two converters sharing one slot never hold two workers, and both get their conversions done", async () => {
    const slots = createWorkerSlots(1, 2);
    const a = createConverter({ thresholdBytes: 0, slots });
    const b = createConverter({ thresholdBytes: 0, slots });
    assert.equal(a.options.threads, 1, "a converter's own bound defaults to the process's");
    const json = JSON.stringify(orderOfJsonSize(16 * 1024));
    const expected = await createConverter({ thresholdBytes: Number.MAX_SAFE_INTEGER, threads: 1 }).jsonToBinary(schema, ORDER, json);
    let worst = 0;
    const sample = setInterval(() => {
      worst = Math.max(worst, slotsHeld(slots), a.workers + b.workers);
    }, 1);
    try {
      assert.deepEqual(await a.jsonToBinary(schema, ORDER, json), expected);
      assert.equal(a.workers, 1);
      // b waits for the slot; a's idle worker gives it back at once because b wants it.
      assert.deepEqual(await b.jsonToBinary(schema, ORDER, json), expected);
      assert.equal(b.workers, 1);
      assert.equal(a.workers, 0);
      // Both busy at once: the one worker passes between them whenever its holder runs dry.
      const all = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).jsonToBinary(schema, ORDER, json)));
      for (const r of all) assert.deepEqual(r, expected);
    } finally {
      clearInterval(sample);
    }
    assert.equal(worst, 1, "never more than the bound");
    await Promise.all([a.close(), b.close()]);
    assert.equal(slotsHeld(slots), 0, "closing gives every slot back");
    assert.equal(slotsWanted(slots), 0);
  });

  it("a worker idle for the idle time stops and gives its slot back", async () => {
    const slots = createWorkerSlots(2);
    const pool = new ConversionPool({ threads: 2, slots, maxQueue: 4, idleMs: 100 });
    const r = await pool.run({ kind: "convert", schemaId: schema.id, typeName: ORDER, json: JSON.stringify(orderOfJsonSize(1024)) }, schema.files);
    assert.equal(r.kind, "binary");
    assert.equal(pool.workers, 1);
    assert.equal(slotsHeld(slots), 1);
    await until(() => slotsHeld(slots) === 0, "the idle worker to stop");
    assert.equal(pool.workers, 0);
    // The next conversion starts a worker again.
    assert.equal((await pool.run({ kind: "convert", schemaId: schema.id, typeName: ORDER, json: "{}" }, schema.files)).kind, "binary");
    await pool.close();
    assert.equal(slotsHeld(slots), 0);
  });
});
