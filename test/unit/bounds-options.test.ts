import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseCli } from "../../src/main/cli-args.js";
import { validateGatewayOptions } from "../../src/config/options.js";

describe("reply and HTTP/2 bound options", () => {
  it("have documented defaults", () => {
    const o = validateGatewayOptions({});
    assert.equal(o.maxReplyBytes, 8 * 1024 * 1024);
    assert.equal(o.writeStallTimeoutMs, 10_000);
    assert.equal(o.grpcMaxConcurrentStreams, 1000);
    assert.equal(o.grpcMessageTimeoutMs, 10_000);
  });

  it("come from flags, else the environment", () => {
    const env = { GATEWAY_MAX_REPLY_BYTES: "1000", GATEWAY_WRITE_STALL_TIMEOUT_MS: "2000", GATEWAY_GRPC_MAX_STREAMS: "7", GATEWAY_GRPC_MESSAGE_TIMEOUT_MS: "3000" };
    assert.deepEqual(parseCli([], env), { maxReplyBytes: 1000, writeStallTimeoutMs: 2000, grpcMaxConcurrentStreams: 7, grpcMessageTimeoutMs: 3000 });
    const flags = ["--max-reply-bytes", "5", "--write-stall-timeout", "6", "--grpc-max-streams", "8", "--grpc-message-timeout", "9"];
    assert.deepEqual(parseCli(flags, env), { maxReplyBytes: 5, writeStallTimeoutMs: 6, grpcMaxConcurrentStreams: 8, grpcMessageTimeoutMs: 9 });
  });

  it("refuse values that are not positive, naming the option", () => {
    assert.throws(() => validateGatewayOptions({ grpcMaxConcurrentStreams: 0 }), /option grpcMaxConcurrentStreams must be a positive integer \(got 0\)/);
    assert.throws(() => validateGatewayOptions({ maxReplyBytes: 1.5 }), /option maxReplyBytes must be a positive integer/);
    assert.throws(() => validateGatewayOptions({ grpcMessageTimeoutMs: -1 }), /option grpcMessageTimeoutMs must be a positive number/);
    assert.throws(() => parseCli(["--grpc-max-streams", "many"], {}), /--grpc-max-streams must be an integer/);
  });
});
