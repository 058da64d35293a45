import { preciseEpochMs } from "../shared/timers.js";
import type { ExemplarIds, Metrics } from "./metrics.js";

/** The subscriber transports the delivery latency is labelled with. */
export type DeliveryTransport = "grpc" | "websocket" | "sse";

/** The pub/sub delivery latency histogram of one thread's registry. */
export interface DeliveryLatency {
  /**
   * An outlet of `transport` has just handed one event to every one of its subscribers of the event's topic: record
   * the time since the broker received it (`receivedAt`, `preciseEpochMs`; nothing when unknown). `exemplar`: the ids
   * of the event's sampled fan-out span. Called once per event per outlet, never per subscriber.
   */
  observe(transport: DeliveryTransport, receivedAt: number | undefined, exemplar: ExemplarIds | undefined): void;
  /** The same for a batch of events written together, all at one instant (one clock read for the batch). */
  observeAll(transport: DeliveryTransport, events: ReadonlyArray<{ readonly receivedAt?: number | undefined; readonly exemplar?: ExemplarIds | undefined }>): void;
}

/** The metric's name (the Grafana dashboard and docs/observability.md name it). */
export const DELIVERY_LATENCY_METRIC = "platform_pubsub_delivery_latency_seconds";

/**
 * Create `platform_pubsub_delivery_latency_seconds` on `metrics` (once per registry: the main thread's pub/sub facility
 * and each uWS worker thread's web side). `exemplars`: tracing is on, so each bucket keeps the ids of its latest
 * sampled fan-out span. The gateway cannot see a subscriber's receipt; what it measures is its own part of the path,
 * from the event's arrival from the runtime in this process (for an event published through this gateway, the
 * runtime's delivery back to it comes first) to the moment the outlet wrote it to its subscribers' connections (or
 * their bounded queues, for one that is blocked) — on a uWS worker thread, after the hop from the main thread.
 */
export function createDeliveryLatency(metrics: Metrics, exemplars: boolean): DeliveryLatency {
  const h = metrics.histogram(
    DELIVERY_LATENCY_METRIC,
    "Pub/sub delivery latency in seconds, by subscriber transport (grpc, websocket, sse): from when the gateway received an event from the runtime to when an outlet had written it to all its subscribers' connections (once per event per outlet)",
    ["transport"],
    { exemplars },
  );
  const labels = { grpc: { transport: "grpc" }, websocket: { transport: "websocket" }, sse: { transport: "sse" } } as const;
  // Threads' clocks differ by a fraction of a millisecond at most: a negative difference is a zero latency.
  const seconds = (now: number, at: number): number => (now > at ? (now - at) / 1000 : 0);
  return {
    observe(transport, receivedAt, exemplar) {
      if (receivedAt === undefined) return;
      h.observe(labels[transport], seconds(preciseEpochMs(), receivedAt), exemplar);
    },
    observeAll(transport, events) {
      if (events.length === 0) return;
      const now = preciseEpochMs();
      for (const e of events) if (e.receivedAt !== undefined) h.observe(labels[transport], seconds(now, e.receivedAt), e.exemplar);
    },
  };
}
