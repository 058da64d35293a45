import { cloudEventFromBinary, cloudEventFromJson, isBinaryMode } from "../shared/cloudevent-json.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { Code } from "../shared/code.js";
import { toInBand } from "../shared/status.js";
import { createAuthenticator } from "../ops/auth.js";
import type { PubsubOps } from "../ops/pubsub.js";
import { json, type RestRequest, type Route } from "../http/router.js";
import { traceOfHeaders } from "../ops/forward-metadata.js";
import { httpServerSpan } from "../observe/span.js";

const STRUCTURED = "application/cloudevents+json";
const BATCH = "application/cloudevents-batch+json";
const PUBLISH_SPAN = httpServerSpan("POST", "/v1/pubsub/{topic}");

/** The CloudEvent of a REST publish request, in structured or binary mode (CloudEvents HTTP binding). */
export function cloudEventOfRequest(req: RestRequest): CloudEvent {
  const ct = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (ct === STRUCTURED) {
    if (req.body.length === 0) throw invalidArgument("cloudevent", "is required: the request body is empty");
    return cloudEventFromJson(req.json());
  }
  if (ct === BATCH) throw invalidArgument("content-type", `${BATCH} (batch mode) is not supported: publish one event per request`);
  if (isBinaryMode(req.headers)) return cloudEventFromBinary(req.headers, req.body);
  throw invalidArgument(
    "request",
    `is not a CloudEvent: use structured mode (content-type ${STRUCTURED}, the event as JSON) or binary mode (ce-source, ce-type, ce-id, ce-specversion headers, the body as data)`,
  );
}

/** `POST /v1/pubsub/{topic}`: publish one event; replies `{status: {success, status, message}}`. */
export function pubsubRoutes(ops: PubsubOps): Route[] {
  return [
    {
      method: "POST",
      path: "/v1/pubsub",
      handler: async () => {
        throw invalidArgument("topic", "must not be empty: POST /v1/pubsub/{topic}");
      },
    },
    {
      method: "POST",
      path: "/v1/pubsub/{topic}",
      handler: async (req) => {
        const trace = traceOfHeaders(ops.tracing, req.headers, PUBLISH_SPAN);
        return json({ status: toInBand(await ops.publish(req.params["topic"], cloudEventOfRequest(req), req.signal, trace)) });
      },
    },
  ];
}

/**
 * `GET /dapr/subscribe`: Dapr's declarative subscription callback (HTTP app channel). Subscriptions are made at runtime
 * through streaming, so it answers an empty list (docs/pubsub.md "Subscribe"). It carries no x-api-key; with
 * `appApiToken` set the caller must send that `dapr-api-token`, as daprd does.
 */
export function declarativeSubscriptionsRoute(appApiToken: string | undefined): Route {
  const token = createAuthenticator(appApiToken ? [appApiToken] : []);
  return {
    method: "GET",
    path: "/dapr/subscribe",
    auth: false,
    handler: async (req) => {
      if (!token.check(req.headers["dapr-api-token"])) throw new GatewayError(Code.UNAUTHENTICATED, "missing or invalid dapr-api-token");
      return json([]);
    },
  };
}
