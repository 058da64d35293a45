import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { topicProblem } from "../ops/cloudevent-validate.js";
import { apiKeyRefusal, type Authenticator } from "../ops/auth.js";
import { originCheck, type OriginPolicy } from "../http/origin.js";

/** What a web subscriber may do: from a token, or everything with a valid x-api-key. */
export interface Grant {
  /** Exact topic names and prefixes ending in `*`; null: every topic. */
  topics: readonly string[] | null;
  /** May publish (to the same topics). */
  publish: boolean;
  /** Epoch ms when the grant ends (token expiry); null: never. */
  expiresAt: number | null;
}

/** Whether `grant` covers `topic`. */
export function allows(grant: Grant, topic: string): boolean {
  if (grant.topics === null) return true;
  for (const p of grant.topics) {
    if (p.endsWith("*") ? topic.startsWith(p.slice(0, -1)) : topic === p) return true;
  }
  return false;
}

/** Bounds on token requests. */
export const MAX_TOKEN_TTL_SECONDS = 86_400;
export const MAX_TOKEN_TOPICS = 64;
const AUDIENCE = "platform-gateway/pubsub";

/**
 * Signs and checks browser tokens: compact JWTs, HS256 over the configured secret, with node:crypto (synchronous).
 * Synchronous on purpose: a WebSocket upgrade is then decided inside uWS's upgrade handler, never after an await.
 * The uWS 20.30 we ship sometimes dropped a socket upgraded later through res.cork() right after open, on worker
 * threads (docs/web-pubsub.md, "Browser tokens"); HMAC-SHA256 of a few hundred bytes costs microseconds.
 */
export interface TokenIssuer {
  /** Validate a `POST /v1/pubsub/tokens` body and sign a token; INVALID_ARGUMENT naming the field on bad input. */
  issue(body: Record<string, unknown>): { token: string; expires_at: string };
  /** Verify a token; UNAUTHENTICATED saying why (expired, bad signature, malformed). Never echoes the token. */
  verify(token: string): Grant;
}

/** The protected header of every token the gateway signs (what jose's SignJWT wrote, byte for byte). */
const TOKEN_HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");
/** The alphabet of one base64url segment, unpadded. */
const B64URL_SEGMENT = /^[A-Za-z0-9_-]+$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The one refusal for every token that is not a valid, current token of this gateway (the reason stays server-side). */
function invalidToken(): GatewayError {
  return new GatewayError(Code.UNAUTHENTICATED, "token is not valid (malformed, bad signature or wrong audience)");
}

/** A base64url segment decoded as a UTF-8 JSON object; undefined when it is anything else (a length of 4n+1 is no
 * byte string's encoding: Buffer would quietly drop the last character). */
