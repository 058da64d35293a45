/**
 * The fuzzer's regressions (test/fuzz/): every corpus seed as it is, then every saved finding in
 * test/fuzz/crashes/*.json, replayed in order against a fresh gateway child with the fuzzer's liveness checks after
 * each input: the process is up, a well-behaved connection gets a correct unary reply, RSS stays in bound, and every
 * connection is closed at the end.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { CRASH_DIR, decodeInput, replay, type CrashFile } from "../fuzz/fuzz.js";
import { loadCorpus } from "../fuzz/inputs.js";

const crashes = readdirSync(CRASH_DIR)
  .filter((n) => n.endsWith(".json"))
  .sort();

describe("HTTP/2 fuzz regressions", () => {
  it("every corpus seed, sent whole, leaves the gateway serving", async () => {
    const inputs = loadCorpus().map((c) => ({ label: `corpus ${c.name}`, chunks: [c.bytes], halfClose: false }));
    assert.equal(await replay(inputs), undefined);
  });

  for (const name of crashes) {
    it(`saved finding ${name} no longer breaks the gateway`, async () => {
      const crash = JSON.parse(readFileSync(new URL(name, CRASH_DIR), "utf8")) as CrashFile;
      assert.equal(await replay(crash.inputs.map(decodeInput)), undefined, `found by seed ${crash.seed}: ${crash.finding}`);
    });
  }
});
