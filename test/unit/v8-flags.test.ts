import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { INTERRUPT_BUDGET, cliV8Flags } from "../../src/main/v8-flags.js";

test("the CLI lowers V8's interrupt budget unless node was given one", () => {
  assert.deepEqual(cliV8Flags([]), [`--interrupt-budget=${INTERRUPT_BUDGET}`]);
  assert.deepEqual(cliV8Flags(["--enable-source-maps", "--max-old-space-size=512"]), [`--interrupt-budget=${INTERRUPT_BUDGET}`]);
  assert.deepEqual(cliV8Flags(["--interrupt-budget=67584"]), []);
  assert.deepEqual(cliV8Flags(["--interrupt_budget=1000"]), []);
  // A flag that only starts the same way is not the budget.
  assert.deepEqual(cliV8Flags(["--interrupt-budget-for-feedback-allocation=940"]), [`--interrupt-budget=${INTERRUPT_BUDGET}`]);
});

test("tuneV8 sets a flag V8 accepts at run time, in a process of its own", () => {
  // A flag V8 did not know would only print a warning: setFlagsFromString must be silent and the process fine.
  const r = spawnSync(process.execPath, ["--import", "tsx", "-e", 'import("./src/main/v8-flags.ts").then((m) => process.stdout.write(JSON.stringify(m.tuneV8([]))))'], {
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), [`--interrupt-budget=${INTERRUPT_BUDGET}`]);
  assert.equal(r.stderr.trim(), "");
});
