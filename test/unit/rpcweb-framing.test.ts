import assert from "node:assert/strict";
import { test } from "node:test";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Base64Chunks, decodeBase64Body, envelope, parseEnvelopes, percentEncode, singleMessage, trailersFrame } from "../../src/rpcweb/framing.js";
import { compressionRefusal, connectCodeName, connectEndStream, connectHttpStatus, protocolOf, timeoutMs } from "../../src/rpcweb/protocols.js";

const codeOf = (code: Code) => (e: unknown) => e instanceof GatewayError && e.code === code;

test("envelopes: prefix is flags and a big-endian length; a body of several parses back in order", () => {
  const a = envelope(0, Buffer.from("abc"));
  assert.deepEqual([...a.subarray(0, 5)], [0, 0, 0, 0, 3]);
  const big = Buffer.alloc(70_000, 7);
  const parsed = parseEnvelopes(Buffer.concat([a, envelope(0x02, big), envelope(0, Buffer.alloc(0))]));
  assert.deepEqual(
    parsed.map((e) => [e.flags, e.data.length]),
    [
      [0, 3],
      [2, 70_000],
      [0, 0],
    ],
  );
  assert.equal(parsed[0]!.data.toString(), "abc");
  assert.deepEqual(singleMessage(parseEnvelopes(a)), Buffer.from("abc"));
});

test("envelopes: truncated prefix or payload, compressed payload, and not exactly one message are refused", () => {
  assert.throws(() => parseEnvelopes(Buffer.from([0, 0, 0])), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => parseEnvelopes(envelope(0, Buffer.from("abcdef")).subarray(0, 8)), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => parseEnvelopes(envelope(0x01, Buffer.from("x"))), codeOf(Code.UNIMPLEMENTED));
  assert.throws(() => singleMessage([]), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => singleMessage(parseEnvelopes(Buffer.concat([envelope(0, Buffer.from("a")), envelope(0, Buffer.from("b"))]))), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => singleMessage(parseEnvelopes(envelope(0x02, Buffer.from("{}")))), codeOf(Code.INVALID_ARGUMENT));
});

test("gRPC-Web text: base64 split anywhere across chunks, with padding between separately encoded frames", () => {
  const f1 = envelope(0, Buffer.from("hello"));
  const f2 = trailersFrame(Code.OK, "");
  // Each frame encoded on its own, as the gateway and Envoy write them: padding inside the stream.
  const text = f1.toString("base64") + f2.toString("base64");
  assert.ok(f1.toString("base64").endsWith("="), "the first frame's encoding is padded");
  for (let cut = 0; cut <= text.length; cut++) {
    for (const second of [cut, Math.min(text.length, cut + 3)]) {
      const d = new Base64Chunks();
      const bytes = Buffer.concat([d.push(text.slice(0, cut)), d.push(text.slice(cut, second)), d.push(text.slice(second))]);
      d.end();
      assert.deepEqual(bytes, Buffer.concat([f1, f2]), `cut at ${cut}/${second}`);
    }
  }
  assert.deepEqual(decodeBase64Body(Buffer.from(text)), Buffer.concat([f1, f2]));
});

test("gRPC-Web text: a bad character, padding inside a group, or a partial last group are refused", () => {
  assert.throws(() => decodeBase64Body(Buffer.from("AA*A")), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => decodeBase64Body(Buffer.from("A=AA")), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => decodeBase64Body(Buffer.from("AAAAAA")), codeOf(Code.INVALID_ARGUMENT));
});

test("trailers frame: flag 0x80, grpc-status and a percent-encoded grpc-message as header lines", () => {
  const [t] = parseEnvelopes(trailersFrame(Code.NOT_FOUND, "no such order: ü 100%"));
  assert.equal(t!.flags, 0x80);
  assert.equal(t!.data.toString("latin1"), "grpc-status: 5\r\ngrpc-message: no such order: %C3%BC 100%25\r\n");
  assert.equal(parseEnvelopes(trailersFrame(Code.OK, ""))[0]!.data.toString(), "grpc-status: 0\r\n");
  assert.equal(decodeURIComponent(percentEncode("a\r\nb ü")), "a\r\nb ü");
});

test("content types name the protocol and codec; anything else is no browser RPC", () => {
  assert.deepEqual(protocolOf("application/json; charset=utf-8"), { protocol: "connect-unary", codec: "json", text: false, contentType: "application/json" });
  assert.equal(protocolOf("application/proto")!.codec, "proto");
  assert.equal(protocolOf("application/connect+json")!.protocol, "connect-stream");
  assert.equal(protocolOf("Application/GRPC-Web+proto")!.protocol, "grpc-web");
  assert.equal(protocolOf("application/grpc-web-text")!.text, true);
  assert.equal(protocolOf("text/plain"), undefined);
  assert.equal(protocolOf(undefined), undefined);
});

test("Connect codes, HTTP statuses and end-of-stream messages follow the Connect protocol", () => {
  assert.equal(connectCodeName(Code.CANCELLED), "canceled");
  assert.equal(connectCodeName(Code.INVALID_ARGUMENT), "invalid_argument");
  assert.equal(connectHttpStatus(Code.CANCELLED), 499);
  assert.equal(connectHttpStatus(Code.RESOURCE_EXHAUSTED), 429);
  assert.equal(connectHttpStatus(Code.DATA_LOSS), 500);
  assert.deepEqual(JSON.parse(connectEndStream(Code.OK, "").toString()), {});
  assert.deepEqual(JSON.parse(connectEndStream(Code.ABORTED, "stop").toString()), { error: { code: "aborted", message: "stop" } });
});

test("timeouts: Connect-Timeout-Ms digits, grpc-timeout digits and unit; malformed ones are INVALID_ARGUMENT", () => {
  assert.equal(timeoutMs("connect-unary", { "connect-timeout-ms": "250" }), 250);
  assert.equal(timeoutMs("connect-stream", {}), undefined);
  assert.equal(timeoutMs("grpc-web", { "grpc-timeout": "2S" }), 2000);
  assert.equal(timeoutMs("grpc-web", { "grpc-timeout": "1500000u" }), 1500);
  assert.throws(() => timeoutMs("connect-unary", { "connect-timeout-ms": "12345678901" }), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => timeoutMs("connect-unary", { "connect-timeout-ms": "-1" }), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => timeoutMs("grpc-web", { "grpc-timeout": "123456789S" }), codeOf(Code.INVALID_ARGUMENT));
  assert.throws(() => timeoutMs("grpc-web", { "grpc-timeout": "5x" }), codeOf(Code.INVALID_ARGUMENT));
});

test("compression: identity passes, anything else is UNIMPLEMENTED naming the protocol's header", () => {
  assert.equal(compressionRefusal("connect-unary", { "content-encoding": "identity" }), undefined);
  assert.equal(compressionRefusal("grpc-web", {}), undefined);
  assert.match(compressionRefusal("connect-unary", { "content-encoding": "gzip" })!.rawMessage, /content-encoding/);
  assert.match(compressionRefusal("connect-stream", { "connect-content-encoding": "br" })!.rawMessage, /connect-content-encoding/);
  assert.equal(compressionRefusal("grpc-web", { "grpc-encoding": "gzip" })!.code, Code.UNIMPLEMENTED);
});
