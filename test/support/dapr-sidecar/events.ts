import { randomBytes, randomUUID } from "node:crypto";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import { objectToStruct } from "../../../src/runtime/dapr/struct.js";
import { goJsonMarshal } from "./go-json.js";

/** A CloudEvent in the JSON format, as the broker stores it. */
export type Envelope = Record<string, unknown>;

const CORE = new Set(["id", "source", "type", "specversion", "datacontenttype", "data", "data_base64"]);

function isJson(ct: string): boolean {
  const base = ct.split(";")[0]!.trim().toLowerCase();
  return base.endsWith("/json") || base.endsWith("+json");
}

/**
 * What daprd does with a PublishEvent: `application/cloudevents+json` data is taken as the event (attributes kept,
 * `time`, `traceparent`/`traceid` (when traceid is absent) and `tracestate` added, `topic` and `pubsubname`
 * overwritten); any other content type is wrapped in a new event of type com.dapr.event.sent.
 *
 * The trace context daprd writes is its own span's for the PublishEvent call (dapr `pkg/api/grpc/grpc.go`
 * PublishEvent, through `pkg/runtime/pubsub/cloudevents.go` NewCloudEvent into contrib `pubsub/envelope.go`
 * FromCloudEvent / NewCloudEventsEnvelope, which set `traceid` and `traceparent` to the same value): a child of the
 * call's `traceparent` metadata when it has one (the same trace id, daprd's span id), else a new trace.
 */
export function envelopeOf(
  req: { pubsub_name: string; topic: string; data: Uint8Array; data_content_type: string },
  appId: string,
  callTraceparent?: string,
): Envelope {
  const ct = req.data_content_type || "text/plain";
  const bytes = Buffer.from(req.data ?? []);
  let env: Envelope;
  if (ct.split(";")[0]!.trim().toLowerCase() === "application/cloudevents+json") {
    try {
      env = JSON.parse(bytes.toString("utf8")) as Envelope;
    } catch (e) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `error when unmarshalling the cloud event envelope for topic ${req.topic}: ${(e as Error).message}`);
    }
    if (typeof env !== "object" || env === null || Array.isArray(env)) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `cloud event envelope for topic ${req.topic} is not a JSON object`);
    }
    env = { ...env };
  } else {
    env = { specversion: "1.0", id: randomUUID(), source: appId, type: "com.dapr.event.sent", datacontenttype: ct };
    if (isJson(ct)) {
      try {
        env["data"] = JSON.parse(bytes.toString("utf8"));
      } catch {
        env["data_base64"] = bytes.toString("base64");
      }
    } else if (ct.split(";")[0]!.trim().toLowerCase() === "application/octet-stream") env["data_base64"] = bytes.toString("base64");
    else env["data"] = bytes.toString("utf8"); // daprd keeps it as a string; delivery then drops it unless text/*
  }
  env["time"] ??= new Date().toISOString();
  if (env["traceid"] === undefined) {
    const caller = /^00-([0-9a-f]{32})-[0-9a-f]{16}-([0-9a-f]{2})$/.exec(callTraceparent ?? "");
    const tp = `00-${caller?.[1] ?? randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-${caller?.[2] ?? "01"}`;
    env["traceparent"] = tp;
    env["traceid"] = tp;
  }
  env["tracestate"] ??= "";
  env["topic"] = req.topic;
  env["pubsubname"] = req.pubsub_name;
  return env;
}

/**
 * The TopicEventRequest daprd streams for an envelope (dapr `pkg/runtime/pubsub/subscriptions.go`
 * GRPCEnvelopeFromSubscriptionMessage with contrib `contenttype/utils.go`; the stored event was decoded with float64
 * numbers first): `data_base64` decoded to its bytes; otherwise `data` only for string content types (text/*,
 * application/xml; a non-string value there is undeliverable, sent here as empty) as the string's bytes, and for
 * EXACTLY application/json or application/cloudevents+json re-encoded by encoding/json (keys sorted, `<>&` escaped);
 * ANY OTHER content type (`*+json`, `*+xml`, none) arrives EMPTY. Every non-core attribute goes in `extensions`.
 */
export function topicEventOf(env: Envelope, topic: string, pubsubName: string): object {
  const ct = typeof env["datacontenttype"] === "string" ? (env["datacontenttype"] as string) : "";
  const base = ct.split(";")[0]!.trim().toLowerCase();
  let data = Buffer.alloc(0);
  if (typeof env["data_base64"] === "string") data = Buffer.from(env["data_base64"] as string, "base64");
  else if (env["data"] !== undefined && env["data"] !== null) {
    if (base.startsWith("text/") || base === "application/xml") {
      if (typeof env["data"] === "string") data = Buffer.from(env["data"] as string, "utf8");
    } else if (base === "application/json" || base === "application/cloudevents+json") {
      data = Buffer.from(goJsonMarshal(JSON.stringify(env["data"])), "utf8");
    }
  }
  const extensions: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(env)) if (!CORE.has(k)) extensions[k] = v;
  return {
    id: String(env["id"] ?? ""),
    source: String(env["source"] ?? ""),
    type: String(env["type"] ?? ""),
    spec_version: String(env["specversion"] ?? ""),
    data_content_type: ct,
    data,
    topic,
    pubsub_name: pubsubName,
    path: "",
    extensions: objectToStruct(extensions),
  };
}
