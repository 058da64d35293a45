/**
 * Response header encoding of the native HTTP/2 server (src/h2/server-encode.ts) and its request
 * header checks (src/h2/server-headers.ts): every block decodes back to its list with the client-side HPACK decoder, the
 * block cache answers by value (a list changed in place gets a fresh block), and malformed requests are noticed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HpackDecoder } from "../../src/h2/hpack.js";
import { encodeHeaderList, headerBlock } from "../../src/h2/server-encode.js";
import { RequestHeaders } from "../../src/h2/server-headers.js";
import type { HeaderList } from "../../src/h2/types.js";

const decode = (b: Buffer): HeaderList => {
  const out: HeaderList = [];
  new HpackDecoder().decode(b, 0, b.length, { header: (n, v) => void out.push([n, v]) });
  return out;
};

describe("native h2 server header encoding", () => {
  it("encodes static matches as one indexed byte, static names by index, other names as literals; all decode back", () => {
    const lists: HeaderList[] = [
      [[":status", "200"]],
      [
        [":status", "404"],
        ["content-type", "application/grpc"],
        ["grpc-encoding", "identity"],
      ],
      [
        ["grpc-status", "13"],
        ["grpc-message", "x".repeat(300)],
        ["x-bin-bin", "AAEC"],
        ["date", ""],
      ],
      [[":status", "418"]],
    ];
    for (const list of lists) assert.deepEqual(decode(encodeHeaderList(list)), list);
    assert.deepEqual([...encodeHeaderList([[":status", "200"]])], [0x88]);
    // content-type is static index 31: a 4-bit prefix index, then the value.
    assert.deepEqual([...encodeHeaderList([["content-type", "a"]])], [0x0f, 31 - 15, 1, 0x61]);
  });

  it("answers from the cache by value: the same list in a new array shares the block, a list changed in place does not", () => {
    const list: HeaderList = [
      [":status", "200"],
      ["content-type", "application/grpc"],
    ];
    const a = headerBlock(list);
    assert.equal(headerBlock(list.map(([n, v]) => [n, v])), a);
    list[1]![1] = "application/grpc+proto";
    const b = headerBlock(list);
    assert.notEqual(b, a);
    assert.deepEqual(decode(b), list);
    // Many different lists (a per-call grpc-message) evict nothing they should not answer correctly.
    for (let i = 0; i < 100; i++) {
      const l: HeaderList = [
        ["grpc-status", "2"],
        ["grpc-message", `failure ${i}`],
      ];
      assert.deepEqual(decode(headerBlock(l)), l);
    }
    assert.deepEqual(decode(headerBlock(list)), list);
  });
});

describe("native h2 server request header checks", () => {
  const check = (fields: HeaderList, max = 1024): { wellFormed: boolean; over: boolean; fields: HeaderList } => {
    const r = new RequestHeaders(max);
    r.reset();
    for (const [n, v] of fields) r.header(n, v);
    return { wellFormed: r.wellFormed, over: r.over, fields: r.take() };
  };
  const REQ: HeaderList = [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", "/a.B/C"],
    [":authority", "h"],
    ["te", "trailers"],
  ];

  it("accepts a gRPC request and keeps its fields in order", () => {
    assert.deepEqual(check(REQ), { wellFormed: true, over: false, fields: REQ });
  });

  it("notices what makes a request malformed", () => {
    const bad: HeaderList[] = [
      REQ.filter(([k]) => k !== ":method"),
      REQ.filter(([k]) => k !== ":scheme"),
      [...REQ.slice(0, 2), [":path", ""], ...REQ.slice(3)],
      [...REQ, [":method", "GET"]],
      [...REQ, [":status", "200"]],
      [["x-a", "1"], ...REQ],
      [...REQ, ["Content-Type", "application/grpc"]],
      [...REQ, ["keep-alive", "1"]],
      [...REQ, ["transfer-encoding", "chunked"]],
      [...REQ, ["upgrade", "h2c"]],
      [...REQ.slice(0, 4), ["te", "trailers, deflate"]],
    ];
    for (const fields of bad) assert.equal(check(fields).wellFormed, false, JSON.stringify(fields));
  });

  it("stops keeping fields past the list size (RFC 7541 sizes: name + value + 32 each)", () => {
    const list: HeaderList = [...REQ, ["x-big", "v".repeat(100)]];
    const size = list.reduce((n, [k, v]) => n + k.length + v.length + 32, 0);
    assert.equal(size, 351);
    const r = check(list, size - 1);
    assert.equal(r.over, true);
    assert.deepEqual(r.fields, REQ);
    assert.equal(check(list, size).over, false);
  });
});
