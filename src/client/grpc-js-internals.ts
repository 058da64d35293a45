import { createRequire } from "node:module";
import type { ChannelCredentials } from "@grpc/grpc-js";

/**
 * The one place the client library relies on grpc-js's private internals. The client never imports server modules, so
 * this is its own file.
 * test/unit/client-grpc-js-internals.test.ts exercises each accessor against the real library and fails with
 * `clientInternalsProblem(...)` when an upgrade changes a shape.
 *
 * Written against grpc-js 1.14.
 */

/** The installed grpc-js version ("unknown" if its package.json cannot be read). */
export const GRPC_JS_VERSION: string = (() => {
  try {
    return (createRequire(import.meta.url)("@grpc/grpc-js/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
})();

/** The message for a shape `what` that grpc-js no longer has. */
export function clientInternalsProblem(what: string): string {
  return `grpc-js ${GRPC_JS_VERSION} changed ${what}; the client was written against grpc-js 1.14 (see src/client/grpc-js-internals.ts)`;
}

/** What `isChannelCredentials` looks for. */
export const CREDENTIALS_SHAPE = "ChannelCredentials: its _isSecure() method";

/**
 * Whether `v` is a grpc-js ChannelCredentials. Not `instanceof`: an application may hand over credentials made by its
 * own copy of grpc-js, whose class is not this one; every grpc-js ChannelCredentials has the (underscore-private)
 * `_isSecure()` method, so that marks one.
 */
export function isChannelCredentials(v: unknown): v is ChannelCredentials {
  return typeof v === "object" && v !== null && typeof (v as { _isSecure?: unknown })._isSecure === "function";
}
