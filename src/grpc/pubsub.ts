import { subscribeFailureKind, type Broker, type EndReason, type SubscriberSink, type Subscription } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { onAbort } from "../shared/signals.js";
import { statusOk, toInBand } from "../shared/status.js";
import type { Logger } from "../observe/logger.js";
import { MAX_SUBSCRIPTION_TOPICS, type PubsubOps } from "../ops/pubsub.js";
import type { PubsubHandlers } from "../gen/gateway/io/cloudevents/v1/Pubsub.js";
import type { SubscribeRequest__Output } from "../gen/gateway/io/cloudevents/v1/SubscribeRequest.js";
import { rawResponses, type GrpcImpl, type ServerStreamMethod, type ServiceImpl } from "./server.js";
import { echo } from "../shared/echo.js";
import { asBuffer } from "../shared/bytes.js";
import { topicProblem } from "../ops/cloudevent-validate.js";
import type { FramedWriter, ServerStreamCall } from "./native/call-types.js";
import { CallMetadata } from "../shared/metadata.js";
import { randomUUID } from "node:crypto";
import { traceOfGrpc } from "../ops/forward-metadata.js";
import { endWith, grpcServerSpan, type TraceIncoming, type TraceSpan } from "../observe/span.js";

const PUBLISH_SPAN = grpcServerSpan("io.cloudevents.v1.Pubsub/PublishEvent");
const SUBSCRIBE_SPAN = grpcServerSpan("io.cloudevents.v1.Pubsub/Subscribe");

/** The topic an empty `topics` list means (docs/pubsub.md "Subscribe"). */
export const DEFAULT_TOPIC = "state.change";
/** Response header carrying the id Unsubscribe takes. */
export const SUBSCRIPTION_ID_HEADER = "x-subscription-id";

/** The status a stream ends with for each broker end reason (OK for Unsubscribe). */
export function statusOfEnd(reason: EndReason): GatewayError | null {
  switch (reason.kind) {
    case "unsubscribed":
      return null;
    case "slow":
      return new GatewayError(
        Code.RESOURCE_EXHAUSTED,
        `subscriber fell more than ${reason.capacity} events behind and was dropped; resubscribe and reconcile from state`,
      );
    case "stuck":
      return new GatewayError(
        Code.RESOURCE_EXHAUSTED,
        `subscriber made no progress for ${reason.stalledMs} ms with ${reason.pending} events pending and was dropped; resubscribe and reconcile from state`,
      );
    case "shutdown":
      return new GatewayError(Code.UNAVAILABLE, "gateway is shutting down");
    case "upstream-failed":
      return new GatewayError(Code.UNAVAILABLE, `the runtime subscription to topic '${echo(reason.topic)}' broke: ${reason.message}`);
  }
}

/** Request metadata: resume after this position (as SSE's `Last-Event-ID`); implies positions. */
export const LAST_EVENT_ID_METADATA = "last-event-id";
/** Request metadata: `true` makes the stream carry positions (headers and each event's `gwposition`). */
export const POSITIONS_METADATA = "x-positions";
/** Response header: the current position when the stream went live (positions only). */
export const POSITION_HEADER = "x-position";
/** Response header on a resume: whether every missed event is replayed. */
export const RECOVERED_HEADER = "x-recovered";
/** The CloudEvents extension attribute carrying an event's position (positions only). */
export const POSITION_ATTRIBUTE = "gwposition";
/** Events a positioned stream holds while its HTTP/2 stream is over its high-water mark (as the broker's ring). */
export const POSITIONED_BUFFER = 1024;

/**
 * Where positioned streams come from (the main thread's web hub, bound by the pub/sub facility): positions, history
 * and backfill. Frames are framed SubscribeResponse messages whose CloudEvent carries `gwposition`, encoded once per
 * event for every positioned stream.
 */
export interface PositionFeed {
  /** Throw INVALID_ARGUMENT naming `field` when `text` is not a position. */
  checkPosition(field: string, text: string): void;
  /**
   * Take a reference on each topic; resolves once all are live (holding nothing when it rejects), with a resume from
   * `since` prepared. Each event of the topics then reaches PositionedOutlet.deliver.
   */
  acquire(topics: readonly string[], signal: AbortSignal, since: string | undefined): Promise<FeedStart>;
  /** Give the references back. */
  release(topics: readonly string[]): void;
}

