/**
 * platform-gateway/client: a typed TypeScript client of the gateway's gRPC API (dynamic invoke, listings, state,
 * pub/sub with reconnecting subscriptions, request-reply over pub/sub, triggers). See docs/client.md.
 */
export { createGatewayClient, type GatewayClient, type SubscriptionOptions } from "./client.js";
export type { GatewayClientOptions, ReconnectOptions } from "./options.js";
export { backoffDelay } from "./options.js";
export { Code, GatewayError, GatewayClientError, GatewayInvocationError, RequestTimeoutError } from "./errors.js";
export { Subscription, FATAL_SUBSCRIBE_CODES, type SubscribeOptions, type ReconnectingInfo, type LiveInfo } from "./subscription.js";
export { CORRELATION_ID_ATTRIBUTE, REPLY_TOPIC_ATTRIBUTE, DEFAULT_REQUEST_TIMEOUT_MS, type RequestOptions } from "./request-reply.js";
export {
  toProtoCloudEvent,
  fromProtoCloudEvent,
  eventData,
  attributeString,
  toAttributeValue,
  fromAttributeValue,
  type CloudEventInput,
  type CloudEventJson,
  type AttributeInput,
  type ProtoCloudEvent,
  type CloudEventAttributeValue,
} from "./cloudevent.js";
export type { CallOptions } from "./transport.js";
export { InvokeStream, type InvokeStreamOptions } from "./invoke-stream.js";
export type * from "./types.js";
export { subscribeWeb, type WebSubscribeOptions, type WebSubscription, type WebEventMessage } from "./web.js";
