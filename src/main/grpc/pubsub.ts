import { constants as h2 } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { subscribeFailureKind, type Broker, type EndReason, type Subscription } from "../../broker/index.js";
import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { Logger } from "../logger.js";
import type { PubsubOps } from "../ops/pubsub.js";
import type { PubsubHandlers } from "../../gen/gateway/io/cloudevents/v1/Pubsub.js";
import type { SubscribeRequest__Output } from "../../gen/gateway/io/cloudevents/v1/SubscribeRequest.js";
import { rawResponses, toStatusObject, type GrpcImpl, type ServerStreamMethod, type ServiceImpl } from "./server.js";
import { echo } from "../../shared/echo.js";
import { topicProblem } from "../cloudevent-validate.js";
import type { CounterMetric } from "../metrics.js";
import { CALL_STREAM_SHAPE, callHttp2Stream, internalsProblem, type CallHttp2Stream } from "./grpc-js-internals.js";

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

/**
 * The HTTP/2 stream to write a Subscribe call's pre-framed events to directly, or undefined (then the call keeps
 * grpc-js's own write path) when grpc-js's internals are not what this expects.
 *
 * grpc-js's server stream is an object-mode Writable whose `_write` waits for the HTTP/2 write callback before it
 * takes the next message, so through `call.write()` one stream moves about one message per event-loop turn: under a
 * publish burst a perfectly healthy reader fell 1024 events behind and was reaped. Its `sendMessage` also allocates
 * and copies a framed buffer per message, that is per subscriber. Writing the event's one framed Buffer (encoded once
 * per event by the broker's encoder, shared by every subscriber) straight to the call's Http2Stream avoids both: Node
 * buffers and coalesces the writes, respects HTTP/2 flow control, and its `write()` return value and `'drain'` keep the
 * backpressure contract. Headers are sent before any event (`sink.open`), and grpc-js's status (`call.end()` /
 * `'error'`) ends the same stream after the data, so the HTTP/2 framing stays what grpc-js would have produced.
 */
function directStreamOf(call: object): CallHttp2Stream | undefined {
  return callHttp2Stream(call);
}

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
  /** Subscribe streams started, by write path: "direct" (pre-framed bytes to the HTTP/2 stream) or "grpc-js". */
  writePaths?: CounterMetric<"path">;
}

/** The `io.cloudevents.v1.Pubsub` implementation and the set of its open streams. */
export function createPubsubGrpc(deps: PubsubGrpcDeps): { impl: ServiceImpl; streams: StreamSet } {
  const { ops, broker, logger } = deps;
  const open = new Set<grpc.ServerWritableStream<SubscribeRequest__Output, Buffer>>();

  let warnedNoDirect = false;
  const hardReset = (call: grpc.ServerWritableStream<unknown, unknown>): void => {
    const s = callHttp2Stream(call);
    if (s && !s.closed) s.close(h2.NGHTTP2_CANCEL);
  };

  const subscribe = rawResponses((call: grpc.ServerWritableStream<SubscribeRequest__Output, Buffer>) => {
    const requested = call.request?.topics ?? [];
    const topics = requested.length > 0 ? [...requested] : [DEFAULT_TOPIC];
    for (const [i, t] of topics.entries()) {
      const problem = topicProblem(t);
      if (problem) return void call.emit("error", toStatusObject(new GatewayError(Code.INVALID_ARGUMENT, `topics[${i}] ${problem}`)));
    }
    open.add(call);
    const ac = new AbortController();
    let sub: Subscription | undefined;
    /** The call has its status (grpc-js 'finish') or was cancelled: nothing more is written to it. */
    let done = false;
    const direct = directStreamOf(call);
    deps.writePaths?.inc({ path: direct ? "direct" : "grpc-js" });
    if (!direct && !warnedNoDirect) {
      warnedNoDirect = true;
      logger.warn({}, `${internalsProblem(CALL_STREAM_SHAPE)}: Subscribe streams fall back to grpc-js's slower write path`);
    }
    // With direct writes grpc-js finishes the call as soon as the status is handed over, while the HTTP/2 stream may
    // still hold buffered events and the trailers for a client that stopped reading: the stream stays in `open`
    // (so destroy() can reset it) until the HTTP/2 stream itself closes.
    if (direct) direct.on("close", () => open.delete(call));
    const finish = (): void => {
      done = true;
      if (!direct) open.delete(call);
    };
    call.on("cancelled", () => {
      ac.abort();
      sub?.close();
      finish();
      open.delete(call);
    });
    call.on("finish", finish);
    if (direct) direct.on("drain", () => sub?.drain());
    else call.on("drain", () => sub?.drain());

    broker
      .subscribe(
        topics,
        {
          // A framed Buffer from the broker's encoder, shared by every subscriber of the event.
          write: direct
            ? (bytes) => (done || direct.destroyed || direct.closed ? false : direct.write(bytes))
            : // grpc-js frames again (identity serializer): hand it the bare message.
              (bytes) => call.write((bytes as Buffer).subarray(GRPC_MESSAGE_PREFIX)),
          open: (id) => {
            const md = new grpc.Metadata();
            md.set(SUBSCRIPTION_ID_HEADER, id);
            call.sendMetadata(md);
          },
          end: (reason) => {
            if (done) return;
            const err = statusOfEnd(reason);
            if (!err) {
              call.end();
              return;
            }
            call.emit("error", toStatusObject(err));
            if (reason.kind === "slow" || reason.kind === "stuck") {
              logger.warn({ subscriptionId: sub?.id, topics, reason: reason.kind }, err.rawMessage);
              // The status travels behind the data already buffered for this stream; a client that never reads
              // again would hold the stream open forever, so reset it after a grace period. Not gated on `done`:
              // grpc-js reports the call finished once the status is queued, long before this client reads it.
              setTimeout(() => hardReset(call), deps.reapGraceMs).unref();
            }
          },
        },
        ac.signal,
      )
      .then(
        (s) => {
          sub = s;
          // Cancelled in the instant between attach and here: the cancel handler saw no subscription yet.
          if (ac.signal.aborted || done) s.close();
        },
        (e: unknown) => {
          if (done) return;
          const kind = subscribeFailureKind(e);
          if (kind === "cancelled") return;
          // The broker's failure carries its code; anything else thrown while subscribing is UNAVAILABLE.
          const err = kind ? (e as GatewayError) : new GatewayError(Code.UNAVAILABLE, (e as Error).message, { cause: e });
          logger.warn({ topics, code: err.codeName, err: err.rawMessage }, "subscribe failed");
          call.emit("error", toStatusObject(err));
        },
      );
  });

  // Subscribe writes pre-encoded SubscribeResponse bytes (rawResponses), so its call is typed with Buffer responses.
  const impl: Omit<GrpcImpl<PubsubHandlers>, "Subscribe"> & { Subscribe: ServerStreamMethod } = {
    PublishEvent: async (req, ctx) => ({
      status: await ops.publish(req.topic, req.cloudevent, ctx.signal),
    }),
    Subscribe: subscribe,
    Unsubscribe: async (req) => ({ status: ops.unsubscribe(req.subscription_id) }),
  };
  return {
    impl,
    streams: {
      dropAll() {
        for (const call of [...open]) hardReset(call);
        open.clear();
      },
      get size() {
        return open.size;
      },
    },
  };
}
