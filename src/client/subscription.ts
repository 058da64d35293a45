import { EventEmitter } from "node:events";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { onAbort } from "../shared/signals.js";
import type { CloudEvent as ProtoCloudEvent } from "../shared/cloudevent.js";
import { FATAL_SUBSCRIBE_CODES, GatewayClientError, toClientError } from "./errors.js";
import { backoffDelay, type ResolvedReconnectOptions } from "./options.js";
import type { Transport } from "./transport.js";
import type { SubscriptionMessage } from "./types.js";

/** Told before each reconnect attempt. */
export interface ReconnectingInfo {
  /** 1 for the first attempt after a termination, counting up until a stream is live again. */
  attempt: number;
  /** How long the client waits before this attempt, ms. */
  delayMs: number;
  /** Why the previous stream ended. */
  error: GatewayClientError;
}

/** Told when a stream is live (response headers received). */
export interface LiveInfo {
  /** The stream's `x-subscription-id` response header, when the gateway sent one. */
  subscriptionId: string | undefined;
  /** True when this stream replaced one that ended (a reconnect). */
  reconnected: boolean;
  /** With positions: the stream's `x-position` header (the position it went live at). */
  position?: string;
  /** On a resume (`since`, or a reconnect with positions): the `x-recovered` header, true when nothing was missed. */
  recovered?: boolean;
}

/** Codes that end a subscription instead of reconnecting (one definition, shared with `subscribeWeb`). */
export { FATAL_SUBSCRIBE_CODES };

/** Options of `subscribe()`. */
export interface SubscribeOptions {
  /** Aborting ends the subscription (like `close()`); the iterator then finishes normally. */
  signal?: AbortSignal;
  /** Called before each reconnect attempt (also emitted as the `"reconnecting"` event). */
  onReconnecting?: (info: ReconnectingInfo) => void;
  /** Called when a replacement stream is live (also emitted as `"reconnected"`). */
  onReconnected?: (info: LiveInfo) => void;
  /** Handler form only: called when the handler throws or rejects; the subscription goes on. Default: ignore. */
  onHandlerError?: (error: unknown, message: SubscriptionMessage) => void;
  /** Messages buffered in the client before the stream is paused (flow control). Default 256. */
  highWaterMark?: number;
  /** How long `unsubscribe()` waits for the gateway to end the stream before cancelling it, ms. Default 2000. */
  unsubscribeTimeoutMs?: number;
  /**
   * Ask for positions: each message carries `position`, and every reconnect resumes from the last position seen
   * (`last-event-id`), so nothing in the gap is lost while the gateway still holds it (`LiveInfo.recovered`).
   */
  positions?: boolean;
  /** Resume from this position (a message's `position`, or `subscription.position` saved earlier); implies `positions`. */
  since?: string;
}

/** Internals the client passes in. */
export interface SubscriptionDeps {
  transport: Transport;
  reconnect: ResolvedReconnectOptions;
}

/**
 * A queue entry that is not a message: where a stream went live (with no resume, or one that missed events), queued
 * behind the messages received before it so `position` reaches it only once they were handed over.
 */
class PositionMark {
  constructor(readonly position: string) {}
}

interface SubscribeResponseWire {
  topic: string;
  cloudevent: ProtoCloudEvent | null;
}

/**
 * A live subscription to one or more topics: an `AsyncIterable` of `{topic, event}` (iterate it once), with
 * reconnection. Events: `"live"` (LiveInfo; every time a stream's headers arrive), `"reconnecting"`
 * (ReconnectingInfo), `"reconnected"` (LiveInfo), `"end"` (GatewayClientError | undefined).
 *
 * A stream the client cancels (close(), abort, break out of the loop) is a normal end. Any other termination
 * reconnects with jittered exponential backoff, except for the FATAL_SUBSCRIBE_CODES and after
 * `reconnect.maxAttempts` consecutive failures: the subscription then ends with that error (the iterator throws
 * it, `done` resolves with it). Events published while no stream is live are not delivered.
 */
