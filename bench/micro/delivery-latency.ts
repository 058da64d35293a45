import type { SubscriberSink } from "../../src/broker/index.js";
import { createDeliveryLatency } from "../../src/observe/delivery-latency.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { preciseEpochMs } from "../../src/shared/timers.js";
import { figure } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { timeTasks } from "../lib/tiny.js";
import { benchBroker } from "./broker-fanout.js";

const sink: SubscriberSink = { write: () => true, open() {}, end() {} };

/**
 * The broker's fan-out of one event to `subscribers` gRPC subscribers with the pub/sub facility's counters (the
 * broker's own receipt stamp included), per event.
 */
async function fanoutPerEvent(mode: RunMode, subscribers: number): Promise<number> {
  const metrics = createMetrics({ processMetrics: false });
  const received = metrics.counter("bench_received_total", "events", []);
  const delivered = metrics.counter("bench_delivered_total", "deliveries", []);
  const b = await benchBroker(subscribers, () => sink, {
    fannedOut(_t, n) {
      received.inc();
      if (n > 0) delivered.inc({}, n);
    },
  });
  const reps = Math.ceil(10_000 / subscribers);
  let seq = 0;
  const t = await timeTasks(mode, {
    fanout() {
      for (let r = 0; r < reps; r++) b.emit(seq++);
    },
  });
  await b.close();
  await metrics.close();
  return t["fanout"]!.meanNs / reps;
}

/**
 * What one outlet's observation costs (`DeliveryLatency.observe`: a clock read and one histogram observe) and the
 * broker's receipt stamp, timed apart; then the two together against a whole event's fan-out at 1, 100 and 10,000
 * subscribers. Timed apart rather than as the difference of two fan-outs, which at 10,000 subscribers is lost in noise.
 */
async function costs(mode: RunMode, onStep: (what: string) => void): Promise<Figure[]> {
  onStep("delivery latency: the receipt stamp and one observation");
  const metrics = createMetrics({ processMetrics: false });
  const latency = createDeliveryLatency(metrics, false);
  const at = preciseEpochMs();
  // Summed and checked, so the clock reads are not optimized away.
  let total = 0;
  const t = await timeTasks(mode, {
    stamp() {
      for (let i = 0; i < 10_000; i++) total += preciseEpochMs();
    },
    observe() {
      for (let i = 0; i < 10_000; i++) latency.observe("grpc", at, undefined);
    },
    loop() {
      for (let i = 0; i < 10_000; i++) total += i;
    },
  });
  if (total === 0) throw new Error("the loops never ran");
  await metrics.close();
  const stamp = t["stamp"]!.meanNs / 10_000;
  const observe = t["observe"]!.meanNs / 10_000;
  const loop = { label: "bare loop", value: t["loop"]!.meanNs / 10_000 };
  const out = [
    figure("delivery-latency-stamp", "The broker's receipt stamp of one event (timeOrigin + performance.now())", stamp, { unit: "ns", baseline: loop }),
    figure("delivery-latency-observe", "One outlet's delivery latency observation (a clock read and one histogram observe)", observe, { unit: "ns", baseline: loop }),
  ];
  for (const n of [1, 100, 10_000]) {
    onStep(`delivery latency against a fan-out to ${n} subscriber(s)`);
    const fanout = await fanoutPerEvent(mode, n);
    out.push(
      figure(`delivery-latency-${n}`, `Delivery latency (stamp and one observation) per event fanned out to ${n.toLocaleString("en-US")} gRPC subscriber(s)`, stamp + observe, {
        unit: "ns",
        baseline: { label: "the event's in-process fan-out to sinks that only count", value: fanout },
        note: `${((100 * (stamp + observe)) / fanout).toFixed(2)}% of the in-process fan-out; a real stream write costs microseconds more per subscriber`,
      }),
    );
  }
  return out;
}

/** The delivery latency histogram's cost: the receipt stamp, one observation, and both against fan-outs of 1 to 10,000. */
export async function deliveryLatencyFigures(mode: RunMode, onStep: (what: string) => void): Promise<Figure[]> {
  return costs(mode, onStep);
}
