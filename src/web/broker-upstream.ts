import { randomBytes } from "node:crypto";
import type { Broker } from "../broker/index.js";
import { cloudEventToJson } from "../shared/cloudevent-json.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import type { Logger } from "../observe/logger.js";
import { WebEvent, type HubUpstream } from "./hub.js";

/**
 * The main hub's upstream: the broker, one fanout attachment per topic. The sequence numbers are issued here, one per
 * event of a followed topic, and the epoch drawn here is the process's: every position, on any thread, is one of
 * these. Each event is serialized to CloudEvents JSON once, for every transport and thread.
 */
export function brokerUpstream(broker: Broker, logger: Logger): HubUpstream {
  const epoch = randomBytes(6).toString("hex");
  let seq = 0;
  return {
    epoch,
    linger: true,
    // Nothing is in flight on the main thread: every event up to the last number issued has reached its topic.
    seq: () => seq,
    async follow(topic, sink) {
      const handle = await broker.attachFanout(topic, {
        event: (_topic, ce) => {
          let json: string;
          try {
            json = JSON.stringify(cloudEventToJson(ce as CloudEvent));
          } catch (err) {
            logger.error({ topic, err }, "pub/sub event could not be serialized as JSON and was dropped");
            return;
          }
          const s = ++seq;
          sink.event(new WebEvent(topic, s, `${epoch}-${s}`, json));
        },
        end: (reason) => sink.end(reason),
      });
      // The hub's own linger (the history age) is the topic's retention: the broker does not linger again.
      return { completeAfter: seq, events: [], stop: () => handle.close({ linger: false }) };
    },
  };
}
