import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isUtf8 } from "node:buffer";
import { echo, MAX_ECHO_CHARS } from "../../src/shared/echo.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { firstInvalidUtf8, locateInvalidUtf8InJson } from "../../src/shared/utf8.js";
import { checkWire } from "../../src/shared/wire-check.js";
import { fromJson, toBinary } from "@bufbuild/protobuf";
import { gatewayRegistry } from "../../src/shared/protos.js";

describe("echo", () => {
  it("keeps short values and cuts long ones without splitting a surrogate pair", () => {
    assert.equal(echo("abc"), "abc");
    assert.equal(echo("a".repeat(300)), `${"a".repeat(MAX_ECHO_CHARS)}…(44 more characters)`);
    const pairAtCut = "a".repeat(MAX_ECHO_CHARS - 1) + "😀" + "b";
    assert.equal(echo(pairAtCut), `${"a".repeat(MAX_ECHO_CHARS - 1)}…(3 more characters)`);
  });

  it("bounds every GatewayError message", () => {
    const e = new GatewayError(3, "x".repeat(100_000));
    assert.ok(e.rawMessage.length < 1100);
    assert.equal(e.message, e.rawMessage);
  });
});

describe("firstInvalidUtf8", () => {
  it("finds the first bad byte: stray continuation, overlong, surrogate, past U+10FFFF, cut sequence", () => {
    const cases: Array<[number[], number]> = [
      [[0x61, 0x62], 2],
      [[0x61, 0x80], 1],
      [[0xc0, 0xaf], 0],
      [[0xe0, 0x80, 0xaf], 0],
      [[0x61, 0xed, 0xa0, 0x80], 1],
      [[0xf4, 0x90, 0x80, 0x80], 0],
      [[0x61, 0xe2, 0x82], 1],
      [[0xe2, 0x82, 0xac, 0xff], 3],
    ];
    for (const [bytes, at] of cases) assert.equal(firstInvalidUtf8(Uint8Array.from(bytes)), at, JSON.stringify(bytes));
  });

  it("agrees with node's isUtf8 on random input", () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff;
    for (let n = 0; n < 2000; n++) {
      const bytes = Uint8Array.from({ length: 1 + (n % 12) }, rnd);
      assert.equal(firstInvalidUtf8(bytes) === bytes.length, isUtf8(bytes), Buffer.from(bytes).toString("hex"));
    }
  });

  it("names the JSON member with the bad bytes, or the offset when a real U+FFFD makes it ambiguous", () => {
    const body = Buffer.concat([Buffer.from('{"a":"ok","b":{"c":["x","y'), Buffer.from([0xff]), Buffer.from('"]}}')]);
    assert.equal(locateInvalidUtf8InJson(body, firstInvalidUtf8(body)), "in b.c[1]");
    const ambiguous = Buffer.concat([Buffer.from('{"a":"\\ufffd","b":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    assert.equal(locateInvalidUtf8InJson(ambiguous, 19), "at byte offset 19");
  });
});

describe("checkWire", () => {
  const type = gatewayRegistry().getMessage("platform.SaveStateRequest")!;
  const ok = Buffer.from(toBinary(type, fromJson(type, { service: "s", key: "k", value: "v", publish_change: true })));

  it("accepts whole messages, unknown fields included", () => {
    assert.equal(checkWire(type, ok), undefined);
    assert.equal(checkWire(type, Buffer.concat([ok, Buffer.from([0xf8, 0x01, 0x05])])), undefined);
  });

  it("refuses truncation, invalid UTF-8, wrong wire types and groups, naming the field", () => {
    const msg = (b: Buffer) => checkWire(type, b)?.rawMessage ?? "";
    assert.match(msg(ok.subarray(0, ok.length - 1)), /truncated/);
    assert.match(msg(Buffer.from([0x12, 0x02, 0xc3, 0x28])), /field key is not valid UTF-8/);
    assert.match(msg(Buffer.from([0x08, 0x01])), /field service has wire type 0/);
    assert.match(msg(Buffer.from([0x33])), /wire type 3/);
    assert.match(msg(Buffer.from([0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])), /longer than 10 bytes/);
  });
});
