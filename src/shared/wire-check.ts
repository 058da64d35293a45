import protobuf from "protobufjs";
import { Code } from "./code.js";
import { GatewayError } from "./gateway-error.js";

/**
 * A strict pass over protobuf wire bytes, run before a request is decoded. protobufjs is lenient where the gateway
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

const utf8 = new TextDecoder("utf-8", { fatal: true });

type Kind = { kind: "string" | "message" | "other"; name: string; type?: protobuf.Type; map?: protobuf.MapField };

function kindOf(field: protobuf.Field, path: string): Kind {
  const name = path ? `${path}.${field.name}` : field.name;
  if (field instanceof protobuf.MapField) return { kind: "message", name, map: field };
  if (field.type === "string") return { kind: "string", name };
  if (field.resolvedType instanceof protobuf.Type) return { kind: "message", name, type: field.resolvedType };
  return { kind: "other", name };
}

/** A map entry's fields: 1 is the key, 2 the value. */
function mapEntryKind(map: protobuf.MapField, id: number, name: string): Kind | undefined {
  if (id === 1) return { kind: map.keyType === "string" ? "string" : "other", name: `${name} key` };
  if (id !== 2) return undefined;
  if (map.type === "string") return { kind: "string", name: `${name} value` };
  if (map.resolvedType instanceof protobuf.Type) return { kind: "message", name: `${name} value`, type: map.resolvedType };
  return { kind: "other", name: `${name} value` };
}

const bad = (problem: string): GatewayError => new GatewayError(Code.INVALID_ARGUMENT, `the request message ${problem}`);

function walk(buf: Uint8Array, start: number, end: number, fieldAt: (id: number) => Kind | undefined, path: string, depth: number): void {
  if (depth > MAX_WIRE_DEPTH) throw bad(`nests more than ${MAX_WIRE_DEPTH} messages deep${path ? ` at ${path}` : ""}`);
  let pos = start;
  const where = (k: Kind | undefined, id: number): string => (k ? `field ${k.name}` : `field number ${id}${path ? ` inside ${path}` : ""}`);
  const varint = (what: string): number => {
    let value = 0;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw bad(`is truncated: ${what} runs past the end of the message`);
      const b = buf[pos++]!;
      value += (b & 0x7f) * 2 ** (7 * i);
      if (b < 0x80) return value;
    }
    throw bad(`is malformed: ${what} is a varint longer than 10 bytes`);
  };
  while (pos < end) {
    const tag = varint(path ? `a tag inside ${path}` : "a tag");
    const id = Math.floor(tag / 8);
    const wire = tag % 8;
    if (id === 0) throw bad(`is malformed: field number 0${path ? ` inside ${path}` : ""}`);
    const k = fieldAt(id);
    if (k && k.kind !== "other" && wire !== 2) throw bad(`is malformed: ${where(k, id)} has wire type ${wire}, expected 2 (length-delimited)`);
    switch (wire) {
      case 0:
        varint(where(k, id));
        break;
      case 1:
      case 5: {
        const n = wire === 1 ? 8 : 4;
        if (pos + n > end) throw bad(`is truncated: ${where(k, id)} runs past the end of the message`);
        pos += n;
        break;
      }
      case 2: {
        const len = varint(`the length of ${where(k, id)}`);
        if (len > end - pos) throw bad(`is truncated: ${where(k, id)} declares ${len} bytes but ${end - pos} remain`);
        const fieldEnd = pos + len;
        if (k?.kind === "string") {
          try {
            utf8.decode(buf.subarray(pos, fieldEnd));
          } catch {
            throw bad(`is invalid: ${where(k, id)} is not valid UTF-8`);
          }
        } else if (k?.kind === "message") {
          const { map, type, name } = k;
          const inner = map ? (n: number) => mapEntryKind(map, n, name) : (n: number) => (type!.fieldsById[n] ? kindOf(type!.fieldsById[n]!, name) : undefined);
          walk(buf, pos, fieldEnd, inner, name, depth + 1);
        }
        pos = fieldEnd;
        break;
      }
      default:
        throw bad(`is malformed: ${where(k, id)} uses wire type ${wire}, which proto3 messages do not have`);
    }
  }
}

/** INVALID_ARGUMENT saying what is wrong when `buf` is not a whole, well-formed `type` message; else undefined. */
export function checkWire(type: protobuf.Type, buf: Uint8Array): GatewayError | undefined {
  try {
    walk(buf, 0, buf.length, (id) => (type.fieldsById[id] ? kindOf(type.fieldsById[id]!, "") : undefined), "", 0);
    return undefined;
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
}
