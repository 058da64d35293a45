/**
 * The fuzzer's inputs: a seed corpus of well-formed client byte streams (test/fuzz/corpus/*.bin, written by
 * `seedCorpus()`: each file is what a client writes, preface first), and the mutators that turn a seed into an input,
 * at frame level (type, flags, stream id, length field, payload bytes, splice/duplicate/reorder/drop frames,
 * CONTINUATION splits, padding) and at byte level, then cut into TCP writes. A second generator keeps the HTTP/2
 * framing valid and mutates the gRPC layer instead: the 5-byte message prefix (compressed flag, length, truncation),
 * gzip/deflate bodies, the request headers (grpc-timeout, grpc-encoding, content-type, metadata) and the protobuf
 * payload of each gateway method. Every input is a pure function of (run seed, index): `makeInput`.
 */
import { readdirSync, readFileSync } from "node:fs";
import { gzipSync, deflateSync } from "node:zlib";
import { huffmanEncode, writeInt } from "../../src/h2/hpack.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { F, PREFACE, T, grpcFrame, grpcRequestFields, headerBlock, rawFrame, settings, u32 as u32Strict } from "../support/h2-raw-unary.js";
import { Rng } from "./prng.js";

/** One frame of an input; `length` overrides the header's length field (a lie about the payload). */
export interface FFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
  length?: number;
}

/** What the target is sent: the bytes in `chunks`, each its own socket write; `halfClose` ends our side after them. */
export interface FuzzInput {
  label: string;
  chunks: Buffer[];
  halfClose: boolean;
}

/** Inputs are kept under this many bytes (floods are made by repeating frames, not by size). */
const MAX_INPUT = 512 * 1024;

export const CORPUS_DIR = new URL("./corpus/", import.meta.url);

// ---- building blocks ----

/** The full gRPC paths of the gateway's methods, with whether the client streams. */
export const METHODS: { path: string; clientStream: boolean; serialize(o: object): Buffer }[] = (() => {
  const pd = gatewayPackageDefinition();
  const out: { path: string; clientStream: boolean; serialize(o: object): Buffer }[] = [];
  for (const svc of Object.values(pd)) {
    if ("format" in svc) continue;
    for (const m of Object.values(svc as Record<string, { path: string; requestStream: boolean; requestSerialize(o: object): Buffer }>)) {
      out.push({ path: m.path, clientStream: m.requestStream, serialize: (o) => m.requestSerialize(o) });
    }
  }
  return out;
})();

/** Plausible requests per method (others get `{}`): names and keys the gateway knows and does not. */
const SAMPLES: Record<string, object[]> = {
  "/platform.Config/GetService": [{ name: "orders" }, { name: "x".repeat(300) }],
  "/platform.State/SaveState": [{ service: "orders", key: "k", value: "v" }],
  "/platform.State/GetState": [{ service: "orders", key: "k" }],
  "/platform.State/QueryState": [{ service: "orders", query: "{}", limit: 5 }],
  "/platform.Gateway/Invoke": [{ service: "orders", method: "Get", request_data: "{}" }],
  "/platform.Gateway/InvokeJson": [{ service: "orders", method: "Get", request_data: '{"a":1}' }],
  "/platform.Gateway/InvokeStream": [{ service: "orders", method: "Get", request_data: "{}" }],
  "/platform.Gateway/ListMethods": [{ service: "orders" }],
  "/io.cloudevents.v1.Pubsub/Subscribe": [{ topics: ["fuzz"] }, { topics: ["a", "b", "state.change"] }],
  "/io.cloudevents.v1.Pubsub/PublishEvent": [{ topic: "fuzz", cloudevent: { id: "1", source: "urn:fuzz", spec_version: "1.0", type: "t", text_data: "hi" } }],
  "/io.cloudevents.v1.Pubsub/Unsubscribe": [{ subscription_id: "nope" }],
  "/platform.Trigger/GetTrigger": [{ name: "nope" }],
  "/platform.Trigger/ListTriggers": [{}],
};

function sampleMessage(rng: Rng, m: (typeof METHODS)[number]): Buffer {
  const xs = SAMPLES[m.path];
  try {
    return m.serialize(xs ? rng.pick(xs) : {});
  } catch {
    return Buffer.alloc(0);
  }
}

const CONFIG_LIST = "/platform.Config/ListServices";