/** An acquired feed, about to go live. */
export interface FeedStart {
  /**
   * Call synchronously right before going live: the current position and, on a resume, whether it is exact and the
   * frames to replay (none when it is not: the client reconciles from state, as a WebSocket or SSE subscriber does).
   */
  begin(): { position: string; recovered: boolean | undefined; frames: Buffer[] };
}

/** What the feed's fan-out calls for the positioned streams: once per event per topic. */
export interface PositionedOutlet {
  /** Deliver one event of `topic`; `frame` encodes it (called once, only when a stream holds the topic). */
  deliver(topic: string, frame: () => Buffer | undefined): number;
  /** The topic ended for good (upstream failure, shutdown): end its streams. */
  endTopic(topic: string, reason: EndReason): void;
}

/** Length of the gRPC message prefix (compressed flag + 32-bit length) the broker's encoder puts before each event. */
export const GRPC_MESSAGE_PREFIX = 5;

/** Open Subscribe streams, so the facility can end or drop them at shutdown. */
export interface StreamSet {
  /** End every positioned stream with UNAVAILABLE "gateway is shutting down" (broker streams end with the broker). */
  endAll(): void;
  /** Reset every stream still open (destroy). */
  dropAll(): void;
  readonly size: number;
}

/** Dependencies of the Pubsub gRPC service. */
export interface PubsubGrpcDeps {
  ops: PubsubOps;
  broker: Broker;
  logger: Logger;
  /**
   * How long a reaped (slow or stuck) stream may take to deliver its final status through the data it already has
   * buffered before it is reset, ms.
   */
  reapGraceMs: number;
  /** Positioned streams' feed; without it `x-positions`/`last-event-id` are refused (FAILED_PRECONDITION). */
  feed?: PositionFeed;
  /** How often positioned streams are checked for no progress (the broker's sweep interval), ms. */
  sweepIntervalMs: number;
  /** With tracing on: the span of a stream's start (until its subscription is live), as the web fronts have. */
  traceSubscribe?: (trace: TraceIncoming, topics: number) => TraceSpan;
}

/** A Subscribe stream served with positions from the feed. */
interface PositionedStream {
  id: string;
  call: SubscribeCall;
  topics: string[];
  /** Frames waiting while the HTTP/2 stream is over its high-water mark; null when not blocked. */
  pending: Buffer[] | null;
  /** Frames written since the last sweep, and the time of that sweep (stuck detection, as the broker's). */
  progress: number;
  sweptAt: number;
  done: boolean;
}

type SubscribeCall = ServerStreamCall<SubscribeRequest__Output, Buffer>;

/**
 * The broker's sink for one Subscribe stream. Events go out as the broker's encoder framed them: one Buffer per event,
 * encoded once and shared by every subscriber, handed to the HTTP/2 stream without a copy; the write's return value
 * and drained() keep the backpressure contract (the broker's ring holds what does not fit).
 *
 * Built for the delivery loop, which calls `write` once per event per subscriber and, with thousands of them, pays a
 * cache miss for each object a write reads: a class (a method reads this object's fields, where closures read a
 * function and its context too), writing through the call's framedWriter() (the HTTP/2 stream, not the call).
 */
class SubscribeSink implements SubscriberSink {
  /** The call has its status, or is over: nothing more is written to it. */
  done = false;
  /** Waiting for the call to drain (a write returned false). */
  private waiting = false;
  /** The call's framed writer, once open() sent the response headers. */
  private writer: FramedWriter = NOT_OPEN;
  /** The broker's subscription, once live. */
  sub: Subscription | undefined;

  constructor(
    private readonly call: SubscribeCall,
    private readonly ended: (reason: EndReason) => void,
  ) {}

  write(bytes: Uint8Array): boolean {
    if (this.done) return false;
    // The writer refuses once the call is over.
    const ok = this.writer.write(asBuffer(bytes));
    if (!ok) this.blocked();
    return ok;
  }

  blocked(): void {
    if (this.waiting) return;
    this.waiting = true;
    void this.call.drained().then(() => {
      this.waiting = false;
      if (!this.done) this.sub?.drain();
    });
  }

  open(id: string): void {
    const md = new CallMetadata();
    md.set(SUBSCRIPTION_ID_HEADER, id);
    this.call.sendMetadata(md);
    this.writer = this.call.framedWriter();
  }

