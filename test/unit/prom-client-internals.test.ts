import { test } from "node:test";
import assert from "node:assert/strict";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { createMetrics } from "../../src/observe/metrics.js";
import {
  GAUGE_HASHMAP_SHAPE,
  PROM_CLIENT_VERSION,
  SERIES_HASHMAP_SHAPE,
  counterSeries,
  gaugeSeries,
  histogramBounds,
  histogramSeries,
  promClientProblem,
  seriesHash,
  setBucketExemplar,
} from "../../src/observe/prom-client-internals.js";

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

// The hot-path series updates (counterSeries / histogramSeries / observeSeries) against the real prom-client: each
// finds the series prom-client made, and createMetrics' counters and histograms (which use them) expose exactly what
// prom-client's public API exposes for the same calls.

test("seriesHash finds the series prom-client made, for counters and histograms, labelled or not", () => {
  const reg = new Registry();
  const c = new Counter({ name: "t_c", help: "test", labelNames: ["route", "method", "status"], registers: [reg] });
  c.inc({ status: 200, route: "/a", method: "POST" });
  const s = counterSeries(c, seriesHash(["method", "route", "status"], { route: "/a", method: "POST", status: 200 }));
  assert.equal(s?.value, 1, promClientProblem(SERIES_HASHMAP_SHAPE));
  assert.equal(counterSeries(c, seriesHash(["method", "route", "status"], { route: "/b", method: "POST", status: 200 })), undefined);
  const plain = new Counter({ name: "t_plain_c", help: "test", registers: [reg] });
  plain.inc();
  assert.equal(counterSeries(plain, seriesHash([], undefined))?.value, 1, promClientProblem(SERIES_HASHMAP_SHAPE));
  const h = new Histogram({ name: "t_h", help: "test", labelNames: ["service", "code"], buckets: [0.1, 1], registers: [reg] });
  h.observe({ service: "x", code: "OK" }, 0.5);
  assert.deepEqual(histogramBounds(h), [0.1, 1], promClientProblem(SERIES_HASHMAP_SHAPE));
  assert.equal(histogramBounds({ upperBounds: ["1"] } as unknown as Histogram), undefined);
  const hs = histogramSeries(h, seriesHash(["code", "service"], { service: "x", code: "OK" }));
  assert.deepEqual(hs && { sum: hs.sum, count: hs.count, buckets: { ...hs.bucketValues } }, { sum: 0.5, count: 1, buckets: { "0.1": 0, "1": 1 } }, promClientProblem(SERIES_HASHMAP_SHAPE));
  // A series prom-client dropped (reset) is not found: the next update goes the public way and makes it again.
  c.reset();
  assert.equal(counterSeries(c, seriesHash(["method", "route", "status"], { route: "/a", method: "POST", status: 200 })), undefined);
});

test("createMetrics' counters, gauges and histograms expose what prom-client's public API does for the same calls", async () => {
  const m = createMetrics({ processMetrics: false });
  const ref = new Registry();
  const names = ["route", "method", "status"] as const;
  const mc = m.counter("t_requests_total", "help c", names);
  const rc = new Counter({ name: "t_requests_total", help: "help c", labelNames: [...names], registers: [ref] });
  const mh = m.histogram("t_latency_seconds", "help h", ["service", "code"], { buckets: [0.001, 0.01, 0.1] });
  const rh = new Histogram({ name: "t_latency_seconds", help: "help h", labelNames: ["service", "code"], buckets: [0.001, 0.01, 0.1], registers: [ref] });
  const mp = m.counter("t_plain_total", "help p", []);
  const rp = new Counter({ name: "t_plain_total", help: "help p", registers: [ref] });
  const mg = m.gauge("t_open", "help g", ["transport"]);
  const rg = new Gauge({ name: "t_open", help: "help g", labelNames: ["transport"], registers: [ref] });
  const values = [0.0005, 0.001, 0.002, 0.01, 0.05, 0.1, 0.5, 3, 0];
  for (let i = 0; i < 40; i++) {
    const labels = { route: `/r${i % 3}`, method: i % 2 ? "GET" : "POST", status: i % 5 ? 200 : 404 };
    const n = i % 4;
    mc.inc(labels, n);
    rc.inc(labels, n);
    const hl = { service: `s${i % 2}`, code: i % 7 ? "OK" : "UNAVAILABLE" };
    mh.observe(hl, values[i % values.length]!);
    rh.observe(hl, values[i % values.length]!);
    mp.inc();
    rp.inc();
    const gl = { transport: i % 3 ? "websocket" : "sse" };
    if (i % 4 === 3) {
      mg.dec(gl, 2);
      rg.dec(gl, 2);
    } else if (i === 20) {
      mg.set(gl, 7);
      rg.set(gl, 7);
    } else {
      mg.inc(gl);
      rg.inc(gl);
    }
  }
  // What prom-client refuses is still refused (the first call of a series and every later one).
  assert.throws(() => mc.inc({ route: "/r0", method: "GET", status: 200 }, -1), /decrease/);
  assert.throws(() => mh.observe({ service: "s0", code: "OK" }, Number.POSITIVE_INFINITY), /not a valid number/);
  assert.equal(await m.registry.metrics(), await ref.metrics());
  // After a reset the series start again, as prom-client's own do.
  m.registry.resetMetrics();
  ref.resetMetrics();
  mc.inc({ route: "/r0", method: "GET", status: 200 });
  rc.inc({ route: "/r0", method: "GET", status: 200 });
  mc.inc({ route: "/r0", method: "GET", status: 200 });
  rc.inc({ route: "/r0", method: "GET", status: 200 });
  assert.equal(await m.registry.metrics(), await ref.metrics());
});