export class Subscription extends EventEmitter implements AsyncIterable<SubscriptionMessage> {
  /** The topics as requested (an empty list means `["state.change"]` on the gateway). */
  readonly topics: readonly string[];
  /** Resolves when the first stream is live (headers received); rejects if the subscription ends before that. */
  readonly ready: Promise<void>;
  /** Resolves when the subscription has ended: with the error that ended it, or undefined for a normal end. */
  readonly done: Promise<GatewayClientError | undefined>;

  #deps: SubscriptionDeps;
  #opts: SubscribeOptions;
  #call: grpc.ClientReadableStream<unknown> | undefined;
  #live = false;
  #everLive = false;
  #stopped = false;
  #ended = false;
  #endError: GatewayClientError | undefined;
  #attempt = 0;
  #timer: NodeJS.Timeout | undefined;
  #subscriptionId: string | undefined;
  /** The last position received (an event's, or the live stream's `x-position`); where a reconnect resumes from. */
  #position: string | undefined;
  /**
   * What `position` reports: the last position handed to the caller (a message taken from the queue, or a live
   * position with no message before it still queued). Behind #position while messages wait in the queue, so a
   * position saved at close() never skips what was received but not handed over.
   */
  #delivered: string | undefined;
  #recovered: boolean | undefined;
  #queue: Array<SubscriptionMessage | PositionMark> = [];
  #paused = false;
  #iterating = false;
  #wake: (() => void) | undefined;
  #liveWaiters: Array<{ resolve: () => void; reject: (e: GatewayClientError) => void }> = [];
  #resolveReady!: () => void;
  #rejectReady!: (e: GatewayClientError) => void;
  #resolveDone!: (e: GatewayClientError | undefined) => void;
  /** Removes the listener on the caller's signal (once the subscription ends). */
  #unlisten: () => void = () => undefined;

