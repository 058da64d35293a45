import { isLoopbackHost } from "../config/options.js";
import { Code } from "../shared/code.js";
import { echo } from "../shared/echo.js";
import { GatewayError } from "../shared/gateway-error.js";

/**
 * Browser-origin policy of every HTTP front (REST, WebSocket, SSE, browser RPC): `--cors-origin` values; `*` allows any.
 * A request without Origin (not a browser) passes, and so does a same-origin one (the Origin's host:port equals the
 * Host header): a page served by the gateway itself (the console) talking back to it is not a cross-site request,
 * whatever the allow-list says.
 *
 * With no API key configured (`loopbackOnly`) the Host header must also be a loopback name (DNS rebinding: a page of
 * `evil.example:8080` whose name the attacker re-resolved to 127.0.0.1 sends `Host: evil.example:8080` and an Origin
 * equal to it, or no Origin at all on a same-origin GET). See `hostAllowed`.
 */
export interface OriginPolicy {
  /** Whether this Origin header value may call a request whose Host header is `host`. */
  allowed(origin: string | undefined, host?: string): boolean;
  /**
   * Whether a request sent with this Host header is served at all, whatever its Origin: always, unless the policy is
   * `loopbackOnly`; then only a loopback Host (`localhost`, `127.0.0.0/8`, `[::1]`, any port), the host of an origin
   * listed explicitly (not `*`), or none (no browser sends a request without Host).
   */
  hostAllowed(host: string | undefined): boolean;
  /** The policy refuses non-loopback Hosts (no API key is configured). */
  readonly loopbackOnly: boolean;
}

export interface OriginPolicyOptions {
  /** No API key is configured: serve only loopback Hosts (or those of listed origins). Default false. */
  loopbackOnly?: boolean;
}

/** Whether `origin` (scheme://host[:port]) names the host the request was sent to. */
export function sameOrigin(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return false; // "null" (sandboxed or file pages) and garbage are never same-origin
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return false;
  // URL drops a scheme's default port; Host keeps what the client sent, so compare both spellings.
  const h = host.toLowerCase();
  return u.host === h || (u.port === "" && `${u.hostname}:${u.protocol === "https:" ? 443 : 80}` === h);
}

/** `host[:port]` or `[v6][:port]`, as a Host header holds it. */
const HOST_HEADER = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::\d{1,5})?$/;

/** Whether a Host header value names a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`) with any port or none. */
export function loopbackHostHeader(host: string): boolean {
  const m = HOST_HEADER.exec(host.toLowerCase());
  if (!m) return false;
  return m[1] !== undefined ? m[1] === "::1" : isLoopbackHost(m[2]!);
}

/** The origin policy over the allow-list. */
export function createOriginPolicy(origins: readonly string[], options: OriginPolicyOptions = {}): OriginPolicy {
  const set = new Set(origins.map((o) => o.toLowerCase().replace(/\/$/, "")));
  const any = set.has("*");
  const listed = [...set].filter((o) => o !== "*");
  const loopbackOnly = options.loopbackOnly === true;
  const hostAllowed = (host: string | undefined): boolean =>
    !loopbackOnly || host === undefined || host === "" || loopbackHostHeader(host) || listed.some((o) => sameOrigin(o, host));
  return {
    loopbackOnly,
    hostAllowed,
    allowed: (origin, host) => origin === undefined || origin === "" || any || set.has(origin.toLowerCase()) || (sameOrigin(origin, host) && hostAllowed(host)),
  };
}

/** The refusal of a request whose Host the policy does not serve (PERMISSION_DENIED, HTTP 403). */
export function hostRefusal(host: string): GatewayError {
  return new GatewayError(
    Code.PERMISSION_DENIED,
    `host ${echo(host, 100)} is not a loopback name: with no API key configured the gateway answers only requests addressed to ` +
      "localhost, 127.0.0.1 or [::1] (a site whose name resolves to this machine must not reach it); use one of them, list the site's origin with --cors-origin, or configure --api-key",
  );
}

/** The refusal of a browser Origin the policy does not allow (PERMISSION_DENIED, HTTP 403). */
export function originRefusal(origin: string): GatewayError {
  return new GatewayError(Code.PERMISSION_DENIED, `origin ${echo(origin, 100)} is not allowed (same origin or --cors-origin)`);
}

/**
 * Why a request's Origin is refused, or undefined when the policy allows it: a same-origin page on a Host the policy
 * does not serve (a DNS-rebound name) is told about the Host, any other about its Origin.
 */
export function originCheck(policy: OriginPolicy, origin: string | undefined, host: string | undefined): GatewayError | undefined {
  if (policy.allowed(origin, host)) return undefined;
  return origin !== undefined && sameOrigin(origin, host) ? hostRefusal(host ?? "") : originRefusal(origin ?? "");
}

/**
 * Why a browser request is refused before anything else runs, or undefined to go on: a Host the policy does not serve
 * (no API key and not loopback), then an Origin it does not allow. Every HTTP front checks this first.
 */
export function browserRefusal(policy: OriginPolicy, origin: string | undefined, host: string | undefined): GatewayError | undefined {
  if (!policy.hostAllowed(host)) return hostRefusal(host ?? "");
  return originCheck(policy, origin, host);
}