  /**
   * The HTTP/2 stream itself: the broker writes to it directly while the subscriber keeps up. The broker's encoder
   * makes Buffers (subscribeResponseEncoder), which is what the stream takes; once the call is over the stream
   * refuses every write, as `write` does.
   */
  outlet(): FramedWriter {
    return this.writer;
  }

  end(reason: EndReason): void {
    if (!this.done) this.ended(reason);
  }
}

/** A sink's writer before open(): the broker writes only after open(), so this only keeps the field's type. */
const NOT_OPEN: FramedWriter = { write: () => false };

/** The `io.cloudevents.v1.Pubsub` implementation and the set of its open streams. */
export function createPubsubGrpc(deps: PubsubGrpcDeps): { impl: ServiceImpl; streams: StreamSet; outlet: PositionedOutlet } {
  const { ops, broker, logger } = deps;
  const open = new Set<SubscribeCall>();
  const positionedStreams = positioned(deps, open);

  const subscribe = rawResponses((call: SubscribeCall) => {
    const requested = call.request?.topics ?? [];
    if (requested.length > MAX_SUBSCRIPTION_TOPICS) {
      return call.end(invalidArgument("topics", `must hold at most ${MAX_SUBSCRIPTION_TOPICS} topics, got ${requested.length}`));
    }
    const topics = requested.length > 0 ? [...requested] : [DEFAULT_TOPIC];
    for (const [i, t] of topics.entries()) {
      const problem = topicProblem(t);
      if (problem) return call.end(new GatewayError(Code.INVALID_ARGUMENT, `topics[${i}] ${problem}`));
    }
    let asked: { since: string | undefined } | undefined;
    try {
      asked = positionsAsked(call.metadata);
    } catch (e) {
      return call.end(GatewayError.from(e));
    }
    if (asked) return positionedStreams.subscribe(call, topics, asked.since);
    open.add(call);
    const sink = new SubscribeSink(call, (reason) => {
      const err = statusOfEnd(reason);
      end(err ?? undefined);
      if (err && (reason.kind === "slow" || reason.kind === "stuck")) {
        logger.warn({ subscriptionId: sink.sub?.id, topics, reason: reason.kind }, err.rawMessage);
        // The status travels behind the data already buffered for this stream; a client that never reads
        // again would hold the stream open forever, so reset it after a grace period (nothing if it closed).
        setTimeout(() => call.reset(), deps.reapGraceMs).unref();
      }
    });
    const end = (status?: GatewayError): void => {
      sink.done = true;
      call.end(status);
    };
    // The signal aborts once the stream has closed (after the status and the events buffered before it reached the
    // client, or a cancel): until then the call stays in `open`, so dropAll() can reset a reader that stopped reading.
    // The call's cancellation is the subscribe's too (the broker only reads `aborted`): no AbortController per stream.
    onAbort(call.cancellation, () => {
      sink.done = true;
      sink.sub?.close();
      open.delete(call);
    });

    // The start is traced under the caller's context until the subscription is live (no span per event).
    const span = deps.traceSubscribe?.(traceOfGrpc(true, call.metadata, SUBSCRIBE_SPAN)!, topics.length);
    const subscribing = broker.subscribe(topics, sink, call.cancellation);
    (span ? endWith(span, subscribing) : subscribing).then(
      (s) => {
        sink.sub = s;
        // Cancelled in the instant between attach and here: the abort handler saw no subscription yet.
        if (call.cancellation.aborted || sink.done) s.close();
      },
      (e: unknown) => {
        if (sink.done) return;
        const kind = subscribeFailureKind(e);
        if (kind === "cancelled") return;
        // The broker's failure carries its code; anything else thrown while subscribing is UNAVAILABLE.
        const err = kind ? (e as GatewayError) : new GatewayError(Code.UNAVAILABLE, (e as Error).message, { cause: e });
        logger.warn({ topics, code: err.codeName, err: err.rawMessage }, "subscribe failed");
        end(err);
      },
    );
  });

  // Subscribe writes pre-encoded SubscribeResponse bytes (rawResponses), so its call is typed with Buffer responses.
  const impl: Omit<GrpcImpl<PubsubHandlers>, "Subscribe"> & { Subscribe: ServerStreamMethod } = {
    PublishEvent: async (req, ctx) => ({
      status: toInBand(await ops.publish(req.topic, req.cloudevent, ctx.cancellation, traceOfGrpc(ops.tracing, ctx.metadata, PUBLISH_SPAN))),
    }),
    Subscribe: subscribe,
    Unsubscribe: async (req) => ({
      status: toInBand(positionedStreams.unsubscribe(req.subscription_id) ? statusOk() : ops.unsubscribe(req.subscription_id)),
    }),
  };
  return {
    impl,
    outlet: positionedStreams.outlet,
    streams: {
      endAll: () => positionedStreams.endAll(),
      dropAll() {
        for (const call of [...open]) call.reset();
        open.clear();
      },
      get size() {
        return open.size;
      },
    },
  };
}

