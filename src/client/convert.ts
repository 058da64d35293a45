/**
 * Wire (proto-loader snake_case) shapes to the library's public camelCase results, and back for inputs. The wire
 * shapes are the generated types (src/gen/gateway), so a proto change these mappings miss fails to compile.
 */
import type { ChangeNotification } from "../gen/gateway/platform/ChangeNotification.js";
import type { ConfigService__Output } from "../gen/gateway/platform/ConfigService.js";
import type { GetMethodSchemaResponse__Output } from "../gen/gateway/platform/GetMethodSchemaResponse.js";
import type { MethodInfo__Output } from "../gen/gateway/platform/MethodInfo.js";
import type { StateItem__Output } from "../gen/gateway/platform/StateItem.js";
import type { Status__Output } from "../gen/gateway/platform/Status.js";
import type { TriggerRecord__Output } from "../gen/gateway/platform/TriggerRecord.js";
import { inBandFailure, inBandOk } from "../shared/status.js";
import { toProtoCloudEvent } from "./cloudevent.js";
import type { ChangeNotificationInput, ConfigService, MethodInfo, MethodSchema, OperationStatus, StateItem, TriggerRecord } from "./types.js";

/** A Status from the wire. An absent Status (the call itself succeeded and reported nothing in-band) reads as OK. */
export function status(s: Status__Output | null | undefined): OperationStatus {
  if (s === null || s === undefined) return inBandOk();
  return { success: Boolean(s.success), status: String(s.status ?? ""), message: String(s.message ?? "") };
}

/** Return the status when it reports success; otherwise throw a GatewayClientError with the reported code and message. */
export function requireSuccess(s: Status__Output | null | undefined, what: string): OperationStatus {
  const st = status(s);
  const failed = inBandFailure(st, `${what} failed with status ${st.status || "(none)"}`);
  if (failed) throw failed;
  return st;
}

export function methodInfo(m: MethodInfo__Output): MethodInfo {
  return {
    name: m.name,
    fullName: m.full_name,
    inputType: m.input_type,
    outputType: m.output_type,
    isClientStreaming: Boolean(m.is_client_streaming),
    isServerStreaming: Boolean(m.is_server_streaming),
  };
}

export function methodSchema(s: GetMethodSchemaResponse__Output): MethodSchema {
  return {
    inputTypeName: s.input_type_name,
    outputTypeName: s.output_type_name,
    // A string on the wire; the gateway only sends "input" or "output" (the type it was asked for).
    schemaType: s.schema_type as MethodSchema["schemaType"],
    fields: (s.fields ?? []).map((f) => ({ name: f.name, type: f.type, typeName: f.type_name, isRepeated: Boolean(f.is_repeated), isOptional: Boolean(f.is_optional) })),
  };
}

export function configService(s: ConfigService__Output): ConfigService {
  const out: ConfigService = { name: s.name };
  if (s.grpc) out.grpc = { host: s.grpc.host, port: s.grpc.port };
  if (s.pubsub) out.pubsub = { pubsubName: s.pubsub.pubsub_name };
  if (s.state) out.state = { storeName: s.state.store_name, keys: [...(s.state.keys ?? [])] };
  if (s.jobs) out.jobs = { crons: (s.jobs.crons ?? []).map((c) => ({ name: c.name, schedule: c.schedule, targetTopic: c.target_topic })) };
  return out;
}

export function stateItem(i: StateItem__Output): StateItem {
  return { key: i.key, value: i.value, etag: i.etag };
}

export function triggerRecord(t: Partial<TriggerRecord__Output>): TriggerRecord {
  // Partial: a gateway answering success without a trigger gives {} here; its strings read as "".
  return {
    name: t.name ?? "",
    targetTopic: t.target_topic ?? "",
    schedule: t.schedule ?? "",
    dueTime: t.due_time ?? "",
    repeats: Number(t.repeats ?? 0),
    ttl: t.ttl ?? "",
    createdAt: t.created_at ?? "",
    nextFireTime: t.next_fire_time ?? "",
    lastFireTime: t.last_fire_time ?? "",
    expiresAt: t.expires_at ?? "",
    timesFired: Number(t.times_fired ?? 0),
  };
}

/** A ChangeNotification for the wire, or undefined when not given. */
export function changeNotification(c: ChangeNotificationInput | undefined): ChangeNotification | undefined {
  if (c === undefined) return undefined;
  return { topic: c.topic ?? "", ...(c.cloudevent !== undefined ? { cloudevent: toProtoCloudEvent(c.cloudevent) } : {}) };
}
