import type { _io_cloudevents_v1_CloudEvent_CloudEventAttributeValue as ProtoAttributeValue } from "../gen/gateway/io/cloudevents/v1/CloudEvent.js";

/**
 * The in-process CloudEvent: the `io.cloudevents.v1.CloudEvent` message as @grpc/proto-loader presents it with the
 * gateway's loader options (keepCase, oneofs, bytes as Buffer). Runtimes, the broker and the front ends all pass this
 * shape, so an event crosses the process without conversions.
 */
export interface CloudEventAttributeValue {
  ce_boolean?: boolean;
  ce_integer?: number;
  ce_string?: string;
  ce_bytes?: Uint8Array;
  ce_uri?: string;
  ce_uri_ref?: string;
  /** null as proto-loader may present an unset message (the generated `__Output` types say so). */
  ce_timestamp?: { seconds: string | number; nanos: number } | null;
  /** Which member of the `attr` oneof is set (proto-loader `oneofs: true`): a member name of the generated type. */
  attr?: NonNullable<ProtoAttributeValue["attr"]>;
}

/** A google.protobuf.Any. */
export interface AnyMessage {
  type_url: string;
  value: Uint8Array;
}

export interface CloudEvent {
  id: string;
  source: string;
  spec_version: string;
  type: string;
  attributes: Record<string, CloudEventAttributeValue>;
  binary_data?: Uint8Array;
  text_data?: string;
  proto_data?: AnyMessage | null;
  /** Which member of the `data` oneof is set, if any. */
  data?: "binary_data" | "text_data" | "proto_data";
}

/** The CloudEvents spec version the gateway speaks. */
export const SPEC_VERSION = "1.0";
