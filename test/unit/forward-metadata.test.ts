import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CallMetadata } from "../../src/shared/metadata.js";
import { createMetadataFilter } from "../../src/ops/forward-metadata.js";
import { DEFAULT_FORWARD_HEADERS, validateGatewayOptions } from "../../src/config/options.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Code } from "../../src/shared/code.js";

describe("forwarding allow-list", () => {
  const filter = createMetadataFilter(DEFAULT_FORWARD_HEADERS);

  it("keeps allow-listed gRPC metadata (every value) and drops the rest", () => {
    const md = new CallMetadata();
    md.set("x-api-key", "secret");
    md.set("authorization", "Bearer t");
    md.set("traceparent", "00-abc-def-01");
    md.add("x-request-id", "a");
    md.add("x-request-id", "b");
    md.set("trace-bin", Buffer.from([1, 2]));
    md.set("x-custom", "v");
    const out = filter.fromGrpc(md);
    assert.deepEqual(out.toJSON(), { traceparent: ["00-abc-def-01"], "x-request-id": ["a", "b"] });
  });

  it("forwards nothing for absent metadata", () => {
    assert.deepEqual(filter.fromGrpc(undefined).toJSON(), {});
    assert.deepEqual(filter.fromObject(undefined).toJSON(), {});
    assert.deepEqual(filter.fromObject(null).toJSON(), {});
  });

  it("never forwards x-api-key or -bin entries, even when a list names them", () => {
    const loose = createMetadataFilter(["x-api-key", "traceparent", "x-trace-bin"]);
    const md = new CallMetadata();
    md.set("x-api-key", "k");
    md.set("traceparent", "t");
    md.set("x-trace-bin", Buffer.from("b"));
    assert.deepEqual(loose.fromGrpc(md).toJSON(), { traceparent: ["t"] });
    assert.deepEqual(loose.fromObject({ "X-API-KEY": "k", "x-trace-bin": "b", Traceparent: "t" }).toJSON(), { traceparent: ["t"] });
  });

  it("filters REST headers", () => {
    const out = filter.fromHeaders({ "x-api-key": "k", cookie: "c", "x-b3-traceid": "1", "content-type": "application/json" });
    assert.deepEqual(out.toJSON(), { "x-b3-traceid": ["1"] });
  });

  it("rejects a metadata object that is not an object of strings, naming the entry", () => {
    const check = (v: unknown, re: RegExp) =>
      assert.throws(() => filter.fromObject(v), (e: GatewayError) => {
        assert.equal(e.code, Code.INVALID_ARGUMENT);
        assert.match(e.message, re);
        return true;
      });
    check(["a"], /metadata must be an object.*array/);
    check("x", /metadata must be an object.*string/);
    check({ traceparent: 1 }, /metadata\.traceparent must be a string \(got number\)/);
    check({ traceparent: null }, /metadata\.traceparent must be a string \(got null\)/);
  });

  it("the gateway refuses to start with an authority-carrying header on the list", () => {
    for (const h of ["authorization", "Cookie", "x-api-key", "proxy-authorization"]) {
      assert.throws(() => validateGatewayOptions({ forwardHeaders: ["traceparent", h] }), (e: GatewayError) => {
        assert.equal(e.code, Code.FAILED_PRECONDITION);
        assert.match(e.message, new RegExp(h.toLowerCase()));
        return true;
      });
    }
    assert.throws(() => validateGatewayOptions({ forwardHeaders: ["trace-bin"] }), /-bin/);
  });
});
