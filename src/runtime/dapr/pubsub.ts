import type { CloudEvent } from "../../shared/cloudevent.js";
import type { PubsubPort, UpstreamSubscription } from "../pubsub-port.js";
import type { RuntimeLogger } from "../runtime.js";
import { cloudEventToJson } from "../../shared/cloudevent-json.js";
import type { DaprConnection } from "./connection.js";
import { TopicStream, type BackoffOptions } from "./topic-stream.js";

/** The Dapr pub/sub port plus what the runtime needs to shut it down. */
export interface DaprPubsub extends PubsubPort {
  /** Streams open right now (one per subscribe() call still open). */
  readonly openStreams: number;
  /** Close every stream. */
  close(): void;
}

/**
 * PubsubPort over Dapr: publish sends the event in the CloudEvents JSON format (`application/cloudevents+json`, so
 * daprd keeps its attributes); subscribe opens one `SubscribeTopicEventsAlpha1` stream per call (the broker makes it
 * one per topic per process) that survives sidecar restarts.
 */
export function createDaprPubsub(conn: DaprConnection, pubsubName: string, logger: RuntimeLogger, backoff: BackoffOptions = {}): DaprPubsub {
  const streams = new Set<TopicStream>();
  return {
    get openStreams() {
      return streams.size;
    },
    async publish(topic: string, event: CloudEvent, signal?: AbortSignal): Promise<void> {
      const data = Buffer.from(JSON.stringify(cloudEventToJson(event)), "utf8");
      await conn.unary(
        "PublishEvent",
        { pubsub_name: pubsubName, topic, data, data_content_type: "application/cloudevents+json", metadata: {} },
        signal ? { signal } : {},
      );
    },
    async subscribe(topic, handlers, signal): Promise<UpstreamSubscription> {
      const stream = new TopicStream(conn, pubsubName, topic, handlers, logger, backoff, (s) => streams.delete(s));
      streams.add(stream);
      try {
        await stream.open(signal);
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