/** A 32-bit field from any number the mutators make (ids with the reserved bit set are negative in JS). */
const u32 = (n: number): Buffer => u32Strict(n >>> 0);

function req(sid: number, path: string, extra: [string, string][] = [], flags: number = F.END_HEADERS): FFrame {
  return { type: T.HEADERS, flags, stream: sid, payload: headerBlock(grpcRequestFields(path, extra)) };
}
function data(sid: number, payload: Buffer, end = true): FFrame {
  return { type: T.DATA, flags: end ? F.END_STREAM : 0, stream: sid, payload };
}
function ctl(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): FFrame {
  return { type, flags, stream, payload };
}
function windowUpdate(sid: number, inc: number): FFrame {
  return ctl(T.WINDOW_UPDATE, 0, sid, u32(inc));
}
function rst(sid: number, code: number): FFrame {
  return ctl(T.RST_STREAM, 0, sid, u32(code));
}
function goaway(last: number, code: number, debug = ""): FFrame {
  return ctl(T.GOAWAY, 0, 0, Buffer.concat([u32(last), u32(code), Buffer.from(debug)]));
}
function ping(ack = false): FFrame {
  return ctl(T.PING, ack ? F.ACK : 0, 0, Buffer.from("fuzzping"));
}
function priority(sid: number, dep: number, weight: number, exclusive = false): FFrame {
  const p = Buffer.alloc(5);
  p.writeUInt32BE((dep | (exclusive ? 0x80000000 : 0)) >>> 0);
  p[4] = weight;
  return ctl(T.PRIORITY, 0, sid, p);
}

/** A HEADERS block split into HEADERS + CONTINUATION frames at the given offsets. */
function splitBlock(f: FFrame, cuts: number[]): FFrame[] {
  const b = f.payload;
  const points = [...new Set(cuts.map((c) => Math.max(0, Math.min(b.length, c))))].sort((x, y) => x - y);
  const parts: Buffer[] = [];
  let at = 0;
  for (const c of points) {
    parts.push(b.subarray(at, c));
    at = c;
  }
  parts.push(b.subarray(at));
  const endHeaders = f.flags & F.END_HEADERS;
  return parts.map((p, i) => ({
    type: i === 0 ? f.type : T.CONTINUATION,
    flags: i === 0 ? f.flags & ~F.END_HEADERS : i === parts.length - 1 ? endHeaders : 0,
    stream: f.stream,
    payload: p,
  }));
}

/** Padded form of a DATA or HEADERS frame. */
function padded(f: FFrame, pad: number): FFrame {
  return { ...f, flags: f.flags | F.PADDED, payload: Buffer.concat([Buffer.from([pad & 0xff]), f.payload, Buffer.alloc(pad & 0xff)]) };
}

/** A header block with dynamic-table inserts (literal with incremental indexing, Huffman), then references to them. */
function dynamicBlock(path: string, tableUpdate?: number): Buffer {
  const out = Buffer.alloc(4096);
  let p = 0;
  if (tableUpdate !== undefined) p = writeInt(out, p, tableUpdate, 5, 0x20);
  // :method POST (static 3), :scheme http (static 6)
  out[p++] = 0x83;
  out[p++] = 0x86;
  const lit = (name: string, value: string): void => {
    const n = huffmanEncode(name);
    const v = huffmanEncode(value);
    out[p++] = 0x40;
    p = writeInt(out, p, n.length, 7, 0x80);
    p += n.copy(out, p);
    p = writeInt(out, p, v.length, 7, 0x80);
    p += v.copy(out, p);
  };
  lit(":path", path);
  lit(":authority", "127.0.0.1");
  lit("content-type", "application/grpc");
  lit("te", "trailers");
  lit("x-fuzz", "a".repeat(100));
  return out.subarray(0, p);
}
/** The same request again, by dynamic-table indices only (62.. are the inserts above, newest first). */
function indexedBlock(): Buffer {
  return Buffer.from([0x83, 0x86, 0x80 | 66, 0x80 | 65, 0x80 | 64, 0x80 | 63, 0x80 | 62]);
}

// ---- the seed corpus ----

