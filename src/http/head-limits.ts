import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";

/**
 * Limits on a REST request head, answered in-band instead of by a dropped connection. uWebSockets.js (20.30) has
 * compile-time limits of its own and closes the connection without an answer past them: a head of more than 4 KiB
 * that arrives in more than one read, about 128 KiB in one read, or more than 46 header lines. These limits sit below
 * that wherever the gateway gets to see the head, so a client learns what was too large (414 / 431) instead of seeing
 * a reset.
 */

/** Longest request target (path plus `?` and query) in bytes; longer is 414 URI Too Long. */
export const MAX_URL_BYTES = 4096;
/** Most header lines; more is 431. uWS itself drops a head past 46. */
export const MAX_HEADER_COUNT = 40;
/** Largest total of header names and values in bytes; larger is 431. */
export const MAX_HEADER_BYTES = 8192;

/**
 * The HTTP status and error for a head over the limits, else undefined. `count` is the header lines and `bytes` the
 * total of header names and values, both counted by `requestHeaders` in its one walk over the head.
 */
export function checkHead(path: string, query: string, count: number, bytes: number): { status: number; error: GatewayError } | undefined {
  const url = Buffer.byteLength(path) + (query ? Buffer.byteLength(query) + 1 : 0);
  if (url > MAX_URL_BYTES) {
    return { status: 414, error: new GatewayError(Code.INVALID_ARGUMENT, `the request URL is ${url} bytes long; the limit is ${MAX_URL_BYTES}`) };
  }
  if (count > MAX_HEADER_COUNT) {
    return { status: 431, error: new GatewayError(Code.INVALID_ARGUMENT, `the request has ${count} header lines; the limit is ${MAX_HEADER_COUNT}`) };
  }
  if (bytes > MAX_HEADER_BYTES) {
    return { status: 431, error: new GatewayError(Code.INVALID_ARGUMENT, `the request headers total ${bytes} bytes; the limit is ${MAX_HEADER_BYTES}`) };
  }
  return undefined;
}
