import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseCli } from "../../src/main/cli-args.js";
import { validateGatewayOptions } from "../../src/config/options.js";
import { listenSocketsPerApp } from "../../src/http/router.js";
import { somaxconn } from "../../src/shared/accept-backlog.js";

describe("reply and HTTP/2 bound options", () => {
  it("have documented defaults", () => {
    const o = validateGatewayOptions({});
    assert.equal(o.maxReplyBytes, 8 * 1024 * 1024);
    assert.equal(o.writeStallTimeoutMs, 10_000);
    assert.equal(o.grpcMaxConcurrentStreams, 1000);
    assert.equal(o.grpcMessageTimeoutMs, 10_000);
    assert.equal(o.acceptBacklog, 4096);
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
    assert.throws(() => validateGatewayOptions({ acceptBacklog: 0 }), /option acceptBacklog must be a positive integer \(got 0\)/);
    assert.throws(() => validateGatewayOptions({ acceptBacklog: 40_000 }), /option acceptBacklog must be at most 32768 \(got 40000\)/);
  });

  it("--accept-backlog: a flag, else GATEWAY_ACCEPT_BACKLOG; the HTTP port opens enough uWS sockets of 512 for it", () => {
    assert.deepEqual(parseCli(["--accept-backlog", "1024"], { GATEWAY_ACCEPT_BACKLOG: "2048" }), { acceptBacklog: 1024 });
    assert.deepEqual(parseCli([], { GATEWAY_ACCEPT_BACKLOG: "2048" }), { acceptBacklog: 2048 });
    if (process.platform !== "linux") return assert.equal(listenSocketsPerApp(4096, 2), 1);
    const perSocket = Math.min(512, somaxconn());
    assert.equal(listenSocketsPerApp(4096, 1), Math.ceil(4096 / perSocket));
    // Spread over the threads' apps, rounded up: never fewer than one each, never less than asked in all.
    assert.equal(listenSocketsPerApp(4096, 2), Math.ceil(Math.ceil(4096 / perSocket) / 2));
    assert.equal(listenSocketsPerApp(100, 3), 1);
    assert.ok(listenSocketsPerApp(1500, 2) * 2 * perSocket >= 1500);
  });
});