/** The seeds, as frame lists (the preface and a SETTINGS come first in every one's bytes). */
export function seedCorpus(): { name: string; frames: FFrame[]; settings?: [number, number][] }[] {
  const list = grpcFrame(Buffer.alloc(0));
  const subscribe = grpcFrame(METHODS.find((m) => m.path.endsWith("/Subscribe"))!.serialize({ topics: ["fuzz", "state.change"] }));
  const invokeStream = METHODS.find((m) => m.path.endsWith("/InvokeStream"))!;
  const chunk = (o: object): Buffer => grpcFrame(invokeStream.serialize(o));
  const gz = grpcFrame(gzipSync(Buffer.alloc(0)), 1);
  const getService = METHODS.find((m) => m.path === "/platform.Config/GetService")!;
  return [
    { name: "unary-list-services", frames: [req(1, CONFIG_LIST), data(1, list)] },
    { name: "unary-two-streams", frames: [req(1, CONFIG_LIST), data(1, list), req(3, getService.path), data(3, grpcFrame(getService.serialize({ name: "orders" })))] },
    { name: "server-streaming-subscribe", frames: [req(1, "/io.cloudevents.v1.Pubsub/Subscribe"), data(1, subscribe), ping(), rst(1, 8)] },
    {
      name: "client-streaming-invoke-stream",
      frames: [req(1, invokeStream.path), data(1, chunk({ service: "orders", method: "Get" }), false), data(1, chunk({ request_data: "{}" }), false), data(1, chunk({ request_data: '{"a":1}' }), false), data(1, Buffer.alloc(0))],
    },
    {
      name: "settings-ping-window-rst-mix",
      settings: [[1, 0], [3, 100], [4, 1 << 20], [5, 32_768], [6, 8192], [2, 0]],
      frames: [ping(), windowUpdate(0, 1 << 20), req(1, CONFIG_LIST), windowUpdate(1, 1000), ctl(T.SETTINGS, 0, 0, settings([[4, 0]])), data(1, list), ctl(T.SETTINGS, F.ACK, 0), ping(true), rst(1, 8), req(3, CONFIG_LIST), data(3, list)],
    },
    { name: "continuation-split", frames: [...splitBlock(req(1, CONFIG_LIST), [3, 10, 20, 30]), data(1, list)] },
    { name: "padding-and-priority", frames: [padded({ ...req(1, CONFIG_LIST), flags: F.END_HEADERS | F.PRIORITY, payload: Buffer.concat([Buffer.from([0, 0, 0, 0, 16]), req(1, CONFIG_LIST).payload]) }, 10), priority(1, 0, 200), priority(3, 1, 1, true), padded(data(1, list), 255)] },
    { name: "goaway-after-call", frames: [req(1, CONFIG_LIST), data(1, list), goaway(1, 0, "bye"), req(3, CONFIG_LIST), data(3, list)] },
    {
      name: "hpack-dynamic-table",
      frames: [
        { type: T.HEADERS, flags: F.END_HEADERS, stream: 1, payload: dynamicBlock(CONFIG_LIST, 4096) },
        data(1, list),
        { type: T.HEADERS, flags: F.END_HEADERS, stream: 3, payload: indexedBlock() },
        data(3, list),
        ctl(T.SETTINGS, 0, 0, settings([[1, 0]])),
        { type: T.HEADERS, flags: F.END_HEADERS, stream: 5, payload: dynamicBlock(CONFIG_LIST, 0) },
        data(5, list),
      ],
    },
    { name: "grpc-gzip", frames: [req(1, CONFIG_LIST, [["grpc-encoding", "gzip"], ["grpc-accept-encoding", "gzip,deflate"]]), data(1, gz), req(3, CONFIG_LIST, [["grpc-encoding", "deflate"]]), data(3, grpcFrame(deflateSync(Buffer.alloc(0)), 1))] },
    { name: "grpc-gzip-bomb", frames: [req(1, CONFIG_LIST, [["grpc-encoding", "gzip"]]), data(1, grpcFrame(gzipSync(Buffer.alloc(8 << 20)), 1))] },
    {
      name: "grpc-timeout-bad",
      frames: ["-1S", "1.5S", "1 S", "99999999999S", "1n", "0m", "S", "100000000H"].flatMap((t, i) => [req(2 * i + 1, CONFIG_LIST, [["grpc-timeout", t]]), data(2 * i + 1, list)]),
    },
    { name: "huge-lengths", frames: [req(1, CONFIG_LIST), data(1, Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3])), req(3, CONFIG_LIST), { ...data(3, list), length: 0xffffff }] },
    { name: "unknown-frames-and-reflection", frames: [ctl(0xfa, 0xff, 0, Buffer.from("x")), req(1, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"), data(1, grpcFrame(Buffer.from([0x3a, 0x00])), false), rst(1, 0)] },
    { name: "metadata-binary", frames: [req(1, CONFIG_LIST, [["x-trace-bin", "!!notbase64"], ["x-api-key", "k"], ["grpc-accept-encoding", "identity"], ["user-agent", "fuzz"]]), data(1, list)] },
    { name: "trailers-from-client", frames: [req(1, CONFIG_LIST), data(1, list, false), { type: T.HEADERS, flags: F.END_HEADERS | F.END_STREAM, stream: 1, payload: headerBlock([["x-t", "1"]]) }] },
  ];
}

/** The bytes a client writes for a frame list (preface and SETTINGS first). */
export function serialize(frames: FFrame[], entries: [number, number][] = [], preface = true): Buffer {
  const parts: Buffer[] = preface ? [PREFACE, rawFrame(T.SETTINGS, 0, 0, settings(entries))] : [];
  for (const f of frames) {
    const b = rawFrame(f.type, f.flags & 0xff, f.stream >>> 0, f.payload);
    if (f.length !== undefined) b.writeUIntBE(f.length & 0xffffff, 0, 3);
    parts.push(b);
  }
  return Buffer.concat(parts);
}

/** Parse a client byte stream back into frames (lenient: a cut-off frame's bytes become `tail`). */
export function parseStream(b: Buffer): { preface: boolean; frames: FFrame[]; tail: Buffer } {
  let p = 0;
  const preface = b.length >= PREFACE.length && b.subarray(0, PREFACE.length).equals(PREFACE);
  if (preface) p = PREFACE.length;
  const frames: FFrame[] = [];
  while (b.length - p >= 9) {
    const len = b.readUIntBE(p, 3);
    if (b.length - p - 9 < len) break;
    frames.push({ type: b[p + 3]!, flags: b[p + 4]!, stream: b.readUInt32BE(p + 5), payload: Buffer.from(b.subarray(p + 9, p + 9 + len)) });
    p += 9 + len;
  }
  return { preface, frames, tail: Buffer.from(b.subarray(p)) };
}

/** The corpus as stored: test/fuzz/corpus/*.bin, each a client byte stream. */
export function loadCorpus(): { name: string; bytes: Buffer }[] {
  let names: string[];
  try {
    names = readdirSync(CORPUS_DIR).filter((n) => n.endsWith(".bin")).sort();
  } catch {
    names = [];
  }
  if (names.length === 0) return seedCorpus().map((s) => ({ name: s.name, bytes: serialize(s.frames, s.settings) }));
  return names.map((n) => ({ name: n.replace(/\.bin$/, ""), bytes: readFileSync(new URL(n, CORPUS_DIR)) }));
}

// ---- frame-level mutation ----

const TYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x0b, 0x10, 0xff];
const FLAGS = [F.END_STREAM, F.END_HEADERS, F.PADDED, F.PRIORITY, 0x02, 0x40, 0x80];

