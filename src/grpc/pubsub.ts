import { subscribeFailureKind, type Broker, type EndReason, type Subscription } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { onAbort } from "../shared/signals.js";
import { toInBand } from "../shared/status.js";
import type { Logger } from "../observe/logger.js";
import { MAX_SUBSCRIPTION_TOPICS, type PubsubOps } from "../ops/pubsub.js";
import type { PubsubHandlers } from "../gen/gateway/io/cloudevents/v1/Pubsub.js";
import type { SubscribeRequest__Output } from "../gen/gateway/io/cloudevents/v1/SubscribeRequest.js";
import { rawResponses, type GrpcImpl, type ServerStreamMethod, type ServiceImpl } from "./server.js";
import { echo } from "../shared/echo.js";
import { topicProblem } from "../ops/cloudevent-validate.js";
import type { ServerStreamCall } from "./native/call-types.js";
import { CallMetadata } from "../shared/metadata.js";

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

/** Length of the gRPC message prefix (compressed flag + 32-bit length) the broker's encoder puts before each event. */
export const GRPC_MESSAGE_PREFIX = 5;

/** Open Subscribe streams, so the facility can end or drop them at shutdown. */
export interface StreamSet {
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
}

type SubscribeCall = ServerStreamCall<SubscribeRequest__Output, Buffer>;

/** The `io.cloudevents.v1.Pubsub` implementation and the set of its open streams. */
export function createPubsubGrpc(deps: PubsubGrpcDeps): { impl: ServiceImpl; streams: StreamSet } {
  const { ops, broker, logger } = deps;
  const open = new Set<SubscribeCall>();

  /**
   * Events go out as the broker's encoder framed them (call.writeFramed): one Buffer per event, encoded once and shared
   * by every subscriber, handed to the HTTP/2 stream without a copy; its write() return value and drained() keep
   * the backpressure contract (the broker's ring holds what does not fit).
   */
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
    open.add(call);
    const ac = new AbortController();
    let sub: Subscription | undefined;
    /** The call has its status, or is over: nothing more is written to it. */
    let done = false;
    let waiting = false;
    const end = (status?: GatewayError): void => {
      done = true;
      call.end(status);
    };
    // The signal aborts once the stream has closed (after the status and the events buffered before it reached the
    // client, or a cancel): until then the call stays in `open`, so dropAll() can reset a reader that stopped reading.
    onAbort(call.signal, () => {
      done = true;
      ac.abort();
      sub?.close();
      open.delete(call);
    });

    broker
      .subscribe(
        topics,
        {
          write: (bytes) => {
            if (done || call.ended) return false;
            const ok = call.writeFramed(bytes);
            if (!ok && !waiting) {
              waiting = true;
              void call.drained().then(() => {
                waiting = false;
                if (!done) sub?.drain();
              });
            }
            return ok;
          },
          open: (id) => {
            const md = new CallMetadata();
            md.set(SUBSCRIPTION_ID_HEADER, id);
            call.sendMetadata(md);
          },
          end: (reason) => {
            if (done) return;
            const err = statusOfEnd(reason);
            end(err ?? undefined);
            if (err && (reason.kind === "slow" || reason.kind === "stuck")) {
              logger.warn({ subscriptionId: sub?.id, topics, reason: reason.kind }, err.rawMessage);
              // The status travels behind the data already buffered for this stream; a client that never reads
              // again would hold the stream open forever, so reset it after a grace period (nothing if it closed).
              setTimeout(() => call.reset(), deps.reapGraceMs).unref();
            }
          },
        },
        ac.signal,
      )
      .then(
        (s) => {
          sub = s;
          // Cancelled in the instant between attach and here: the abort handler saw no subscription yet.
          if (ac.signal.aborted || done) s.close();
        },
        (e: unknown) => {
          if (done) return;
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
      status: toInBand(await ops.publish(req.topic, req.cloudevent, ctx.signal)),
    }),
    Subscribe: subscribe,
    Unsubscribe: async (req) => ({ status: toInBand(ops.unsubscribe(req.subscription_id)) }),
  };
  return {
    impl,
    streams: {
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
