import { createBroker, type BrokerObserver, type SubscriberSink, type UpstreamSource } from "../../src/broker/index.js";
import { figure } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { timeTasks } from "../lib/tiny.js";

interface Counter {
  n: number;
}

function countingSink(c: Counter): SubscriberSink {
  return {
    write(bytes) {
      c.n += bytes.length > 0 ? 1 : 0;
      return true;
    },
    open() {},
    end() {},
  };
}

/**
 * A broker over an in-process upstream, with `subscribers` subscribers of topic "bench" (each with its own `sink()`),
 * every event encoded to the same 300-byte buffer: `emit` hands it one event, `close` ends it all.
 */
export async function benchBroker(
  subscribers: number,
  sink: () => SubscriberSink,
  observer?: BrokerObserver,
): Promise<{ emit: (e: number) => void; close: () => Promise<void> }> {
  let emit: ((e: number) => void) | undefined;
  const upstream: UpstreamSource<number> = {
    subscribe(_topic, onEvent) {
      emit = onEvent;
      return Promise.resolve({ close: () => Promise.resolve() });
    },
  };
  const bytes = Buffer.alloc(300, 1);
  const broker = createBroker<number>({ upstream, encode: () => bytes, lingerMs: 10, sweepIntervalMs: 60_000, ...(observer ? { observer } : {}) });
  const subs = await Promise.all(Array.from({ length: subscribers }, () => broker.subscribe(["bench"], sink())));
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
 * The broker's per-event fan-out cost with `subscribers` live in-process subscribers on one topic whose sinks always
 * accept: one upstream event in, `subscribers` writes out. The encoder returns a fixed buffer so only the fan-out is
 * timed. Baseline: a bare loop handing the same buffer to the same number of sinks (no broker).
 */
async function fanoutAt(mode: RunMode, subscribers: number): Promise<Figure> {
  const viaBroker: Counter = { n: 0 };
  const b = await benchBroker(subscribers, () => countingSink(viaBroker));
  const bytes = Buffer.alloc(300, 1);
  const raw: Counter = { n: 0 };
  const sinks = Array.from({ length: subscribers }, () => countingSink(raw));
  const send = b.emit;
  // Enough events per timed call that one sample is well above the timer's resolution.
  const reps = Math.ceil(10_000 / subscribers);
  let seq = 0;
  const t = await timeTasks(mode, {
    broker() {
      for (let r = 0; r < reps; r++) send(seq++);
    },
    loop() {
      for (let r = 0; r < reps; r++) for (let i = 0; i < sinks.length; i++) sinks[i]!.write(bytes);
    },
  });
  const expected = seq * subscribers;
  if (viaBroker.n !== expected) throw new Error(`broker delivered ${viaBroker.n} of ${expected} events`);
  await b.close();
  return figure(`broker-fanout-${subscribers}`, `Broker fan-out of one event to ${subscribers.toLocaleString("en-US")} subscriber(s), per delivery`, t["broker"]!.meanNs / reps / subscribers, {
    unit: "ns",
    baseline: { label: "bare loop over the same sinks", value: t["loop"]!.meanNs / reps / subscribers },
    note: `${(t["broker"]!.meanNs / reps / 1000).toFixed(2)} us per event`,
  });
}

/** Broker fan-out at 1, 100 and 10,000 subscribers. */
export async function brokerFanoutFigures(mode: RunMode, onStep: (what: string) => void): Promise<Figure[]> {
  const out: Figure[] = [];
  for (const n of [1, 100, 10_000]) {
    onStep(`broker fan-out to ${n} subscriber(s)`);
    out.push(await fanoutAt(mode, n));
  }
  return out;
}