function randomFrame(rng: Rng, sids: number[]): FFrame {
  const sid = (): number => rng.pick([...sids, 0, 1, 2, rng.interesting() & 0x7fffffff]);
  switch (rng.int(10)) {
    case 0:
      return ctl(T.SETTINGS, rng.chance(0.1) ? F.ACK : 0, 0, settings(Array.from({ length: rng.int(4) }, () => [rng.int(9), rng.interesting()] as [number, number])));
    case 1:
      return ping(rng.chance(0.2));
    case 2:
      return windowUpdate(sid(), rng.chance(0.7) ? rng.range(1, 70_000) : rng.interesting());
    case 3:
      return rst(sid(), rng.int(14));
    case 4:
      return priority(sid(), sid(), rng.int(256), rng.chance(0.5));
    case 5:
      return goaway(sid(), rng.int(14), rng.chance(0.5) ? "x".repeat(rng.int(64)) : "");
    case 6:
      return ctl(T.CONTINUATION, rng.chance(0.5) ? F.END_HEADERS : 0, sid(), rng.bytes(rng.int(32)));
    case 7:
      return req(rng.pick([...sids, 1]) + 2 * rng.int(3), rng.pick(METHODS).path, [], rng.chance(0.5) ? F.END_HEADERS : F.END_HEADERS | F.END_STREAM);
    case 8:
      return data(sid(), rng.chance(0.5) ? grpcFrame(Buffer.alloc(0)) : rng.bytes(rng.int(100)), rng.chance(0.5));
    default:
      return ctl(rng.pick(TYPES), rng.int(256), sid(), rng.bytes(rng.int(20)));
  }
}

