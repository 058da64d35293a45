import type uws from "uWebSockets.js";

/** What a CORS preflight of one route allows. */
export interface PreflightPolicy {
  /** Whether this Origin may call a request whose Host header is `host` (same origin or `--cors-origin`). */
  allowed(origin: string, host: string): boolean;
  /** `access-control-allow-methods`. */
  methods: string;
  /** `access-control-allow-headers`. */
  headers: string;
  /** `access-control-max-age`, seconds. */
  maxAgeSeconds: number;
}

/**
 * Answer a CORS preflight `OPTIONS`: 204 with the policy's headers for an allowed origin, a bare 403 (no CORS headers,
 * so the browser refuses the call itself) for any other or none. Returns the status written.
 */
export function answerPreflight(res: uws.HttpResponse, req: uws.HttpRequest, policy: PreflightPolicy): number {
  const origin = req.getHeader("origin");
  const allowed = origin !== "" && policy.allowed(origin, req.getHeader("host"));
  res.cork(() => {
    res.writeStatus(allowed ? "204 No Content" : "403 Forbidden");
    if (allowed) {
      res.writeHeader("access-control-allow-origin", origin);
      res.writeHeader("access-control-allow-methods", policy.methods);
      res.writeHeader("access-control-allow-headers", policy.headers);
      res.writeHeader("access-control-max-age", String(policy.maxAgeSeconds));
      res.writeHeader("vary", "Origin");
    }
    res.end();
  });
  return allowed ? 204 : 403;
}
