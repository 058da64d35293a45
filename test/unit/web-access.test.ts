import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createOriginPolicy, parseOfferedProtocols, sameOrigin } from "../../src/web/access.js";

describe("web access: origin rule and offered subprotocols", () => {
  it("same-origin compares the Origin's host:port with the Host header, default ports either way", () => {
    assert.equal(sameOrigin("http://127.0.0.1:8080", "127.0.0.1:8080"), true);
    assert.equal(sameOrigin("http://GW.example.com", "gw.example.com"), true);
    assert.equal(sameOrigin("http://gw.example.com", "gw.example.com:80"), true);
    assert.equal(sameOrigin("https://gw.example.com", "gw.example.com:443"), true);
    assert.equal(sameOrigin("http://127.0.0.1:8081", "127.0.0.1:8080"), false);
    assert.equal(sameOrigin("http://evil.example", "gw.example.com"), false);
    assert.equal(sameOrigin("null", "gw.example.com"), false);
    assert.equal(sameOrigin("file:///x", "x"), false);
    assert.equal(sameOrigin("http://gw.example.com", undefined), false);
  });

  it("the origin policy: no Origin, listed, *, or same-origin pass; anything else is refused", () => {
    const p = createOriginPolicy(["https://app.example.com/"]);
    assert.equal(p.allowed(undefined), true);
    assert.equal(p.allowed("https://APP.example.com"), true);
    assert.equal(p.allowed("http://gw:8080", "gw:8080"), true);
    assert.equal(p.allowed("http://evil.example", "gw:8080"), false);
    assert.equal(p.allowed("http://evil.example"), false);
    assert.equal(createOriginPolicy(["*"]).allowed("http://evil.example"), true);
  });

  it("offered subprotocols: the protocol is selected, credentials collected, a credential never preferred over it", () => {
    assert.deepEqual(parseOfferedProtocols("invoke.v1, key.abc", "invoke.v1", "key."), { credentials: ["abc"], selected: "invoke.v1" });
    assert.deepEqual(parseOfferedProtocols("key.a,key.b", "invoke.v1", "key."), { credentials: ["a", "b"], selected: "key.a" });
    assert.deepEqual(parseOfferedProtocols("", "pubsub.v1", "token."), { credentials: [], selected: "" });
  });
});
