import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import { backoffDelay, type BackoffPolicy } from "../../shared/backoff.js";
import { deadlineSignal, onAbort } from "../../shared/signals.js";
import type { UpstreamHandlers } from "../pubsub-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { fromTopicEvent, type TopicEventRequest } from "./cloudevent-json.js";
import type { DaprConnection, DaprRequest, DaprResponse } from "./connection.js";

/** Reconnect backoff of a broken subscription stream. */
export interface BackoffOptions {
  /** First delay, ms. Default 50. */
  initialMs?: number;
  /** Largest delay, ms. Default 2000. */
  maxMs?: number;
}

/** Codes after which resubscribing cannot succeed: the subscription is reported dead instead of retried. */
const FATAL = new Set([Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.UNAUTHENTICATED, Code.PERMISSION_DENIED, Code.UNIMPLEMENTED]);

/** How long a subscribe may take, ms: daprd's confirmation of one attempt, and every attempt of a first subscribe. */
export const SUBSCRIBE_TIMEOUT_MS = 10_000;

/**
 * daprd's answer to an initial request while it shuts down or reloads its components: INVALID_ARGUMENT "failed
 * deserializing metadata. Error: subscriber is closed" (dapr `pkg/runtime/processor/subscriber/subscriber.go`). It is
 * transient despite its code: the same request succeeds once the reload is over.
 */
export function isSubscriberClosed(err: GatewayError): boolean {
  return err.code === Code.INVALID_ARGUMENT && /subscriber is closed/i.test(err.rawMessage);
}

/**
 * Whether a failed resubscribe is worth retrying. Besides "subscriber is closed" (isSubscriberClosed), daprd ends open
 * streams UNKNOWN "stream closed" on SIGTERM: both are transient, so only the other FATAL codes give up.
 */
export function isRetryableResubscribe(err: GatewayError): boolean {
  if (isSubscriberClosed(err)) return true;
  return !FATAL.has(err.code);
}

/** The subscription stream: requests and answers as the generated types of `SubscribeTopicEventsAlpha1` say. */
type SubscribeCall = grpc.ClientDuplexStream<DaprRequest<"SubscribeTopicEventsAlpha1">, DaprResponse<"SubscribeTopicEventsAlpha1">>;

/**
 * One `SubscribeTopicEventsAlpha1` stream for one topic, kept alive: it sends the initial request, waits for the
 * initial response before reporting live, hands each event to `handlers.onEvent` and acks it SUCCESS (at-most-once:
 * a handler failure is not retried). When the stream breaks it reconnects with jittered exponential backoff and
 * resubscribes. What the handlers see of the gap depends on daprd's pub/sub component: with Redis streams the app's
 * consumer group keeps what was published meanwhile and delivers it after the resubscribe (late, not missed), and an
 * event handed to the handlers whose ack did not reach daprd before the break comes again after the component's
 * processingTimeout when its redelivery is on (a duplicate, out of order); with pubsub.in-memory what was published
 * meanwhile is missed.
 */
export class TopicStream {
  private call: SubscribeCall | undefined;
  private closed = false;
  private attempt = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Ends the pause of a first subscribe between two refused attempts (close() calls it). */
  private wake: (() => void) | undefined;
  private readonly backoff: BackoffPolicy;

  constructor(
    private readonly conn: DaprConnection,
    private readonly pubsubName: string,
    readonly topic: string,
    private readonly handlers: UpstreamHandlers,
    private readonly logger: RuntimeLogger,
    backoff: BackoffOptions = {},
    private readonly onDead: (s: TopicStream) => void = () => undefined,
  ) {
    // Doubling with +-50% jitter: resubscribes of many topics after a sidecar restart spread out.
    this.backoff = { initialDelayMs: backoff.initialMs ?? 50, maxDelayMs: backoff.maxMs ?? 2000, multiplier: 2, jitter: 0.5 };
  }

