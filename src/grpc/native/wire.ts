import { Code } from "../../shared/code.js";
import type { HeaderList } from "../../h2/types.js";
import { CallMetadata } from "../../shared/metadata.js";
import type { Status } from "../../shared/status.js";

/**
 * The gRPC-over-HTTP/2 pieces of the native server that a client can observe, each written to produce what grpc-js
 * 1.14's server produces (build/src/server.js, server-interceptors.js, server-call.js, stream-decoder.js): request
 * metadata, grpc-timeout, response headers, trailers and their status texts.
 */

/** A call's final status as the trailers carry it: the gateway's Status (grpc-status, grpc-message) and trailing metadata. */
export interface StatusLike extends Status {
  metadata?: CallMetadata | null;
}

/** Request headers grpc-js keeps a single value of (node:http2's kSingleValueHeaders): a repeat is dropped. */
const SINGLE_VALUE = new Set([
  "access-control-allow-credentials",
  "access-control-max-age",
  "access-control-request-method",
  "age",
  "authorization",
  "content-encoding",
  "content-language",
  "content-length",
  "content-location",
  "content-md5",
  "content-range",
  "content-type",
  "date",
  "dnt",
  "etag",
  "expires",
  "from",
  "host",
  "if-match",
  "if-modified-since",
  "if-none-match",
  "if-range",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "proxy-authorization",
  "range",
  "referer",
  "retry-after",
  "tk",
  "upgrade-insecure-requests",
  "user-agent",
  "x-content-type-options",
]);

