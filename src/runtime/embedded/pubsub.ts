import type { CloudEvent } from "../../shared/cloudevent.js";
import type { PubsubPort, UpstreamHandlers, UpstreamSubscription } from "../pubsub-port.js";

/** In-process pub/sub: at-most-once, delivered synchronously to the topic's current subscribers in publish order. */
export interface MemoryPubsub extends PubsubPort {
  /** Subscriptions open right now on `topic` (tests). */
  subscriberCount(topic: string): number;
  /** Drop every subscription. */
  close(): void;
}

export function createMemoryPubsub(): MemoryPubsub {
  const topics = new Map<string, Set<UpstreamHandlers>>();
  return {
    async publish(topic: string, event: CloudEvent): Promise<void> {
      const subs = topics.get(topic);
      if (!subs) return;
      for (const h of subs) {
        try {
          h.onEvent(event);
        } catch {
          // A subscriber's failure is its own; delivery to the others goes on (at-most-once).
        }
      }
    },
    async subscribe(topic: string, handlers: UpstreamHandlers): Promise<UpstreamSubscription> {
      let subs = topics.get(topic);
      if (!subs) topics.set(topic, (subs = new Set()));
      subs.add(handlers);
      return {
        async close() {
          const s = topics.get(topic);
          if (!s) return;
          s.delete(handlers);
          if (s.size === 0) topics.delete(topic);
        },
      };
    },
    subscriberCount: (topic) => topics.get(topic)?.size ?? 0,
    close: () => topics.clear(),
  };
}
