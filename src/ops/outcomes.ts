/**
 * The route-by-outcome table: for every route the gateway serves (each gRPC method, REST route, WebSocket and SSE
 * endpoint), how each kind of failure reaches the caller: as an error status (a gRPC status code, an HTTP error
 * status, a WebSocket error frame or refused upgrade), in-band (`success: false` with the code name in a reply that
 * is itself OK, see src/shared/status.ts), or not at all (the call succeeds, e.g. with an empty answer).
 *
 * The table records the behaviour as it is; it is data so that a test (test/integration/outcomes.test.ts) drives
 * every entry over real sockets and fails when the gateway answers otherwise, and when a route is served that has no
 * entry here (Gateway.routes), as fastify's test fails on an undocumented error code. docs/errors.md renders it.
 */
import type { Code } from "../shared/code.js";

/** The fronts. "grpc" includes the transparent proxy and server reflection. */
export type Front = "grpc" | "rest" | "websocket" | "sse";

/** The kinds of failure the table distinguishes. */
export type Failure =
  /** No x-api-key (or a wrong one). */
  | "unauthenticated"
  /** A browser Origin the --cors-origin policy does not allow (per route on the web fronts; REST: EVERY_ROUTE). */
  | "forbidden"
  /** A request body or frame that is not JSON at all (before any field is read). */
  | "malformed"
  /** A field that is missing, of the wrong type or out of range. */
  | "invalid"
  /** The named thing does not exist: a service, method, key, trigger, subscription or file. */
  | "missing"
  /** The backend or the runtime (sidecar) failed the operation with its own code. */
  | "upstream";

/** Every failure kind, in the order the docs list them. */
export const FAILURES: readonly Failure[] = ["unauthenticated", "forbidden", "malformed", "invalid", "missing", "upstream"];

/** How a failure reaches the caller. */
export type Delivery = "status" | "in-band" | "none";

/** The outcome of one failure on one route. */
export interface Outcome {
  readonly via: Delivery;
  /**
   * The code name the caller sees (status or in-band). Absent for `upstream`, which carries the backend's or the
   * runtime's own code, and for `none`.
   */
  readonly code?: keyof typeof Code;
  /** The HTTP status, where it is not the code's usual mapping (src/shared/code.ts httpStatusOf). */
  readonly http?: number;
}

/** One route of the table. */
export interface OutcomeRoute {
  readonly front: Front;
  /** As Gateway.routes names it: "platform.State/SaveState", "POST /v1/state/save-state", "WS /v1/pubsub/ws". */
  readonly route: string;
  /** A part of the route with outcomes of its own, e.g. "op publish" on the pub/sub WebSocket. */
  readonly part?: string;
  /** How each failure kind that can happen on the route reaches the caller. */
  readonly outcomes: Readonly<Partial<Record<Failure, Outcome>>>;
  /** Why, where the choice is not obvious. */
  readonly note?: string;
  /** Served only with this runtime (`--sidecar dapr`: Dapr's app callbacks on the gateway's gRPC port). */
  readonly runtime?: "dapr";
}

const status = (code: keyof typeof Code, http?: number): Outcome => (http === undefined ? { via: "status", code } : { via: "status", code, http });
const inBand = (code: keyof typeof Code): Outcome => ({ via: "in-band", code });
const none: Outcome = { via: "none" };
const upstreamStatus: Outcome = { via: "status" };
const upstreamInBand: Outcome = { via: "in-band" };

const unauthenticated = status("UNAUTHENTICATED");
const invalid = status("INVALID_ARGUMENT");
const notFound = status("NOT_FOUND");
/** A keyed route's outcomes: no key is UNAUTHENTICATED, plus `more`. */
const keyed = (more: Partial<Record<Failure, Outcome>> = {}): Partial<Record<Failure, Outcome>> => ({ unauthenticated, ...more });
/** Invoke's outcomes on every front: whatever goes wrong with the invocation itself is in-band. */
const invokeInBand = { invalid: inBand("INVALID_ARGUMENT"), missing: inBand("NOT_FOUND"), upstream: upstreamInBand };

/**
 * Failures that end the call the same way on every route, whatever its row says. They are not per route, so the
 * outcome test does not drive them; the suites named test them.
 */