/** Headers grpc-js removes from the metadata a handler sees. */
const NOT_METADATA = new Set(["grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "accept-encoding", "te", "content-type"]);

/** What the gRPC layer reads from a request's header list. */
export interface RequestHead {
  path: string | undefined;
  contentType: string | undefined;
  authority: string | undefined;
  timeout: string | undefined;
  encoding: string | undefined;
  /** The metadata handlers see (reserved headers removed, -bin values decoded). */
  metadata: CallMetadata;
}

/**
 * Read a request's header list as grpc-js reads node:http2's header object: repeats of a header are joined with ", "
 * ("; " for cookie), a single-value header keeps its first value, pseudo-headers and the transport's own headers are
 * not metadata, and `-bin` values are base64-decoded (a joined custom -bin value split at commas), with grpc-js's
 * `Metadata.fromHttp2Headers` validation (metadata.ts).
 */
export function readRequestHead(list: HeaderList): RequestHead {
  let path: string | undefined;
  let authority: string | undefined;
  let host: string | undefined;
  let contentType: string | undefined;
  let timeout: string | undefined;
  let encoding: string | undefined;
  let obj: Record<string, string> | undefined;
  for (let i = 0; i < list.length; i++) {
    const [name, value] = list[i]!;
    if (name.charCodeAt(0) === 58 /* ':' */) {
      if (name === ":path") path ??= value;
      else if (name === ":authority") authority ??= value;
      continue;
    }
    if (NOT_METADATA.has(name)) {
      if (name === "content-type") contentType ??= value;
      else if (name === "grpc-timeout") timeout = timeout === undefined ? value : `${timeout}, ${value}`;
      else if (name === "grpc-encoding") encoding = encoding === undefined ? value : `${encoding}, ${value}`;
      continue;
    }
    if (name === "host") host ??= value;
    obj ??= {};
    const prev = obj[name];
    if (prev === undefined) obj[name] = value;
    else if (!SINGLE_VALUE.has(name)) obj[name] = name === "cookie" ? `${prev}; ${value}` : `${prev}, ${value}`;
  }
  const metadata = new CallMetadata();
  if (obj) for (const name in obj) metadata.addFromHeader(name, obj[name]!);
  return { path, contentType, authority: authority ?? host, timeout, encoding, metadata };
}

/** gRPC's TimeoutValue (1-8 ASCII digits) and TimeoutUnit, the whole header value (PROTOCOL-HTTP2.md). */
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const UNIT_MS: Record<string, number> = { H: 3600000, M: 60000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/**
 * A grpc-timeout value in ms (truncated to whole ms), or undefined when it is not 1-8 ASCII digits followed by a unit
 * (H M S m u n) and nothing else: "-1S", "1.5S", "1 S" and "999999999S" are invalid, as grpc-go reads them (grpc-js
 * 1.14 takes the first match anywhere in the value, so it runs "-1S" as 1 s). grpc-js also truncates with `| 0`, which
 * wraps a timeout over 2^31 ms (about 24.8 days, e.g. "2592000S") to a negative one; this keeps the real value.
 */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = TIMEOUT.exec(value);
  return m ? Math.trunc(+m[1]! * UNIT_MS[m[2]!]!) : undefined;
}

/** grpc-message as grpc-js sends it (`encodeURI`); a lone surrogate, which encodeURI refuses, becomes U+FFFD. */
export function encodeGrpcMessage(details: string): string {
  try {
    return encodeURI(details);
  } catch {
    return encodeURI(details.replace(/\p{Cs}/gu, "\uFFFD"));
  }
}

/** Append metadata entries to a header list, each value its own field (-bin values base64), replacing a same-named default. */
function appendMetadata(out: HeaderList, md: CallMetadata | null | undefined, defaults: number): HeaderList {
  if (!md) return out;
  for (const [key, values] of md.entries()) {
    // Object.assign(defaults, metadata) in grpc-js: a metadata key equal to a default header replaces it.
    for (let i = 0; i < defaults; i++) {
      if (out[i]![0] === key) {
        out.splice(i, 1);
        defaults--;
        break;
      }
    }
    for (const v of values) out.push([key, typeof v === "string" ? v : v.toString("base64")]);
  }
  return out;
}

function isEmpty(md: CallMetadata | null | undefined): boolean {
  return !md || md.empty;
}

/** grpc-js's default response headers (no custom metadata). Shared: the HTTP/2 layer does not change a list it is given. */
const DEFAULT_RESPONSE_HEADERS: HeaderList = [
  [":status", "200"],
  ["content-type", "application/grpc+proto"],
  ["grpc-accept-encoding", "identity,deflate,gzip"],
  ["grpc-encoding", "identity"],
];

/** The response HEADERS grpc-js sends before the first message (or on sendMetadata). */
export function responseHeaders(md: CallMetadata | null | undefined): HeaderList {
  if (isEmpty(md)) return DEFAULT_RESPONSE_HEADERS;
  return appendMetadata(DEFAULT_RESPONSE_HEADERS.slice(), md, DEFAULT_RESPONSE_HEADERS.length);
}

const OK_TRAILERS: HeaderList = [
  ["grpc-status", "0"],
  ["grpc-message", "OK"],
];

/** The trailers after a response's messages: grpc-status, grpc-message, then the status metadata. */
export function trailers(status: StatusLike): HeaderList {
  if (status.code === 0 && status.message === "OK" && isEmpty(status.metadata)) return OK_TRAILERS;
  return appendMetadata(
    [
      ["grpc-status", String(status.code)],
      ["grpc-message", encodeGrpcMessage(status.message)],
    ],
    status.metadata,
    2,
  );
}

/** A trailers-only response (HEADERS with END_STREAM, no messages): :status first, then as grpc-js orders it. */
export function trailersOnly(status: StatusLike): HeaderList {
  return appendMetadata(
    [
      [":status", "200"],
      ["grpc-status", String(status.code)],
      ["grpc-message", encodeGrpcMessage(status.message)],
      ["content-type", "application/grpc+proto"],
    ],
    status.metadata,
    4,
  );
}

/** grpc-js's trailers-only reply for a path with no handler (server.js _respondWithError: grpc-message not encoded). */
export function unimplementedReply(path: string): HeaderList {
  return [
    [":status", "200"],
    ["grpc-status", String(Code.UNIMPLEMENTED)],
    ["grpc-message", `The server does not implement the method ${path}`],
    ["content-type", "application/grpc+proto"],
  ];
}

/**
 * The reply to a request whose content-type is not application/grpc*: HTTP 415, no gRPC status, as grpc-js answers,
 * but with a short text/plain body saying why (grpc-js sends none), so a plain HTTP/2 client sees a complete answer.
 */
export const UNSUPPORTED_MEDIA_TYPE: HeaderList = [
  [":status", "415"],
  ["content-type", "text/plain; charset=utf-8"],
];
export const UNSUPPORTED_MEDIA_TYPE_BODY = Buffer.from("this port serves gRPC: content-type must be application/grpc\n");
