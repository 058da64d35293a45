import { hash, timingSafeEqual } from "node:crypto";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";

/** Checks `x-api-key` values. */
export interface Authenticator {
  /** True when auth is on (at least one key configured). */
  readonly enabled: boolean;
  /** Whether `key` is accepted. Always true when auth is off. Constant time in the key's content. */
  check(key: string | undefined): boolean;
}

/**
 * SHA-256 of a key, one shot: no Hash object per call, whose hidden map V8 frees at a full collection between calls,
 * throwing away every function compiled with the key check inlined (docs/warmup.md, "The collection").
 */
const digest = (s: string): Buffer => hash("sha256", s, "buffer");

/** An authenticator over the configured keys. No keys: every call is accepted (the host is then loopback only). */
export function createAuthenticator(keys: readonly string[]): Authenticator {
  const digests = keys.map(digest);
  // Read as a boolean: an empty `digests` has another hidden map (elements kind) than one of Buffers, and code
  // compiled by the warm-up's private gateway (which always has a key) would fail its map check at the first call.
  const enabled = digests.length > 0;
  return {
    enabled,
    check(key) {
      if (!enabled) return true;
      if (key === undefined || key === "") return false;
      // Hash first so lengths never leak, then compare against every key without early exit.
      const d = digest(key);
      let ok = false;
      for (const k of digests) ok = timingSafeEqual(d, k) || ok;
      return ok;
    },
  };
}

/**
 * Why an `x-api-key` value is refused, or undefined when it is accepted: the one check every front (REST, WebSocket,
 * SSE) makes. `key` holds every copy of a repeated header joined with ", " (as HTTP/2 and the REST front join them), so
 * two keys are refused whichever comes first instead of one of them being picked. `hint` ends the plain refusal.
 */
export function apiKeyRefusal(auth: Authenticator, key: string | undefined, hint = ""): GatewayError | undefined {
  if (auth.check(key)) return undefined;
  if (auth.enabled && key?.includes(",")) return new GatewayError(Code.UNAUTHENTICATED, "x-api-key is given more than once; send exactly one key");
  return new GatewayError(Code.UNAUTHENTICATED, `missing or invalid x-api-key${hint}`);
}