export const EVERY_ROUTE = [
  "a request body or message over --max-body-bytes: RESOURCE_EXHAUSTED (HTTP 413; Connect's 429 and gRPC-Web's grpc-status 8 on the browser RPC routes; a WebSocket frame closes the socket with 1009) (rest-router, web-fronts-qa, web-pubsub, ws-oversize, connect-web tests)",
  "a REST reply over 64 KiB while its HTTP thread already holds --max-unread-reply-bytes for clients that have not read theirs: UNAVAILABLE (HTTP 503, retry-after 1) (rest-stalled-replies test)",
  "a REST state query or bulk get reply while --max-unread-reply-bytes of such replies are already being built: UNAVAILABLE (HTTP 503, retry-after 1) (json-items unit test, the REST class of the attack suite)",
  "a REST request whose browser Origin is neither the gateway's own nor listed in --cors-origin: PERMISSION_DENIED (HTTP 403), before the body is read; with no API key configured, a keyed route or web front reached through a Host that is not loopback: PERMISSION_DENIED (HTTP 403) (rest-origin, rest-origin-browser tests)",
  "the gateway is shutting down: UNAVAILABLE (HTTP 503) (shutdown, health-metrics tests)",
  "an unknown REST path: NOT_FOUND (HTTP 404); a known path with another method: UNIMPLEMENTED (HTTP 405 with Allow) (rest-router test)",
  "the caller's deadline passed: DEADLINE_EXCEEDED; the caller cancelled: CANCELLED (dispatch-resilience, client tests)",
] as const;

