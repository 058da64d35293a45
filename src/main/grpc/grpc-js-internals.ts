import { createRequire } from "node:module";
import type http2 from "node:http2";
import type * as grpc from "@grpc/grpc-js";

/**
 * Every place the gateway's server side reaches into grpc-js's private internals, each behind one small typed
 * accessor. grpc-js offers no public way to do these things; each accessor checks the shape it relies on and, when an
 * upgrade changed it, returns undefined (or false) so the caller can keep grpc-js's own behaviour and log
 * `internalsProblem(...)`. test/integration/grpc-js-internals.test.ts exercises each one against the real library and
 * fails with the same message, so an upgrade that changes a shape is caught by `npm test`, not in production.
 *
 * Written against grpc-js 1.14.
 */

const require = createRequire(import.meta.url);

/** The installed grpc-js version, e.g. "1.14.7" ("unknown" if its package.json cannot be read). */
export const GRPC_JS_VERSION: string = (() => {
  try {
    return (require("@grpc/grpc-js/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
})();

/** The message an accessor's caller logs (and its test fails with) when grpc-js no longer has the shape `what`. */
export function internalsProblem(what: string): string {
  return `grpc-js ${GRPC_JS_VERSION} changed ${what}; the gateway was written against grpc-js 1.14 (see src/main/grpc/grpc-js-internals.ts)`;
}

/** The parts of the HTTP/2 stream under a grpc-js server call that the gateway uses. */
export interface CallHttp2Stream {
  closed: boolean;
  destroyed: boolean;
  writableNeedDrain: boolean;
  write(chunk: Uint8Array): boolean;
  close(code: number): void;
  on(event: "drain" | "close", listener: () => void): unknown;
}

/** What `callHttp2Stream` walks: the handler's call -> `call` (ServerInterceptingCall) -> `nextCall`... -> `stream`. */
export const CALL_STREAM_SHAPE = "the server call's private call/nextCall/stream chain (ServerWritableStreamImpl.call -> BaseServerInterceptingCall.stream)";

/**
 * The Http2Stream under a grpc-js server call (a handler's `call`), or undefined when grpc-js's internals are not the
 * call -> `call` -> `nextCall`* -> `stream` chain this expects. Used for the Subscribe direct-write path (pubsub.ts)
 * and to reset a stream (RST_STREAM CANCEL) that grpc-js would otherwise keep open.
 */
export function callHttp2Stream(call: object): CallHttp2Stream | undefined {
  let c = (call as { call?: unknown }).call as Record<string, unknown> | undefined;
  for (let i = 0; c && i < 8; i++) {
    const s = c["stream"] as Partial<CallHttp2Stream> | undefined;
    if (
      s &&
      typeof s.close === "function" &&
      typeof s.closed === "boolean" &&
      typeof s.on === "function" &&
      typeof s.write === "function" &&
      typeof s.destroyed === "boolean"
    ) {
      return s as CallHttp2Stream;
    }
    c = c["nextCall"] as Record<string, unknown> | undefined;
  }
  return undefined;
}

/** What `serverHttp2Servers` reads. */
export const HTTP2_SERVERS_SHAPE = "grpc.Server's private http2Servers map (its node:http2 servers, one per bound address)";

/**
 * The node:http2 servers under a bound grpc-js Server (its private `http2Servers` map), or undefined when that map is
 * missing. grpc-js does not expose its HTTP/2 sessions; the session guards (session-guards.ts) reach them through
 * these servers' 'session' event. Call it after bindAsync.
 */
export function serverHttp2Servers(server: grpc.Server): http2.Http2Server[] | undefined {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) return undefined;
  const out = [...servers.keys()] as unknown[];
  return out.every((s) => typeof s === "object" && s !== null && typeof (s as http2.Http2Server).on === "function") ? (out as http2.Http2Server[]) : undefined;
}

/** grpc-js's own step that turns one 5-byte-prefixed request message into its (decompressed) payload. */
export type DecompressMessage = (this: unknown, message: Buffer, encoding: string) => Promise<Buffer>;

/** What `wrapDecompressMessage` replaces. */
export const DECOMPRESS_SHAPE = "BaseServerInterceptingCall.prototype.decompressMessage in build/src/server-interceptors.js";

/**
 * Replace grpc-js's `BaseServerInterceptingCall.prototype.decompressMessage` (process-wide, every server) with
 * `wrap(original)`. Returns false, changing nothing, when grpc-js has no such module or method.
 */
export function wrapDecompressMessage(wrap: (original: DecompressMessage) => DecompressMessage): boolean {
  let proto: Record<string, unknown> | undefined;
  try {
    const mod = require("@grpc/grpc-js/build/src/server-interceptors.js") as { BaseServerInterceptingCall?: { prototype: Record<string, unknown> } };
    proto = mod.BaseServerInterceptingCall?.prototype;
  } catch {
    return false;
  }
  const original = proto?.["decompressMessage"];
  if (!proto || typeof original !== "function") return false;
  proto["decompressMessage"] = wrap(original as DecompressMessage);
  return true;
}
