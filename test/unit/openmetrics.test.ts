import { test } from "node:test";
import assert from "node:assert/strict";
import { AggregatorRegistry, Histogram, Registry, type OpenMetricsContentType } from "prom-client";
import { createMetrics } from "../../src/observe/metrics.js";
import { openMetricsText, restoreExemplars, wantsOpenMetrics, type MetricFamily } from "../../src/observe/openmetrics.js";
import { parseOpenMetrics } from "../support/openmetrics.js";

const IDS = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };

test("wantsOpenMetrics: Prometheus' scrape Accept and a bare media type yes; q=0, text/plain, */* and none no", () => {
  assert.equal(wantsOpenMetrics("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"), true);
  assert.equal(wantsOpenMetrics("Application/OpenMetrics-Text"), true);
  assert.equal(wantsOpenMetrics("text/plain, application/openmetrics-text; q=0.2"), true);
  for (const no of [undefined, "", "*/*", "text/plain;version=0.0.4", "application/openmetrics-text;q=0", "application/openmetrics-textx"]) assert.equal(wantsOpenMetrics(no), false, String(no));
});

test("a histogram with exemplars: the OpenMetrics text carries the trace ids on the bucket of the value, and parses against the ABNF", async () => {
  const m = createMetrics({ processMetrics: false });
  const h = m.histogram("t_latency_seconds", "Latency \\ of \"calls\"\nin seconds", ["service"], { buckets: [0.01, 0.1], exemplars: true });
  const c = m.counter("t_calls_total", "Calls", ["service"]);
  const g = m.gauge("t_open", "Open things", ["kind"]);
  h.observe({ service: 'a"b\\c\nd' }, 0.05, IDS);
  h.observe({ service: 'a"b\\c\nd' }, 0.005);
  h.observe({ service: "x" }, 7, { traceId: "ab".repeat(16), spanId: "cd".repeat(8) });
  c.inc({ service: "x" }, 3);
  g.set({ kind: "ws" }, 2);
  const text = openMetricsText(await m.registry.getMetricsAsJSON());
  const families = parseOpenMetrics(text);
  assert.deepEqual(families.map((f) => [f.name, f.type]), [["t_latency_seconds", "histogram"], ["t_calls", "counter"], ["t_open", "gauge"]]);
  assert.equal(families[0]!.help, 'Latency \\\\ of \\"calls\\"\\nin seconds');
  const buckets = families[0]!.samples.filter((s) => s.name === "t_latency_seconds_bucket" && s.labels["service"] === 'a"b\\c\nd');
  assert.deepEqual(buckets.map((b) => [b.labels["le"], b.value, b.exemplar?.labels, b.exemplar?.value]), [
    ["0.01", 1, undefined, undefined],
    ["0.1", 2, { trace_id: IDS.traceId, span_id: IDS.spanId }, 0.05],
    ["+Inf", 2, undefined, undefined],
  ]);
  const inf = families[0]!.samples.find((s) => s.name === "t_latency_seconds_bucket" && s.labels["service"] === "x" && s.labels["le"] === "+Inf");
  assert.equal(inf?.exemplar?.labels["trace_id"], "ab".repeat(16), "a value above every bound keeps its exemplar on +Inf");
  assert.deepEqual(families[1]!.samples.map((s) => [s.name, s.value]), [["t_calls_total", 3]]);
  // The plain text of the same registry: unchanged by exemplars (prom-client prints them only in OpenMetrics mode).
  const plain = await m.registry.metrics();
  assert.doesNotMatch(plain, /trace_id|# EOF/);
  assert.match(plain, /^t_calls_total\{service="x"\} 3$/m);
});

test("an exemplar written on the hot path is the one prom-client's own observe would record", async () => {
  const m = createMetrics({ processMetrics: false });
  const mine = m.histogram("t_h", "h", ["code"], { buckets: [0.1, 1], exemplars: true });
  const ref = new Registry<OpenMetricsContentType>();
  ref.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  const theirs = new Histogram({ name: "t_h", help: "h", labelNames: ["code"], buckets: [0.1, 1], enableExemplars: true, registers: [ref] });
  const labelSet = { trace_id: IDS.traceId, span_id: IDS.spanId };
  for (const v of [0.05, 0.5, 0.07, 3]) {
    mine.observe({ code: "OK" }, v, IDS);
    theirs.observe({ labels: { code: "OK" }, value: v, exemplarLabels: labelSet as never });
  }
  const strip = (values: MetricFamily["values"]): unknown =>
    values.map((v) => {
      const ex = (v as { exemplar?: { labelSet: unknown; value: number } | null }).exemplar;
      return { ...v, exemplar: ex ? { labelSet: ex.labelSet, value: ex.value } : null };
    });
  const [a] = await m.registry.getMetricsAsJSON();
  const [b] = await ref.getMetricsAsJSON();
  assert.deepEqual(strip(a!.values), strip(b!.values));
});

test("restoreExemplars: the aggregated histogram gets, per bucket, the newest exemplar any thread held", async () => {
  const threads = [0, 1].map(() => createMetrics({ processMetrics: false }));
  const hs = threads.map((t) => t.histogram("t_h", "h", ["code"], { buckets: [0.1, 1], exemplars: true }));
  hs[0]!.observe({ code: "OK" }, 0.05, { traceId: "11".repeat(16), spanId: "11".repeat(8) });
  await new Promise((r) => setTimeout(r, 5));
  hs[1]!.observe({ code: "OK" }, 0.06, { traceId: "22".repeat(16), spanId: "22".repeat(8) });
  hs[0]!.observe({ code: "OK" }, 0.5, { traceId: "33".repeat(16), spanId: "33".repeat(8) });
  // What the main thread receives over the bridge: structured clones (Exemplar instances become plain objects).
  const inputs = await Promise.all(threads.map(async (t) => structuredClone(await t.registry.getMetricsAsJSON())));
  const agg = await AggregatorRegistry.aggregate(inputs as never).getMetricsAsJSON();
  assert.ok(agg[0]!.values.every((v) => !(v as { exemplar?: unknown }).exemplar), "prom-client's aggregation drops exemplars");
  restoreExemplars(agg, inputs);
  const om = parseOpenMetrics(openMetricsText(agg))[0]!;
  const byLe = Object.fromEntries(om.samples.filter((s) => s.name === "t_h_bucket").map((s) => [s.labels["le"], [s.value, s.exemplar?.labels["trace_id"]]]));
  assert.deepEqual(byLe, { "0.1": [2, "22".repeat(16)], "1": [3, "33".repeat(16)], "+Inf": [3, undefined] });
});

test("the test reader refuses what OpenMetrics forbids", () => {
  const ok = '# TYPE a histogram\n# HELP a h\na_bucket{le="1"} 1 # {trace_id="x"} 0.5 1.5\na_bucket{le="+Inf"} 1\na_sum 0.5\na_count 1\n# EOF\n';
  assert.equal(parseOpenMetrics(ok)[0]!.samples[0]!.exemplar?.value, 0.5);
  const bad: Array<[string, RegExp]> = [
    [ok.replace("# EOF\n", ""), /EOF/],
    [ok.replace('{trace_id="x"}', `{trace_id="${"x".repeat(130)}"}`), /128/],
    [ok.replace("a_sum 0.5", "a_sum 0.5 # {t=\"x\"} 1"), /exemplar on a_sum/],
    [ok.replace('a_bucket{le="+Inf"} 1\n', ""), /\+Inf/],
    [ok.replace("a_count 1", "b_count 1"), /not part of family/],
    [ok.replace("# HELP a h\n", "# HELP a h\n\n"), /empty lines/],
    [ok.replace('{trace_id="x"} 0.5', '{trace_id="x"} fast'), /not an OpenMetrics number/],
  ];
  for (const [text, why] of bad) assert.throws(() => parseOpenMetrics(text), why, text);
});
