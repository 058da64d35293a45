import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { INTERRUPT_BUDGET, MAX_INLINED_BYTECODE, MAX_INLINED_BYTECODE_CUMULATIVE, cliV8Flags } from "../../src/main/v8-flags.js";

const BUDGET = `--interrupt-budget=${INTERRUPT_BUDGET}`;
const INLINE = `--max-inlined-bytecode-size=${MAX_INLINED_BYTECODE}`;
const INLINE_ALL = `--max-inlined-bytecode-size-cumulative=${MAX_INLINED_BYTECODE_CUMULATIVE}`;

test("the CLI sets V8's interrupt budget and inlining sizes unless node was given them", () => {
  assert.deepEqual(cliV8Flags([]), [BUDGET, INLINE, INLINE_ALL]);
  assert.deepEqual(cliV8Flags(["--enable-source-maps", "--max-old-space-size=512"]), [BUDGET, INLINE, INLINE_ALL]);
  assert.deepEqual(cliV8Flags(["--interrupt-budget=67584"]), [INLINE, INLINE_ALL]);
  assert.deepEqual(cliV8Flags(["--interrupt_budget=1000"]), [INLINE, INLINE_ALL]);
  assert.deepEqual(cliV8Flags(["--max_inlined_bytecode_size=460"]), [BUDGET, INLINE_ALL]);
  assert.deepEqual(cliV8Flags(["--max-inlined-bytecode-size-cumulative=920", "--interrupt-budget=1"]), [INLINE]);
  // A flag that only starts the same way is another flag.
  assert.deepEqual(cliV8Flags(["--interrupt-budget-for-feedback-allocation=940"]), [BUDGET, INLINE, INLINE_ALL]);
});

test("tuneV8 sets flags V8 accepts at run time, in a process of its own", () => {
  // A flag V8 did not know would only print a warning: setFlagsFromString must be silent and the process fine.
  const r = spawnSync(process.execPath, ["--import", "tsx", "-e", 'import("./src/main/v8-flags.ts").then((m) => process.stdout.write(JSON.stringify(m.tuneV8([]))))'], {
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [BUDGET, INLINE, INLINE_ALL]);
  assert.equal(r.stderr.trim(), "");
});
