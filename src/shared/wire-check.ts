import { isUtf8 } from "node:buffer";
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { Code } from "./code.js";
import { GatewayError } from "./gateway-error.js";

/**
 * A strict pass over protobuf wire bytes, run before a request is decoded (shapes from the @bufbuild/protobuf
 * descriptors of the request type). protobufjs, proto-loader's codec, is lenient where the gateway
 * must not be: its Node reader cuts a length-delimited field that runs past the end of the message short (`0a 64 61`
 * decoded as `{service: "a"}`), and it decodes invalid UTF-8 in `string` fields to U+FFFD, which was then stored.
 * This walk refuses both, naming the field, so nothing runs on a message the caller did not send whole.
 *
 * Checked: every tag, varint and length stays inside its message; `string` fields (map keys and values included) are
 * valid UTF-8; string and message fields use the length-delimited wire type; nesting stays under MAX_WIRE_DEPTH.
 * Proto3 messages have no groups, so the group wire types (3, 4) are refused like the undefined ones (6, 7).
 */

/** How deeply messages may nest on the wire. */
export const MAX_WIRE_DEPTH = 100;

/** What the walk needs to know about one field number of a message: its kind, its name and, for messages, its shape. */
interface Slot {
  kind: "string" | "message" | "other";
  name: string;
  shape?: Shape;
}
type Shape = Map<number, Slot>;

// Shapes are built once per message type (and map field) and reused by every request.
const shapes = new WeakMap<object, Shape>();

function shapeOf(type: DescMessage): Shape {
  let shape = shapes.get(type);
  if (shape) return shape;
  shape = new Map();
  shapes.set(type, shape); // before the fields: recursive types refer to their own shape
  for (const field of type.fields) shape.set(field.number, slotOf(field));
  return shape;
}

function slotOf(field: DescField): Slot {
  switch (field.fieldKind) {
    case "map": {
      let entry = shapes.get(field);
      if (!entry) {
        const value: Slot =
          field.mapKind === "scalar" && field.scalar === ScalarType.STRING
            ? { kind: "string", name: "value" }
            : field.mapKind === "message"
              ? { kind: "message", name: "value", shape: shapeOf(field.message) }
              : { kind: "other", name: "value" };
        entry = new Map([
          [1, { kind: field.mapKey === ScalarType.STRING ? "string" : "other", name: "key" }],
          [2, value],
        ]);
        shapes.set(field, entry);
      }
      return { kind: "message", name: field.name, shape: entry };
    }
    case "scalar":
      return { kind: field.scalar === ScalarType.STRING ? "string" : "other", name: field.name };
    case "message":
      return { kind: "message", name: field.name, shape: shapeOf(field.message) };
    case "list":
      if (field.listKind === "scalar" && field.scalar === ScalarType.STRING) return { kind: "string", name: field.name };
      if (field.listKind === "message") return { kind: "message", name: field.name, shape: shapeOf(field.message) };
      return { kind: "other", name: field.name };
    case "enum":
      return { kind: "other", name: field.name };
  }
}

const bad = (problem: string): GatewayError => new GatewayError(Code.INVALID_ARGUMENT, `the request message ${problem}`);

/** Read position shared by the walk (one check runs at a time: it is synchronous). */
const cur = { pos: 0 };
const TRUNCATED = -1;
const TOO_LONG = -2;

/** A varint at cur.pos, or TRUNCATED / TOO_LONG. No closures on this path: it runs for every field of every request. */
function varint(buf: Uint8Array, end: number): number {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (cur.pos >= end) return TRUNCATED;
    const b = buf[cur.pos++]!;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return value;
    scale *= 128;
  }
  return TOO_LONG;
}

function varintError(result: number, what: string): GatewayError {
  return result === TRUNCATED ? bad(`is truncated: ${what} runs past the end of the message`) : bad(`is malformed: ${what} is a varint longer than 10 bytes`);
}

function fieldName(slot: Slot | undefined, id: number, path: string): string {
  return slot ? `field ${path ? `${path}.` : ""}${slot.name}` : `field number ${id}${path ? ` inside ${path}` : ""}`;
}

function walk(buf: Uint8Array, end: number, shape: Shape, path: string, depth: number): void {
  if (depth > MAX_WIRE_DEPTH) throw bad(`nests more than ${MAX_WIRE_DEPTH} messages deep at ${path}`);
  while (cur.pos < end) {
    const tag = varint(buf, end);
    if (tag < 0) throw varintError(tag, `a tag${path ? ` inside ${path}` : ""}`);
    const id = Math.floor(tag / 8);
    const wire = tag % 8;
    if (id === 0) throw bad(`is malformed: field number 0${path ? ` inside ${path}` : ""}`);
    const slot = shape.get(id);
    if (slot && slot.kind !== "other" && wire !== 2) throw bad(`is malformed: ${fieldName(slot, id, path)} has wire type ${wire}, expected 2 (length-delimited)`);
    switch (wire) {
      case 0: {
        const v = varint(buf, end);
        if (v < 0) throw varintError(v, fieldName(slot, id, path));
        break;
      }
      case 1:
      case 5: {
        const n = wire === 1 ? 8 : 4;
        if (cur.pos + n > end) throw bad(`is truncated: ${fieldName(slot, id, path)} runs past the end of the message`);
        cur.pos += n;
        break;
      }
      case 2: {
        const len = varint(buf, end);
        if (len < 0) throw varintError(len, `the length of ${fieldName(slot, id, path)}`);
        if (len > end - cur.pos) throw bad(`is truncated: ${fieldName(slot, id, path)} declares ${len} bytes but ${end - cur.pos} remain`);
        const fieldEnd = cur.pos + len;
        if (slot?.kind === "string") {
          // isUtf8 validates in place; decoding here would copy every string of every request once more.
          if (!isUtf8(buf.subarray(cur.pos, fieldEnd))) throw bad(`is invalid: ${fieldName(slot, id, path)} is not valid UTF-8`);
        } else if (slot?.kind === "message") {
          walk(buf, fieldEnd, slot.shape!, path ? `${path}.${slot.name}` : slot.name, depth + 1);
        }
        cur.pos = fieldEnd;
        break;
      }
      default:
        throw bad(`is malformed: ${fieldName(slot, id, path)} uses wire type ${wire}, which proto3 messages do not have`);
    }
  }
}

/** INVALID_ARGUMENT saying what is wrong when `buf` is not a whole, well-formed `type` message; else undefined. */
export function checkWire(type: DescMessage, buf: Uint8Array): GatewayError | undefined {
  try {
    cur.pos = 0;
    walk(buf, buf.length, shapeOf(type), "", 0);
    return undefined;
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
}
