import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { subscribeFailure, subscribeFailureKind } from "../../src/broker/index.js";
import { GatewayClientError, GatewayError as ClientGatewayError, GatewayInvocationError, createGatewayClient } from "../../src/client/index.js";
import { Code } from "../../src/shared/code.js";
import { MAX_ERROR_MESSAGE_CHARS } from "../../src/shared/echo.js";
import { GatewayError, invalidArgument } from "../../src/shared/gateway-error.js";
import { inBandError, inBandFailure, inBandOk, statusError, statusOf, statusOk, toInBand } from "../../src/shared/status.js";
import { validateConverterOptions } from "../../src/workers/converter.js";

describe("one error class", () => {
  it("the client's GatewayClientError is GatewayError itself, so instanceof holds with either name", () => {
    assert.equal(GatewayClientError, GatewayError);
    assert.equal(ClientGatewayError, GatewayError);
    assert.throws(() => createGatewayClient({ address: "" }), (e: unknown) => e instanceof GatewayError && e instanceof GatewayClientError && e.field === "address");
    const inv = new GatewayInvocationError("orders", "GetOrder", "NOT_FOUND", "no such order");
    assert.ok(inv instanceof GatewayError);
    assert.equal(inv.code, Code.NOT_FOUND);
    assert.equal(inv.message, "orders/GetOrder failed: no such order");
  });

  it("from() keeps a grpc-js ServiceError's code and details, turns an AbortError into CANCELLED, caps the message", () => {
    const se = Object.assign(new Error("5 NOT_FOUND: gone"), { code: 5, details: "gone" });
    const e = GatewayError.from(se);
    assert.equal(e.code, Code.NOT_FOUND);
    assert.equal(e.message, "gone");
    assert.equal(e.cause, se);
    assert.equal(GatewayError.from(new DOMException("x", "AbortError")).code, Code.CANCELLED);
    assert.equal(GatewayError.from("plain", Code.UNKNOWN).code, Code.UNKNOWN);
    assert.ok(new GatewayError(Code.INTERNAL, "x".repeat(5000)).message.length < MAX_ERROR_MESSAGE_CHARS + 40);
  });

  it("invalidArgument names the field in the message and in `field`", () => {
    const e = invalidArgument("topic", "must not be empty");
    assert.deepEqual([e.code, e.message, e.field], [Code.INVALID_ARGUMENT, "topic must not be empty", "topic"]);
  });

  it("a broker subscribe failure is a GatewayError whose code says why", () => {
    assert.equal(subscribeFailure("closed", "closing").code, Code.UNAVAILABLE);
    assert.equal(subscribeFailure("cancelled", "gone").code, Code.CANCELLED);
    const refused = subscribeFailure("upstream", "refused", "t", new GatewayError(Code.INVALID_ARGUMENT, "no such pubsub"));
    assert.deepEqual([refused.code, refused.details], [Code.INVALID_ARGUMENT, { kind: "upstream", topic: "t" }]);
    assert.equal(subscribeFailure("upstream", "broke", "t", new GatewayError(Code.INTERNAL, "boom")).code, Code.UNAVAILABLE);
    assert.equal(subscribeFailureKind(refused), "upstream");
    assert.equal(subscribeFailureKind(new GatewayError(Code.UNAVAILABLE, "other")), undefined);
  });

  it("converter options are refused with INVALID_ARGUMENT naming the option (was a TypeError)", () => {
    assert.throws(() => validateConverterOptions({ threads: 0 }), (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT && e.field === "converter option threads");
  });
});

describe("in-band status", () => {
  it("builds success and failure, and turns a failure back into the error", () => {
    assert.deepEqual(inBandOk(), { success: true, status: "OK", message: "" });
    assert.deepEqual(inBandOk("deleted 2 of 3 requested keys"), { success: true, status: "OK", message: "deleted 2 of 3 requested keys" });
    assert.deepEqual(inBandError(invalidArgument("name", "is required")), { success: false, status: "INVALID_ARGUMENT", message: "name is required" });
    assert.deepEqual(inBandError(Code.ABORTED, "etag mismatch"), { success: false, status: "ABORTED", message: "etag mismatch" });
    assert.deepEqual(inBandError(new Error("boom")), { success: false, status: "INTERNAL", message: "boom" });
    assert.equal(inBandFailure(inBandOk()), undefined);
    const back = inBandFailure(inBandError(Code.NOT_FOUND, "no trigger named t"));
    assert.ok(back instanceof GatewayError);
    assert.deepEqual([back.code, back.message], [Code.NOT_FOUND, "no trigger named t"]);
    assert.equal(inBandFailure({ success: false, status: "OK", message: "" }, "the call failed")!.code, Code.UNKNOWN);
    assert.equal(inBandFailure({ success: false, status: "NOPE", message: "" }, "the call failed")!.message, "the call failed");
  });
  it("the internal Status: from an error, to the in-band wire form, back to an error", () => {
    assert.deepEqual(statusOk(), { code: Code.OK, message: "" });
    assert.deepEqual(statusOf(invalidArgument("topic", "must not be empty")), { code: Code.INVALID_ARGUMENT, message: "topic must not be empty" });
    assert.deepEqual(statusOf(new Error("boom")), { code: Code.INTERNAL, message: "boom" });
    assert.deepEqual(statusOf({ code: 0, details: "odd" }), { code: Code.UNKNOWN, message: "odd" }, "thrown is never OK");
    assert.deepEqual(toInBand(statusOk("deleted 2")), { success: true, status: "OK", message: "deleted 2" });
    assert.deepEqual(Object.keys(toInBand({ code: Code.NOT_FOUND, message: "x" })), ["success", "status", "message"], "the wire's key order");
    assert.deepEqual(toInBand({ code: Code.UNAVAILABLE, message: "down" }), { success: false, status: "UNAVAILABLE", message: "down" });
    assert.equal(statusError(statusOk()), undefined);
    const e = statusError({ code: Code.PERMISSION_DENIED, message: "not yours" });
    assert.ok(e instanceof GatewayError);
    assert.deepEqual([e.code, e.message], [Code.PERMISSION_DENIED, "not yours"]);
  });
});
