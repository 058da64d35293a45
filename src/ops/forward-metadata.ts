import * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import type { CallMetadata } from "../shared/metadata.js";
import type { ServerSpanInfo, TraceIncoming } from "../observe/span.js";

/**
 * The forwarding allow-list (docs/dispatch.md "Metadata forwarding"; docs/contract.md "Authentication"): only headers named in `forwardHeaders` reach a backend.
 * `x-api-key` never does, whatever the list says; binary (`-bin`) entries are skipped silently.
 */
export interface MetadataFilter {
  /** Allow-listed entries of inbound gRPC metadata, as the metadata of the backend call. */
  fromGrpc(md: CallMetadata | undefined): grpc.Metadata;
  /** Allow-listed entries of REST request headers (lower-case names). */
  fromHeaders(headers: Readonly<Record<string, string>>): grpc.Metadata;
  /**
   * Allow-listed entries of the `/v1/grpc/call` `metadata` object; absent (undefined/null) forwards nothing.
   * INVALID_ARGUMENT naming the entry when it is not an object of strings.
   */
  fromObject(obj: unknown, field?: string): grpc.Metadata;
  /**
   * With tracing on, the caller's W3C trace context in REST request headers (whatever the allow-list says) and the
   * server span to open for it; undefined with tracing off, so the call is not traced and nothing is allocated.
   */
  traceOfHeaders(headers: Readonly<Record<string, string>>, server: ServerSpanInfo): TraceIncoming | undefined;
  /** The same from inbound gRPC metadata. */
  traceOfGrpc(md: CallMetadata | undefined, server: ServerSpanInfo): TraceIncoming | undefined;
}

const NEVER = "x-api-key";
/** Characters no HTTP/2 header name or value may hold. */
const CONTROL = /[\x00-\x1f\x7f]/;

/** Create a filter over the validated allow-list (lower-case names); `tracing`: whether calls are traced. */
export function createMetadataFilter(allowList: readonly string[], tracing = false): MetadataFilter {
  const allowed = allowList.map((h) => h.toLowerCase()).filter((h) => h !== NEVER && !h.endsWith("-bin"));
  const allowedSet = new Set(allowed);
  const passes = (key: string): boolean => allowedSet.has(key);
  return {
    fromGrpc(md) {
      const out = new grpc.Metadata();
      if (!md) return out;
      // Walk the short allow-list rather than every inbound key.
      for (const key of allowed) {
        for (const v of md.strings(key)) out.add(key, v);
      }
      return out;
    },
    fromHeaders(headers) {
      const out = new grpc.Metadata();
      for (const key of allowed) {
        const v = headers[key];
        if (v !== undefined) out.add(key, v);
      }
      return out;
    },
    fromObject(obj, field = "metadata") {
      const out = new grpc.Metadata();
      if (obj === undefined || obj === null) return out;
      if (typeof obj !== "object" || Array.isArray(obj)) {
        throw new GatewayError(Code.INVALID_ARGUMENT, `${field} must be an object of string values (got ${Array.isArray(obj) ? "an array" : typeof obj})`);
      }
      for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
        if (typeof v !== "string") throw new GatewayError(Code.INVALID_ARGUMENT, `${field}.${echo(k)} must be a string (got ${v === null ? "null" : typeof v})`);
        // A CR or LF would split the header; grpc-js only notices when sending, as an in-band INTERNAL.
        if (CONTROL.test(k)) throw new GatewayError(Code.INVALID_ARGUMENT, `${field} key ${JSON.stringify(echo(k))} must not contain control characters (CR, LF, ...)`);
        if (CONTROL.test(v)) throw new GatewayError(Code.INVALID_ARGUMENT, `${field}.${echo(k)} must not contain control characters (CR, LF, ...)`);
        const key = k.toLowerCase();
        if (passes(key)) out.add(key, v);
      }
      return out;
    },
    traceOfHeaders: (headers, server) => traceOfHeaders(tracing, headers, server),
    traceOfGrpc: (md, server) => traceOfGrpc(tracing, md, server),
  };
}

/**
 * With tracing on, the caller's W3C trace context in REST request headers (whatever the allow-list says) and the
 * server span to open for it; undefined with tracing off, so the call is not traced and nothing is allocated.
 */
export function traceOfHeaders(tracing: boolean, headers: Readonly<Record<string, string>>, server: ServerSpanInfo): TraceIncoming | undefined {
  if (!tracing) return undefined;
  return { traceparent: headers["traceparent"], tracestate: headers["tracestate"], server };
}

/** The same from inbound gRPC metadata. */
export function traceOfGrpc(tracing: boolean, md: CallMetadata | undefined, server: ServerSpanInfo): TraceIncoming | undefined {
  if (!tracing) return undefined;
  if (!md) return { traceparent: undefined, tracestate: undefined, server };
  // A repeated tracestate is one list (W3C trace context: its entries joined with commas).
  const states = md.strings("tracestate");
  return { traceparent: md.strings("traceparent")[0], tracestate: states.length > 0 ? states.join(",") : undefined, server };
}
