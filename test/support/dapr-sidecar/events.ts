import { randomBytes, randomUUID } from "node:crypto";
import { Code } from "../../../src/shared/code.js";
import { GatewayError } from "../../../src/shared/gateway-error.js";
import { objectToStruct } from "../../../src/runtime/dapr/struct.js";
import { goJsonMarshal } from "./go-json.js";

/** A CloudEvent in the JSON format, as the broker stores it. */
export type Envelope = Record<string, unknown>;

const CORE = new Set(["id", "source", "type", "specversion", "datacontenttype", "data", "data_base64"]);

/** daprd's tracing configuration (`Configuration.spec.tracing`). */
export interface TracingSpec {
  /**
   * `samplingRate`. Default "" (no Configuration): daprd then samples 1 in 10,000 (dapr `pkg/diagnostics/utils/
   * trace_utils.go` GetTraceSamplingRate) and tracing is ON. "0" turns tracing off.
   */
  samplingRate?: string;
}

/** dapr GetTraceSamplingRate: the rate, 1e-4 when it does not parse. */
function samplingRate(spec: TracingSpec | undefined): number {
  const raw = spec?.samplingRate ?? "";
  const f = raw.trim() === "" ? NaN : Number(raw);
  return Number.isFinite(f) ? f : 1e-4;
}

/** OpenTelemetry's TraceIDRatioBased sampler: the trace id's low 8 bytes, shifted right once, below rate * 2^63. */
function ratioSampled(traceId: string, rate: number): boolean {
  if (rate >= 1) return true;
  if (rate <= 0) return false;
  const x = BigInt(`0x${traceId.slice(16)}`) >> 1n;
  return x < BigInt(Math.floor(rate * 2 ** 63));
}

/**
 * The trace context daprd writes into a published event: its own span's for the PublishEvent call (dapr
 * `pkg/api/grpc/grpc.go` PublishEvent, diag.TraceIDAndStateFromSpan). With tracing off (samplingRate "0") daprd
 * installs no tracing interceptor, the span is a no-op and both strings are EMPTY, whatever the caller sent. With
 * tracing on, the span is a child of the call's `traceparent`/`tracestate` metadata when it has a valid one (same
 * trace id, a new span id, the caller's sampled flag: ParentBased sampler; its tracestate), else a new trace sampled
 * by the rate (1 in 10,000 by default, so flags "00").
 */
export function publishTraceContext(spec: TracingSpec | undefined, callTraceparent?: string, callTracestate?: string): { traceparent: string; tracestate: string } {
  const rate = samplingRate(spec);
  if (rate === 0) return { traceparent: "", tracestate: "" };
  const caller = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(callTraceparent ?? "");
  const valid = caller && !/^0+$/.test(caller[1]!) && !/^0+$/.test(caller[2]!);
  const span = randomBytes(8).toString("hex");
  if (valid) {
    const sampled = (parseInt(caller[3]!, 16) & 1) === 1;
    return { traceparent: `00-${caller[1]}-${span}-${sampled ? "01" : "00"}`, tracestate: callTracestate ?? "" };
  }
  const trace = randomBytes(16).toString("hex");
  return { traceparent: `00-${trace}-${span}-${ratioSampled(trace, rate) ? "01" : "00"}`, tracestate: "" };
}

/**
 * What daprd does with a PublishEvent: `application/cloudevents+json` data is taken as the event (attributes kept,
 * `time`, `traceparent`/`traceid` (when traceid is absent) and `tracestate` (when absent) added, `topic` and
 * `pubsubname` overwritten: contrib `pubsub/envelope.go` FromCloudEvent); any other content type is wrapped in a new
 * event of type com.dapr.event.sent (NewCloudEventsEnvelope, `traceid` and `traceparent` the same value). The trace
 * context is publishTraceContext's.
 */
