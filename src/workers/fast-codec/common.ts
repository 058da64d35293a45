/**
 * What the compiled fast paths (encode.ts: JSON -> binary, decode.ts: binary -> JSON) share: the bail-out signal,
 * which descriptors they handle, and the 64-bit integer helpers.
 *
 * The fast paths are exact copies of @bufbuild/protobuf's behaviour on a subset of inputs. Whatever falls outside
 * that subset (a value the library would reject, or accept only through a rule the fast path does not copy) throws
 * BAIL, and codec.ts reruns the library, which then produces the same bytes, text or error as without a fast path.
 */
import type { DescEnum, DescMessage } from "@bufbuild/protobuf";

/** Thrown (never returned to a caller) when the fast path is not sure; codec.ts falls back to the library. */
const BAIL: unique symbol = Symbol("fast-codec: not sure, use the library");

/** Give up on this conversion (the caller returns undefined and codec.ts runs the library). */
export function bail(): never {
  throw BAIL;
}

/**
 * Nesting depth past which the fast paths give up. The library stops at 100 (its recursionLimit, counting messages and
 * Struct/Value levels); bailing well before that leaves the limit's error to the library.
 */
export const MAX_DEPTH = 64;

const EDITION_PROTO3 = 999;
export const IMPLICIT = 2;
const LEGACY_REQUIRED = 3;

/** The largest |seconds| of a google.protobuf.Duration (about 10,000 years), as the library checks it. */
export const DURATION_SECONDS_MAX = 315_576_000_000;

/** Well-known types whose JSON form the fast paths write themselves. */
export type WktKind = "timestamp" | "duration" | "wrapper" | "struct" | "value" | "listValue";

/** The nine wrapper types (google.protobuf.*Value): a JSON scalar or null, never an object. */
export const WRAPPER_TYPE_NAMES: readonly string[] = [
  "google.protobuf.DoubleValue",
  "google.protobuf.FloatValue",
  "google.protobuf.Int64Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.Int32Value",
  "google.protobuf.UInt32Value",
  "google.protobuf.BoolValue",
  "google.protobuf.StringValue",
  "google.protobuf.BytesValue",
];
const wrapperNames = new Set(WRAPPER_TYPE_NAMES);

/** One direction's writers for the kinds of message the fast path handles (the encoder and the decoder each pass theirs). */
export interface KindWriters<W> {
  timestamp: W;
  duration: W;
  struct: W;
  value: W;
  listValue: W;
  wrapper(scalar: number): W;
  /** A plain message's compiled writer (the compiler caches it itself, so recursive types find it while compiling). */
  plain(desc: DescMessage): W;
}

/**
 * One direction's body writers per descriptor: a well-known kind's picked from its KindWriters, a plain message's
 * compiled once (writerOfKind). Only a plain message's writer is taken at the top level (`plainOf`).
 */
export class KindWriterCache<W extends object> {
  private readonly cache = new WeakMap<DescMessage, W | null>();
  private readonly plain = new WeakSet<W>();

  constructor(private readonly writers: KindWriters<W>) {}

  /** The writer of `desc`, or null when its type is "slow" or cannot be compiled here. */
  of(desc: DescMessage): W | null {
    return writerOfKind(desc, this.cache, this.writers);
  }

  /** Record the compiled writer of plain message `desc`, before its fields compile, so recursive types find it. */
  addPlain(desc: DescMessage, writer: W): void {
    this.cache.set(desc, writer);
    this.plain.add(writer);
  }

  /** The writer of `desc` when it is a plain message type, else null (the library converts it). */
  plainOf(desc: DescMessage): W | null {
    const w = this.of(desc);
    return w !== null && this.plain.has(w) ? w : null;
  }
}

/**
 * The writer of `desc` in one direction, null when its kind is "slow" or it cannot be compiled here; compiled or
 * picked once per descriptor.
 */
function writerOfKind<W>(desc: DescMessage, cache: WeakMap<DescMessage, W | null>, writers: KindWriters<W>): W | null {
  const known = cache.get(desc);
  if (known !== undefined) return known;
  const kind = messageKind(desc);
  if (kind === "plain") {
    try {
      return writers.plain(desc);
    } catch {
      // Compilation cannot succeed later (code generation from strings disallowed): remember, so every conversion of
      // this type goes straight to the library instead of building and rejecting the source again.
      cache.set(desc, null);
      return null;
    }
  }
  const writer = kind === "slow" ? null : kind === "wrapper" ? writers.wrapper(desc.fields[0]!.scalar!) : writers[kind];
  cache.set(desc, writer);
  return writer;
}

