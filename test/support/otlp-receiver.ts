import http from "node:http";
import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";

/**
 * The part of opentelemetry-proto's trace service an exporter sends (opentelemetry/proto/collector/trace/v1 and the
 * trace, resource and common messages it uses), with the upstream field numbers. The 0.223 exporters serialize with a
 * hand-written writer and ship no .proto, so the receiver decodes against the protocol's own schema.
 */
const OTLP_TRACE_PROTO = `
syntax = "proto3";
package otlp;
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  fixed32 flags = 16;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  repeated Event events = 11;
  uint32 dropped_events_count = 12;
  repeated Link links = 13;
  uint32 dropped_links_count = 14;
  Status status = 15;
  message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
  message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; uint32 dropped_attributes_count = 5; fixed32 flags = 6; }
}
message Status { string message = 2; int32 code = 3; }
`;

const requestType = protobuf.parse(OTLP_TRACE_PROTO, { keepCase: false }).root.lookupType("otlp.ExportTraceServiceRequest");

/** OTLP span kinds (SPAN_KIND_*). */
export const SpanKind = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;

export type AttributeValue = string | number | boolean;

/** One span as received, ids in lower-case hex (as `traceparent` writes them), "" for no parent. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, AttributeValue>;
  events: Array<{ name: string; attributes: Record<string, AttributeValue> }>;
  /** The span's links (ids in lower-case hex). */
  links: Array<{ traceId: string; spanId: string }>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  /** Unix nanoseconds, decimal. */
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  droppedAttributesCount: number;
  /** W3C trace flags. */
  flags: number;
  traceState: string;
  /** The resource attributes of the batch it came in. */
  resource: Record<string, AttributeValue>;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** e.g. "http://127.0.0.1:41234/v1/traces" */
  readonly url: string;
  /** Every span received so far, in arrival order. */
  readonly spans: ReceivedSpan[];
  /** The content type of each export request received ("application/x-protobuf" or "application/json"). */
  readonly contentTypes: string[];
  /** Export requests that could not be decoded (answered 400), with why. */
  readonly rejected: string[];
  close(): Promise<void>;
}

const MAX_BODY = 16 * 1024 * 1024;

function hex(v: unknown): string {
  if (v === undefined || v === null || v === "") return "";
  if (typeof v === "string") return v.toLowerCase();
  return Buffer.from(v as Uint8Array).toString("hex");
}

/** An AnyValue from either encoding (JSON int64s arrive as strings or numbers). */
function anyValue(v: Record<string, unknown> | undefined): AttributeValue {
  if (!v) return "";
  if (v["stringValue"] !== undefined) return String(v["stringValue"]);
  if (v["boolValue"] !== undefined) return Boolean(v["boolValue"]);
  if (v["intValue"] !== undefined) return Number(v["intValue"]);
  if (v["doubleValue"] !== undefined) return Number(v["doubleValue"]);
  return JSON.stringify(v);
}

function attributes(list: unknown): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of (list as Array<{ key: string; value?: Record<string, unknown> }> | undefined) ?? []) out[kv.key] = anyValue(kv.value);
  return out;
}

/** The spans of one ExportTraceServiceRequest, decoded to the shape both encodings share (camelCase fields). */
function spansOf(req: Record<string, unknown>): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of (req["resourceSpans"] as Array<Record<string, unknown>> | undefined) ?? []) {
    const resource = attributes((rs["resource"] as Record<string, unknown> | undefined)?.["attributes"]);
    for (const ss of (rs["scopeSpans"] as Array<Record<string, unknown>> | undefined) ?? []) {
      for (const s of (ss["spans"] as Array<Record<string, unknown>> | undefined) ?? []) {
        const status = (s["status"] as { code?: number; message?: string } | undefined) ?? {};
        out.push({
          traceId: hex(s["traceId"]),
          spanId: hex(s["spanId"]),
          parentSpanId: hex(s["parentSpanId"]),
          name: String(s["name"] ?? ""),
          kind: Number(s["kind"] ?? 0),
          attributes: attributes(s["attributes"]),
          events: ((s["events"] as Array<Record<string, unknown>> | undefined) ?? []).map((e) => ({ name: String(e["name"]), attributes: attributes(e["attributes"]) })),
          links: ((s["links"] as Array<Record<string, unknown>> | undefined) ?? []).map((l) => ({ traceId: hex(l["traceId"]), spanId: hex(l["spanId"]) })),
          status: { code: Number(status.code ?? 0), message: status.message ?? "" },
          startTimeUnixNano: String(s["startTimeUnixNano"] ?? "0"),
          endTimeUnixNano: String(s["endTimeUnixNano"] ?? "0"),
          droppedAttributesCount: Number(s["droppedAttributesCount"] ?? 0),
          flags: Number(s["flags"] ?? 0),
          traceState: String(s["traceState"] ?? ""),
          resource,
        });
      }
    }
  }
  return out;
}

/** The spans of one export request body, decoded as a collector would (protobuf or JSON, by content type). */
export function decodeTraceRequest(body: Uint8Array, contentType: string): ReceivedSpan[] {
  if (contentType === "application/x-protobuf") return spansOf(requestType.toObject(requestType.decode(body), { longs: String, bytes: Buffer }) as Record<string, unknown>);
  if (contentType === "application/json") return spansOf(JSON.parse(Buffer.from(body).toString("utf8")) as Record<string, unknown>);
  throw new Error(`unsupported content type ${JSON.stringify(contentType)}`);
}

/**
 * A real OTLP/HTTP traces receiver on 127.0.0.1 (ephemeral port): decodes ExportTraceServiceRequest in protobuf
 * (`application/x-protobuf`) and JSON (`application/json`), gzip or not, and answers as a collector does.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const rejected: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on("end", () => {
      const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim();
      try {
        if (req.method !== "POST" || req.url !== "/v1/traces") throw new Error(`${req.method} ${req.url} is not the traces endpoint`);
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        const decoded = decodeTraceRequest(body, type);
        contentTypes.push(type);
        spans.push(...decoded);
        res.writeHead(200, { "content-type": type });
        res.end(type === "application/json" ? "{}" : Buffer.alloc(0));
      } catch (e) {
        rejected.push((e as Error).message);
        res.writeHead(400, { "content-type": "text/plain" });
        res.end((e as Error).message);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    contentTypes,
    rejected,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