  /** @internal Use `client.subscribe()`. */
  constructor(topics: readonly string[], deps: SubscriptionDeps, opts: SubscribeOptions = {}) {
    super();
    this.topics = Object.freeze([...topics]);
    this.#deps = deps;
    this.#opts = opts;
    this.#position = opts.since || undefined;
    this.#delivered = this.#position;
    this.ready = new Promise<void>((res, rej) => {
      this.#resolveReady = res;
      this.#rejectReady = rej;
    });
    this.ready.catch(() => undefined); // observed through done/iterator too; never an unhandled rejection
    this.done = new Promise((res) => (this.#resolveDone = res));
    if (opts.signal?.aborted) {
      this.#finish(undefined);
      return;
    }
    this.#unlisten = onAbort(opts.signal, () => this.close());
    this.#connect();
  }

  /** The current stream's `x-subscription-id` header (changes on reconnect); undefined until live or when not sent. */
  get subscriptionId(): string | undefined {
    return this.#subscriptionId;
  }

  /**
   * With positions: the position of the last message handed to you (returned by the iterator, or passed to the
   * handler), or where the stream went live when nothing was handed over since. Save it and pass it as `since` to a
   * later subscription: every message after it comes again (messages still buffered when the subscription was
   * closed included), none before it.
   */
  get position(): string | undefined {
    return this.#delivered;
  }

  /** True while a stream is live (headers received and not yet ended). */
  get live(): boolean {
    return this.#live;
  }

  /** True once the subscription has ended for good. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Resolves as soon as a stream is live (now, or after the next reconnect); rejects if the subscription ends first. */
  whenLive(): Promise<void> {
    if (this.#live) return Promise.resolve();
    if (this.#ended) return Promise.reject(this.#endError ?? new GatewayClientError(Code.CANCELLED, "the subscription has ended"));
    return new Promise((resolve, reject) => this.#liveWaiters.push({ resolve, reject }));
  }

  /**
   * End the subscription through the gateway's Unsubscribe with this stream's `x-subscription-id`, wait (bounded) for
   * the gateway to end the stream, and cancel it if it has not. Resolves true when the gateway confirmed the
   * unsubscribe, false when the stream had to be cancelled instead (no id, not live, or Unsubscribe failed).
   * Either way the subscription has ended when the promise resolves.
   */
  async unsubscribe(): Promise<boolean> {
    if (this.#ended) return false;
    this.#stopped = true;
    clearTimeout(this.#timer);
    const id = this.#subscriptionId;
    let confirmed = false;
    if (id !== undefined && this.#live) {
      try {
        const res = await this.#deps.transport.unary("io.cloudevents.v1.Pubsub", "Unsubscribe", { subscription_id: id }, { timeoutMs: 5000 });
        confirmed = Boolean(res.status?.success);
      } catch {
        confirmed = false;
      }
      if (confirmed && !this.#ended) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([this.done, new Promise<void>((r) => (t = setTimeout(r, this.#opts.unsubscribeTimeoutMs ?? 2000)))]);
        clearTimeout(t);
      }
    }
    this.close();
    return confirmed;
  }

  /** End the subscription now by cancelling the stream (a normal end: CANCELLED by the client). Safe to call twice. */
  close(): void {
    if (this.#ended) return;
    this.#stopped = true;
    this.#queue.length = 0;
    const call = this.#call;
    this.#call = undefined;
    call?.cancel();
    this.#finish(undefined);
  }

  /** Iterate the delivered messages. One iterator per subscription; leaving the loop early closes the subscription. */
  [Symbol.asyncIterator](): AsyncIterator<SubscriptionMessage> {
    if (this.#iterating) throw new GatewayClientError(Code.FAILED_PRECONDITION, "a subscription can be iterated only once");
    this.#iterating = true;
    return {
      next: async (): Promise<IteratorResult<SubscriptionMessage>> => {
        for (;;) {
          const m = this.#queue.shift();
          if (m) {
            if (this.#paused && this.#queue.length <= this.#hwm() / 2) {
              this.#paused = false;
              this.#call?.resume();
            }
            if (m instanceof PositionMark) {
              this.#delivered = m.position;
              continue;
            }
            // Handed over now: from here a saved position resumes after this message, or after the live position
            // that came right behind it.
            if (m.position !== undefined) this.#delivered = m.position;
            while (this.#queue[0] instanceof PositionMark) this.#delivered = (this.#queue.shift() as PositionMark).position;
            return { value: m, done: false };
          }
          if (this.#ended) {
            if (this.#endError) {
              const e = this.#endError;
              this.#endError = undefined; // throw once; later next() calls report done
              throw e;
            }
            return { value: undefined, done: true };
          }
          await new Promise<void>((r) => (this.#wake = r));
        }
      },
      return: async (): Promise<IteratorResult<SubscriptionMessage>> => {
        this.close();
        return { value: undefined, done: true };
      },
    };
  }

  /** @internal Deliver every message to `handler`, one at a time, until the subscription ends. */
  async runHandler(handler: (m: SubscriptionMessage) => unknown): Promise<void> {
    try {
      for await (const m of this) {
        try {
          await handler(m);
        } catch (e) {
          try {
            this.#opts.onHandlerError?.(e, m);
          } catch {
            // a throwing error callback must not end the subscription
          }
        }
      }
    } catch {
      // the terminal error is reported through `done` and the "end" event
    }
  }

  #hwm(): number {
    return this.#opts.highWaterMark ?? 256;
  }

  #connect(): void {
    if (this.#stopped) return;
    let call: grpc.ClientReadableStream<unknown>;
    try {
      const positions = this.#opts.positions || this.#opts.since ? { "x-positions": "true", ...(this.#position ? { "last-event-id": this.#position } : {}) } : undefined;
      call = this.#deps.transport.serverStream("io.cloudevents.v1.Pubsub", "Subscribe", { topics: [...this.topics] }, positions);
    } catch (e) {
      this.#finish(e instanceof GatewayClientError ? e : new GatewayClientError(Code.CANCELLED, "the client is closed"));
      return;
    }
    this.#call = call;
    call.on("metadata", (md: grpc.Metadata) => {
      if (call !== this.#call) return;
      const id = md.get("x-subscription-id")[0];
      this.#subscriptionId = typeof id === "string" ? id : undefined;
      const position = md.get("x-position")[0];
      const recovered = md.get("x-recovered")[0];
      this.#recovered = recovered === undefined ? undefined : recovered === "true";
      // Not recovered: nothing before the live position comes back, so the next resume starts there.
      if (typeof position === "string" && (this.#position === undefined || this.#recovered === false)) {
        this.#position = position;
        // Messages received before it are still to be handed over: `position` reaches it after them.
        if (this.#queue.length === 0) this.#delivered = position;
        else this.#queue.push(new PositionMark(position));
      }
      this.#onLive();
    });
    call.on("data", (res: SubscribeResponseWire) => {
      if (call !== this.#call || !res.cloudevent) return;
      if (!this.#live) this.#onLive(); // a gateway that skipped the header flush
      const position = this.#opts.positions || this.#opts.since ? attributeString(res.cloudevent, "gwposition") : undefined;
      if (position !== undefined) this.#position = position;
      this.#queue.push(position === undefined ? { topic: res.topic, event: res.cloudevent } : { topic: res.topic, event: res.cloudevent, position });
      if (!this.#paused && this.#queue.length >= this.#hwm()) {
        this.#paused = true;
        call.pause();
      }
      this.#wakeReader();
    });
    call.on("error", () => undefined); // the outcome is taken from "status"
    call.on("status", (st: grpc.StatusObject) => this.#onEnded(call, st));
  }

  #onLive(): void {
    if (this.#live) return;
    this.#live = true;
    this.#attempt = 0;
    const reconnected = this.#everLive;
    this.#everLive = true;
    const info: LiveInfo = { subscriptionId: this.#subscriptionId, reconnected };
    if (this.#opts.positions || this.#opts.since) {
      if (this.#position !== undefined) info.position = this.#position;
      if (this.#recovered !== undefined) info.recovered = this.#recovered;
    }
    this.#resolveReady();
    for (const w of this.#liveWaiters.splice(0)) w.resolve();
    this.#tell("live", info);
    if (reconnected) this.#tell("reconnected", info, this.#opts.onReconnected);
  }

  #onEnded(call: grpc.ClientReadableStream<unknown>, st: grpc.StatusObject): void {
    if (call !== this.#call) return;
    this.#call = undefined;
    this.#live = false;
    this.#paused = false;
    if (this.#stopped) {
      this.#finish(undefined);
      return;
    }
    // The stream's final status, translated where every grpc-js status enters the client (toClientError).
    const error = toClientError({ code: st.code, details: st.details || `the subscription stream ended with ${Code[st.code as number] ?? st.code}` });
    if (FATAL_SUBSCRIBE_CODES.has(error.code) || this.#attempt >= this.#deps.reconnect.maxAttempts) {
      this.#finish(error);
      return;
    }
    const delayMs = backoffDelay(this.#deps.reconnect, this.#attempt);
    this.#attempt++;
    const info: ReconnectingInfo = { attempt: this.#attempt, delayMs, error };
    this.#timer = setTimeout(() => this.#connect(), delayMs);
    this.#tell("reconnecting", info, this.#opts.onReconnecting);
  }

  #finish(error: GatewayClientError | undefined): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#stopped = true;
    this.#live = false;
    clearTimeout(this.#timer);
    this.#unlisten();
    this.#endError = error;
    const why = error ?? new GatewayClientError(Code.CANCELLED, "the subscription was closed");
    if (!this.#everLive) this.#rejectReady(why);
    for (const w of this.#liveWaiters.splice(0)) w.reject(why);
    this.#wakeReader();
    this.#resolveDone(error);
    this.#tell("end", error);
  }

  /**
   * Tell the caller (the option callback, then the event's listeners). These run inside grpc-js stream events: one
   * that throws would be an uncaught exception that ends the process and would skip the reconnect, so it is reported
   * as a process warning instead and the subscription goes on.
   */
  #tell<T>(event: string, info: T, callback?: (info: T) => void): void {
    try {
      callback?.(info);
    } catch (e) {
      process.emitWarning(`a subscription ${event} callback threw: ${String(e)}`, { code: "GATEWAY_CLIENT_CALLBACK" });
    }
    // rawListeners: a once() wrapper removes itself when called.
    for (const listener of this.rawListeners(event)) {
      try {
        (listener as (i: T) => void).call(this, info);
      } catch (e) {
        process.emitWarning(`a subscription "${event}" listener threw: ${String(e)}`, { code: "GATEWAY_CLIENT_CALLBACK" });
      }
    }
  }

  #wakeReader(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }
}

/** A string attribute of a received CloudEvent. */
function attributeString(event: ProtoCloudEvent, name: string): string | undefined {
  const v = event.attributes?.[name]?.ce_string;
  return typeof v === "string" ? v : undefined;
}
