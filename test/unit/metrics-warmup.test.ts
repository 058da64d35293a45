import { test } from "node:test";
import assert from "node:assert/strict";
import { createMetrics } from "../../src/observe/metrics.js";

/** The exposition lines of `metrics` that start with `prefix` (no help or type lines). */
async function lines(m: ReturnType<typeof createMetrics>, prefix: string): Promise<string[]> {
  return (await m.registry.metrics()).split("\n").filter((l) => l.startsWith(prefix));
}

test("a warm-up's recording is forgotten: counters and histograms get back their values of before in the same series objects, gauges lose the hidden backend's", async () => {
  const m = createMetrics({ processMetrics: false });
  const calls = m.counter("t_calls_total", "calls", ["service", "code"]);
  const plain = m.counter("t_plain_total", "a counter without labels", []);
  const latency = m.histogram("t_latency_seconds", "latency", ["service"], { buckets: [0.1, 1] });
  const open = m.gauge("t_open", "open connections", ["service"]);
  calls.inc({ service: "orders", code: "OK" }, 2);
  latency.observe({ service: "orders" }, 0.05);
  open.set({ service: "orders" }, 3);
  const before = await lines(m, "t_");
  const hashMap = (metric: object): Record<string, object> => (metric as { hashMap: Record<string, object> }).hashMap;
  const promCalls = m.registry.getSingleMetric("t_calls_total")!;
  const ordersSeries = hashMap(promCalls)['code:OK,service:orders,'];
  assert.ok(ordersSeries);

  const forget = m.beginWarmup();
  calls.inc({ service: "orders", code: "OK" });
  calls.inc({ service: "warmup-echo", code: "OK" }, 5);
  calls.inc({ service: "orders", code: "UNAVAILABLE" });
  plain.inc();
  latency.observe({ service: "orders" }, 0.5);
  latency.observe({ service: "warmup-echo" }, 0.5);
  open.set({ service: "warmup-echo" }, 1);
  const madeDuring = m.counter("t_late_total", "a counter made during the warm-up", ["code"]);
  madeDuring.inc({ code: "OK" });
  assert.ok((await lines(m, "t_calls_total")).some((l) => l.includes("warmup-echo")), "recorded as ever meanwhile");
  forget("warmup-echo");

  // A series the warm-up made for another backend's labels stays, at zero: hot code compiled against it stays valid.
  assert.deepEqual(await lines(m, "t_"), [...before.slice(0, 1), 't_calls_total{service="orders",code="UNAVAILABLE"} 0', ...before.slice(1)]);
  assert.equal(hashMap(promCalls)['code:OK,service:orders,'], ordersSeries, "the same series object");
  // Recording goes on from there, through the same series.
  calls.inc({ service: "orders", code: "OK" });
  latency.observe({ service: "orders" }, 2);
  assert.ok((await lines(m, "t_calls_total")).includes('t_calls_total{service="orders",code="OK"} 3'));
  assert.ok((await lines(m, "t_latency_seconds_count")).includes('t_latency_seconds_count{service="orders"} 2'));
  assert.ok((await lines(m, "t_latency_seconds_bucket")).includes('t_latency_seconds_bucket{le="+Inf",service="orders"} 2'));
});
