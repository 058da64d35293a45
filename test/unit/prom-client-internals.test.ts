import { test } from "node:test";
import assert from "node:assert/strict";
import { Gauge, Registry } from "prom-client";
import { GAUGE_HASHMAP_SHAPE, PROM_CLIENT_VERSION, gaugeSeries, promClientProblem } from "../../src/main/prom-client-internals.js";

// gaugeSeries against the real prom-client: fails with "prom-client <version> changed ..." when an upgrade changes it.

test("gaugeSeries reads every labelled series of a real prom-client Gauge, synchronously after inc/dec/set", async () => {
  assert.match(PROM_CLIENT_VERSION, /^\d+\.\d+\.\d+/);
  const g = new Gauge({ name: "t_gauge", help: "test", labelNames: ["k"], registers: [new Registry()] });
  g.inc({ k: "a" }, 3);
  g.dec({ k: "a" });
  g.set({ k: "b" }, 7);
  const series = gaugeSeries(g);
  assert.ok(series, promClientProblem(GAUGE_HASHMAP_SHAPE));
  const byLabel = Object.fromEntries(series.map((s) => [s.labels["k"], s.value]));
  assert.deepEqual(byLabel, { a: 2, b: 7 }, promClientProblem(GAUGE_HASHMAP_SHAPE));
  // The same values prom-client's public (async) API reports.
  const pub = await g.get();
  assert.deepEqual(Object.fromEntries(pub.values.map((v) => [v.labels["k"], v.value])), byLabel);
});

test("gaugeSeries of an unlabelled gauge has its one series", () => {
  const g = new Gauge({ name: "t_plain", help: "test", registers: [new Registry()] });
  g.set(5);
  assert.deepEqual(gaugeSeries(g), [{ value: 5, labels: {} }], promClientProblem(GAUGE_HASHMAP_SHAPE));
});

test("gaugeSeries is undefined for an object without prom-client's shape", () => {
  assert.equal(gaugeSeries({} as Gauge), undefined);
  assert.equal(gaugeSeries({ hashMap: { x: { value: "1" } } } as unknown as Gauge), undefined);
});
