import { AggregatorRegistry } from "prom-client";
import { GatewayError } from "../shared/gateway-error.js";
import type { HealthEntry } from "../observe/health.js";
import type { Metrics } from "../observe/metrics.js";
import { openMetricsText, restoreExemplars, type MetricFamily } from "../observe/openmetrics.js";
import type { Bridge } from "./bridge.js";

/** A thread as health and metrics see it. */
export interface ObservedThread {
  readonly index: number;
  readonly bridge: Bridge;
}

/**
 * Health of the threads: `uws-threads` (how many of `count` serve; Degraded while one is restarting) and one
 * `uws-thread-<n>` entry per running thread with its web subscribers (asked of the thread; a thread that does not
 * answer says so).
 */
export async function threadsHealth(running: readonly ObservedThread[], count: number, port: number): Promise<Record<string, HealthEntry>> {
  const entries: Record<string, HealthEntry> = {
    "uws-threads": {
      status: running.length === count ? "Healthy" : running.length > 0 ? "Degraded" : "Unhealthy",
      description: `${running.length} of ${count} uWS worker threads serving HTTP on port ${port}`,
    },
  };
  await Promise.all(
    running.map(async (s) => {
      const d = await s.bridge.call<string>("stats", {}).catch((e: unknown) => `no answer: ${GatewayError.from(e).rawMessage}`);
      entries[`uws-thread-${s.index}`] = { status: "Healthy", description: d };
    }),
  );
  return entries;
}

/**
 * The Prometheus text of the main registry and every running thread's, summed per series (prom-client's cluster
 * aggregation: each metric's help once, counters and histograms summed per label set, gauges summed). A thread that
 * does not answer is left out. `openMetrics`: the OpenMetrics text instead, each histogram bucket with the newest
 * exemplar any thread holds for it (the aggregation drops them; openmetrics.ts puts them back).
 */
export async function threadsMetrics(metrics: Metrics, running: readonly ObservedThread[], openMetrics = false): Promise<string> {
  const main = await metrics.registry.getMetricsAsJSON();
  const threads = await Promise.all(running.map((s) => s.bridge.call<MetricFamily[]>("metrics", {}).catch(() => undefined)));
  const inputs = [main, ...threads.filter((t) => t !== undefined)];
  const agg = AggregatorRegistry.aggregate(inputs as never);
  if (openMetrics) {
    const families = await agg.getMetricsAsJSON();
    restoreExemplars(families, inputs);
    // Series the aggregator leaves out (see below) are the main thread's own.
    for (const m of main) if (!agg.getSingleMetric(m.name)) families.push(m);
    return openMetricsText(families);
  }
  let text = await agg.metrics();
  // Series the aggregator leaves out (e.g. process_start_time_seconds, 'omit' for a cluster) are the main thread's own.
  for (const m of main) if (!agg.getSingleMetric(m.name)) text += (await metrics.registry.getSingleMetricAsString(m.name)) + "\n";
  return text;
}
