import { randomUUID } from "node:crypto";
import { Code } from "../shared/code.js";
import { deadlineSignal, onAbort } from "../shared/signals.js";
import { attributeString, toProtoCloudEvent, type CloudEventInput } from "./cloudevent.js";
import { GatewayClientError, RequestTimeoutError, invalidArgument } from "./errors.js";
import type { Subscription } from "./subscription.js";
import type { SubscriptionMessage } from "./types.js";
import type { CloudEvent as ProtoCloudEvent } from "../shared/cloudevent.js";

/** Options of `request()`. */
export interface RequestOptions {
  /** How long to wait for the reply, ms, counted from the call (subscribing and publishing included). Default 30000. */
  timeoutMs?: number;
  /** The correlation id to send; default a random UUID. Must not be in flight on the same reply topic. */
  correlationId?: string;
  /** Cancels the wait; the promise rejects with CANCELLED. */
  signal?: AbortSignal;
}

/** The extension attribute that carries the correlation id (the sole matching key). */
export const CORRELATION_ID_ATTRIBUTE = "correlationid";
/** The extension attribute that names the topic the responder replies to. */
export const REPLY_TOPIC_ATTRIBUTE = "replytopic";

/** Default request-reply timeout (docs/contract.md "Limits": 30 s). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

interface Pending {
  resolve(m: SubscriptionMessage): void;
  reject(e: GatewayClientError): void;
}

/** What the router needs from the client. */
export interface ReplyRouterDeps {
  /** Open the persistent subscription to a reply topic; `handler` gets each message. */
  subscribe(topic: string, handler: (m: SubscriptionMessage) => void): Subscription;
  /** Publish a wire event; rejects on failure. */
  publish(topic: string, event: ProtoCloudEvent, signal?: AbortSignal): Promise<unknown>;
}

/**
 * Request-reply over pub/sub: one persistent subscription per reply topic, shared by every in-flight request on it,
 * confirmed live before anything is published; replies are matched on the `correlationid` attribute only, and
 * replies nobody waits for (late, unknown, duplicate) are dropped.
 */
export class ReplyRouter {
  #deps: ReplyRouterDeps;
  #topics = new Map<string, { sub: Subscription; pending: Map<string, Pending> }>();
  #dropped = 0;
  #closed = false;

  constructor(deps: ReplyRouterDeps) {
    this.#deps = deps;
  }

  /** Replies received that matched no in-flight request (late, unknown or duplicate), since creation. */
  get droppedReplies(): number {
    return this.#dropped;
  }

  /** Send `event` to `topic` and resolve the first reply on `replyTopic` carrying the same correlation id. */
  async request(topic: string, event: CloudEventInput, replyTopic: string, options: RequestOptions = {}): Promise<SubscriptionMessage> {
    if (this.#closed) throw new GatewayClientError(Code.CANCELLED, "the client is closed");
    if (typeof topic !== "string" || topic === "") throw invalidArgument("topic", "must be a non-empty string");
    if (typeof replyTopic !== "string" || replyTopic === "") throw invalidArgument("replyTopic", "must be a non-empty string");
    const timeoutMs = options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (typeof timeoutMs !== "number" || !(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw invalidArgument("timeoutMs", `must be a positive number (got ${String(timeoutMs)})`);
    const correlationId = options.correlationId ?? randomUUID();
    if (typeof correlationId !== "string" || correlationId === "") throw invalidArgument("correlationId", "must be a non-empty string");
    const wire = toProtoCloudEvent(event);
    wire.attributes[CORRELATION_ID_ATTRIBUTE] = { ce_string: correlationId };
    wire.attributes[REPLY_TOPIC_ATTRIBUTE] = { ce_string: replyTopic };

    const entry = this.#entry(replyTopic);
    if (entry.pending.has(correlationId)) throw new GatewayClientError(Code.ALREADY_EXISTS, `correlationId ${correlationId} is already in flight on reply topic ${replyTopic}`);

    const signal = options.signal;
    if (signal?.aborted) throw new GatewayClientError(Code.CANCELLED, `request ${correlationId} was cancelled`);
    // The caller's signal or the timeout, whichever ends first; cleared (timer and listener) once the request settles.
    const deadline = deadlineSignal(timeoutMs, () => new RequestTimeoutError(correlationId, replyTopic, timeoutMs), signal);
    const reply = new Promise<SubscriptionMessage>((resolve, reject) => {
      entry.pending.set(correlationId, { resolve, reject });
      onAbort(deadline.signal, (reason) => {
        reject(reason instanceof RequestTimeoutError ? reason : new GatewayClientError(Code.CANCELLED, `request ${correlationId} was cancelled`));
      });
    });
    try {
      // The reply subscription must be live before the request goes out, or a fast reply would be missed.
      await Promise.race([entry.sub.whenLive(), reply]);
      await Promise.race([this.#deps.publish(topic, wire, signal), reply]);
      return await reply;
    } finally {
      deadline.clear();
      // Whatever happened, this id no longer waits: a reply arriving from now on is dropped.
      if (this.#topics.get(replyTopic) === entry) entry.pending.delete(correlationId);
    }
  }

  /** End every reply subscription; in-flight requests reject with CANCELLED. */
  close(): void {
    this.#closed = true;
    for (const [topic, e] of this.#topics) {
      this.#topics.delete(topic);
      e.sub.close();
      for (const p of e.pending.values()) p.reject(new GatewayClientError(Code.CANCELLED, "the client was closed"));
      e.pending.clear();
    }
  }

  #entry(replyTopic: string): { sub: Subscription; pending: Map<string, Pending> } {
    const existing = this.#topics.get(replyTopic);
    if (existing && !existing.sub.ended) return existing;
    const pending = new Map<string, Pending>();
    const sub = this.#deps.subscribe(replyTopic, (m) => {
      const id = attributeString(m.event, CORRELATION_ID_ATTRIBUTE);
      const p = id === undefined ? undefined : pending.get(id);
      if (!p) {
        this.#dropped++;
        return;
      }
      pending.delete(id!);
      p.resolve(m);
    });
    const entry = { sub, pending };
    this.#topics.set(replyTopic, entry);
    // A reply subscription that ends for good (fatal error) fails its waiters; the next request opens a new one.
    void sub.done.then((err) => {
      if (this.#topics.get(replyTopic) === entry) this.#topics.delete(replyTopic);
      const why = err ?? new GatewayClientError(Code.CANCELLED, `the reply subscription to ${replyTopic} ended`);
      for (const p of pending.values()) p.reject(why);
      pending.clear();
    });
    return entry;
  }
}
