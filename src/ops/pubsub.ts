import type { Broker, FanoutTrace } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { attributeToValue, type CloudEvent } from "../shared/cloudevent.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { statusOf, statusOk, type Status } from "../shared/status.js";
import { validatePublish, withPublishDefaults } from "./cloudevent-validate.js";
import type { GatewayContext } from "./context.js";
import { echo } from "../shared/echo.js";
import type { TraceIncoming, TraceSpan, Tracer } from "../observe/span.js";
import type { CancelSignal } from "../shared/signals.js";

/**
 * Topics one subscription may name, on every front: one gRPC Subscribe call, one WebSocket (SSE names at most
 * MAX_SSE_TOPICS, its topics travel in the URL). Each topic can be an upstream subscription (on Dapr, a daprd stream),
 * so one request must not open thousands.
 */
export const MAX_SUBSCRIPTION_TOPICS = 256;

/** The pub/sub operations shared by the gRPC and REST front ends. */
export interface PubsubOps {
  /**
   * Publish one event: INVALID_ARGUMENT (thrown) for bad input; runtime failures come back as the status (in-band on
   * the wire). Fills a missing id (UUID) and spec_version ("1.0").
   */
  publish(topic: string | undefined | null, event: CloudEvent | undefined | null, signal?: CancelSignal, trace?: TraceIncoming): Promise<Status>;
  /** Whether publishes are traced: the fronts hand `publish` a TraceIncoming only then. */
  readonly tracing: boolean;
  /** End the Subscribe stream whose `x-subscription-id` is `id`; NOT_FOUND (a status, in-band) for an unknown id. */
  unsubscribe(id: string | undefined | null): Status;
}

/** Create the pub/sub operations over the runtime's pub/sub port and the broker. */
export function createPubsubOps(ctx: GatewayContext, broker: Broker): PubsubOps {
  const published = ctx.metrics.counter(
    "platform_pubsub_events_published_total",
    "Publish requests that passed validation, by result (ok: the runtime accepted the event; failed: reported in-band)",
    ["result"],
  );
  const tracer = ctx.tracer;
  const tracing = tracer?.on === true;
  const publishHere = async (topic: string, e: CloudEvent, signal: CancelSignal | undefined, span: TraceSpan | undefined): Promise<Status> => {
    const producer = span ? producerSpan(span, topic, e) : undefined;
    try {
      await ctx.runtime.pubsub.publish(topic, producer ? producer.event : e, signal);
    } catch (err) {
      const ge = GatewayError.from(err, Code.UNAVAILABLE);
      producer?.span.end(ge.code, ge.rawMessage);
      published.inc({ result: "failed" });
      ctx.logger.warn({ topic, eventId: e.id, code: ge.codeName, err: ge.rawMessage }, "publish failed in the runtime");
      return { code: ge.code, message: `publishing to topic '${echo(topic)}' failed: ${ge.rawMessage}` };
    }
    producer?.span.end();
    published.inc({ result: "ok" });
    return statusOk();
  };
  return {
    tracing,
    async publish(topic, event, signal, trace) {
      // Tracing off: the fronts hand no trace context, and this check is all a publish pays for tracing.
      if (trace === undefined || !tracing) {
        validatePublish(topic, event);
        return publishHere(topic!, withPublishDefaults(event!), signal, undefined);
      }
      const span = tracer!.start(trace);
      span.set("messaging.operation.type", "send");
      try {
        validatePublish(topic, event);
        span.set("messaging.destination.name", topic!);
        const status = await publishHere(topic!, withPublishDefaults(event!), signal, span);
        span.end(status.code, status.message);
        return status;
      } catch (e) {
        const s = GatewayError.from(e);
        span.end(s.code, s.rawMessage);
        throw e;
      }
    },
    unsubscribe(id) {
      if (typeof id !== "string" || id === "") {
        return statusOf(invalidArgument("subscription_id", "must not be empty: use the x-subscription-id response header of the Subscribe call"));
      }
      if (!broker.unsubscribe(id)) {
        return { code: Code.NOT_FOUND, message: `no live subscription with id '${echo(id)}' on this gateway` };
      }
      return statusOk();
    },
  };
}