export function envelopeOf(
  req: { pubsub_name: string; topic: string; data: Uint8Array; data_content_type: string },
  appId: string,
  callTraceparent?: string,
  callTracestate?: string,
  tracing?: TracingSpec,
): Envelope {
  const ct = req.data_content_type || "text/plain";
  const bytes = Buffer.from(req.data ?? []);
  let env: Envelope;
  if (isContentType(ct, "application/cloudevents+json")) {
    try {
      env = JSON.parse(bytes.toString("utf8")) as Envelope;
    } catch (e) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `error when unmarshalling the cloud event envelope for topic ${req.topic}: ${(e as Error).message}`);
    }
    if (typeof env !== "object" || env === null || Array.isArray(env)) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `cloud event envelope for topic ${req.topic} is not a JSON object`);
    }
    env = { ...env };
    // FromCloudEvent: defaults for these three when missing or null.
    env["source"] ??= "Dapr";
    env["type"] ??= "com.dapr.event.sent";
    env["specversion"] ??= "1.0";
  } else {
    // NewCloudEventsEnvelope: JSON for EXACTLY application/json (kept as a string when it does not parse), base64 for
    // application/octet-stream, a string for everything else.
    env = { specversion: "1.0", id: randomUUID(), source: appId, type: "com.dapr.event.sent", datacontenttype: ct };
    if (isContentType(ct, "application/json")) {
      try {
        env["data"] = JSON.parse(bytes.toString("utf8"));
      } catch {
        env["data"] = bytes.toString("utf8");
      }
    } else if (isContentType(ct, "application/octet-stream")) env["data_base64"] = bytes.toString("base64");
    else env["data"] = bytes.toString("utf8"); // delivery then passes it only for text/* and application/xml
  }
  // Go's time.RFC3339 (whole seconds).
  if (!("time" in env)) env["time"] = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
  const trace = publishTraceContext(tracing, callTraceparent, callTracestate);
  if (!("traceid" in env)) {
    env["traceparent"] = trace.traceparent;
    env["traceid"] = trace.traceparent;
  }
  if (!("tracestate" in env)) env["tracestate"] = trace.tracestate;
  env["topic"] = req.topic;
  env["pubsubname"] = req.pubsub_name;
  return env;
}

/** contrib `contenttype/utils.go` isContentType: lower-cased, exact, or exact before a `;` (no trimming). */
function isContentType(ct: string, expected: string): boolean {
  const lower = ct.toLowerCase();
  if (lower === expected) return true;
  const semi = lower.indexOf(";");
  return semi >= 0 && lower.slice(0, semi) === expected;
}

/** contrib IsStringContentType: a `text/` prefix, or application/xml. */
function isStringContentType(ct: string): boolean {
  return ct.toLowerCase().startsWith("text/") || isContentType(ct, "application/xml");
}

/** dapr ExtractCloudEventProperty: the attribute when it is a string, else "". */
function prop(env: Envelope, key: string): string {
  return typeof env[key] === "string" ? (env[key] as string) : "";
}

/**
 * The TopicEventRequest daprd streams for an envelope (dapr `pkg/runtime/pubsub/subscriptions.go`
 * GRPCEnvelopeFromSubscriptionMessage with contrib `contenttype/utils.go`; the stored event was decoded with float64
 * numbers first): `data_base64` decoded to its bytes; otherwise `data` only for string content types (text/*,
 * application/xml) as the string's bytes, and for EXACTLY application/json or application/cloudevents+json re-encoded
 * by encoding/json (keys sorted, `<>&` escaped); ANY OTHER content type (`*+json`, `*+xml`, none) arrives EMPTY. Every
 * non-core attribute goes in `extensions`.
 *
 * Some events cannot be delivered at all: a string content type whose `data` is not a string, a `data_base64` that is
 * not a string or not base64. daprd then returns a retriable error without calling the app ("unexpected data type
 * encountered in envelope"); `{ undeliverable }` says why.
 */
export function topicEventOf(env: Envelope, topic: string, pubsubName: string): { event: object } | { undeliverable: string } {
  const ct = prop(env, "datacontenttype");
  let data = Buffer.alloc(0);
  const b64 = env["data_base64"];
  if (b64 !== undefined && b64 !== null) {
    if (typeof b64 !== "string") return { undeliverable: "unexpected data type encountered in envelope" };
    // Go's base64.StdEncoding: padded standard alphabet only (it skips \r and \n).
    const text = b64.replace(/[\r\n]/g, "");
    if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) return { undeliverable: "illegal base64 data in data_base64" };
    data = Buffer.from(text, "base64");
  } else if (env["data"] !== undefined && env["data"] !== null) {
    if (isStringContentType(ct)) {
      if (typeof env["data"] !== "string") return { undeliverable: "unexpected data type encountered in envelope" };
      data = Buffer.from(env["data"] as string, "utf8");
    } else if (isContentType(ct, "application/json") || isContentType(ct, "application/cloudevents+json")) {
      data = Buffer.from(goJsonMarshal(JSON.stringify(env["data"])), "utf8");
    }
  }
  const extensions: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(env)) if (!CORE.has(k)) extensions[k] = v;
  return {
    event: {
      id: prop(env, "id"),
      source: prop(env, "source"),
      type: prop(env, "type"),
      spec_version: prop(env, "specversion"),
      data_content_type: ct,
      data,
      topic,
      pubsub_name: pubsubName,
      path: "",
      extensions: objectToStruct(extensions),
    },
  };
}
