/**
 * The HPACK decoder and encoder helpers of the raw HTTP/2 client (src/h2/hpack.ts), against RFC 7541 Appendix C.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HpackDecoder, HpackError, huffmanDecode, huffmanEncode, literalField, writeInt, type HeaderSink } from "../../src/h2/hpack.js";
import { IndexingEncoder } from "../../src/h2/server-encode.js";

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ""), "hex");
const decode = (d: HpackDecoder, b: Buffer): [string, string][] => {
  const out: [string, string][] = [];
  const sink: HeaderSink = { header: (n, v) => void out.push([n, v]) };
  d.decode(b, 0, b.length, sink);
  return out;
};
const REQ1: [string, string][] = [
  [":method", "GET"],
  [":scheme", "http"],
  [":path", "/"],
  [":authority", "www.example.com"],
];
const REQ2: [string, string][] = [...REQ1, ["cache-control", "no-cache"]];
const REQ3: [string, string][] = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/index.html"],
  [":authority", "www.example.com"],
  ["custom-key", "custom-value"],
];

describe("HPACK (RFC 7541)", () => {
  it("C.2: literal representations, with and without indexing", () => {
    const d = new HpackDecoder();
    assert.deepEqual(decode(d, hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")), [["custom-key", "custom-header"]]);
    assert.equal(d.tableSize, 55);
    assert.deepEqual(decode(d, hex("040c 2f73 616d 706c 652f 7061 7468")), [[":path", "/sample/path"]]);
    assert.deepEqual(decode(d, hex("1008 7061 7373 776f 7264 0673 6563 7265 74")), [["password", "secret"]]);
    assert.equal(d.tableSize, 55, "never-indexed and without-indexing literals leave the table alone");
    assert.deepEqual(decode(d, hex("82")), [[":method", "GET"]]);
  });

  it("C.3: a request sequence without Huffman shares the dynamic table", () => {
    const d = new HpackDecoder();
    assert.deepEqual(decode(d, hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")), REQ1);
    assert.equal(d.tableSize, 57);
    assert.deepEqual(decode(d, hex("8286 84be 5808 6e6f 2d63 6163 6865")), REQ2);
    assert.equal(d.tableSize, 110);
    assert.deepEqual(decode(d, hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")), REQ3);
    assert.equal(d.tableSize, 164);
  });

  it("C.4: the same requests with Huffman-coded strings", () => {
    const d = new HpackDecoder();
    assert.deepEqual(decode(d, hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")), REQ1);
    assert.deepEqual(decode(d, hex("8286 84be 5886 a8eb 1064 9cbf")), REQ2);
    assert.deepEqual(decode(d, hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")), REQ3);
    assert.equal(d.tableSize, 164);
    assert.deepEqual(d.entries(), [
      ["custom-key", "custom-value"],
      ["cache-control", "no-cache"],
      [":authority", "www.example.com"],
    ]);
  });

  it("C.6: Huffman responses evicting from a 256-octet table", () => {
    const d = new HpackDecoder(256);
    const loc: [string, string] = ["location", "https://www.example.com"];
    assert.deepEqual(
      decode(d, hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3")),
      [[":status", "302"], ["cache-control", "private"], ["date", "Mon, 21 Oct 2013 20:13:21 GMT"], loc],
    );
    assert.equal(d.tableSize, 222);
    assert.deepEqual(decode(d, hex("4883 640e ffc1 c0bf")), [[":status", "307"], ["cache-control", "private"], ["date", "Mon, 21 Oct 2013 20:13:21 GMT"], loc]);
    assert.equal(d.tableSize, 222);
    const cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    assert.deepEqual(
      decode(
        d,
        hex(
          "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
      ),
      [[":status", "200"], ["cache-control", "private"], ["date", "Mon, 21 Oct 2013 20:13:22 GMT"], loc, ["content-encoding", "gzip"], ["set-cookie", cookie]],
    );
    assert.equal(d.tableSize, 215);
    assert.deepEqual(d.entries(), [["set-cookie", cookie], ["content-encoding", "gzip"], ["date", "Mon, 21 Oct 2013 20:13:22 GMT"]]);
  });

  it("IndexingEncoder writes C.6's responses byte for byte, evicting as the decoder does", () => {
    const e = new IndexingEncoder(256);
    const loc: [string, string] = ["location", "https://www.example.com"];
    const date1: [string, string] = ["date", "Mon, 21 Oct 2013 20:13:21 GMT"];
    const cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    assert.equal(e.encode([[":status", "302"], ["cache-control", "private"], date1, loc]).toString("hex"), hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3").toString("hex"));
    assert.equal(e.encode([[":status", "307"], ["cache-control", "private"], date1, loc]).toString("hex"), "4883640effc1c0bf");
    assert.equal(
      e.encode([[":status", "200"], ["cache-control", "private"], ["date", "Mon, 21 Oct 2013 20:13:22 GMT"], loc, ["content-encoding", "gzip"], ["set-cookie", cookie]]).toString("hex"),
      hex("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07").toString("hex"),
    );
  });

  it("IndexingEncoder: a gRPC server's replies decode in order, every repeat one byte per field", () => {
    const e = new IndexingEncoder();
    const d = new HpackDecoder();
    const head: [string, string][] = [[":status", "200"], ["content-type", "application/grpc"]];
    const trailers: [string, string][] = [["grpc-status", "0"], ["grpc-message", ""]];
    for (let i = 0; i < 3; i++) {
      const h = e.encode(head);
      const t = e.encode(trailers);
      assert.deepEqual(decode(d, h), head);
      assert.deepEqual(decode(d, t), trailers);
      if (i > 0) assert.equal(h.length + t.length, 4, "indexed from the second reply on");
    }
    // Far more than the table holds: old entries go, in step with the decoder.
    for (let i = 0; i < 300; i++) {
      const list: [string, string][] = [["x-request", `r-${i}`], ["grpc-status", "0"]];
      assert.deepEqual(decode(d, e.encode(list)), list);
    }
    assert.ok(d.tableSize <= 4096);
  });

  it("dynamic table size updates shrink and evict; one above the advertised size or after a field is refused", () => {
    const d = new HpackDecoder();
    decode(d, hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"));
    assert.equal(d.tableSize, 57);
    assert.deepEqual(decode(d, hex("20 82")), [[":method", "GET"]]);
    assert.equal(d.tableSize, 0, "size 0 empties the table");
    assert.throws(() => decode(d, hex("be")), HpackError, "the evicted entry is gone");
    decode(d, hex("3fe1 1f")); // back to 4096
    assert.throws(() => decode(d, hex("3fe2 1f")), /exceeds 4096/);
    assert.throws(() => decode(d, hex("82 20")), /after a header field/);
  });

  it("C.1 integers; Huffman round trip of every octet; malformed input throws HpackError", () => {
    const b = Buffer.alloc(8);
    assert.deepEqual(b.subarray(0, writeInt(b, 0, 10, 5, 0)), hex("0a"));
    assert.deepEqual(b.subarray(0, writeInt(b, 0, 1337, 5, 0)), hex("1f9a0a"));
    assert.deepEqual(b.subarray(0, writeInt(b, 0, 42, 8, 0)), hex("2a"));
    assert.deepEqual(huffmanEncode("www.example.com"), hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"));
    const all = String.fromCharCode(...Array.from({ length: 256 }, (_, i) => i));
    const enc = huffmanEncode(all);
    assert.equal(huffmanDecode(enc, 0, enc.length), all);
    assert.equal(huffmanDecode(Buffer.alloc(0), 0, 0), "");
    const bad = Buffer.from(huffmanEncode("www.example.com"));
    bad[bad.length - 1]! &= 0xfe;
    assert.throws(() => huffmanDecode(bad, 0, bad.length), /padding/);
    assert.throws(() => huffmanDecode(hex("ffffffff"), 0, 4), /EOS/);
    assert.throws(() => huffmanDecode(hex("f1e3 ff ff"), 0, 4), /padding/, "eight or more bits of padding");
    const d = new HpackDecoder();
    assert.throws(() => decode(d, hex("80")), /index 0/);
    assert.throws(() => decode(d, hex("ff ff ff ff ff ff 0f")), /integer too large/);
    assert.throws(() => decode(d, hex("c0")), /not in the table/);
    assert.throws(() => decode(d, hex("0f")), /truncated/);
    assert.throws(() => decode(d, hex("04 0c 2f73")), /longer than the header block/);
  });

  it("bounds the decoded header list, so a one-byte index cannot repeat a large entry without limit", () => {
    const d = new HpackDecoder(4096, 64 * 1024);
    const big = "v".repeat(3000);
    const first = Buffer.alloc(3100);
    const n = literalField(first, 0, 0, "x-big", big);
    first[0] = 0x40; // with incremental indexing
    assert.equal(decode(d, first.subarray(0, n)).length, 1);
    assert.throws(() => decode(d, Buffer.alloc(40, 0xbe)), /header list larger than 65536/);
  });

  /**
   * Decode `field` as a literal with incremental indexing into `d` (a 4096-octet table), and check the table against a
   * model: the newest entries of `added` (newest first) that fit, and their size.
   */
  const addAndCheck = (d: HpackDecoder, added: [string, string][], field: [string, string]): void => {
    const out = Buffer.alloc(field[0].length + field[1].length + 16);
    const n = literalField(out, 0, 0, field[0], field[1]);
    out[0] = 0x40; // with incremental indexing
    decode(d, out.subarray(0, n));
    added.unshift(field);
    const size = (f: [string, string]): number => f[0].length + f[1].length + 32;
    let kept = 0;
    let octets = 0;
    while (kept < added.length && octets + size(added[kept]!) <= 4096) octets += size(added[kept++]!);
    assert.equal(d.tableSize, octets, `after ${added.length} entries`);
    assert.deepEqual(d.entries(), added.slice(0, kept), `after ${added.length} entries`);
  };

  it("keeps the dynamic table in step as it grows, wraps and evicts: every entry reachable by its index, newest first", () => {
    const d = new HpackDecoder(4096);
    const added: [string, string][] = [];
    // Entries of 38 to 42 octets: the table holds about 100 of them, so 300 additions fill it, then evict in turn.
    for (let i = 0; i < 300; i++) addAndCheck(d, added, [`k${i % 7}`, `v${i}`]);
    // Index 62 is the newest entry, the last index the oldest one kept.
    const n = d.entries().length;
    assert.deepEqual(decode(d, Buffer.from([0x80 | 62])), [added[0]]);
    const last = Buffer.alloc(4);
    const end = writeInt(last, 0, 61 + n, 7, 0x80);
    assert.deepEqual(decode(d, last.subarray(0, end)), [added[n - 1]]);
  });

  it("grows a ring that has wrapped: large entries evicting at a small size, then many small ones", () => {
    const d = new HpackDecoder(4096);
    const added: [string, string][] = [];
    // 600-octet values: about 6 fit, so the first ring wraps while evicting; then 40-octet entries make it grow.
    const values = [...Array.from({ length: 20 }, (_, i) => `L${i}`.padEnd(600, "x")), ...Array.from({ length: 200 }, (_, i) => `s${i}`)];
    for (const [i, v] of values.entries()) addAndCheck(d, added, [`k${i % 5}`, v]);
  });

  it("literalField writes a literal without indexing that the decoder reads back", () => {
    const out = Buffer.alloc(512);
    let p = literalField(out, 0, 4, "", "/pkg.Svc/Method");
    p = literalField(out, p, 0, "x-long", "y".repeat(200));
    assert.deepEqual(decode(new HpackDecoder(), out.subarray(0, p)), [
      [":path", "/pkg.Svc/Method"],
      ["x-long", "y".repeat(200)],
    ]);
  });
});