function mutatePayload(rng: Rng, b: Buffer): Buffer {
  const out = Buffer.from(b);
  switch (rng.int(6)) {
    case 0: // flip bits
      for (let i = rng.range(1, 4); i > 0 && out.length > 0; i--) out[rng.int(out.length)]! ^= 1 << rng.int(8);
      return out;
    case 1: // interesting bytes
      for (let i = rng.range(1, 3); i > 0 && out.length > 0; i--) out[rng.int(out.length)] = rng.pick([0, 0x7f, 0x80, 0xff, 0x3f, 0x40, 0x20]);
      return out;
    case 2: // truncate
      return out.subarray(0, rng.int(out.length + 1));
    case 3: // extend
      return Buffer.concat([out, rng.bytes(rng.range(1, 64))]);
    case 4: // a 32-bit field overwritten (window increments, stream dependencies, GOAWAY fields, grpc lengths)
      if (out.length >= 4) out.writeUInt32BE(rng.interesting() >>> 0, rng.int(out.length - 3));
      return out;
    default:
      return rng.bytes(rng.int(Math.max(1, out.length * 2)));
  }
}

/** One frame-level mutation, in place. */
function mutateFrames(rng: Rng, frames: FFrame[], donors: FFrame[][]): void {
  const sids = [...new Set(frames.map((f) => f.stream))];
  // The first frame (the client's SETTINGS) is left alone most of the time: a connection without it ends at once.
  const lo = frames.length > 1 && rng.chance(0.9) ? 1 : 0;
  const at = (): number => lo + rng.int(frames.length + 1 - lo);
  const i = lo + rng.int(frames.length - lo);
  const f = frames[i];
  const op = rng.int(f === undefined ? 1 : 16);
  if (op === 0 || f === undefined) {
    frames.splice(at(), 0, randomFrame(rng, sids));
    return;
  }
  switch (op) {
    case 1:
      f.type = rng.pick(TYPES);
      return;
    case 2:
      f.flags = rng.chance(0.5) ? f.flags ^ rng.pick(FLAGS) : rng.int(256);
      return;
    case 3:
      f.stream = rng.pick([0, 1, 2, 3, f.stream + 2, f.stream - 2, f.stream | 0x80000000, 0x7fffffff, rng.pick(sids)]) >>> 0;
      return;
    case 4:
      f.length = rng.pick([f.payload.length + 1, Math.max(0, f.payload.length - 1), 0, 16_384, 16_385, 0xffffff, rng.interesting() & 0xffffff]);
      return;
    case 5:
    case 6:
      f.payload = mutatePayload(rng, f.payload);
      return;
    case 7: {
      // splice in frames of another seed
      const d = rng.pick(donors);
      const from = rng.int(d.length);
      frames.splice(i, 0, ...d.slice(from, from + rng.range(1, 4)).map((x) => ({ ...x, payload: Buffer.from(x.payload) })));
      return;
    }
    case 8: {
      // duplicate: a few, or a flood
      const n = rng.chance(0.15) ? rng.range(100, 3000) : rng.range(1, 5);
      const size = 9 + f.payload.length;
      const copies = Math.max(1, Math.min(n, Math.floor(MAX_INPUT / Math.max(1, size) / 2)));
      frames.splice(i, 0, ...Array.from({ length: copies }, () => ({ ...f })));
      return;
    }
    case 9: {
      const j = lo + rng.int(frames.length - lo);
      [frames[i], frames[j]] = [frames[j]!, frames[i]!];
      return;
    }
    case 10:
      frames.splice(i, 1);
      return;
    case 11:
      if (f.type === T.HEADERS && f.payload.length > 1) frames.splice(i, 1, ...splitBlock(f, Array.from({ length: rng.range(1, 4) }, () => rng.int(f.payload.length))));
      else frames.splice(i, 0, randomFrame(rng, sids));
      return;
    case 12:
      if (f.type === T.DATA || f.type === T.HEADERS) frames[i] = padded(f, rng.chance(0.5) ? rng.int(256) : f.payload.length);
      return;
    case 13: {
      // a big header block: many fields, or one huge value
      const fields: [string, string][] = rng.chance(0.5) ? Array.from({ length: rng.range(50, 400) }, (_, k) => [`x-h${k}`, "v".repeat(rng.int(200))]) : [["x-big", "b".repeat(rng.range(10_000, 100_000))]];
      const big: FFrame = { type: T.HEADERS, flags: F.END_HEADERS, stream: (rng.pick([...sids, 1]) | 1) >>> 0, payload: headerBlock([...grpcRequestFields(CONFIG_LIST), ...fields]) };
      frames.splice(i, 0, ...splitBlock(big, Array.from({ length: Math.ceil(big.payload.length / 16_000) }, (_, k) => (k + 1) * 16_000)));
      return;
    }
    case 14: // a table size update or a bad HPACK prefix in front of a block
      if (f.type === T.HEADERS || f.type === T.CONTINUATION) f.payload = Buffer.concat([Buffer.from(rng.pick([[0x3f, 0xe1, 0x1f], [0x20], [0x3f, 0xff, 0xff, 0xff, 0xff, 0x0f], [0xff, 0xff, 0xff, 0xff, 0xff], [0x7e], [0x40, 0x85]])), f.payload]);
      return;
    default:
      frames.splice(at(), 0, randomFrame(rng, sids));
  }
}

