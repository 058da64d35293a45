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

describe("forwardHeaders: headers the backend call sets itself", () => {
  it("refuses HTTP/2 connection headers, the content headers and grpc-* at startup, naming the header", () => {
    for (const h of ["connection", "te", "host", "transfer-encoding", "content-type", "content-length", "user-agent", "grpc-timeout", "grpc-encoding", "grpc-status"]) {
      assert.throws(
        () => validateGatewayOptions({ forwardHeaders: ["traceparent", h] }),
        (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT && e.message.includes(`must not name a header the backend call sets itself`) && e.message.includes(`"${h}"`),
        h,
      );
    }
    assert.doesNotThrow(() => validateGatewayOptions({ forwardHeaders: ["traceparent", "x-tenant-id"] }));
  });
});

describe("secret options in errors", () => {
  it("an empty or non-string API key names its entry, never the other keys", () => {
    assert.throws(
      () => validateGatewayOptions({ apiKeys: ["live-key-0123456789", ""] }),
      (e: unknown) => e instanceof GatewayError && /entry 1 is empty/.test(e.message) && !e.message.includes("live-key-0123456789"),
    );
    assert.throws(
      () => validateGatewayOptions({ apiKeys: ["live-key-0123456789", 7 as unknown as string] }),
      (e: unknown) => e instanceof GatewayError && /entry 1 is a number/.test(e.message) && !e.message.includes("live-key"),
    );
  });

  it("a token option of the wrong type is named without its value", () => {
    assert.throws(
      () => validateGatewayOptions({ daprApiToken: 123456789 as unknown as string }),
      (e: unknown) => e instanceof GatewayError && /daprApiToken/.test(e.message) && !e.message.includes("123456789"),
    );
  });
});
