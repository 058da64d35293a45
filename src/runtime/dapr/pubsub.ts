import type { CloudEvent } from "../../shared/cloudevent.js";
import type { PubsubPort, UpstreamSubscription } from "../pubsub-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { cloudEventToJson } from "../../shared/cloudevent-json.js";
import type { DaprConnection } from "./connection.js";
import { SUBSCRIBE_TIMEOUT_MS, TopicStream, type BackoffOptions } from "./topic-stream.js";
import type { CancelSignal } from "../../shared/signals.js";

/** The Dapr pub/sub port plus what the runtime needs to shut it down. */
export interface DaprPubsub extends PubsubPort {
  /** Streams open right now (one per subscribe() call still open). */
  readonly openStreams: number;
  /** Close every stream. */
  close(): void;
}

/**
 * The CloudEvents JSON envelope the gateway publishes through daprd, with the data ALWAYS as `data_base64` (the
 * event's own bytes). daprd decodes a stored event with float64 numbers and, on delivery, passes `data` only for
 * text/* and application/xml (as the string) and for exactly application/json or application/cloudevents+json
 * (re-encoded by Go's encoding/json: keys sorted, `<>&` escaped, big integers rounded); every other content type
 * (`*+json`, `*+xml`, `text/json` objects, none) arrives EMPTY. `data_base64` is decoded to the original bytes for every
 * content type (dapr `pkg/runtime/pubsub/subscriptions.go` GRPCEnvelopeFromSubscriptionMessage), so subscribers get
 * the published bytes and `datacontenttype` unchanged.
 */
export function toDaprEnvelope(event: CloudEvent): Record<string, unknown> {
  const out = cloudEventToJson(event);
  if (out["data"] !== undefined) {
    // cloudEventToJson writes `data` only for text_data (binary and proto data are data_base64 already).
    delete out["data"];
    out["data_base64"] = Buffer.from(event.text_data ?? "", "utf8").toString("base64");
  }
  // daprd fills in `traceparent`, `traceid` and `tracestate` from its own span whenever the event has no `traceid`
  // (contrib `pubsub/envelope.go` FromCloudEvent, called by dapr `pkg/api/grpc/grpc.go` PublishEvent): the event's
  // `traceparent` (the gateway's publish span, or its producer's) survives only with a `traceid` beside it, which is
  // the same value in Dapr's envelopes.
  if (typeof out["traceparent"] === "string" && out["traceparent"] !== "" && out["traceid"] === undefined) out["traceid"] = out["traceparent"];
  return out;
}

/**
 * PubsubPort over Dapr: publish sends the event in the CloudEvents JSON format (`application/cloudevents+json`, so
 * daprd keeps its attributes); subscribe opens one `SubscribeTopicEventsAlpha1` stream per call (the broker makes it
 * one per topic per process) that survives sidecar restarts. A subscribe made while daprd reloads its pub/sub (its
 * "subscriber is closed" answer) is retried with the resubscribe backoff for up to `subscribeTimeoutMs`, then fails
 * UNAVAILABLE (TopicStream.start).
 */
export function createDaprPubsub(
  conn: DaprConnection,
  pubsubName: string,
  logger: RuntimeLogger,
  backoff: BackoffOptions = {},
  subscribeTimeoutMs: number = SUBSCRIBE_TIMEOUT_MS,
): DaprPubsub {
  const streams = new Set<TopicStream>();
  return {
    get openStreams() {
      return streams.size;
    },
    async publish(topic: string, event: CloudEvent, signal?: CancelSignal): Promise<void> {
      const envelope = toDaprEnvelope(event);
      const data = Buffer.from(JSON.stringify(envelope), "utf8");
      // The event's context is the call's too: a daprd that writes its own span's context into the event anyway
      // (contrib FromCloudEvent overwrites `traceparent` in some versions) then keeps it in the same trace.
      const traceparent = typeof envelope["traceparent"] === "string" && envelope["traceparent"] !== "" ? envelope["traceparent"] : undefined;
      await conn.unary(
        "PublishEvent",
        { pubsub_name: pubsubName, topic, data, data_content_type: "application/cloudevents+json", metadata: {} },
        { ...(signal ? { signal } : {}), ...(traceparent ? { traceparent } : {}) },
      );
    },
    async subscribe(topic, handlers, signal): Promise<UpstreamSubscription> {
      const stream = new TopicStream(conn, pubsubName, topic, handlers, logger, backoff, (s) => streams.delete(s));
      streams.add(stream);
      try {
        await stream.start(signal, subscribeTimeoutMs);
      } catch (e) {
        stream.close();
        streams.delete(stream);
        throw conn.translate(e);
      }
      return {
        async close() {
          stream.close();
          streams.delete(stream);
        },
      };
    },
    close() {
      for (const s of streams) s.close();
      streams.clear();
    },
  };
}