  /**
   * The first subscribe: open the stream, retrying daprd's "subscriber is closed" (a reload, isSubscriberClosed) with
   * the same backoff as a resubscribe, all within `timeoutMs`. A reload that outlasts it fails UNAVAILABLE, never
   * INVALID_ARGUMENT (which callers take as final). Every other failure is reported at once: a sidecar that is down
   * fails UNAVAILABLE after the connection's connect timeout, an unknown component INVALID_ARGUMENT.
   */
  async start(signal?: AbortSignal, timeoutMs = SUBSCRIBE_TIMEOUT_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      let err: GatewayError;
      try {
        await this.open(signal, Math.max(1, deadline - Date.now()));
        return;
      } catch (e) {
        err = GatewayError.from(e);
      }
      if (!isSubscriberClosed(err) || this.closed || signal?.aborted) throw err;
      const delay = backoffDelay(this.backoff, attempt);
      if (Date.now() + delay >= deadline) {
        throw new GatewayError(
          Code.UNAVAILABLE,
          `dapr sidecar at ${this.conn.address} kept refusing the subscription to ${this.topic} for ${timeoutMs} ms while its pub/sub reloads: ${err.rawMessage}`,
          { cause: err },
        );
      }
      this.logger.debug({ topic: this.topic, code: err.codeName, err: err.message }, "dapr subscribe refused while daprd reloads; retrying");
      await this.pause(delay, signal);
      if (this.closed) throw new GatewayError(Code.CANCELLED, `subscription to ${this.topic} was closed`);
      if (signal?.aborted) throw GatewayError.from(signal.reason, Code.CANCELLED);
    }
  }

  /** Wait `ms`, or less when `signal` aborts or close() is called. */
  private pause(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      let off: (() => void) | undefined;
      const done = (): void => {
        clearTimeout(timer);
        off?.();
        if (this.wake === done) this.wake = undefined;
        resolve();
      };
      this.wake = done;
      timer = setTimeout(done, ms);
      off = onAbort(signal, done);
    });
  }

  /** Open the stream once; resolves on daprd's initial response, rejects with a GatewayError when it cannot. */
  async open(signal?: AbortSignal, timeoutMs = SUBSCRIBE_TIMEOUT_MS): Promise<void> {
    const call = await this.conn.bidi("SubscribeTopicEventsAlpha1", signal);
    if (this.closed) {
      call.cancel();
      throw new GatewayError(Code.CANCELLED, `subscription to ${this.topic} was closed`);
    }
    this.call = call;
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      let live = false;
      // The caller's signal or the confirmation deadline, whichever ends first.
      const deadline = deadlineSignal(
        timeoutMs,
        () => new GatewayError(Code.UNAVAILABLE, `dapr sidecar at ${this.conn.address} did not confirm the subscription to ${this.topic} within ${timeoutMs} ms`),
        signal,
      );
      const settle = (): void => {
        settled = true;
        deadline.clear();
      };
      const fail = (e: GatewayError): void => {
        if (settled) return;
        settle();
        if (this.call === call) this.call = undefined;
        call.cancel();
        reject(e);
      };
      if (deadline.signal.aborted) return fail(GatewayError.from(deadline.signal.reason, Code.CANCELLED));
      onAbort(deadline.signal, (reason) => fail(GatewayError.from(reason, Code.CANCELLED)));
      call.on("data", (msg: DaprResponse<"SubscribeTopicEventsAlpha1">) => {
        if (msg.initial_response && !settled) {
          settle();
          live = true;
          resolve();
          return;
        }
        if (msg.event_message && live) this.deliver(call, msg.event_message);
      });
      call.on("error", (e: unknown) => {
        if (!settled) return fail(this.conn.translate(e));
        if (live && this.call === call) this.broken(this.conn.translate(e));
      });
      call.on("end", () => {
        if (!settled) return fail(new GatewayError(Code.UNAVAILABLE, `dapr sidecar at ${this.conn.address} ended the subscription to ${this.topic} before confirming it`));
        if (live && this.call === call) this.broken(new GatewayError(Code.UNAVAILABLE, `dapr sidecar at ${this.conn.address} ended the subscription stream`));
      });
      call.write({ initial_request: { pubsub_name: this.pubsubName, topic: this.topic, metadata: {} } });
    });
    this.attempt = 0;
  }

  private deliver(call: SubscribeCall, ev: TopicEventRequest): void {
    try {
      this.handlers.onEvent(fromTopicEvent(ev));
    } catch (e) {
      this.logger.error({ err: e, topic: this.topic, id: ev.id }, "subscriber handler threw; the event is acknowledged anyway (at-most-once)");
    }
    if (!this.closed) call.write({ event_processed: { id: ev.id, status: { status: "SUCCESS" } } });
  }

  private broken(e: GatewayError): void {
    if (this.closed) return;
    this.call = undefined;
    this.logger.warn({ topic: this.topic, code: e.codeName, err: e.message }, "dapr subscription stream broke; resubscribing");
    this.schedule();
  }

  private schedule(): void {
    const delay = backoffDelay(this.backoff, this.attempt++);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.closed) return;
      this.open().then(
        () => this.logger.info({ topic: this.topic }, "dapr subscription restored"),
        (e: unknown) => {
          if (this.closed) return;
          const err = GatewayError.from(e);
          if (!isRetryableResubscribe(err)) {
            this.logger.error({ topic: this.topic, code: err.codeName, err: err.message }, "dapr subscription cannot be restored");
            this.closed = true;
            this.onDead(this);
            this.handlers.onError?.(err);
            return;
          }
          this.logger.debug({ topic: this.topic, code: err.codeName, err: err.message }, "dapr resubscribe failed; retrying");
          this.schedule();
        },
      );
    }, delay);
  }

  /** Stop: cancel the stream (daprd redelivers what was not acked elsewhere) and any pending reconnect. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.wake?.();
    const call = this.call;
    this.call = undefined;
    call?.cancel();
  }
}
