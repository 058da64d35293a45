/**
 * A short, bounded run of the HTTP/2 and gRPC fuzzer (test/fuzz/) in `npm test`: fixed seeds and a fixed number of
 * inputs, so it takes a few seconds and fails the same way every time. The long, time-bounded run with a random
 * seed is `.ci/run`'s `FUZZ_SECONDS=120 npx tsx test/fuzz/run.ts`. No timing is asserted: only that the gateway child
 * stays up, answers a well-behaved unary call after every batch, keeps its RSS under the bound, and closes every
 * connection.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fuzz } from "./fuzz.js";
import { loadCorpus, makeInput, parseStream } from "./inputs.js";

describe("HTTP/2 and gRPC fuzzer: a short run", () => {
  it("an input is a pure function of (seed, index), and the corpus parses into frames", () => {
    const corpus = loadCorpus();
    assert.ok(corpus.length >= 10, `corpus has ${corpus.length} seeds`);
    for (const c of corpus) assert.ok(parseStream(c.bytes).frames.length >= 2, `${c.name} parses into frames`);
    for (const i of [0, 1, 77, 4242]) {
      const a = makeInput(99, i, corpus);
      const b = makeInput(99, i, corpus);
      assert.deepEqual(Buffer.concat(a.chunks), Buffer.concat(b.chunks));
      assert.equal(a.label, b.label);
    }
    assert.notDeepEqual(Buffer.concat(makeInput(99, 0, corpus).chunks), Buffer.concat(makeInput(100, 0, corpus).chunks));
    // The generator itself never throws (a long run once died at input 7,500 on a reserved-bit stream id).
    for (let i = 0; i < 3000; i++) makeInput(777, 7000 + i, corpus);
  });

  for (const seed of [1, 20260127]) {
    it(`seed ${seed}: 160 inputs, the gateway stays up, serves, stays in its memory bound and closes every connection`, async () => {
      const lines: string[] = [];
      const r = await fuzz({ seed, count: 160, concurrency: 4, save: false, log: (l) => lines.push(l) });
      assert.equal(r.inputs, 160);
      assert.deepEqual(r.findings, [], lines.join("\n"));
    });
  }
});
