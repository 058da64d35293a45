import { test } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { CREDENTIALS_SHAPE, GRPC_JS_VERSION, clientInternalsProblem, isChannelCredentials } from "../../src/client/grpc-js-internals.js";
import { resolveClientOptions } from "../../src/client/options.js";

// isChannelCredentials against the real grpc-js: fails with "grpc-js <version> changed ..." when an upgrade changes it.

test("every kind of real grpc-js ChannelCredentials is recognised", () => {
  assert.match(GRPC_JS_VERSION, /^\d+\.\d+\.\d+/);
  const insecure = grpc.credentials.createInsecure();
  const ssl = grpc.credentials.createSsl();
  const combined = grpc.credentials.combineChannelCredentials(ssl, grpc.credentials.createFromMetadataGenerator((_p, cb) => cb(null, new grpc.Metadata())));
  for (const [name, c] of Object.entries({ insecure, ssl, combined })) {
    assert.ok(isChannelCredentials(c), `${clientInternalsProblem(CREDENTIALS_SHAPE)} (${name})`);
    assert.equal(resolveClientOptions({ address: "127.0.0.1:1", tls: c }).tls, c);
  }
});

test("things that are not ChannelCredentials are refused, naming the tls option", () => {
  assert.equal(isChannelCredentials(null), false);
  for (const v of [{}, "yes", grpc.credentials.createFromMetadataGenerator((_p, cb) => cb(null, new grpc.Metadata()))]) {
    assert.equal(isChannelCredentials(v), false);
    assert.throws(() => resolveClientOptions({ address: "127.0.0.1:1", tls: v as never }), /tls.*must be a boolean or grpc ChannelCredentials/);
  }
});