/**
 * A feed's subscribe failure as the stream's status; undefined when the subscriber gave up first (nothing to send).
 * The feed's errors carry their code (e.g. RESOURCE_EXHAUSTED past the hub's topic bound); anything else is UNAVAILABLE.
 */
function subscribeFailed(e: unknown): GatewayError | undefined {
  if (subscribeFailureKind(e) === "cancelled") return undefined;
  if (e instanceof GatewayError) return e;
  return new GatewayError(Code.UNAVAILABLE, (e as Error).message, { cause: e });
}

/**
 * Whether the request asks for positions (`x-positions: true`, or a resume with `last-event-id`); undefined for a
 * plain Subscribe. INVALID_ARGUMENT for an `x-positions` value other than true/false.
 */
function positionsAsked(md: CallMetadata): { since: string | undefined } | undefined {
  const since = md.strings(LAST_EVENT_ID_METADATA)[0] || undefined;
  const flag = md.strings(POSITIONS_METADATA)[0]?.trim().toLowerCase();
  if (flag !== undefined && flag !== "true" && flag !== "false") {
    throw invalidArgument(POSITIONS_METADATA, `must be true or false, got '${echo(flag)}'`);
  }
  return since !== undefined || flag === "true" ? { since } : undefined;
}

/**
 * Subscribe streams with positions, served from the feed (the web hub) instead of the broker: the feed's fan-out hands
 * each event to `outlet` once, encoded once on first use, and each stream writes the shared frame. A stream over its
 * HTTP/2 high-water mark holds up to POSITIONED_BUFFER frames, then ends RESOURCE_EXHAUSTED (slow); one that makes no
 * progress for a sweep interval with frames held ends stuck: the broker's rules and statuses (statusOfEnd).
 */