/** The table. */
export const OUTCOMES: readonly OutcomeRoute[] = [
  // platform.Gateway
  { front: "grpc", route: "platform.Gateway/Invoke", outcomes: keyed(invokeInBand), note: "spec InvokeResponse: the outcome of the invocation is in-band" },
  { front: "grpc", route: "platform.Gateway/InvokeJson", outcomes: keyed(invokeInBand) },
  { front: "grpc", route: "platform.Gateway/InvokeStream", outcomes: keyed(invokeInBand), note: "the last response carries the status" },
  { front: "grpc", route: "platform.Gateway/ListServices", outcomes: keyed() },
  { front: "grpc", route: "platform.Gateway/ListMethods", outcomes: keyed({ invalid, missing: notFound }) },
  { front: "grpc", route: "platform.Gateway/GetMethodSchema", outcomes: keyed({ invalid, missing: notFound }) },
  { front: "rest", route: "GET /v1/gateway/list-services", outcomes: keyed() },
  { front: "rest", route: "GET /v1/gateway/list-methods", outcomes: keyed({ invalid, missing: notFound }) },
  {
    front: "rest",
    route: "POST /v1/gateway/invoke",
    outcomes: keyed({ malformed: invalid, ...invokeInBand }),
    note: "a body that is not a JSON object is a 400; every field problem after that is in-band, as on gRPC",
  },
  { front: "rest", route: "POST /v1/gateway/invoke-json", outcomes: keyed({ malformed: invalid, ...invokeInBand }) },
  { front: "rest", route: "POST /v1/gateway/invoke-stream", outcomes: keyed({ malformed: invalid, ...invokeInBand }), note: "HTTP 200; the last line carries the status" },
  {
    front: "websocket",
    route: "WS /v1/gateway/invoke-ws",
    outcomes: keyed({ malformed: inBand("INVALID_ARGUMENT"), ...invokeInBand }),
    note: "a refused upgrade is an HTTP status; once open, every failure is the final status frame",
  },
  { front: "rest", route: "GET /v1/grpc/{service}/methods", outcomes: keyed({ invalid, missing: notFound }) },
  { front: "rest", route: "GET /v1/grpc/{service}/schema/{method+}", outcomes: keyed({ invalid, missing: notFound }) },
  { front: "rest", route: "GET /v1/grpc/{service}/protos", outcomes: keyed({ missing: notFound }) },
  { front: "rest", route: "GET /v1/openapi.json", outcomes: keyed(), note: "a backend that is down is listed under x-unavailable" },
  { front: "rest", route: "GET /v1/grpc/{service}/openapi.json", outcomes: keyed({ missing: notFound }) },
  {
    front: "rest",
    route: "POST /v1/grpc/call",
    outcomes: keyed({ malformed: invalid, ...invokeInBand }),
    note: "in-band as {error: true, statusCode, data}",
  },
  {
    front: "grpc",
    route: "<backend service>/<method>",
    outcomes: keyed({ missing: status("UNIMPLEMENTED"), upstream: upstreamStatus }),
    note: "the transparent proxy: the backend's own status, unchanged",
  },
  {
    front: "grpc",
    route: "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    outcomes: keyed({ missing: inBand("NOT_FOUND") }),
    note: "in-band as the reflection protocol's error_response",
  },
  { front: "grpc", route: "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", outcomes: keyed({ missing: inBand("NOT_FOUND") }) },

  // platform.State: every failure is a status; a missing key is an empty answer on gRPC and a 404 on REST.
  { front: "grpc", route: "platform.State/SaveState", outcomes: keyed({ invalid, missing: notFound, upstream: upstreamStatus }) },
  { front: "grpc", route: "platform.State/GetState", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }), note: "a missing key is an empty value and etag, as in Dapr" },
  { front: "grpc", route: "platform.State/DeleteState", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }), note: "deleting a missing key succeeds" },
  { front: "grpc", route: "platform.State/QueryState", outcomes: keyed({ invalid, upstream: upstreamStatus }) },
  { front: "grpc", route: "platform.State/GetBulkState", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }), note: "missing keys are left out" },
  { front: "grpc", route: "platform.State/DeleteBulkState", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }), note: "the message counts the keys deleted" },
  { front: "rest", route: "POST /v1/state/save-state", outcomes: keyed({ malformed: invalid, invalid, missing: notFound, upstream: upstreamStatus }) },
  { front: "rest", route: "GET /v1/state/{service}/{key+}", outcomes: keyed({ missing: notFound, upstream: upstreamStatus }), note: "a missing key is 404 (gRPC GetState answers empty)" },
  { front: "rest", route: "DELETE /v1/state/{service}/{key+}", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }) },
  { front: "rest", route: "GET /v1/state/{service}/query", outcomes: keyed({ invalid, upstream: upstreamStatus }) },
  { front: "rest", route: "GET /v1/state/{service}/bulk", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }) },
  { front: "rest", route: "DELETE /v1/state/{service}/bulk", outcomes: keyed({ invalid, missing: none, upstream: upstreamStatus }) },

  // platform.Config
  { front: "grpc", route: "platform.Config/ListServices", outcomes: keyed() },
  { front: "grpc", route: "platform.Config/GetService", outcomes: keyed({ invalid, missing: notFound }) },
  { front: "rest", route: "GET /v1/config/list-services", outcomes: keyed() },
  { front: "rest", route: "GET /v1/config/get-service", outcomes: keyed({ invalid, missing: none }), note: "an unregistered name answers null" },

  // platform.Trigger: in-band on gRPC (spec: ScheduleTrigger reports in-band, the others follow), statuses on REST.
  { front: "grpc", route: "platform.Trigger/ScheduleTrigger", outcomes: keyed({ invalid: inBand("INVALID_ARGUMENT"), upstream: upstreamInBand }) },
  { front: "grpc", route: "platform.Trigger/GetTrigger", outcomes: keyed({ missing: inBand("NOT_FOUND") }) },
  { front: "grpc", route: "platform.Trigger/DeleteTrigger", outcomes: keyed({ missing: inBand("NOT_FOUND") }) },
  { front: "grpc", route: "platform.Trigger/ListTriggers", outcomes: keyed() },
  { front: "rest", route: "POST /v1/trigger/{name}", outcomes: keyed({ malformed: invalid, invalid, upstream: upstreamStatus }), note: "REST reports trigger failures as statuses" },
  { front: "rest", route: "GET /v1/trigger/{name}", outcomes: keyed({ missing: notFound }) },
  { front: "rest", route: "DELETE /v1/trigger/{name}", outcomes: keyed({ missing: notFound }) },
  { front: "rest", route: "GET /v1/trigger", outcomes: keyed() },

  // io.cloudevents.v1.Pubsub: bad input is a status; a runtime that refuses a publish is in-band (spec).
  { front: "grpc", route: "io.cloudevents.v1.Pubsub/PublishEvent", outcomes: keyed({ invalid, upstream: upstreamInBand }) },
  { front: "grpc", route: "io.cloudevents.v1.Pubsub/Subscribe", outcomes: keyed({ invalid, upstream: upstreamStatus }) },
  { front: "grpc", route: "io.cloudevents.v1.Pubsub/Unsubscribe", outcomes: keyed({ invalid: inBand("INVALID_ARGUMENT"), missing: inBand("NOT_FOUND") }) },
  { front: "rest", route: "POST /v1/pubsub", outcomes: keyed({ invalid }), note: "no topic in the path" },
  { front: "rest", route: "POST /v1/pubsub/{topic}", outcomes: keyed({ malformed: invalid, invalid, upstream: upstreamInBand }) },
  { front: "rest", route: "POST /v1/pubsub/tokens", outcomes: keyed({ malformed: invalid, invalid }) },
  {
    front: "rest",
    route: "GET /v1/pubsub/ws",
    outcomes: { unauthenticated: none, invalid: status("FAILED_PRECONDITION", 426) },
    note: "a GET without Upgrade: 426, Upgrade: websocket",
  },
  {
    front: "websocket",
    route: "WS /v1/pubsub/ws",
    part: "upgrade",
    outcomes: keyed({ forbidden: status("PERMISSION_DENIED") }),
    note: "a refused upgrade is an HTTP status",
  },
  { front: "websocket", route: "WS /v1/pubsub/ws", part: "any frame", outcomes: { malformed: invalid }, note: "error frame {op: error, code, message}" },
  { front: "websocket", route: "WS /v1/pubsub/ws", part: "op subscribe", outcomes: { invalid, upstream: upstreamStatus } },
  { front: "websocket", route: "WS /v1/pubsub/ws", part: "op unsubscribe", outcomes: { invalid, missing: none }, note: "replies with the topics actually left" },
  {
    front: "websocket",
    route: "WS /v1/pubsub/ws",
    part: "op publish",
    outcomes: { invalid, upstream: upstreamStatus },
    note: "a runtime refusal is an error frame here (in-band on gRPC and REST)",
  },
  { front: "sse", route: "GET /v1/pubsub/events", outcomes: keyed({ forbidden: status("PERMISSION_DENIED"), invalid, upstream: upstreamStatus }), note: "refused before the stream starts" },
  { front: "sse", route: "OPTIONS /v1/pubsub/events", outcomes: { unauthenticated: none, forbidden: status("PERMISSION_DENIED") }, note: "CORS preflight: 204 or a bare 403" },
  // Connect and gRPC-Web on the HTTP port, at each backend method's gRPC path (docs/browser-rpc.md).
  {
    front: "rest",
    route: "POST /:service/:method",
    outcomes: { unauthenticated, forbidden: status("PERMISSION_DENIED"), malformed: invalid, invalid, missing: status("UNIMPLEMENTED", 404), upstream: upstreamStatus },
    note: "as Connect unary answers, with Connect's error JSON ({code: \"unauthenticated\", ...}); Connect streaming answers HTTP 200 with the code in its end-of-stream message, gRPC-Web with grpc-status",
  },
  { front: "rest", route: "OPTIONS /:service/:method", outcomes: { unauthenticated: none, forbidden: status("PERMISSION_DENIED") }, note: "CORS preflight for a routed service: 204 or a bare 403; any other OPTIONS goes on to the REST routes" },
  {
    front: "rest",
    route: "GET /dapr/subscribe",
    outcomes: { unauthenticated: none },
    note: "Dapr's declarative subscription callback: no x-api-key; with --app-api-token a missing dapr-api-token is 401",
  },

  // Dapr's app callbacks (--sidecar dapr only): daprd calls them without x-api-key; with --app-api-token the job
  // callbacks need that dapr-api-token ("no x-api-key" below means "no dapr-api-token" for them).
  ...["OnInvoke", "OnTopicEvent", "ListInputBindings", "OnBindingEvent", "OnBulkTopicEvent"].map(
    (m): OutcomeRoute => ({ front: "grpc", route: `dapr.proto.runtime.v1.AppCallback/${m}`, runtime: "dapr", outcomes: { unauthenticated: none, missing: status("UNIMPLEMENTED") } }),
  ),
  {
    front: "grpc",
    route: "dapr.proto.runtime.v1.AppCallbackAlpha/OnBulkTopicEventAlpha1",
    runtime: "dapr",
    outcomes: { unauthenticated: none, missing: status("UNIMPLEMENTED") },
    note: "subscriptions are streaming: daprd never delivers through the app channel",
  },
  { front: "grpc", route: "dapr.proto.runtime.v1.AppCallback/ListTopicSubscriptions", runtime: "dapr", outcomes: { unauthenticated: none }, note: "an empty list" },
  { front: "grpc", route: "dapr.proto.runtime.v1.AppCallbackHealthCheck/HealthCheck", runtime: "dapr", outcomes: { unauthenticated: none } },
  {
    front: "grpc",
    route: "dapr.proto.runtime.v1.AppCallback/OnJobEvent",
    runtime: "dapr",
    outcomes: { unauthenticated, invalid },
    note: "no x-api-key here: with --app-api-token, a missing dapr-api-token; a status, so daprd applies the job's failure policy",
  },
  { front: "grpc", route: "dapr.proto.runtime.v1.AppCallbackAlpha/OnJobEventAlpha1", runtime: "dapr", outcomes: { unauthenticated, invalid } },

  // Process routes.
  { front: "rest", route: "GET /health", outcomes: { unauthenticated: none } },
  { front: "rest", route: "GET /metrics", outcomes: { unauthenticated: none } },
  { front: "rest", route: "GET /console", outcomes: { unauthenticated: none } },
  { front: "rest", route: "GET /console/", outcomes: { unauthenticated: none } },
  { front: "rest", route: "GET /console/{file}", outcomes: { unauthenticated: none, missing: notFound } },
];
