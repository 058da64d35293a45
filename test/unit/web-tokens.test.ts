import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { jwtVerify, SignJWT } from "jose";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createTokenIssuer } from "../../src/web/access.js";

const SECRET = "unit-test-token-secret";
/** The HS256 key the issuer derives from SECRET (sha256 of the secret), to sign test tokens the gateway never would. */
const KEY = createHash("sha256").update(SECRET).digest();
const AUD = "platform-gateway/pubsub";
const INVALID = "token is not valid (malformed, bad signature or wrong audience)";
const EXPIRED = "token expired: request a new one";

const b64 = (v: unknown): string => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
const mac = (input: string, key: Buffer = KEY): string => createHmac("sha256", key).update(input).digest("base64url");
const nowS = (): number => Math.floor(Date.now() / 1000);

/** A token with any header and claims, signed with `key` over exactly what it carries. */
function forge(header: unknown, claims: unknown, key: Buffer = KEY): string {
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${mac(input, key)}`;
}

/** Good claims, with `over` replacing (or, as undefined, removing) some. */
function claims(over: Record<string, unknown> = {}): Record<string, unknown> {
  const c: Record<string, unknown> = { topics: ["a", "pre.*"], pub: true, aud: AUD, iat: nowS(), exp: nowS() + 60, ...over };
  for (const [k, v] of Object.entries(over)) if (v === undefined) delete c[k];
  return c;
}

const HS256 = { alg: "HS256", typ: "JWT" };
const issuer = createTokenIssuer(SECRET);

/** verify() refuses `token` UNAUTHENTICATED with `message`, and the message carries no part of the token. */
function refused(token: string, message: string, what: string): void {
  assert.throws(
    () => issuer.verify(token),
    (e: unknown) => {
      assert.ok(e instanceof GatewayError, `${what}: a GatewayError`);
      assert.equal(e.code, Code.UNAUTHENTICATED, `${what}: UNAUTHENTICATED`);
      assert.equal(e.rawMessage, message, what);
      for (const part of [token, ...token.split(".")].filter((p) => p.length >= 4)) {
        assert.ok(!e.message.includes(part), `${what}: the message never echoes the token`);
      }
      return true;
    },
    what,
  );
}

describe("browser tokens: synchronous HS256 sign and verify (node:crypto)", () => {
  it("an issued token verifies synchronously to its grant, and is a standard JWT jose accepts", async () => {
    const { token, expires_at } = issuer.issue({ topics: ["a", "pre.*"], ttl_seconds: 60, publish: true });
    const grant = issuer.verify(token);
    assert.deepEqual(grant, { topics: ["a", "pre.*"], publish: true, expiresAt: Date.parse(expires_at) });
    assert.ok(grant.expiresAt! >= Date.now() + 60_000, "lives at least ttl_seconds");
    const [h, p] = token.split(".");
    assert.deepEqual(JSON.parse(Buffer.from(h!, "base64url").toString()), HS256);
    assert.deepEqual(Object.keys(JSON.parse(Buffer.from(p!, "base64url").toString()) as object), ["topics", "pub", "aud", "iat", "exp"]);
    const { payload, protectedHeader } = await jwtVerify(token, KEY, { algorithms: ["HS256"], audience: AUD, requiredClaims: ["exp"] });
    assert.equal(protectedHeader.alg, "HS256");
    assert.deepEqual(payload["topics"], ["a", "pre.*"]);
    assert.equal(issuer.verify(issuer.issue({ topics: ["x"], ttl_seconds: 1 }).token).publish, false, "publish defaults to false");
  });

  it("a token jose signed with the same key verifies (tokens issued before this change stay valid)", async () => {
    const token = await new SignJWT({ topics: ["t*"], pub: false }).setProtectedHeader({ alg: "HS256", typ: "JWT" }).setAudience(AUD).setIssuedAt().setExpirationTime(nowS() + 30).sign(KEY);
    assert.deepEqual(issuer.verify(token), { topics: ["t*"], publish: false, expiresAt: (nowS() + 30) * 1000 });
    // Audience as an array holding ours, no typ, no iat: as jose accepted.
    assert.deepEqual(issuer.verify(forge({ alg: "HS256" }, claims({ aud: ["other", AUD], iat: undefined }))).topics, ["a", "pre.*"]);
  });

  it("a bad signature is refused: tampered signature, tampered claims, another key, a non-canonical spelling", () => {
    const good = issuer.issue({ topics: ["a"], ttl_seconds: 60 }).token;
    const [h, p, s] = good.split(".") as [string, string, string];
    const flipped = s.slice(0, 10) + (s[10] === "A" ? "B" : "A") + s.slice(11);
    refused(`${h}.${p}.${flipped}`, INVALID, "one signature character changed");
    refused(`${h}.${p}.${s.slice(0, -1)}`, INVALID, "signature one character short");
    refused(`${h}.${p}.${s}AA`, INVALID, "signature with extra bytes");
    refused(`${h}.${b64(claims({ topics: ["*"] }))}.${s}`, INVALID, "claims widened, old signature");
    refused(forge(HS256, claims(), createHash("sha256").update("another-secret-entirely").digest()), INVALID, "signed with another key");
    // 32 bytes are 43 base64url characters whose last carries 2 unused bits: a second spelling of the same MAC.
    const last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".indexOf(s.at(-1)!);
    const twin = s.slice(0, -1) + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last ^ 1];
    assert.deepEqual(Buffer.from(twin, "base64url"), Buffer.from(s, "base64url"), "the twin decodes to the same bytes");
    refused(`${h}.${p}.${twin}`, INVALID, "non-canonical signature encoding");
    assert.deepEqual(issuer.verify(good).topics, ["a"], "the untouched token still verifies");
  });

  it("an expired token is refused as expired (exp now or past); a bad signature wins over expiry", () => {
    refused(forge(HS256, claims({ exp: nowS() - 10 })), EXPIRED, "exp in the past");
    refused(forge(HS256, claims({ exp: nowS() })), EXPIRED, "exp equal to now");
    const expired = forge(HS256, claims({ exp: nowS() - 10 }));
    refused(expired.slice(0, -2) + (expired.endsWith("AA") ? "BA" : "AA"), INVALID, "expired and tampered");
    refused(forge(HS256, claims({ exp: nowS() - 10, aud: "elsewhere" })), INVALID, "expired with the wrong audience");
  });

  it("any alg but HS256 is refused before the key is used: none, RS256, HS512, missing, wrong type", () => {
    const c = b64(claims());
    refused(`${b64({ alg: "none", typ: "JWT" })}.${c}.`, INVALID, "alg none, empty signature");
    refused(forge({ alg: "none" }, claims()), INVALID, "alg none with an HMAC signature");
    refused(forge({ alg: "RS256", typ: "JWT" }, claims()), INVALID, "alg RS256 (HMAC-signed: the key-confusion attack)");
    refused(forge({ alg: "HS512" }, claims()), INVALID, "alg HS512");
    refused(forge({ alg: "hs256" }, claims()), INVALID, "alg in lower case");
    refused(forge({ typ: "JWT" }, claims()), INVALID, "no alg");
    refused(forge({ alg: ["HS256"] }, claims()), INVALID, "alg an array");
    refused(forge({ alg: "HS256", crit: ["exp"] }, claims()), INVALID, "a crit header");
  });

  it("malformed tokens are refused: segment count, encoding, JSON, UTF-8", () => {
    const good = issuer.issue({ topics: ["a"], ttl_seconds: 60 }).token;
    const [h, p, s] = good.split(".") as [string, string, string];
    refused("", INVALID, "empty");
    refused("not-a-token-at-all", INVALID, "one segment");
    refused(`${h}.${p}`, INVALID, "two segments");
    refused(`${good}.${s}`, INVALID, "four segments");
    refused(`..`, INVALID, "three empty segments");
    refused(`${h}..${s}`, INVALID, "empty payload");
    refused(`${h}=.${p}.${s}`, INVALID, "padding in the header");
    refused(`${h}.${p}=.${s}`, INVALID, "padding in the payload");
    refused(`${h}.${p}.${s}=`, INVALID, "padding in the signature");
    refused(`${h}.${p.slice(0, 5)}+/${p.slice(7)}.${s}`, INVALID, "base64 (not url) characters");
    refused(`${h}.${p} .${s}`, INVALID, "a space");
    const input = (hh: string, pp: string): string => `${hh}.${pp}.${mac(`${hh}.${pp}`)}`;
    refused(input(b64("{not json"), p), INVALID, "header not JSON");
    refused(input(b64(["HS256"]), p), INVALID, "header an array");
    refused(input(b64("null"), p), INVALID, "header null");
    refused(input(h, b64("{not json")), INVALID, "claims not JSON");
    refused(input(h, b64("[1,2]")), INVALID, "claims an array");
    refused(input(h, b64('"a string"')), INVALID, "claims a string");
    refused(input(h, Buffer.from([0x7b, 0xff, 0xfe, 0x7d]).toString("base64url")), INVALID, "claims not UTF-8");
    refused(input(h, p.slice(0, p.length - (p.length % 4)) + "A"), INVALID, "claims of an impossible length (4n+1)");
  });

  it("wrong types or values in the claims are refused", () => {
    refused(forge(HS256, claims({ exp: undefined })), INVALID, "no exp");
    refused(forge(HS256, claims({ exp: String(nowS() + 60) })), INVALID, "exp a string");
    refused(forge(HS256, claims({ exp: null })), INVALID, "exp null");
    refused(forge(HS256, claims({ iat: "yesterday" })), INVALID, "iat a string");
    refused(forge(HS256, claims({ nbf: true })), INVALID, "nbf a boolean");
    refused(forge(HS256, claims({ nbf: nowS() + 30 })), INVALID, "nbf in the future");
    assert.equal(issuer.verify(forge(HS256, claims({ nbf: nowS() - 1 }))).publish, true, "nbf in the past is fine");
    refused(forge(HS256, claims({ aud: undefined })), INVALID, "no aud");
    refused(forge(HS256, claims({ aud: "platform-gateway/other" })), INVALID, "another audience");
    refused(forge(HS256, claims({ aud: ["x", "y"] })), INVALID, "an audience list without ours");
    refused(forge(HS256, claims({ aud: { [AUD]: true } })), INVALID, "aud an object");
    refused(forge(HS256, claims({ topics: undefined })), "token carries no topics", "no topics");
    refused(forge(HS256, claims({ topics: "a" })), "token carries no topics", "topics a string");
    refused(forge(HS256, claims({ topics: ["a", 1] })), "token carries no topics", "a topic not a string");
    assert.equal(issuer.verify(forge(HS256, claims({ pub: "true" }))).publish, false, "pub other than true grants no publish");
  });
});
