import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";

/**
 * The length-prefixed framing Connect streaming and gRPC-Web share: one flags byte, a 4-byte big-endian length, the
 * payload. Connect marks its end-of-stream message with flag 0x02, gRPC-Web its trailers with 0x80; 0x01 is a
 * compressed payload, which the gateway does not accept (it negotiates no compression).
 */
export interface Envelope {
  flags: number;
  data: Buffer;
}

/** Flag of a compressed payload (both protocols). */
export const FLAG_COMPRESSED = 0x01;
/** Flag of Connect's end-of-stream message. */
export const FLAG_END_STREAM = 0x02;
/** Flag of gRPC-Web's trailers frame. */
export const FLAG_TRAILERS = 0x80;

const HEADER_BYTES = 5;

/** One envelope: the 5-byte prefix and the payload in one buffer (a single uWS write). */
export function envelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + data.byteLength);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, HEADER_BYTES);
  return out;
}

/**
 * The envelopes of a whole request body. INVALID_ARGUMENT naming the problem when the body ends inside an envelope,
 * and UNIMPLEMENTED for a compressed one.
 */
export function parseEnvelopes(body: Buffer): Envelope[] {
  const out: Envelope[] = [];
  let pos = 0;
  while (pos < body.length) {
    if (body.length - pos < HEADER_BYTES) throw new GatewayError(Code.INVALID_ARGUMENT, `request body ends inside an envelope prefix (${body.length - pos} of 5 bytes)`);
    const flags = body[pos]!;
    const length = body.readUInt32BE(pos + 1);
    pos += HEADER_BYTES;
    if (body.length - pos < length) throw new GatewayError(Code.INVALID_ARGUMENT, `request envelope declares ${length} bytes but ${body.length - pos} follow`);
    if (flags & FLAG_COMPRESSED) throw new GatewayError(Code.UNIMPLEMENTED, "compressed request messages are not supported (send them uncompressed)");
    out.push({ flags, data: body.subarray(pos, pos + length) });
    pos += length;
  }
  return out;
}

/**
 * The one request message of a unary or server-streaming call from its envelopes: exactly one data envelope, no other
 * flag set. INVALID_ARGUMENT otherwise.
 */
export function singleMessage(envelopes: readonly Envelope[]): Buffer {
  if (envelopes.length !== 1) throw new GatewayError(Code.INVALID_ARGUMENT, `expected exactly one request message, got ${envelopes.length}`);
  const e = envelopes[0]!;
  if (e.flags !== 0) throw new GatewayError(Code.INVALID_ARGUMENT, `the request message has flags 0x${e.flags.toString(16)}; expected 0`);
  return e.data;
}

const BASE64_GROUP = /^[A-Za-z0-9+/]{2,4}={0,2}$/;

/**
 * Decoder of gRPC-Web text (base64) in chunks of any size. A sender may encode each frame on its own, so padding can
 * appear inside the stream: the text is decoded in groups of four characters, each group on its own (a padded group
 * ends one encoded piece, the next starts fresh). Characters outside base64 are INVALID_ARGUMENT.
 */
export class Base64Chunks {
  private rest = "";

  /** Bytes of every complete 4-character group so far; a partial group waits for the next chunk. */
  push(chunk: string): Buffer {
    const text = this.rest + chunk.replace(/[\r\n]/g, "");
    const whole = text.length - (text.length % 4);
    this.rest = text.slice(whole);
    const parts: Buffer[] = [];
    for (let i = 0; i < whole; i += 4) {
      const group = text.slice(i, i + 4);
      if (!BASE64_GROUP.test(group) || /=[^=]/.test(group)) throw new GatewayError(Code.INVALID_ARGUMENT, `request body is not valid base64 at character ${i}`);
      parts.push(Buffer.from(group, "base64"));
    }
    return Buffer.concat(parts);
  }

  /** The end of the text: INVALID_ARGUMENT when a group is left incomplete. */
  end(): void {
    if (this.rest !== "") throw new GatewayError(Code.INVALID_ARGUMENT, "request body ends inside a base64 group (its length is not a multiple of 4)");
  }
}

/** Decode a whole gRPC-Web text body. */
export function decodeBase64Body(body: Buffer): Buffer {
  const d = new Base64Chunks();
  const out = d.push(body.toString("latin1"));
  d.end();
  return out;
}

/**
 * gRPC-Web's trailers frame: the status and message as HTTP/1 header lines (`grpc-message` percent-encoded as gRPC
 * over HTTP/2 sends it), flag 0x80.
 */
export function trailersFrame(code: Code, message: string): Buffer {
  let text = `grpc-status: ${code}\r\n`;
  if (message !== "") text += `grpc-message: ${percentEncode(message)}\r\n`;
  return envelope(FLAG_TRAILERS, Buffer.from(text, "latin1"));
}

/** gRPC's percent-encoding of grpc-message: printable ASCII except '%' as is, every other UTF-8 byte as %XX. */
export function percentEncode(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
