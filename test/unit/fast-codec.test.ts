/**
 * Differential test of the compiled fast path (src/workers/fast-codec/) against @bufbuild/protobuf, which it must
 * copy exactly: for thousands of seeded random values of every field kind (test/support/protos/kinds/v1/kinds.proto,
 * and the shop schema), the fast path either gives up (undefined: codec.ts then runs the library, errors included)
 * or gives the library's bytes / JSON text, character for character. It must never answer where the library fails.
 * Canonical inputs must take the fast path (otherwise it would be a slow path that merely passes this test).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { create, fromBinary, fromJson, toBinary, toJsonString, type DescField, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { binaryToJson, jsonToBinary } from "../../src/workers/codec.js";
import { fastBinaryToJson } from "../../src/workers/fast-codec/decode.js";
import { fastJsonToBinary } from "../../src/workers/fast-codec/encode.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { compileSchema } from "../../src/workers/schema-registry.js";
import { encodedFileDescriptorProtos, KINDS_PROTO, SHOP_PROTO } from "../support/protos/descriptors.js";
import { orderOfJsonSize, richOrder } from "../support/protos/samples.js";

const registry = compileSchema(encodedFileDescriptorProtos(KINDS_PROTO));
const shop = compileSchema(encodedFileDescriptorProtos(SHOP_PROTO));
const msg = (name: string, reg = registry): DescMessage => reg.getMessage(name)!;

// ---------------------------------------------------------------------------------------------------------------
// Seeded PRNG and value pools
// ---------------------------------------------------------------------------------------------------------------

let seed = 0x5eed1234;
function rand(): number {
  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const chance = (p: number): boolean => rand() < p;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const int = (n: number): number => Math.floor(rand() * n);

function randomBytes(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = int(256);
  return b;
}

function base64Of(b: Uint8Array, form: number): string {
  const std = Buffer.from(b).toString("base64");
  if (form === 0) return std;
  if (form === 1) return std.replace(/=+$/, "");
  return std.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(): string {
  switch (int(5)) {
    case 0:
      return pick(["", "a", "hello world", "é", "中文", "😀", "line\nbreak", 'quote"back\\slash', "\u0000\u001f", "\u2028\u2029", "</script>", "\ud83d\ude00x"]);
    case 1:
      return "x".repeat(int(300)); // lengths across the one/two-byte length prefix
    case 2: {
      let s = "";
      for (let i = int(12); i > 0; i--) s += String.fromCharCode(32 + int(95));
      return s;
    }
    case 3: {
      let s = "";
      for (let i = int(8); i > 0; i--) s += String.fromCodePoint(pick([0x41, 0xe9, 0x7ff, 0x800, 0xffff, 0x10000, 0x10ffff, 0x20ac, 0xfeff]));
      return s;
    }
    default:
      return "é".repeat(int(100));
  }
}

/** Stands for a JSON -0 (JSON.stringify writes -0 as 0; the text of a case gets the real -0 back, see jsonText). */
const NEG_ZERO = "<-0>";
const jsonText = (v: JsonValue): string => JSON.stringify(v).replaceAll(`"${NEG_ZERO}"`, "-0");

/** Numbers written as values the library accepts only through rules the fast path leaves to it, or rejects. */
const odd: Record<string, readonly JsonValue[]> = {
  float: ["1.5", "1e3", " 1", "", "abc", true, {}, [], 1e39, "-1e39", null],
  int32: ["1e2", "0x10", "-0", "1.0", " 1", 1.5, 2147483648, -2147483649, "a", true, "", [], "99999999999"],
  uint32: ["1e2", -1, 4294967296, "-1", 0.5, "x"],
  int64: ["0x10", " 12", "+5", "9223372036854775808", "-9223372036854775809", 1.5, "", "abc", "1.0", 1e19, true, "1e3"],
  uint64: ["-1", -1, "18446744073709551616", "0x1", 1.5, "-0", 2e19],
  bool: ["true", 0, 1, "false", null],
  string: [5, true, "\ud800", "a\udc00b", {}, []],
  bytes: ["A", "@@@@", "AA AA", "A=A=", "AA==AA==", "AA=", 5, " AQID", "AQID\n"],
  enum: ["NOPE", 1.5, "1", true, "color_red", {}, 2147483648],
  timestamp: [
    "2026-13-01T00:00:00Z",
    "x",
    5,
    "2026-01-02 03:04:05Z",
    "2026-01-02T03:04:05z",
    "0000-12-31T23:59:59Z",
    "2026-02-30T00:00:00Z",
    "2026-01-02T03:04:05.1234567890Z",
    "2026-01-02T25:04:05Z",
    "2026-01-02T03:04:05+24:00",
    "10000-01-01T00:00:00Z",
  ],
  duration: ["1.1234567891s", "5sx", "1", "s", "315576000001s", "-315576000001s", "1.s", 5, "+1s", " 1s", "1.5"],
};