/** A string-valued attribute of an event (an extension such as `traceparent`), undefined when absent or empty. */
function stringAttribute(e: CloudEvent, name: string): string | undefined {
  const v = e.attributes?.[name];
  if (v === undefined) return undefined;
  const s = attributeToValue(v);
  return typeof s === "string" && s !== "" ? s : undefined;
}

/**
 * The runtime call's producer span (messaging conventions: "publish <topic>") and the event to hand the runtime. As
 * Dapr does, the span's context travels in the event as the CloudEvents `traceparent` and `tracestate` extensions, so
 * the delivery side continues it. An event that already carries a `traceparent` keeps it (its producer's context is
 * the one the event belongs to): the span is linked to it instead.
 */
export function producerSpan(parent: TraceSpan, topic: string, e: CloudEvent): { span: TraceSpan; event: CloudEvent } {
  const own = stringAttribute(e, "traceparent");
  const attributes = { "messaging.operation.type": "send", "messaging.destination.name": topic, "messaging.message.id": e.id };
  const span = parent.child(`publish ${topic}`, "producer", attributes, own);
  if (own !== undefined) return { span, event: e };
  const h = span.headers();
  const attrs: CloudEvent["attributes"] = { ...e.attributes, traceparent: { ce_string: h.traceparent } };
  if (h.tracestate) attrs["tracestate"] = { ce_string: h.tracestate };
  else delete attrs["tracestate"];
  return { span, event: { ...e, attributes: attrs } };
}

/**
 * One event's fan-out span: its deliveries by transport, kept until the end (the outlets report as they go) and then
 * set as `gateway.deliveries.<transport>`.
 */
class FanoutSpan implements FanoutTrace {
  private readonly counts = new Map<string, number>();
  /** Plain values (they cross to the uWS worker threads with the event, and stay in the resume history with it). */
  readonly exemplar: FanoutTrace["exemplar"];
  constructor(private readonly span: TraceSpan) {
    this.exemplar = span.sampled ? { traceId: span.traceId, spanId: span.spanId } : undefined;
  }
  count(transport: string, deliveries: number): void {
    this.counts.set(transport, (this.counts.get(transport) ?? 0) + deliveries);
  }
  end(): void {
    for (const [transport, n] of this.counts) this.span.set(`gateway.deliveries.${transport}`, n);
    this.span.end();
  }
}

/**
 * The fan-out span of one event (tracing on; undefined off): one span per event, whatever the number of subscribers,
 * under the context the event carries (the publish span's, or its producer's), so an event's delivery joins its
 * publish's trace. The broker makes it as the event arrives; each outlet counts its deliveries in it.
 */
export function fanoutTracer(tracer: Tracer | undefined): ((topic: string, event: CloudEvent) => FanoutTrace) | undefined {
  if (tracer?.on !== true) return undefined;
  return (topic, event) => {
    const traceparent = stringAttribute(event, "traceparent");
    const attributes: Record<string, string> = { "messaging.operation.type": "process", "messaging.destination.name": topic };
    if (event.id) attributes["messaging.message.id"] = event.id;
    return new FanoutSpan(
      tracer.start({
        traceparent,
        tracestate: traceparent !== undefined ? stringAttribute(event, "tracestate") : undefined,
        server: { name: `deliver ${topic}`, kind: "consumer", attributes },
      }),
    );
  };
}

/**
 * The span of a subscription's start (tracing on; undefined off): from the request to live, which takes the topics'
 * upstream subscriptions (the runtime's, on a topic's first subscriber) and any resume. The caller ends it.
 */
export function subscribeTracer(tracer: Tracer | undefined): ((trace: TraceIncoming, topics: number) => TraceSpan) | undefined {
  if (tracer?.on !== true) return undefined;
  return (trace, topics) => {
    const span = tracer.start(trace);
    span.set("gateway.topics", topics);
    return span;
  };
}