// ---- byte level and TCP writes ----

function mutateBytes(rng: Rng, b: Buffer): Buffer {
  let out = Buffer.from(b);
  for (let n = rng.range(1, 4); n > 0; n--) {
    const at = rng.int(out.length + 1);
    switch (rng.int(4)) {
      case 0:
        if (out.length > 0) out[Math.min(at, out.length - 1)]! ^= 1 << rng.int(8);
        break;
      case 1:
        out = Buffer.concat([out.subarray(0, at), rng.bytes(rng.range(1, 16)), out.subarray(at)]);
        break;
      case 2:
        out = Buffer.concat([out.subarray(0, at), out.subarray(Math.min(out.length, at + rng.range(1, 16)))]);
        break;
      default:
        if (out.length > 0) out[Math.min(at, out.length - 1)] = rng.int(256);
    }
  }
  return out;
}

/** Cut `b` into socket writes: whole, a few random cuts, or byte by byte at the start (frames split mid-header). */
function cut(rng: Rng, b: Buffer): Buffer[] {
  const mode = rng.int(4);
  if (mode === 0 || b.length < 2) return [b];
  if (mode === 1) {
    const head = Math.min(b.length, rng.range(1, 48));
    return [...Array.from({ length: head }, (_, i) => b.subarray(i, i + 1)), b.subarray(head)].filter((c) => c.length > 0);
  }
  const points = [...new Set(Array.from({ length: rng.range(1, 8) }, () => rng.range(1, b.length - 1)))].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let at = 0;
  for (const p of points) {
    out.push(b.subarray(at, p));
    at = p;
  }
  out.push(b.subarray(at));
  return out;
}

// ---- the gRPC layer on valid framing ----

const TIMEOUTS = ["-1S", "1.5S", "1 S", "99999999999S", "1n", "0m", "S", "1", "100000000H", "1u", "99999999m", "1M", "00000001S", "", " 1S"];
const ENCODINGS = ["gzip", "deflate", "identity", "br", "snappy", "", "gzip, deflate", "GZIP"];

function mutateProto(rng: Rng, b: Buffer): Buffer {
  switch (rng.int(5)) {
    case 0: // a field with a random tag and wire type
      return Buffer.concat([b, Buffer.from([rng.int(256), rng.int(256)]), rng.bytes(rng.int(8))]);
    case 1: // a length-delimited field claiming more than there is
      return Buffer.concat([b, Buffer.from([(rng.range(1, 15) << 3) | 2, 0xff, 0xff, 0xff, 0x0f]), rng.bytes(rng.int(4))]);
    case 2: // a varint that never ends
      return Buffer.concat([b, Buffer.from([(rng.range(1, 15) << 3) | 0]), Buffer.alloc(rng.range(10, 40), 0xff)]);
    case 3: // invalid UTF-8 in a string field
      return Buffer.concat([b, Buffer.from([(rng.range(1, 4) << 3) | 2, 3, 0xc3, 0x28, 0xff])]);
    default:
      return mutatePayload(rng, b);
  }
}