function scalarValue(f: { scalar: number }, clean: boolean): JsonValue {
  const t = f.scalar;
  const kind = t === 1 || t === 2 ? "float" : t === 5 || t === 15 || t === 17 ? "int32" : t === 13 || t === 7 ? "uint32" : t === 3 || t === 16 || t === 18 ? "int64" : t === 4 || t === 6 ? "uint64" : t === 8 ? "bool" : t === 9 ? "string" : "bytes";
  if (!clean && chance(0.05)) return pick(odd[kind]!);
  switch (kind) {
    case "float":
      return t === 1
        ? pick<JsonValue>([0, NEG_ZERO, 1.5, -2.25, 1e300, -1e-300, 5e-324, 123456.789, "NaN", "Infinity", "-Infinity", 0.1, rand() * 1e6, -rand()])
        : pick<JsonValue>([0, NEG_ZERO, 1.5, -0.25, 0.1, 3.4028234663852886e38, -3.4028234663852886e38, 1e-40, "NaN", "-Infinity", Math.fround(rand() * 1000)]);
    case "int32":
      return pick<JsonValue>([0, 1, -1, 2147483647, -2147483648, 127, 128, -129, int(1 << 30) - (1 << 29), "12", "-7", "0", NEG_ZERO]);
    case "uint32":
      return pick<JsonValue>([0, 1, 4294967295, 128, 16384, int(4294967295), "42", "4294967295"]);
    case "int64":
      return pick<JsonValue>([0, "0", 1, -1, "9223372036854775807", "-9223372036854775808", 9007199254740991, -9007199254740991, "9007199254740993", "-4294967296", 4294967296, "1234567890123456789", 9007199254740992, 1e18, -1e18, "-0", "007", int(1e9) - 5e8, NEG_ZERO]);
    case "uint64":
      return pick<JsonValue>([0, "0", "18446744073709551615", 1, 4294967295, 4294967296, "9223372036854775808", 9007199254740991, 1e19, "000123", NEG_ZERO]);
    case "bool":
      return chance(0.5);
    case "string":
      return randomString();
    default:
      return chance(0.1) ? "" : base64Of(randomBytes(int(70)), int(3));
  }
}

function enumValue(f: DescField, clean: boolean): JsonValue {
  if (!clean && chance(0.1)) return pick(odd.enum!);
  const e = f.enum!;
  if (chance(0.15)) return pick([99, -5, 7]); // unknown numbers of an open enum are kept
  const v = pick(e.values);
  return chance(0.7) ? v.name : v.number;
}

function mapKey(scalar: number, clean: boolean): string {
  if (!clean && chance(0.1)) {
    return pick(scalar === 9 ? ["__proto__", "@type"] : scalar === 8 ? ["yes", "1", "TRUE"] : ["01", "-0", " 1", "1e1", "x", "1.0", "99999999999999999999", "-1"]);
  }
  switch (scalar) {
    case 9:
      return pick(["", "a", "key", "1", "-1", "10", "b", "é", "4294967295", "0"]) + (chance(0.3) ? String(int(5)) : "");
    case 8:
      return pick(["true", "false"]);
    case 5:
    case 15:
    case 17:
      return pick(["0", "1", "-1", "2147483647", "-2147483648", "7", "300"]);
    case 13:
    case 7:
      return pick(["0", "1", "4294967295", "4294967294", "12", "300"]);
    case 4:
    case 6:
      return pick(["0", "18446744073709551615", "12", "9007199254740993", "4294967296"]);
    default:
      return pick(["0", "-9223372036854775808", "9223372036854775807", "123", "-5", "4294967296"]);
  }
}

