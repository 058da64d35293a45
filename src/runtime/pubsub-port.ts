import type { CloudEvent } from "../shared/cloudevent.js";

/** A live upstream subscription to one topic. */
export interface UpstreamSubscription {
  /** Stop receiving; resolves when the upstream is released. Safe to call twice. */
  close(): Promise<void>;
}

/** Callbacks of one upstream subscription. */
export interface UpstreamHandlers {
  /** One event of the topic. Called synchronously in arrival order; must not throw. */
  onEvent(event: CloudEvent): void;
  /**
   * The upstream broke and could not be restored (adapters reconnect on their own first). Optional: the
   * subscription is dead after this call.
   */
  onError?(error: Error): void;
}

/**
 * The sidecar's pub/sub, on the gateway-wide component name the runtime was created with.
 * Delivery is at-most-once. One upstream subscription per topic per process is the broker's job, not the port's.
 */
export interface PubsubPort {
  /** Publish one event; rejects with a GatewayError (UNAVAILABLE when the sidecar is down). */
  publish(topic: string, event: CloudEvent, signal?: AbortSignal): Promise<void>;
  /** Subscribe to `topic`; resolves once the subscription is live (events published after that are delivered). */
  subscribe(topic: string, handlers: UpstreamHandlers, signal?: AbortSignal): Promise<UpstreamSubscription>;
}