function jsonSegment(segment: string): Record<string, unknown> | undefined {
  if (!B64URL_SEGMENT.test(segment) || segment.length % 4 === 1) return undefined;
  try {
    const v: unknown = JSON.parse(utf8.decode(Buffer.from(segment, "base64url")));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Verify a compact JWT signed with `key`, with the checks jose's `jwtVerify(token, key, {algorithms: ["HS256"],
 * audience, requiredClaims: ["exp"]})` made, signature before claims: three base64url segments; a JSON object header
 * with `alg` exactly HS256 (`none`, RS256 and the rest are refused before any key is used) and no `crit`; the
 * HMAC-SHA256 of `header.payload` equal (constant time, canonical encoding) to the signature; a JSON object payload
 * whose `aud` is (or holds) the audience; `iat`, `nbf` and `exp` numbers where present, `exp` present, `nbf` not in the
 * future; then `exp` after now (else "token expired"). Every other failure is the same "not valid" refusal, and no
 * message carries any part of the token.
 */
function verifyToken(key: Buffer, token: string, nowMs: number): Grant {
  const parts = token.split(".");
  if (parts.length !== 3) throw invalidToken();
  const [h, p, s] = parts as [string, string, string];
  const header = jsonSegment(h);
  if (!header || header["alg"] !== "HS256" || Object.hasOwn(header, "crit")) throw invalidToken();
  if (!B64URL_SEGMENT.test(s) || !B64URL_SEGMENT.test(p)) throw invalidToken();
  const expected = createHmac("sha256", key).update(`${h}.${p}`).digest();
  const given = Buffer.from(s, "base64url");
  // Re-encoding the given bytes rejects a signature spelled with non-zero padding bits (a second spelling of one MAC).
  if (given.length !== expected.length || !timingSafeEqual(given, expected) || given.toString("base64url") !== s) throw invalidToken();
  const claims = jsonSegment(p);
  if (!claims) throw invalidToken();
  const aud = claims["aud"];
  if (!(aud === AUDIENCE || (Array.isArray(aud) && aud.includes(AUDIENCE)))) throw invalidToken();
  const now = Math.floor(nowMs / 1000);
  for (const c of ["iat", "nbf"]) if (claims[c] !== undefined && typeof claims[c] !== "number") throw invalidToken();
  if (typeof claims["nbf"] === "number" && claims["nbf"] > now) throw invalidToken();
  const exp = claims["exp"];
  if (typeof exp !== "number") throw invalidToken();
  if (exp <= now) throw new GatewayError(Code.UNAUTHENTICATED, "token expired: request a new one");
  const topics = claims["topics"];
  if (!Array.isArray(topics) || !topics.every((t) => typeof t === "string")) throw new GatewayError(Code.UNAUTHENTICATED, "token carries no topics");
  return { topics: topics as string[], publish: claims["pub"] === true, expiresAt: exp * 1000 };
}

/** A token issuer over `secret` (utf-8); a random per-process secret when none is given. */
export function createTokenIssuer(secret: string | undefined): TokenIssuer {
  // Hashing gives HS256 a 256-bit key whatever the secret's length.
  const key = createHash("sha256")
    .update(secret ?? randomBytes(32).toString("hex"))
    .digest();
  return {
    issue(body) {
      for (const k of Object.keys(body)) {
        if (k !== "topics" && k !== "ttl_seconds" && k !== "publish") throw invalidArgument(k.slice(0, 64), "is not a field of a token request (topics, ttl_seconds, publish)");
      }
      const topics = body["topics"];
      if (!Array.isArray(topics) || topics.length === 0) throw invalidArgument("topics", "must be a non-empty array of topic names or prefixes ending in *");
      if (topics.length > MAX_TOKEN_TOPICS) throw invalidArgument("topics", `must hold at most ${MAX_TOKEN_TOPICS} entries, got ${topics.length}`);
      topics.forEach((t, i) => {
        if (typeof t !== "string" || t === "" || t.length > 256) throw invalidArgument(`topics[${i}]`, "must be a non-empty string of at most 256 characters");
        if (t.indexOf("*") !== -1 && t.indexOf("*") !== t.length - 1) throw invalidArgument(`topics[${i}]`, `'${t.slice(0, 64)}' may hold * only as its last character (a prefix)`);
      });
      const ttl = body["ttl_seconds"];
      if (typeof ttl !== "number" || !Number.isInteger(ttl) || ttl < 1 || ttl > MAX_TOKEN_TTL_SECONDS) {
        throw invalidArgument("ttl_seconds", `must be an integer from 1 to ${MAX_TOKEN_TTL_SECONDS}, got ${JSON.stringify(ttl)?.slice(0, 32)}`);
      }
      const publish = body["publish"] ?? false;
      if (typeof publish !== "boolean") throw invalidArgument("publish", "must be a boolean");
      const now = Date.now();
      // JWT `exp` is whole seconds: round up, so a token lives at least `ttl_seconds` (flooring gave a ttl-1 token
      // as little as a millisecond when issued late in a second).
      const exp = Math.ceil(now / 1000) + ttl;
      // The claims in the order jose's SignJWT wrote them, so tokens look as they always did.
      const payload = Buffer.from(JSON.stringify({ topics, pub: publish, aud: AUDIENCE, iat: Math.floor(now / 1000), exp })).toString("base64url");
      const signature = createHmac("sha256", key).update(`${TOKEN_HEADER}.${payload}`).digest("base64url");
      return { token: `${TOKEN_HEADER}.${payload}.${signature}`, expires_at: new Date(exp * 1000).toISOString() };
    },
    verify: (token) => verifyToken(key, token, Date.now()),
  };
}

/** The WebSocket subprotocol the gateway speaks, and the prefix of a token passed as a subprotocol value. */
export const WS_PROTOCOL = "pubsub.v1";
export const TOKEN_PROTOCOL_PREFIX = "token.";

/**
 * The credential a client offered as WebSocket subprotocols, and the subprotocol to select. Browsers cannot set headers
 * on a WebSocket upgrade, so a credential travels as an extra offered value `<prefix><credential>` next to the protocol
 * the gateway speaks. `credentials` holds every such value (callers refuse more than one where that matters).
 */
export interface OfferedProtocols {
  /** The credential parts (after the prefix) of every offered value starting with the prefix, in offer order. */
  credentials: string[];
  /** What to echo in Sec-WebSocket-Protocol: `protocol` when offered, else the first credential value, else "". */
  selected: string;
}

/** Parse a Sec-WebSocket-Protocol header (comma-separated offers) for `protocol` and `<credentialPrefix>` values. */
export function parseOfferedProtocols(header: string, protocol: string, credentialPrefix: string): OfferedProtocols {
  const offered = header.split(",").map((p) => p.trim()).filter(Boolean);
  const withCredential = offered.filter((p) => p.startsWith(credentialPrefix));
  // A browser that offered protocols fails the handshake unless one of them is selected.
  const selected = offered.includes(protocol) ? protocol : (withCredential[0] ?? "");
  return { credentials: withCredential.map((p) => p.slice(credentialPrefix.length)), selected };
}

/**
 * Browser-origin policy: `--cors-origin` values; `*` allows any. A request without Origin (not a browser) passes, and
 * so does a same-origin one (the Origin's host:port equals the Host header). The same rule for every HTTP front: it
 * lives in src/http/origin.ts so the REST router checks it too.
 */
export { createOriginPolicy, sameOrigin, type OriginPolicy } from "../http/origin.js";

/**
 * The refusal every web upgrade checks first (pub/sub WebSocket and SSE, invoke-ws): the gateway is shutting down
 * (UNAVAILABLE), or the browser's Origin is neither the gateway's own nor on `--cors-origin` (PERMISSION_DENIED).
 * Undefined to go on. The Host rule of a gateway without an API key (DNS rebinding) is not checked here: the REST
 * server applies it in front of every handler on its app, web ones included (src/http/router.ts, hostGuardedApp).
 */
export function webAdmission(closing: boolean, origins: OriginPolicy, origin: string | undefined, host: string | undefined): GatewayError | undefined {
  if (closing) return new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down");
  return originCheck(origins, origin, host);
}

/**
 * How a web request authenticates: a token (query `token` or subprotocol), else x-api-key. `apiKey` holds every copy
 * of the header joined (`requestHeaders`) and `tokens` every token the request carries: more than one of either is
 * ambiguous and refused, never resolved by picking one.
 */
export function authenticate(deps: { auth: Authenticator; tokens: TokenIssuer }, apiKey: string | undefined, tokens: readonly string[]): Grant {
  const given = [...new Set(tokens.filter((t) => t !== ""))];
  if (given.length > 1) throw new GatewayError(Code.UNAUTHENTICATED, "two different tokens are given (?token= and Sec-WebSocket-Protocol count alike); send exactly one");
  if (given.length === 1) return deps.tokens.verify(given[0]!);
  return keyGrant(deps, apiKey);
}

/** The grant of a request without a token, decided synchronously: x-api-key (UNAUTHENTICATED when missing, wrong or repeated). */
export function keyGrant(deps: { auth: Authenticator }, apiKey: string | undefined): Grant {
  const refused = apiKeyRefusal(deps.auth, apiKey, " (browsers: pass a token from POST /v1/pubsub/tokens as ?token=)");
  if (refused) throw refused;
  return KEY_GRANT;
}

/** The grant of a valid x-api-key: shared, since every keyed subscriber holds the same one. */
const KEY_GRANT: Grant = Object.freeze({ topics: null, publish: true, expiresAt: null });

/** The topics of a subscribe request, checked: non-empty strings, at most `max`, each allowed by the grant. */
export function checkTopics(field: string, topics: unknown, grant: Grant, max: number): string[] {
  if (!Array.isArray(topics) || topics.length === 0) throw invalidArgument(field, "must be a non-empty array of topic names");
  if (topics.length > max) throw invalidArgument(field, `must hold at most ${max} topics, got ${topics.length}`);
  const out: string[] = [];
  topics.forEach((t, i) => {
    if (typeof t !== "string" || t === "") throw invalidArgument(`${field}[${i}]`, "must be a non-empty string");
    const problem = topicProblem(t);
    if (problem) throw invalidArgument(`${field}[${i}]`, problem);
    if (!allows(grant, t)) throw new GatewayError(Code.PERMISSION_DENIED, `the token does not allow topic '${t.slice(0, 64)}'`);
    out.push(t);
  });
  return out;
}