/**
 * How a message type is handled: "plain" (its fields, generic plan), a well-known JSON form the fast path writes, or
 * "slow" (Any, FieldMask, other special forms, proto2/editions files, groups, required fields, names the plain-object
 * tricks below cannot carry). A field of a "slow" type makes the fast path bail only when that field is present.
 */
export function messageKind(desc: DescMessage): "plain" | "slow" | WktKind {
  const name = desc.typeName;
  if (name.startsWith("google.protobuf.")) {
    switch (name) {
      case "google.protobuf.Timestamp":
        return "timestamp";
      case "google.protobuf.Duration":
        return "duration";
      case "google.protobuf.Struct":
        return "struct";
      case "google.protobuf.Value":
        return "value";
      case "google.protobuf.ListValue":
        return "listValue";
      case "google.protobuf.Any":
      case "google.protobuf.FieldMask":
        return "slow";
    }
    if (wrapperNames.has(name)) {
      const f = desc.fields[0];
      return f !== undefined && f.fieldKind === "scalar" && f.name === "value" && f.number === 1 ? "wrapper" : "slow";
    }
  }
  if (desc.file.edition !== EDITION_PROTO3) return "slow";
  let oneofs = 0;
  for (const f of desc.fields) {
    if (f.presence === LEGACY_REQUIRED || ("delimitedEncoding" in f && f.delimitedEncoding)) return "slow";
    // A key that is an array index would be reordered by the JS object the library builds; a key on Object.prototype
    // ("constructor", "__proto__") behaves differently on plain objects. Neither appears in real APIs.
    if (badKey(f.name) || badKey(f.jsonName)) return "slow";
    if (f.fieldKind === "scalar" && f.scalar === 9 /* STRING */ && !f.utf8Validation) return "slow";
    if (f.fieldKind === "list" && f.listKind === "scalar" && f.scalar === 9 && !f.utf8Validation) return "slow";
  }
  for (const o of desc.oneofs) if (o.kind === "oneof") oneofs++;
  if (oneofs > 30) return "slow"; // one bit each in a 32-bit mask
  return "plain";
}

function badKey(k: string): boolean {
  return k in Object.prototype || /^[0-9]/.test(k);
}

/** An enum the fast paths handle: open (proto3), not google.protobuf.NullValue (its JSON is null). */
export function enumSupported(e: DescEnum): boolean {
  return e.open && e.typeName !== "google.protobuf.NullValue" && e.values.length > 0;
}

// Scalar type numbers (google.protobuf.FieldDescriptorProto.Type), as @bufbuild's ScalarType enum.
export const S = {
  DOUBLE: 1,
  FLOAT: 2,
  INT64: 3,
  UINT64: 4,
  INT32: 5,
  FIXED64: 6,
  FIXED32: 7,
  BOOL: 8,
  STRING: 9,
  BYTES: 12,
  UINT32: 13,
  SFIXED32: 15,
  SFIXED64: 16,
  SINT32: 17,
  SINT64: 18,
} as const;

/** The wire type a scalar (or enum, as INT32) is written with when not packed. */
export function wireTypeOf(scalar: number): number {
  switch (scalar) {
    case S.DOUBLE:
    case S.FIXED64:
    case S.SFIXED64:
      return 1;
    case S.FLOAT:
    case S.FIXED32:
    case S.SFIXED32:
      return 5;
    case S.STRING:
    case S.BYTES:
      return 2;
    default:
      return 0;
  }
}

const TWO32 = 4294967296;

/** Decimal text of the signed 64-bit integer hi:lo (two's complement words). */
export function int64Text(lo: number, hi: number): string {
  if (hi >= -0x200000 && hi < 0x200000) return String(hi * TWO32 + (lo >>> 0));
  return ((BigInt(hi) << 32n) + BigInt(lo >>> 0)).toString();
}

/** Decimal text of the unsigned 64-bit integer hi:lo. */
export function uint64Text(lo: number, hi: number): string {
  const h = hi >>> 0;
  if (h < 0x200000) return String(h * TWO32 + (lo >>> 0));
  return ((BigInt(h) << 32n) + BigInt(lo >>> 0)).toString();
}