function jsonTree(depth: number): JsonValue {
  switch (int(depth > 2 ? 4 : 6)) {
    case 0:
      return null;
    case 1:
      return pick<JsonValue>([0, NEG_ZERO, 1.5, -3, 1e21, 5e-324, 123456789012]);
    case 2:
      return randomString();
    case 3:
      return chance(0.5);
    case 4: {
      const a: JsonValue[] = [];
      for (let i = int(4); i > 0; i--) a.push(jsonTree(depth + 1));
      return a;
    }
    default: {
      const o: { [k: string]: JsonValue } = {};
      for (let i = int(4); i > 0; i--) o[pick(["a", "b", "1", "10", "z", "é", "key", "0"]) + String(int(3))] = jsonTree(depth + 1);
      return o;
    }
  }
}

function messageValue(desc: DescMessage, depth: number, clean: boolean): JsonValue {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      if (!clean && chance(0.15)) return pick(odd.timestamp!);
      return pick(["1970-01-01T00:00:00Z", "2026-01-02T03:04:05.600Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "2026-01-02T03:04:05.123456Z", "1969-12-31T23:59:59.5Z", "2026-01-02T03:04:05.1+01:00", "2026-01-02T03:04:05-07:30", "2000-02-29T12:00:00.000000001Z", "0001-01-01T00:30:00+01:00"]);
    case "google.protobuf.Duration":
      if (!clean && chance(0.15)) return pick(odd.duration!);
      return pick(["0s", "1.5s", "-1.5s", "-0.5s", "315576000000s", "-315576000000s", "90s", "1.000000001s", "0.000001s", "-0s", "00012.5s", "-0.000000001s", "3.100s"]);
    case "google.protobuf.Struct": {
      const o: { [k: string]: JsonValue } = {};
      for (let i = int(4); i > 0; i--) o[pick(["a", "1", "b", "10", "x y", "é"]) + String(int(3))] = jsonTree(1);
      return !clean && chance(0.1) ? pick<JsonValue>([[], "x", 5]) : o;
    }
    case "google.protobuf.Value":
      return jsonTree(0);
    case "google.protobuf.ListValue":
      return !clean && chance(0.1) ? { a: 1 } : [jsonTree(1), jsonTree(1)].slice(int(3));
    case "google.protobuf.Any":
      return pick<JsonValue>([{}, { "@type": "type.googleapis.com/kinds.v1.Scalars", fInt32: 1 }, { "@type": "type.googleapis.com/google.protobuf.Duration", value: "1s" }]);
    case "google.protobuf.FieldMask":
      return pick(["a.fooBar,b", "", "x"]);
    case "google.protobuf.Empty":
      return !clean && chance(0.1) ? { x: 1 } : {};
  }
  const wrapped = desc.typeName.startsWith("google.protobuf.") && desc.typeName.endsWith("Value") ? desc.fields[0] : undefined;
  if (wrapped?.fieldKind === "scalar") return scalarValue(wrapped, clean);
  const o: { [k: string]: JsonValue } = {};
  const oneofsUsed = new Set<unknown>();
  const fields = desc.fields.concat().sort(() => rand() - 0.5); // JSON key order must not matter
  for (const f of fields) {
    if (!chance(depth === 0 ? 0.6 : 0.35)) continue;
    if (clean && (f.fieldKind === "message" || f.fieldKind === "list") && f.message && /google\.protobuf\.(Any|FieldMask)$/.test(f.message.typeName)) continue;
    if (f.oneof !== undefined) {
      if (oneofsUsed.has(f.oneof) && (clean || !chance(0.2))) continue;
      oneofsUsed.add(f.oneof);
    }
    if (depth >= 3 && (f.fieldKind === "message" || f.fieldKind === "list" || f.fieldKind === "map") && f.message?.typeName.startsWith("kinds.")) continue;
    const key = chance(0.75) ? f.jsonName : f.name;
    o[key] = fieldValue(f, depth, clean);
    if (!clean && f.name !== f.jsonName && chance(0.03)) o[key === f.name ? f.jsonName : f.name] = fieldValue(f, depth, clean); // set twice
  }
  if (!clean && chance(0.05)) o[pick(["zzz", "[kinds.v1.ext]", "FString", "@type"])] = 1;
  return o;
}

function fieldValue(f: DescField, depth: number, clean: boolean): JsonValue {
  if (chance(clean ? 0.05 : 0.08) && (f.oneof === undefined || !clean)) return null;
  if (!clean && chance(0.03)) return pick<JsonValue>([[], {}, "s", 3, true]); // the wrong JSON type
  switch (f.fieldKind) {
    case "scalar":
      return scalarValue(f, clean);
    case "enum":
      return enumValue(f, clean);
    case "message":
      return messageValue(f.message, depth + 1, clean);
    case "list": {
      const a: JsonValue[] = [];
      for (let i = int(4); i > 0; i--) {
        if (!clean && chance(0.04)) a.push(null);
        else a.push(f.listKind === "scalar" ? scalarValue(f, clean) : f.listKind === "enum" ? enumValue(f, clean) : messageValue(f.message, depth + 1, clean));
      }
      return a;
    }
    case "map": {
      const o: { [k: string]: JsonValue } = {};
      for (let i = int(4); i > 0; i--) {
        const k = mapKey(f.mapKey, clean);
        const v = f.mapKind === "scalar" ? scalarValue(f, clean) : f.mapKind === "enum" ? enumValue(f, clean) : messageValue(f.message, depth + 1, clean);
        if (k === "__proto__") Object.defineProperty(o, k, { value: v, enumerable: true, configurable: true, writable: true });
        else o[k] = !clean && chance(0.03) ? null : v;
      }
      return o;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The library as reference, and wire-level mutations
// ---------------------------------------------------------------------------------------------------------------

type Outcome<T> = { ok: true; value: T } | { ok: false; error: string };

/** The registry of the message type under test (kinds or shop). */
let current = registry;

function libEncode(desc: DescMessage, value: JsonValue, reg = current): Outcome<Uint8Array> {
  try {
    return { ok: true, value: toBinary(desc, fromJson(desc, value, { registry: reg })) };
  } catch (e) {
    return { ok: false, error: String(e) };
  }
}

function libDecode(desc: DescMessage, bytes: Uint8Array, reg = current): Outcome<string> {
  try {
    return { ok: true, value: toJsonString(desc, fromBinary(desc, bytes), { registry: reg }) };
  } catch (e) {
    return { ok: false, error: String(e) };
  }
}

/** Top-level wire records (tag + payload bytes) of a message. */
function records(bytes: Uint8Array): Uint8Array[] {
  const r = new BinaryReader(bytes);
  const out: Uint8Array[] = [];
  while (r.pos < r.len) {
    const start = r.pos;
    const [no, wt] = r.tag();
    r.skip(wt, no);
    out.push(bytes.subarray(start, r.pos));
  }
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/** A record whose tag is re-encoded with `extra` more varint bytes (overlong, same value). */
function overlongTag(rec: Uint8Array, extra: number): Uint8Array {
  const r = new BinaryReader(rec);
  const [no, wt] = r.tag();
  let v = ((no << 3) | wt) >>> 0;
  const out: number[] = [];
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v | 0x80);
  for (let i = 1; i < extra; i++) out.push(0x80);
  out.push(0);
  return concat([new Uint8Array(out), rec.subarray(r.pos)]);
}

function mutate(bytes: Uint8Array): Uint8Array {
  const recs = records(bytes);
  switch (int(7)) {
    case 6: {
      // a tag in more bytes than needed (valid up to five bytes for the library)
      if (recs.length === 0) return bytes;
      const i = int(recs.length);
      recs[i] = overlongTag(recs[i]!, 1 + int(5));
      return concat(recs);
    }
    case 0: // another field order
      return concat(recs.sort(() => rand() - 0.5));
    case 1: // a record twice
      return recs.length === 0 ? bytes : concat([...recs, pick(recs)]);
    case 2: // truncated
      return bytes.subarray(0, int(bytes.length));
    case 3: {
      // one byte changed
      const b = bytes.slice();
      if (b.length > 0) b[int(b.length)] = int(256);
      return b;
    }
    case 4: // an unknown field
      return concat([bytes, new BinaryWriter().tag(1000 + int(5), WireType.Varint).uint32(7).finish()]);
    default: // a record of another type's bytes spliced in
      return concat([...recs.slice(0, int(recs.length + 1)), randomBytes(int(6))]);
  }
}

/** Random wire bytes for a message: every field with random raw values of its wire type (or sometimes another). */
function randomWire(desc: DescMessage, depth = 0): Uint8Array {
  const w = new BinaryWriter();
  for (const f of desc.fields) {
    if (!chance(0.5)) continue;
    for (let n = f.fieldKind === "list" || f.fieldKind === "map" ? 1 + int(3) : 1; n > 0; n--) writeRandomField(w, f, depth);
  }
  return w.finish();
}

function writeRandomScalar(w: BinaryWriter, scalar: number): void {
  switch (scalar) {
    case 1:
      w.double(pick([0, -0, NaN, Infinity, -Infinity, 1.5, 1e300, 5e-324, rand()]));
      return;
    case 2:
      w.raw(randomBytes(4));
      return;
    case 6:
    case 16:
      w.raw(randomBytes(8));
      return;
    case 7:
    case 15:
      w.raw(randomBytes(4));
      return;
    case 9:
      if (chance(0.15)) w.bytes(randomBytes(int(6)).map((b) => b | 0x80));
      else w.string(randomString());
      return;
    case 12:
      w.bytes(randomBytes(int(40)));
      return;
    case 8:
      w.uint64(pick([0, 1, 2, 255, "18446744073709551615"]));
      return;
    default: {
      // a varint of any 64-bit value
      const lo = int(4294967296);
      const hi = pick([0, 0, 0xffffffff, int(4294967296), 1, 0x200000]);
      w.uint64((BigInt(hi) << 32n) | BigInt(lo));
    }
  }
}

function wireTypeOfScalar(scalar: number): WireType {
  return [1, 6, 16].includes(scalar) ? WireType.Bit64 : [2, 7, 15].includes(scalar) ? WireType.Bit32 : [9, 12].includes(scalar) ? WireType.LengthDelimited : WireType.Varint;
}

function writeRandomField(w: BinaryWriter, f: DescField, depth: number): void {
  const scalar = f.enum !== undefined ? 5 : (f.scalar ?? 0);
  if (f.fieldKind === "map") {
    w.tag(f.number, WireType.LengthDelimited).fork();
    const entry = [(): void => void writeRandomScalar(w.tag(1, wireTypeOfScalar(f.mapKey)), f.mapKey), (): void => {
      if (f.mapKind === "message") w.tag(2, WireType.LengthDelimited).bytes(depth < 2 ? wireFor(f.message, depth + 1) : new Uint8Array(0));
      else writeRandomScalar(w.tag(2, wireTypeOfScalar(scalar)), scalar);
    }];
    if (chance(0.1)) entry.reverse();
    if (chance(0.05)) entry.pop();
    for (const e of entry) e();
    w.join();
    return;
  }
  if (f.message !== undefined) {
    w.tag(f.number, WireType.LengthDelimited).bytes(depth < 2 ? wireFor(f.message, depth + 1) : new Uint8Array(0));
    return;
  }
  if (f.fieldKind === "list" && f.packed && chance(0.7)) {
    w.tag(f.number, WireType.LengthDelimited).fork();
    for (let i = int(4); i > 0; i--) writeRandomScalar(w, scalar);
    w.join();
    return;
  }
  writeRandomScalar(w.tag(f.number, chance(0.03) ? pick([0, 1, 2, 5]) : wireTypeOfScalar(scalar)), scalar);
}

/** Wire bytes for a nested message: random wire, or the library's encoding of a random JSON value. */
function wireFor(desc: DescMessage, depth: number): Uint8Array {
  if (chance(0.5)) {
    const enc = libEncode(desc, JSON.parse(jsonText(messageValue(desc, depth, true))) as JsonValue);
    if (enc.ok) return enc.value;
  }
  return randomWire(desc, depth);
}

// ---------------------------------------------------------------------------------------------------------------

const TYPES = ["kinds.v1.Kinds", "kinds.v1.Scalars", "kinds.v1.Optionals", "kinds.v1.Repeats", "kinds.v1.Maps", "kinds.v1.WellKnown", "shop.v1.Order", "shop.v1.Item"];

/** A random type of TYPES; sets `current` to its registry. */
function pickType(): DescMessage {
  const name = pick(TYPES);
  current = name.startsWith("shop.") ? shop : registry;
  return msg(name, current);
}

interface Stats {
  cases: number;
  libOk: number;
  fast: number;
}

function checkEncode(desc: DescMessage, value: JsonValue, clean: boolean, stats: Stats, reg = current): Outcome<Uint8Array> {
  const text = jsonText(value);
  const lib = libEncode(desc, JSON.parse(text) as JsonValue, reg);
  const fast = fastJsonToBinary(desc, JSON.parse(text) as JsonValue);
  stats.cases++;
  if (lib.ok) stats.libOk++;
  if (fast !== undefined) {
    stats.fast++;
    assert.ok(lib.ok, `fast path accepted what the library rejects (${lib.ok ? "" : lib.error}): ${text.slice(0, 2000)}`);
    assert.equal(Buffer.from(fast).toString("hex"), Buffer.from(lib.value).toString("hex"), `bytes differ for ${desc.typeName} ${text.slice(0, 2000)}`);
  } else if (clean && lib.ok) {
    assert.fail(`the fast path gave up on a canonical ${desc.typeName}: ${text.slice(0, 2000)}`);
  }
  return lib;
}

function checkDecode(desc: DescMessage, bytes: Uint8Array, mustBeFast: boolean, stats: Stats, reg = current): void {
  const lib = libDecode(desc, bytes, reg);
  const fast = fastBinaryToJson(desc, bytes);
  stats.cases++;
  if (lib.ok) stats.libOk++;
  if (fast !== undefined) {
    stats.fast++;
    assert.ok(lib.ok, `fast path decoded what the library rejects (${lib.ok ? "" : lib.error}): ${Buffer.from(bytes).toString("hex")}`);
    assert.equal(fast, lib.value, `JSON differs for ${desc.typeName} ${Buffer.from(bytes).toString("hex")}`);
  } else if (mustBeFast && lib.ok) {
    assert.fail(`the fast path gave up on canonical ${desc.typeName} bytes ${Buffer.from(bytes).toString("hex")} = ${lib.value}`);
  }
}

describe("fast codec: differential against @bufbuild/protobuf", () => {
  it("JSON -> binary: identical bytes, or gives up (never answers where the library fails)", (t) => {
    seed = 0x5eed0001;
    const clean: Stats = { cases: 0, libOk: 0, fast: 0 };
    const wild: Stats = { cases: 0, libOk: 0, fast: 0 };
    for (let i = 0; i < 3000; i++) {
      const desc = pickType();
      const isClean = i % 2 === 0;
      checkEncode(desc, messageValue(desc, 0, isClean), isClean, isClean ? clean : wild);
    }
    t.diagnostic(`clean: ${JSON.stringify(clean)}; wild: ${JSON.stringify(wild)}`);
    assert.ok(clean.libOk > 1200, "most canonical values are valid");
    assert.ok(wild.fast > 100 && wild.libOk - wild.fast > 50 && wild.cases - wild.libOk > 500, "the wild cases exercise both paths and the errors");
  });

  it("binary -> JSON: identical text for canonical, reordered, repeated, truncated and random bytes, or gives up", (t) => {
    seed = 0x5eed0002;
    const canonical: Stats = { cases: 0, libOk: 0, fast: 0 };
    const mutated: Stats = { cases: 0, libOk: 0, fast: 0 };
    const random: Stats = { cases: 0, libOk: 0, fast: 0 };
    for (let i = 0; i < 1500; i++) {
      const desc = pickType();
      const enc = libEncode(desc, JSON.parse(jsonText(messageValue(desc, 0, true))) as JsonValue);
      if (!enc.ok) continue;
      checkDecode(desc, enc.value, true, canonical);
      checkDecode(desc, mutate(enc.value), false, mutated);
    }
    for (let i = 0; i < 1500; i++) {
      const desc = pickType();
      checkDecode(desc, randomWire(desc), false, random);
    }
    t.diagnostic(`canonical: ${JSON.stringify(canonical)}; mutated: ${JSON.stringify(mutated)}; random: ${JSON.stringify(random)}`);
    assert.ok(canonical.fast > 1000);
    assert.ok(mutated.fast > 200 && random.fast > 200, "mutated and random bytes exercise the fast path too");
  });

  it("the shop schema's orders take the fast path both ways with the library's bytes and text", () => {
    current = shop;
    const order = msg("shop.v1.Order", shop);
    const stats: Stats = { cases: 0, libOk: 0, fast: 0 };
    for (const size of [100, 300, 1024, 6 * 1024, 64 * 1024]) {
      const value = orderOfJsonSize(size) as JsonValue;
      const enc = checkEncode(order, value, true, stats, shop);
      assert.ok(enc.ok);
      checkDecode(order, enc.value, true, stats, shop);
    }
    // The rich order has an Any and a FieldMask: the library converts it (both paths give its answer).
    const rich = richOrder() as JsonValue;
    const enc = checkEncode(order, rich, false, stats, shop);
    assert.ok(enc.ok);
    assert.equal(fastBinaryToJson(order, enc.value), undefined);
    assert.equal(binaryToJson(shop, "shop.v1.Order", enc.value), JSON.stringify(rich));
  });

  it("codec.ts answers as the library does: same bytes, same text, GatewayError where the library fails", () => {
    seed = 0x5eed0003;
    for (let i = 0; i < 600; i++) {
      const desc = pickType();
      const type = desc.typeName;
      const text = jsonText(messageValue(desc, 0, i % 3 === 0));
      const lib = libEncode(desc, JSON.parse(text) as JsonValue);
      if (lib.ok) {
        const bytes = jsonToBinary(current, type, text);
        assert.deepEqual(Buffer.from(bytes), Buffer.from(lib.value));
        const libText = libDecode(desc, bytes);
        assert.ok(libText.ok);
        // (codec.ts puts an Any's "@type" first, codec.test.ts checks that; everything else is the library's text)
        if (!libText.value.includes('"@type"')) assert.equal(binaryToJson(current, type, bytes), libText.value);
      } else {
        assert.throws(() => jsonToBinary(current, type, text), (e) => e instanceof GatewayError && e.code === 3, text);
      }
    }
  });

  it("string bytes: every 1- and 2-byte value and random 3- and 4-byte ones (UTF-8 validity and JSON escapes)", (t) => {
    current = registry;
    seed = 0x5eed0004;
    const scalars = msg("kinds.v1.Scalars");
    const stats: Stats = { cases: 0, libOk: 0, fast: 0 };
    const check = (body: number[]): void => checkDecode(scalars, new Uint8Array([0x4a, body.length, ...body]), false, stats);
    for (let a = 0; a < 256; a++) {
      check([a]);
      for (let b = 0; b < 256; b++) check([a, b]);
    }
    const lead = [0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xc2, 0xdf, 0xc0];
    for (let i = 0; i < 20000; i++) check([pick(lead), 0x80 + int(64) - (chance(0.1) ? 1 : 0), 0x80 + int(64), ...(chance(0.5) ? [0x7f + int(66)] : [])]);
    t.diagnostic(JSON.stringify(stats));
    assert.ok(stats.fast > 20000 && stats.libOk - stats.fast < stats.libOk / 100, "valid strings take the fast path");
  });

  it("hand-written wire forms: unpacked lists, map entries in either order, long varints, bad UTF-8, odd well-known values", () => {
    current = registry;
    const stats: Stats = { cases: 0, libOk: 0, fast: 0 };
    const repeats = msg("kinds.v1.Repeats");
    const maps = msg("kinds.v1.Maps");
    const wk = msg("kinds.v1.WellKnown");
    const scalars = msg("kinds.v1.Scalars");
    const w = (): BinaryWriter => new BinaryWriter();
    // Packed field sent unpacked, and packed + unpacked mixed: the library concatenates.
    checkDecode(repeats, w().tag(5, WireType.Varint).int32(-1).tag(5, WireType.Varint).int32(7).finish(), true, stats);
    checkDecode(repeats, w().tag(3, WireType.LengthDelimited).fork().int64(1).int64(-2).join().tag(3, WireType.Varint).int64(3).finish(), true, stats);
    // Not-packed field sent packed.
    checkDecode(repeats, w().tag(19, WireType.LengthDelimited).fork().int32(1).int32(2).join().finish(), true, stats);
    // An empty packed record: no items, the field is left out.
    checkDecode(repeats, w().tag(5, WireType.LengthDelimited).fork().join().finish(), true, stats);
    // Map entry value first; repeated key (first position, last value); entry without value (library default).
    checkDecode(maps, w().tag(1, WireType.LengthDelimited).fork().tag(2, WireType.LengthDelimited).string("v").tag(1, WireType.LengthDelimited).string("k").join().finish(), true, stats);
    const entry = (k: string, v: string): Uint8Array => w().tag(1, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(k).tag(2, WireType.LengthDelimited).string(v).join().finish();
    checkDecode(maps, concat([entry("b", "1"), entry("a", "2"), entry("b", "3"), entry("10", "4"), entry("2", "5")]), true, stats);
    checkDecode(maps, w().tag(1, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string("k").join().finish(), false, stats);
    // Negative int32 as ten bytes, overlong but valid varints, sint/zigzag extremes.
    checkDecode(scalars, w().tag(5, WireType.Varint).int32(-2147483648).tag(17, WireType.Varint).sint32(-2147483648).tag(18, WireType.Varint).sint64("-9223372036854775808").finish(), true, stats);
    checkDecode(scalars, new Uint8Array([0x28, 0x81, 0x80, 0x80, 0x80, 0x00]), true, stats);
    // Overlong tags: five bytes are read, six (or a fifth byte past 0x0f) are an illegal tag for the library.
    checkDecode(scalars, new Uint8Array([0xa8, 0x80, 0x80, 0x80, 0x00, 0x01]), true, stats);
    checkDecode(scalars, new Uint8Array([0xa8, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01]), false, stats);
    checkDecode(scalars, new Uint8Array([0xa8, 0x80, 0x80, 0x80, 0x10, 0x01]), false, stats);
    // Invalid UTF-8, a string cut short, a field given twice.
    checkDecode(scalars, new Uint8Array([0x4a, 0x02, 0xc3, 0x28]), false, stats);
    checkDecode(scalars, new Uint8Array([0x4a, 0x05, 0x61]), false, stats);
    checkDecode(scalars, w().tag(9, WireType.LengthDelimited).string("a").tag(9, WireType.LengthDelimited).string("b").finish(), false, stats);
    // Timestamps and durations at and past their JSON range, negative nanos, a Value with NaN or no kind.
    const ts = (s: bigint, n: number): Uint8Array => w().tag(1, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int64(s).tag(2, WireType.Varint).int32(n).join().finish();
    for (const [s, n] of [[0n, 0], [-62135596800n, 0], [253402300799n, 999999999], [253402300800n, 0], [0n, -1], [1n, 1000000000], [-1n, 500000000], [1700000000n, 120000]] as const) {
      checkDecode(wk, ts(s, n), false, stats);
      checkDecode(wk, concat([w().tag(2, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int64(s).tag(2, WireType.Varint).int32(n).join().finish()]), false, stats);
    }
    const value = (body: (x: BinaryWriter) => BinaryWriter): Uint8Array => w().tag(4, WireType.LengthDelimited).bytes(body(w()).finish()).finish();
    checkDecode(wk, value((x) => x.tag(2, WireType.Bit64).double(NaN)), false, stats);
    checkDecode(wk, value((x) => x), false, stats);
    checkDecode(wk, value((x) => x.tag(1, WireType.Varint).int32(3)), true, stats);
    checkDecode(wk, value((x) => x.tag(3, WireType.LengthDelimited).string("a").tag(4, WireType.Varint).bool(true)), false, stats);
    assert.ok(stats.fast >= 12, JSON.stringify(stats));
  });

  it("names from a backend's descriptors cannot inject code into the generated readers and writers", () => {
    // Reflection hands the gateway whatever json_name a backend declares; the generated code must treat it as data.
    const hostile = ['a"b', "c\\d", "e\nf", "g${process.exit(7)}h", "i`j", "k'); process.exit(7); ('", "\u2028", "é"];
    const file = create(FileDescriptorProtoSchema, {
      name: "hostile.proto",
      package: "hostile",
      syntax: "proto3",
      messageType: [
        {
          name: "M",
          field: hostile.map((jsonName, i) => ({ name: `f${i}`, number: i + 1, label: 1, type: 9, jsonName })),
        },
      ],
    });
    current = compileSchema([toBinary(FileDescriptorProtoSchema, file)]);
    const desc = msg("hostile.M", current);
    const stats: Stats = { cases: 0, libOk: 0, fast: 0 };
    const value = Object.fromEntries(hostile.map((k, i) => [k, `v${i}`]));
    const enc = checkEncode(desc, value, true, stats);
    assert.ok(enc.ok);
    checkDecode(desc, enc.value, true, stats);
    assert.equal(fastBinaryToJson(desc, enc.value), JSON.stringify(value));
  });
});

describe("fast codec where code generation is disallowed", () => {
  it("converts through the library with the same bytes, text and errors (node --disallow-code-generation-from-strings)", () => {
    const child = fileURLToPath(new URL("../support/codec-roundtrip-child.ts", import.meta.url));
    type Outcome = { ok?: string; code?: number; message?: string };
    const run = (flags: string[]): { results: Outcome[]; fastTaken: boolean } =>
      JSON.parse(execFileSync(process.execPath, [...flags, "--import", "tsx", child], { encoding: "utf8", timeout: 60_000 }));
    const locked = run(["--disallow-code-generation-from-strings"]);
    const normal = run([]);
    assert.equal(normal.fastTaken, true);
    assert.equal(locked.fastTaken, false);
    assert.deepEqual(locked.results, normal.results);
    // The valid order converted both times, and the invalid inputs were refused naming the problem.
    const [first, second, wrongType, unknown] = locked.results;
    assert.ok(first?.ok && second?.ok === first.ok);
    assert.match(wrongType?.message ?? "", /orderId/);
    assert.match(unknown?.message ?? "", /nope/);
  });
});
