import { createHash, timingSafeEqual } from "node:crypto";

/** Checks `x-api-key` values. */
export interface Authenticator {
  /** True when auth is on (at least one key configured). */
  readonly enabled: boolean;
  /** Whether `key` is accepted. Always true when auth is off. Constant time in the key's content. */
  check(key: string | undefined): boolean;
}

const digest = (s: string): Buffer => createHash("sha256").update(s).digest();

/** An authenticator over the configured keys. No keys: every call is accepted (the host is then loopback only). */
export function createAuthenticator(keys: readonly string[]): Authenticator {
  const digests = keys.map(digest);
  return {
    enabled: digests.length > 0,
    check(key) {
      if (digests.length === 0) return true;
      if (key === undefined || key === "") return false;
      // Hash first so lengths never leak, then compare against every key without early exit.
      const d = digest(key);
      let ok = false;
      for (const k of digests) ok = timingSafeEqual(d, k) || ok;
      return ok;
    },
  };
}
