import type { CloudEvent as ProtoCloudEvent } from "../shared/cloudevent.js";
import type { CloudEventInput } from "./cloudevent.js";
import type { InBandStatus } from "../shared/status.js";

/**
 * An in-band result (the gateway's Status object: `success`, `status` the gRPC code name, `message`, e.g. how many
 * keys a bulk delete deleted). Operations resolve it only when `success` is true. The gateway's own InBandStatus.
 */
export type OperationStatus = InBandStatus;

/** The raw result of `invokeJson()`: the gateway's InvokeResponse, camelCased. */
export interface InvokeResult {
  success: boolean;
  /** gRPC status code name of the backend call, e.g. "OK" or "NOT_FOUND". */
  status: string;
  /** Error text when `success` is false; empty otherwise. */
  message: string;
  /** The typed backend response as proto3 canonical JSON text. */
  responseData: string;
}

/** One method of a backend service. */
export interface MethodInfo {
  name: string;
  fullName: string;
  inputType: string;
  outputType: string;
  isClientStreaming: boolean;
  isServerStreaming: boolean;
}

export type { FieldSchema, MethodSchema } from "../shared/method-schema.js";

export type { ConfigService } from "../shared/config-service.js";

/** Selects a state change notification's tier: both fields set is Tier 1 (published verbatim to `topic`). */
export interface ChangeNotificationInput {
  topic?: string;
  cloudevent?: CloudEventInput;
}

/** Arguments of `saveState()`. */
export interface SaveStateInput {
  service: string;
  key: string;
  value: string;
  /** Save only if the stored etag matches (ABORTED otherwise). */
  etag?: string;
  /** Publish a change notification after the write. Default false. */
  publishChange?: boolean;
  /** Put the value in the Tier 0 notification. Default false. */
  includeValue?: boolean;
  change?: ChangeNotificationInput;
}

/** Result of `saveState()`. */
export interface SaveStateResult extends OperationStatus {
  /** The etag of the value now stored (empty if the runtime reports none). */
  etag: string;
}

/** Arguments of `deleteState()`. */
export interface DeleteStateInput {
  service: string;
  key: string;
  /** Delete only if the stored etag matches (ABORTED otherwise). */
  etag?: string;
  publishChange?: boolean;
  includeValue?: boolean;
  change?: ChangeNotificationInput;
}

/** Arguments of `deleteBulkState()`. */
export interface DeleteBulkStateInput {
  service: string;
  keys: string[];
  publishChange?: boolean;
  change?: ChangeNotificationInput;
}

/** A stored value and its etag. */
export interface StateItem {
  key: string;
  value: string;
  etag: string;
}

/** Arguments of `queryState()`. */
export interface QueryStateInput {
  service: string;
  /** The runtime's query DSL, as JSON text or an object; `{}` matches everything. Default `{}`. */
  query?: string | object;
  /** 0 or unset: no limit. */
  limit?: number;
}

/** Result of `queryState()`. */
export interface QueryStateResult {
  items: StateItem[];
  /** Continuation token when the query's page limit cut the results; empty otherwise. */
  token: string;
}

/** Arguments of `scheduleTrigger()`. */
export interface ScheduleTriggerInput {
  /** Unique per deployment. */
  name: string;
  targetTopic: string;
  /** 6-field cron "sec min hour dom month dow", "@every <duration>", or "@hourly"-style descriptors. */
  schedule?: string;
  /** First fire time: RFC 3339 timestamp or a duration from now. */
  dueTime?: string;
  /** Number of firings; 0 (default) means unlimited. */
  repeats?: number;
  /** Time-to-live: RFC 3339 timestamp or a duration. */
  ttl?: string;
}

/** A scheduled trigger as get and list report it (times are RFC 3339, empty when not applicable). */
export interface TriggerRecord {
  name: string;
  targetTopic: string;
  schedule: string;
  dueTime: string;
  repeats: number;
  ttl: string;
  createdAt: string;
  nextFireTime: string;
  lastFireTime: string;
  expiresAt: string;
  timesFired: number;
}

/** One delivered event: the topic it was published to and the event in the wire form. */
export interface SubscriptionMessage {
  topic: string;
  event: ProtoCloudEvent;
  /** The event's position (its `gwposition` attribute), on a subscription with `positions` or `since`. */
  position?: string;
}
