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

  it("follows nested messages, map entries and repeated fields by their descriptors", () => {
    const publish = gatewayRegistry().getMessage("io.cloudevents.v1.PublishRequest")!;
    const bad = Buffer.from([0xff]);
    // cloudevent (2) -> attributes (5) map entry -> key (1) with invalid UTF-8
    const entry = Buffer.concat([Buffer.from([0x0a, 1]), bad]);
    const attr = Buffer.concat([Buffer.from([0x2a, entry.length]), entry]);
    const inMapKey = Buffer.concat([Buffer.from([0x12, attr.length]), attr]);
    assert.match(checkWire(publish, inMapKey)?.rawMessage ?? "", /field cloudevent\.attributes\.key is not valid UTF-8/);
    // ... the entry's value (2), a CloudEventAttributeValue whose ce_string (3) is invalid
    const value = Buffer.concat([Buffer.from([0x1a, 1]), bad]);
    const entry2 = Buffer.concat([Buffer.from([0x0a, 1, 0x61, 0x12, value.length]), value]);
    const attr2 = Buffer.concat([Buffer.from([0x2a, entry2.length]), entry2]);
    const inMapValue = Buffer.concat([Buffer.from([0x12, attr2.length]), attr2]);
    assert.match(checkWire(publish, inMapValue)?.rawMessage ?? "", /field cloudevent\.attributes\.value\.ce_string is not valid UTF-8/);
    // A repeated string (ListServicesResponse.services) and a repeated message (GetBulkStateResponse.items[].key).
    const list = gatewayRegistry().getMessage("platform.ListServicesResponse")!;
    assert.match(checkWire(list, Buffer.from([0x0a, 1, 0x61, 0x0a, 1, 0xff]))?.rawMessage ?? "", /field services is not valid UTF-8/);
    const bulk = gatewayRegistry().getMessage("platform.GetBulkStateResponse")!;
    assert.match(checkWire(bulk, Buffer.from([0x0a, 3, 0x0a, 1, 0xff]))?.rawMessage ?? "", /field items\.key is not valid UTF-8/);
    assert.match(checkWire(bulk, Buffer.from([0x08, 1]))?.rawMessage ?? "", /field items has wire type 0/);
  });
});
