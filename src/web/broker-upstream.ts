import { randomBytes } from "node:crypto";
import type { Broker } from "../broker/index.js";
import type { StreamPositions } from "../runtime/pubsub-port.js";
import { cloudEventToJson } from "../shared/cloudevent-json.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import type { Logger } from "../observe/logger.js";
import type { ExemplarIds } from "../observe/metrics.js";
import { pollUntil } from "../shared/timers.js";
import { WebEvent, type HubUpstream } from "./hub.js";
import { eventMark, formatPosition, type PositionScheme } from "./positions.js";

/** How long a resume waits for this process to have read the runtime up to the position's number, ms. */
const CATCH_UP_MS = 2_000;
/** How often that wait looks again, ms. */
const CATCH_UP_POLL_MS = 5;

/** What the broker upstream needs to know about the runtime's positions. */
export interface BrokerUpstreamOptions {
  /** The runtime's cluster-wide positions (the redis runtime); without them the process issues its own. */
  positions?: StreamPositions;
  /** Epoch positions of events carry the event's identity (the Dapr runtime: positions.ts). */
  marks: boolean;
}

/**
 * The main hub's upstream: the broker, one fanout attachment per topic. Each event is serialized to CloudEvents JSON
 * once, for every transport and thread. Its number is the runtime's stream position when the runtime has them (the
 * same on every replica), else one issued here under the process's epoch: every position, on any thread, is one of
 * these.
 */
export function brokerUpstream(broker: Broker, logger: Logger, options: BrokerUpstreamOptions): HubUpstream {
  const { positions } = options;
  const scheme: PositionScheme = positions ? { kind: "stream" } : { kind: "epoch", epoch: randomBytes(6).toString("hex"), marks: options.marks };
  let seq = 0;
  const toWeb = (topic: string, ce: CloudEvent, n: number, receivedAt?: number, exemplar?: ExemplarIds): WebEvent | undefined => {
    let json: string;
    try {
      json = JSON.stringify(cloudEventToJson(ce));
    } catch (err) {
      logger.error({ topic, err }, "pub/sub event could not be serialized as JSON and was dropped");
      return undefined;
    }
    const mark = scheme.kind === "epoch" && scheme.marks ? eventMark(topic, ce.source, ce.id) : undefined;
    return new WebEvent(topic, n, formatPosition(scheme, n, mark), json, ce, receivedAt, exemplar);
  };
  const upstream: HubUpstream = {
    scheme,
    linger: true,
    // Nothing is in flight on the main thread: every event up to the last number issued (or, with stream positions,
    // the runtime's current one) has reached its topic.
    seq: positions ? () => positions.current() : () => seq,
    async follow(topic, sink) {
      const handle = await broker.attachFanout(topic, {
        event: (_topic, ce, n, trace, receivedAt) => {
          const num = positions ? n : ++seq;
          if (num === undefined) return logger.error({ topic }, "pub/sub event without a stream position was dropped");
          const e = toWeb(topic, ce as CloudEvent, num, receivedAt, trace?.exemplar);
          if (e) sink.event(e, trace);
        },
        end: (reason) => sink.end(reason),
      });
      // The hub's own linger (the history age) is the topic's retention: the broker does not linger again.
      return { completeAfter: upstream.seq(), events: [], stop: () => handle.close({ linger: false }) };
    },
  };
  if (!positions) return upstream;
  return {
    ...upstream,
    // A position another replica issued may be ahead of what this one has read: wait for it, bounded.
    catchUp(target) {
      const reached = (): boolean => positions.current() >= target;
      return reached() ? undefined : pollUntil(reached, CATCH_UP_MS, CATCH_UP_POLL_MS);
    },
    async history(topic, since, limit) {
      const held = await positions.history(topic, since, limit);
      const events: WebEvent[] = [];
      for (const h of held.events) {
        const e = toWeb(topic, h.event, h.seq);
        if (e) events.push(e);
      }
      return { complete: held.complete && events.length === held.events.length, events };
    },
  };
}