/** A well-framed call whose gRPC layer is mutated (see the file comment). */
function grpcInput(rng: Rng, label: string): { frames: FFrame[]; label: string } {
  const m = rng.pick(METHODS);
  const extra: [string, string][] = [];
  let msg = sampleMessage(rng, m);
  const notes: string[] = [m.path];
  if (rng.chance(0.6)) {
    msg = mutateProto(rng, msg);
    notes.push("proto");
  }
  let flag = 0;
  if (rng.chance(0.25)) {
    const enc = rng.pick(ENCODINGS);
    extra.push(["grpc-encoding", enc]);
    notes.push(`enc=${enc}`);
    if (rng.chance(0.8)) {
      flag = 1;
      msg = enc.startsWith("deflate") ? deflateSync(msg) : gzipSync(rng.chance(0.1) ? Buffer.alloc(rng.range(1, 16) << 20) : msg);
      if (rng.chance(0.3)) msg = mutatePayload(rng, msg);
    }
  } else if (rng.chance(0.1)) flag = 1;
  if (rng.chance(0.1)) flag = rng.int(256);
  if (rng.chance(0.2)) {
    const t = rng.pick(TIMEOUTS);
    extra.push(["grpc-timeout", t]);
    notes.push(`timeout=${JSON.stringify(t)}`);
  }
  if (rng.chance(0.1)) extra.push([rng.pick(["content-type", "te", "x-bin-bin", "grpc-accept-encoding", ":path", "x-api-key"]), rng.pick(["application/grpc+proto", "application/json", "", "!!", "trailers", "\u00ff"])]);
  let body = grpcFrame(msg, flag);
  if (rng.chance(0.3)) {
    // the prefix lies about the length, or the message is cut off
    if (rng.chance(0.5)) body.writeUInt32BE(rng.interesting() >>> 0, 1);
    else body = body.subarray(0, rng.int(body.length));
    notes.push("prefix");
  }
  if (rng.chance(0.15)) body = Buffer.concat([body, body, grpcFrame(rng.bytes(rng.int(20)))]);
  // DATA frames of up to 16 KiB (or random sizes), END_STREAM on the last unless the call is left open
  const frames: FFrame[] = [req(1, m.path, extra)];
  const open = rng.chance(0.1);
  let at = 0;
  do {
    const n = Math.min(body.length - at, rng.chance(0.5) ? 16_384 : rng.range(1, 2000));
    frames.push(data(1, body.subarray(at, at + n), false));
    at += n;
  } while (at < body.length && frames.length < 600);
  if (!open) frames[frames.length - 1]!.flags |= F.END_STREAM;
  if (rng.chance(0.2)) frames.push(rst(1, rng.int(14)));
  return { frames, label: `${label} grpc ${notes.join(" ")}` };
}

/**
 * Input `index` of run `seed`: a seed's frames with 1-6 frame-level mutations (60%), the gRPC-layer generator (30%), or
 * a byte-level mutation of a seed (10%); then cut into socket writes.
 */
export function makeInput(seed: number, index: number, corpus: { name: string; bytes: Buffer }[]): FuzzInput {
  const rng = new Rng(seed, index);
  const parsed = corpus.map((c) => ({ name: c.name, ...parseStream(c.bytes) }));
  const pickSeed = rng.int(parsed.length);
  const base = parsed[pickSeed]!;
  const kind = rng.int(10);
  let bytes: Buffer;
  let label: string;
  if (kind < 6) {
    const frames = base.frames.map((f) => ({ ...f, payload: Buffer.from(f.payload) }));
    const n = rng.range(1, 6);
    for (let k = 0; k < n; k++) mutateFrames(rng, frames, parsed.map((p) => p.frames));
    bytes = serialize(frames, [], false);
    bytes = Buffer.concat([base.preface ? PREFACE : Buffer.alloc(0), bytes]);
    label = `frames(${n}) of ${base.name}`;
  } else if (kind < 9) {
    const g = grpcInput(rng, "valid framing");
    bytes = serialize(g.frames);
    label = g.label;
  } else {
    bytes = mutateBytes(rng, Buffer.concat([base.preface ? PREFACE : Buffer.alloc(0), serialize(base.frames, [], false), base.tail]));
    label = `bytes of ${base.name}`;
  }
  if (bytes.length > MAX_INPUT) bytes = bytes.subarray(0, MAX_INPUT);
  return { label: `#${index} ${label}`, chunks: cut(rng, bytes), halfClose: rng.chance(0.1) };
}
