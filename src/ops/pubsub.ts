import type { Broker } from "../broker/index.js";
import { Code } from "../shared/code.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { statusOf, statusOk, type Status } from "../shared/status.js";
import { validatePublish, withPublishDefaults } from "./cloudevent-validate.js";
import type { GatewayContext } from "./context.js";
import { echo } from "../shared/echo.js";

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
  publish(topic: string | undefined | null, event: CloudEvent | undefined | null, signal?: AbortSignal): Promise<Status>;
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
  return {
    async publish(topic, event, signal) {
      validatePublish(topic, event);
      const e = withPublishDefaults(event);
      try {
        await ctx.runtime.pubsub.publish(topic!, e, signal);
      } catch (err) {
        const ge = GatewayError.from(err, Code.UNAVAILABLE);
        published.inc({ result: "failed" });
        ctx.logger.warn({ topic, eventId: e.id, code: ge.codeName, err: ge.rawMessage }, "publish failed in the runtime");
        return { code: ge.code, message: `publishing to topic '${echo(topic)}' failed: ${ge.rawMessage}` };
      }
      published.inc({ result: "ok" });
      return statusOk();
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
