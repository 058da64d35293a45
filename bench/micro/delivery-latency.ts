import { createBroker, type BrokerObserver, type SubscriberSink, type UpstreamSource } from "../../src/broker/index.js";
import { createDeliveryLatency } from "../../src/observe/delivery-latency.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { preciseEpochMs } from "../../src/shared/timers.js";
import { figure } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { timeTasks } from "../lib/tiny.js";

const sink: SubscriberSink = { write: () => true, open() {}, end() {} };

/** A broker over an in-process upstream with `subscribers` always-writable subscribers; `emit` sends one event. */
async function brokerWith(subscribers: number, observer: BrokerObserver): Promise<{ emit: (e: number) => void; close: () => Promise<void> }> {
  let emit: ((e: number) => void) | undefined;
  const upstream: UpstreamSource<number> = {
    subscribe(_topic, onEvent) {
      emit = onEvent;
      return Promise.resolve({ close: () => Promise.resolve() });
    },
  };
  const bytes = Buffer.alloc(300, 1);
  const broker = createBroker<number>({ upstream, encode: () => bytes, lingerMs: 10, sweepIntervalMs: 60_000, observer });
  const subs = await Promise.all(Array.from({ length: subscribers }, () => broker.subscribe(["bench"], sink)));
  if (!emit) throw new Error("the broker never subscribed upstream");
  return {
    emit,
    close: async () => {
      for (const s of subs) s.close();
      await broker.close();
    },
  };
}

/**
 * What the delivery latency histogram costs one event's fan-out to `subscribers` gRPC subscribers: the broker with the
 * pub/sub facility's counters only, against the same plus the latency observation (one clock read and one histogram
 * observe per event per outlet, whatever the subscriber count). The broker's receipt stamp is taken either way; its
 * cost is the `stamp` figure.
 */
async function costAt(mode: RunMode, subscribers: number): Promise<Figure> {
  const metrics = createMetrics({ processMetrics: false });
  const received = metrics.counter("bench_received_total", "events", []);
  const delivered = metrics.counter("bench_delivered_total", "deliveries", []);
  const latency = createDeliveryLatency(metrics, false);
  const counting = await brokerWith(subscribers, {
    fannedOut(_t, n) {
      received.inc();
      if (n > 0) delivered.inc({}, n);
    },
  });
  const timed = await brokerWith(subscribers, {
    fannedOut(_t, n, at, ex) {
      received.inc();
      if (n === 0) return;
      delivered.inc({}, n);
      latency.observe("grpc", at, ex);
    },
  });
  const reps = Math.ceil(10_000 / subscribers);
  let seq = 0;
  const t = await timeTasks(mode, {
    counting() {
      for (let r = 0; r < reps; r++) counting.emit(seq++);
    },
    timed() {
      for (let r = 0; r < reps; r++) timed.emit(seq++);
    },
  });
  await counting.close();
  await timed.close();
  await metrics.close();
  const perEvent = (name: string): number => t[name]!.meanNs / reps;
  const extra = perEvent("timed") - perEvent("counting");
  return figure(`delivery-latency-${subscribers}`, `Delivery latency observation, per event fanned out to ${subscribers.toLocaleString("en-US")} gRPC subscriber(s)`, extra, {
    unit: "ns",
    baseline: { label: "the event's fan-out with counters only", value: perEvent("counting") },
    note: `${((100 * extra) / perEvent("counting")).toFixed(1)}% of the fan-out`,
  });
}

/** One receipt stamp (`preciseEpochMs`), the broker takes per event. */
async function stampCost(mode: RunMode): Promise<Figure> {
  // Summed and checked, so the reads are not optimized away.
  let total = 0;
  const t = await timeTasks(mode, {
    stamp() {
      for (let i = 0; i < 10_000; i++) total += preciseEpochMs();
    },
    loop() {
      for (let i = 0; i < 10_000; i++) total += i;
    },
  });
  if (total === 0) throw new Error("the loops never ran");
  return figure("delivery-latency-stamp", "The broker's receipt stamp of one event (performance.timeOrigin + performance.now())", t["stamp"]!.meanNs / 10_000, {
    unit: "ns",
    baseline: { label: "bare loop", value: t["loop"]!.meanNs / 10_000 },
  });
}

/** The delivery latency histogram's cost at 1, 100 and 10,000 subscribers, and the receipt stamp's. */
export async function deliveryLatencyFigures(mode: RunMode, onStep: (what: string) => void): Promise<Figure[]> {
  onStep("delivery latency: the receipt stamp");
  const out: Figure[] = [await stampCost(mode)];
  for (const n of [1, 100, 10_000]) {
    onStep(`delivery latency at ${n} subscriber(s)`);
    out.push(await costAt(mode, n));
  }
  return out;
}
