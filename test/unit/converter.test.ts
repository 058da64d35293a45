import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createConverter, validateConverterOptions, type PooledConverter } from "../../src/workers/converter.js";
import { schemaSetOf, SHOP_PROTO } from "../support/protos/descriptors.js";
import { orderOfJsonSize, richOrder } from "../support/protos/samples.js";

const schema = schemaSetOf(SHOP_PROTO);
const ORDER = "shop.v1.Order";

function isCode(code: Code, message?: RegExp) {
  return (e: unknown): boolean => {
    assert.ok(e instanceof GatewayError, `expected a GatewayError, got ${String(e)}`);
    assert.equal(e.codeName, Code[code]);
    if (message) assert.match(e.message, message);
    return true;
  };
}

describe("converter", () => {
  const inline = createConverter({ thresholdBytes: Number.MAX_SAFE_INTEGER, threads: 1 });
  const pooled = createConverter({ thresholdBytes: 0, threads: 1, maxQueue: 1 }, { crashHook: true });
  const split = createConverter({ thresholdBytes: 4096, threads: 1 });
  after(async () => {
    await Promise.all([inline.close(), pooled.close(), split.close()]);
  });

  it("gives the same results through the pool as inline, for large and small payloads", async () => {
    for (const value of [richOrder(), orderOfJsonSize(64 * 1024), orderOfJsonSize(300)]) {
      const json = JSON.stringify(value);
      const a = await inline.jsonToBinary(schema, ORDER, json);
      const b = await pooled.jsonToBinary(schema, ORDER, json);
      assert.deepEqual(Buffer.from(b), Buffer.from(a));
      const ja = await inline.binaryToJson(schema, ORDER, a);
      const jb = await pooled.binaryToJson(schema, ORDER, b);
      assert.equal(jb, ja);
      assert.deepEqual(JSON.parse(jb), value);
    }
  });

  it("routes by size: below the threshold inline, at or above it to the pool", async () => {
    const small = JSON.stringify(orderOfJsonSize(300));
    const large = JSON.stringify(orderOfJsonSize(8192));
    await split.jsonToBinary(schema, ORDER, small);
    assert.equal(split.active, 0);
    const p = split.jsonToBinary(schema, ORDER, large);
    assert.equal(split.active, 1, "the large payload is on a worker");
    assert.deepEqual(await p, await inline.jsonToBinary(schema, ORDER, large));
  });

  it("reports codec errors from a worker as INVALID_ARGUMENT naming the field", async () => {
    const json = JSON.stringify({ ...orderOfJsonSize(2048), items: [{ sku: "a" }, { skux: 1 }] });
    await assert.rejects(pooled.jsonToBinary(schema, ORDER, json), isCode(Code.INVALID_ARGUMENT, /^field "items\[1\]\.skux" is not a field of shop\.v1\.Item$/));
    await assert.rejects(inline.jsonToBinary(schema, ORDER, '{"itemz":1}'), isCode(Code.INVALID_ARGUMENT, /"itemz"/));
    await assert.rejects(pooled.binaryToJson(schema, ORDER, new Uint8Array([0x0a, 0xff])), isCode(Code.DATA_LOSS));
    await assert.rejects(pooled.jsonToBinary(schema, "shop.v1.Nope", "{}"), isCode(Code.NOT_FOUND));
  });

  it("converts for several schemas in the same workers", async () => {
    const other = { id: `${schema.id}-copy`, files: schema.files };
    const json = JSON.stringify(orderOfJsonSize(1024));
    const [a, b] = await Promise.all([pooled.jsonToBinary(schema, ORDER, json), pooled.jsonToBinary(other, ORDER, json)]);
    assert.deepEqual(a, b);
  });

  it("fails RESOURCE_EXHAUSTED past maxQueue waiting tasks, and the others complete", async () => {
    const json = JSON.stringify(orderOfJsonSize(16 * 1024));
    const calls = [0, 1, 2, 3].map(() => pooled.jsonToBinary(schema, ORDER, json));
    const settled = await Promise.allSettled(calls);
    const rejected = settled.filter((s) => s.status === "rejected");
    assert.equal(rejected.length, 2, "1 running + 1 queued accepted, 2 refused");
    for (const r of rejected) isCode(Code.RESOURCE_EXHAUSTED, /conversion queue is full/)((r as PromiseRejectedResult).reason);
  });

  it("cancels a queued task when its signal aborts, and refuses an aborted signal", async () => {
    const json = JSON.stringify(orderOfJsonSize(16 * 1024));
    const running = pooled.jsonToBinary(schema, ORDER, json);
    const ac = new AbortController();
    const queued = pooled.jsonToBinary(schema, ORDER, json, ac.signal);
    assert.equal(pooled.queued, 1);
    ac.abort();
    await assert.rejects(queued, isCode(Code.CANCELLED));
    assert.equal(pooled.queued, 0);
    await running;
    await assert.rejects(pooled.jsonToBinary(schema, ORDER, "{}", ac.signal), isCode(Code.CANCELLED));
  });

  for (const mode of ["exit", "throw"] as const) {
    it(`a worker crash (${mode}) fails only its call with INTERNAL, and the pool recovers`, async () => {
      const json = JSON.stringify(orderOfJsonSize(4096));
      const expected = await inline.jsonToBinary(schema, ORDER, json);
      const crash = pooled.crashWorker(mode);
      const queuedBehind = pooled.jsonToBinary(schema, ORDER, json); // waits for the (dying) only worker
      await assert.rejects(crash, isCode(Code.INTERNAL, /conversion worker failed/));
      assert.deepEqual(await queuedBehind, expected);
      assert.deepEqual(await pooled.jsonToBinary(schema, ORDER, json), expected);
    });
  }

  it("validates options, naming the field and the value", () => {
    assert.throws(() => validateConverterOptions({ thresholdBytes: -1 }), { message: "converter option thresholdBytes must be an integer >= 0, got -1" });
    assert.throws(() => validateConverterOptions({ threads: 0 }), { message: "converter option threads must be an integer >= 1, got 0" });
    assert.throws(() => validateConverterOptions({ maxQueue: 1.5 }), { message: "converter option maxQueue must be an integer >= 0, got 1.5" });
    const d = validateConverterOptions();
    assert.ok(d.threads >= 1 && d.maxQueue === 256 && d.thresholdBytes > 0 && Object.isFrozen(d));
  });
});

describe("converter lifecycle", () => {
  it("close() lets running and queued work finish, refuses new work, and is safe twice", async () => {
    const c: PooledConverter = createConverter({ thresholdBytes: 0, threads: 1 });
    const json = JSON.stringify(orderOfJsonSize(8192));
    const work = [c.jsonToBinary(schema, ORDER, json), c.jsonToBinary(schema, ORDER, json)];
    const closing = c.close();
    await assert.rejects(c.jsonToBinary(schema, ORDER, json), isCode(Code.UNAVAILABLE));
    await Promise.all(work);
    await closing;
    await c.close();
    c.destroy();
  });

  it("destroy() fails waiting work UNAVAILABLE and is safe twice", async () => {
    const c = createConverter({ thresholdBytes: 0, threads: 1 });
    const json = JSON.stringify(orderOfJsonSize(8192));
    const work = [c.jsonToBinary(schema, ORDER, json), c.jsonToBinary(schema, ORDER, json)];
    c.destroy();
    c.destroy();
    const settled = await Promise.allSettled(work);
    for (const s of settled) {
      assert.equal(s.status, "rejected");
      isCode(Code.UNAVAILABLE)(s.reason);
    }
    await c.close();
  });
});