function positioned(deps: PubsubGrpcDeps, open: Set<SubscribeCall>) {
  const { logger } = deps;
  const byId = new Map<string, PositionedStream>();
  const byTopic = new Map<string, Set<PositionedStream>>();
  let sweep: NodeJS.Timeout | undefined;

  function detach(s: PositionedStream, live: boolean): void {
    if (s.done) return;
    s.done = true;
    s.pending = null;
    if (!live) return;
    byId.delete(s.id);
    for (const t of s.topics) {
      const set = byTopic.get(t);
      set?.delete(s);
      if (set?.size === 0) byTopic.delete(t);
    }
    deps.feed?.release(s.topics);
    if (byId.size === 0 && sweep) {
      clearInterval(sweep);
      sweep = undefined;
    }
  }

  /** End a live stream with the status of `reason` (reaped ones are reset after the grace period). */
  function endStream(s: PositionedStream, reason: EndReason): void {
    if (s.done) return;
    detach(s, true);
    const err = statusOfEnd(reason);
    s.call.end(err ?? undefined);
    if (err && (reason.kind === "slow" || reason.kind === "stuck")) {
      logger.warn({ subscriptionId: s.id, topics: s.topics, reason: reason.kind }, err.rawMessage);
      // As on the broker path: the status waits behind the buffered data; a reader that never reads is reset.
      setTimeout(() => s.call.reset(), deps.reapGraceMs).unref();
    }
  }

  function flush(s: PositionedStream): void {
    const held = s.pending;
    if (s.done || !held) return;
    let i = 0;
    while (i < held.length) {
      const ok = s.call.writeFramed(held[i++]!);
      s.progress++;
      if (!ok) {
        held.splice(0, i);
        void s.call.drained().then(() => flush(s));
        return;
      }
    }
    s.pending = null;
  }

  function push(s: PositionedStream, frame: Buffer): void {
    if (s.done || s.call.ended) return;
    if (s.pending) {
      if (s.pending.length >= POSITIONED_BUFFER) return endStream(s, { kind: "slow", capacity: POSITIONED_BUFFER });
      s.pending.push(frame);
      return;
    }
    s.progress++;
    if (!s.call.writeFramed(frame)) {
      s.pending = [];
      void s.call.drained().then(() => flush(s));
    }
  }

  function sweepNow(): void {
    const now = Date.now();
    for (const s of [...byId.values()]) {
      if (s.pending && s.pending.length > 0 && s.progress === 0) {
        endStream(s, { kind: "stuck", pending: s.pending.length, stalledMs: now - s.sweptAt });
        continue;
      }
      s.progress = 0;
      s.sweptAt = now;
    }
  }

  function subscribe(call: SubscribeCall, topics: string[], since: string | undefined): void {
    const { feed } = deps;
    if (!feed) return call.end(new GatewayError(Code.FAILED_PRECONDITION, "this gateway serves no stream positions on gRPC Subscribe"));
    if (since !== undefined) {
      try {
        feed.checkPosition(LAST_EVENT_ID_METADATA, since);
      } catch (e) {
        return call.end(GatewayError.from(e));
      }
    }
    const unique = [...new Set(topics)];
    const s: PositionedStream = { id: randomUUID(), call, topics: unique, pending: null, progress: 0, sweptAt: Date.now(), done: false };
    let live = false;
    open.add(call);
    const ac = new AbortController();
    onAbort(call.signal, () => {
      ac.abort();
      detach(s, live);
      open.delete(call);
    });
    feed.acquire(unique, ac.signal, since).then(
      (start) => {
        if (s.done || call.ended) return feed.release(unique);
        // Replay and going live in one synchronous step: no event falls between them.
        let begun: ReturnType<FeedStart["begin"]>;
        try {
          begun = start.begin();
        } catch (e) {
          // Nothing is live yet: hand the topics back and say why, rather than leave a rejection nobody handles.
          detach(s, false);
          feed.release(unique);
          const err = GatewayError.from(e);
          logger.error({ topics: unique, err }, "starting a positioned Subscribe stream failed");
          return call.end(err);
        }
        const { position, recovered, frames } = begun;
        const md = new CallMetadata();
        md.set(SUBSCRIPTION_ID_HEADER, s.id);
        md.set(POSITION_HEADER, position);
        if (recovered !== undefined) md.set(RECOVERED_HEADER, String(recovered));
        call.sendMetadata(md);
        live = true;
        byId.set(s.id, s);
        for (const t of unique) {
          let set = byTopic.get(t);
          if (!set) byTopic.set(t, (set = new Set()));
          set.add(s);
        }
        sweep ??= setInterval(sweepNow, deps.sweepIntervalMs).unref();
        for (const f of frames) push(s, f);
      },
      (e: unknown) => {
        if (s.done) return;
        s.done = true;
        const err = subscribeFailed(e);
        if (!err) return;
        logger.warn({ topics: unique, code: err.codeName, err: err.rawMessage }, "subscribe failed");
        call.end(err);
      },
    );
  }

  const outlet: PositionedOutlet = {
    deliver(topic, frame) {
      const subs = byTopic.get(topic);
      if (!subs || subs.size === 0) return 0;
      const bytes = frame();
      if (!bytes) return 0;
      // No copy of the set: a stream reaped inside push leaves it, and Set iteration allows that.
      let n = 0;
      for (const s of subs) {
        n++;
        push(s, bytes);
      }
      return n;
    },
    endTopic(topic, reason) {
      for (const s of [...(byTopic.get(topic) ?? [])]) endStream(s, reason);
    },
  };

  return {
    subscribe,
    outlet,
    /** End the positioned stream `id` (OK status); false when it is none of them. */
    unsubscribe(id: string | null | undefined): boolean {
      const s = id ? byId.get(id) : undefined;
      if (!s) return false;
      endStream(s, { kind: "unsubscribed" });
      return true;
    },
    endAll() {
      for (const s of [...byId.values()]) endStream(s, { kind: "shutdown" });
    },
  };
}
