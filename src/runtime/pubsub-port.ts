import type { CloudEvent } from "../shared/cloudevent.js";
import type { CancelSignal } from "../shared/signals.js";

/** A live upstream subscription to one topic. */
export interface UpstreamSubscription {
  /** Stop receiving; resolves when the upstream is released. Safe to call twice. */
  close(): Promise<void>;
}

/** Callbacks of one upstream subscription. */
export interface UpstreamHandlers {
  /**
   * One event of the topic. Called synchronously in arrival order; must not throw. `seq` is the event's position
   * number when the runtime has cluster-wide positions (`PubsubPort.positions`), else undefined.
   */
  onEvent(event: CloudEvent, seq?: number): void;
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
  publish(topic: string, event: CloudEvent, signal?: CancelSignal): Promise<void>;
  /** Subscribe to `topic`; resolves once the subscription is live (events published after that are delivered). */
  subscribe(topic: string, handlers: UpstreamHandlers, signal?: AbortSignal): Promise<UpstreamSubscription>;
  /**
   * Positions that mean the same in every gateway process sharing this runtime (the redis runtime: stream entry ids),
   * so a subscriber resumes exactly on any replica. Undefined when positions are per process (embedded, dapr).
   */
  readonly positions?: StreamPositions;
}

/** One event as the runtime still holds it, with its position number. */
export interface HeldEvent {
  seq: number;
  event: CloudEvent;
}

/**
 * Cluster-wide positions: one number per event, strictly increasing across every topic in publish order, the same in
 * every process. Every process hands events to `onEvent` in that order, across all its subscribed topics.
 */
export interface StreamPositions {
  /**
   * Every event of every subscribed topic with a number up to this one has been handed to its `onEvent`, and every
   * later one will be. It rises while no subscribed topic has events too (the runtime's own clock).
   */
  current(): number;
  /** The position text of a number (what clients see, e.g. a stream entry id `<ms>-<n>`). */
  format(seq: number): string;
  /** The number of a position text, or undefined when the text is not a position. */
  parse(text: string): number | undefined;
  /**
   * Events of `topic` with a number above `since` that the runtime still holds, oldest first, at most `limit`.
   * `complete` is true when they are every event after `since` (none was trimmed, at most `limit` follow).
   */
  history(topic: string, since: number, limit: number, signal?: AbortSignal): Promise<{ complete: boolean; events: HeldEvent[] }>;
}
