import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { browserRefusal, createOriginPolicy, loopbackHostHeader } from "../../src/http/origin.js";

describe("origin policy: the Host rule of no-key mode (DNS rebinding)", () => {
  it("loopback Host headers: localhost, 127.0.0.0/8 and [::1], with any port or none, in any case", () => {
    for (const h of ["localhost", "localhost:8080", "LocalHost:1", "127.0.0.1", "127.0.0.1:8080", "127.9.8.7:1", "[::1]", "[::1]:8080"]) assert.equal(loopbackHostHeader(h), true, h);
    for (const h of ["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.evil.example:80", "0.0.0.0:8080", "[::2]:8080", "::1", "127.0.0.1:8080@evil", "127.0.0.1:x", "[::1]x", ""]) {
      assert.equal(loopbackHostHeader(h), false, h);
    }
  });

  it("loopbackOnly: non-loopback Hosts are refused unless a listed origin names them; no Host (not a browser) passes", () => {
    const p = createOriginPolicy(["https://app.example.com", "*"], { loopbackOnly: true });
    assert.equal(p.hostAllowed("127.0.0.1:8080"), true);
    assert.equal(p.hostAllowed(undefined), true);
    assert.equal(p.hostAllowed("app.example.com"), true);
    assert.equal(p.hostAllowed("app.example.com:443"), true);
    assert.equal(p.hostAllowed("app.example.com:8443"), false);
    assert.equal(p.hostAllowed("evil.example:8080"), false, "* names no host");
    assert.equal(createOriginPolicy([]).hostAllowed("evil.example:8080"), true, "with keys (the default) any Host");
  });

  it("loopbackOnly: a rebound name is not same-origin, and the refusal names the Host", () => {
    const p = createOriginPolicy([], { loopbackOnly: true });
    assert.equal(p.allowed("http://127.0.0.1:8080", "127.0.0.1:8080"), true);
    assert.equal(p.allowed("http://evil.example:8080", "evil.example:8080"), false);
    assert.equal(createOriginPolicy([]).allowed("http://evil.example:8080", "evil.example:8080"), true, "keyed: same-origin by name is fine");
    assert.match(browserRefusal(p, "http://evil.example:8080", "evil.example:8080")!.message, /host evil\.example:8080 is not a loopback name/);
    assert.match(browserRefusal(p, undefined, "evil.example:8080")!.message, /is not a loopback name/);
    assert.match(browserRefusal(p, "http://other.example", "127.0.0.1:8080")!.message, /origin http:\/\/other\.example is not allowed/);
    assert.equal(browserRefusal(p, undefined, "localhost:8080"), undefined);
  });
});
