import * as grpc from "@grpc/grpc-js";
import type { HeaderList } from "../../../h2/types.js";

/**
 * The gRPC-over-HTTP/2 pieces of the native server that a client can observe, each written to produce what grpc-js
 * 1.14's server produces (build/src/server.js, server-interceptors.js, server-call.js, stream-decoder.js): request
 * metadata, grpc-timeout, response headers, trailers and their status texts.
 */

/** A status as grpc-js handlers give it (`callback(err)`, `call.emit('error', ...)`). */
export interface StatusLike {
  code: number;
  details: string;
  metadata?: grpc.Metadata | null;
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
  metadata: grpc.Metadata;
}

/**
 * Read a request's header list as grpc-js reads node:http2's header object: repeats of a header are joined with ", "
 * ("; " for cookie), a single-value header keeps its first value, pseudo-headers and the transport's own headers are
 * not metadata, and `-bin` values are base64-decoded (a joined custom -bin value split at commas), through grpc-js's
 * own `Metadata.fromHttp2Headers` so the validation and the log of a bad entry are the same.
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
  const metadata = obj ? grpc.Metadata.fromHttp2Headers(obj) : new grpc.Metadata();
  return { path, contentType, authority: authority ?? host, timeout, encoding, metadata };
}

const DEADLINE_REGEX = /(\d{1,8})\s*([HMSmun])/;
const UNIT_MS: Record<string, number> = { H: 3600000, M: 60000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

/**
 * A grpc-timeout value in ms as grpc-js reads it (first match anywhere in the value, truncated to whole ms), or
 * undefined when invalid. grpc-js truncates with `| 0`, which wraps a timeout over 2^31 ms (about 24.8 days, e.g.
 * "2592000S") to a negative one and ends the call at once; this keeps the real value.
 */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = DEADLINE_REGEX.exec(value);
  return m ? Math.trunc(+m[1]! * UNIT_MS[m[2]!]!) : undefined;
}

/** The longest delay setTimeout takes (a longer one fires after 1 ms). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** grpc-js's status for a handler's error object (server-call.js serverErrorToStatus). */
export function serverErrorToStatus(error: unknown, overrideTrailers?: grpc.Metadata | null): StatusLike {
  const e = (typeof error === "object" && error !== null ? error : {}) as { message?: unknown; code?: unknown; details?: unknown; metadata?: grpc.Metadata | null };
  const status: StatusLike = {
    code: grpc.status.UNKNOWN,
    details: "message" in e ? String(e.message) : "Unknown Error",
    metadata: overrideTrailers ?? e.metadata ?? null,
  };
  if (typeof e.code === "number" && Number.isInteger(e.code)) {
    status.code = e.code;
    if (typeof e.details === "string") status.details = e.details;
  }
  return status;
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
function appendMetadata(out: HeaderList, md: grpc.Metadata | null | undefined, defaults: number): HeaderList {
  if (!md) return out;
  const map = md.toHttp2Headers();
  for (const key in map) {
    const v = map[key];
    if (v === undefined) continue;
    // Object.assign(defaults, metadata) in grpc-js: a metadata key equal to a default header replaces it.
    for (let i = 0; i < defaults; i++) {
      if (out[i]![0] === key) {
        out.splice(i, 1);
        defaults--;
        break;
      }
    }
    if (Array.isArray(v)) for (const x of v) out.push([key, String(x)]);
    else out.push([key, String(v)]);
  }
  return out;
}

/** Whether `md` holds no entries (cheaper than building its header object). */
function isEmpty(md: grpc.Metadata | null | undefined): boolean {
  if (!md) return true;
  for (const _ in md.getMap()) return false;
  return true;
}

/** grpc-js's default response headers (no custom metadata). Shared: the HTTP/2 layer does not change a list it is given. */
const DEFAULT_RESPONSE_HEADERS: HeaderList = [
  [":status", "200"],
  ["content-type", "application/grpc+proto"],
  ["grpc-accept-encoding", "identity,deflate,gzip"],
  ["grpc-encoding", "identity"],
];

/** The response HEADERS grpc-js sends before the first message (or on sendMetadata). */
export function responseHeaders(md: grpc.Metadata | null | undefined): HeaderList {
  if (isEmpty(md)) return DEFAULT_RESPONSE_HEADERS;
  return appendMetadata(DEFAULT_RESPONSE_HEADERS.slice(), md, DEFAULT_RESPONSE_HEADERS.length);
}

const OK_TRAILERS: HeaderList = [
  ["grpc-status", "0"],
  ["grpc-message", "OK"],
];

/** The trailers after a response's messages: grpc-status, grpc-message, then the status metadata. */
export function trailers(status: StatusLike): HeaderList {
  if (status.code === 0 && status.details === "OK" && isEmpty(status.metadata)) return OK_TRAILERS;
  return appendMetadata(
    [
      ["grpc-status", String(status.code)],
      ["grpc-message", encodeGrpcMessage(status.details)],
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
      ["grpc-message", encodeGrpcMessage(status.details)],
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
    ["grpc-status", String(grpc.status.UNIMPLEMENTED)],
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