test("setBucketExemplar writes the bucket exemplar prom-client's histogram with exemplars keeps, and refuses one without", () => {
  const reg = new Registry();
  reg.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
  const h = new Histogram({ name: "t_hx", help: "test", labelNames: ["code"], buckets: [0.1, 1], enableExemplars: true, registers: [reg] });
  h.observe({ labels: { code: "OK" }, value: 0.5 } as never);
  const s = histogramSeries(h, seriesHash(["code"], { code: "OK" }));
  assert.ok(s?.bucketExemplars, promClientProblem("Histogram's bucketExemplars"));
  const labels = { trace_id: "ab".repeat(16), span_id: "cd".repeat(8) };
  assert.equal(setBucketExemplar(s, histogramBounds(h)!, 0.5, labels, 1_700_000_000_250), true);
  assert.equal(setBucketExemplar(s, histogramBounds(h)!, 7, labels, 1_700_000_000_500), true);
  assert.deepEqual(s.bucketExemplars["1"], { labelSet: labels, value: 0.5, timestamp: 1_700_000_000.25 });
  assert.equal(s.bucketExemplars["-1"]?.value, 7, "+Inf's exemplar under -1, as prom-client keeps it");
  const plain = new Histogram({ name: "t_hp", help: "test", labelNames: ["code"], buckets: [0.1, 1], registers: [new Registry()] });
  plain.observe({ code: "OK" }, 0.5);
  assert.equal(setBucketExemplar(histogramSeries(plain, seriesHash(["code"], { code: "OK" }))!, [0.1, 1], 0.5, labels, Date.now()), false);
});

test("every metric's series map is a V8 dictionary, whatever series come and go (checked in a node with natives syntax)", async () => {
  const { execFileSync } = await import("node:child_process");
  const { pathToFileURL } = await import("node:url");
  const metricsUrl = pathToFileURL(new URL("../../src/observe/metrics.ts", import.meta.url).pathname).href;
  // %HasFastProperties: the object's hidden class holds its keys (fast mode) or it keeps them in a hash table.
  const script = `
    const { createMetrics } = await import(${JSON.stringify(metricsUrl)});
    const m = createMetrics({});
    const c = m.counter("t_calls_total", "calls", ["service", "method"]);
    const h = m.histogram("t_latency_seconds", "latency", ["service"], { buckets: [0.001, 0.01] });
    const g = m.gauge("t_open", "open", ["service"]);
    const maps = () => Object.values(m.registry._metrics).filter((x) => x.name.startsWith("t_")).map((x) => x.hashMap);
    const fast = () => maps().filter((o) => %HasFastProperties(o)).length;
    const out = { metrics: maps().length, fastAtStart: fast() };
    const forget = m.beginWarmup();
    for (const s of ["a", "b", "hidden"]) { c.inc({ service: s, method: "M" }); h.observe({ service: s }, 0.002); g.inc({ service: s }); }
    forget("hidden");
    for (const s of ["c", "d"]) { c.inc({ service: s, method: "M" }); h.observe({ service: s }, 0.002); }
    out.fastAfter = fast();
    out.text = await m.registry.metrics();
    console.log(JSON.stringify(out));
  `;
  const res = JSON.parse(execFileSync(process.execPath, ["--allow-natives-syntax", "--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 30_000 }).trim().split("\n").pop()!) as {
    metrics: number;
    fastAtStart: number;
    fastAfter: number;
    text: string;
  };
  assert.equal(res.metrics, 3, "the registry holds the three metrics");
  assert.equal(res.fastAtStart, 0, "a series map in fast mode at creation");
  assert.equal(res.fastAfter, 0, "a series map in fast mode after a warm-up and new series");
  assert.match(res.text, /t_calls_total\{service="c",method="M"\} 1/);
  assert.doesNotMatch(res.text, /hidden/);
});
