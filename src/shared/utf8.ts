import { isUtf8 } from "node:buffer";
import { echo } from "./echo.js";

/**
 * Strict UTF-8 for request text. `Buffer.toString("utf8")` turns invalid bytes into U+FFFD, which the gateway then
 * stored and forwarded as if the caller had sent it; input text must be valid UTF-8 instead.
 */

/** Offset of the first byte that does not start or continue a valid UTF-8 sequence (bytes.length when all valid). */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    let n: number;
    let min: number;
    if (b < 0x80) {
      i++;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) [n, min] = [1, 0x80];
    else if (b >= 0xe0 && b <= 0xef) [n, min] = [2, 0x800];
    else if (b >= 0xf0 && b <= 0xf4) [n, min] = [3, 0x10000];
    else return i;
    let cp = b & (0x3f >> n);
    for (let j = 1; j <= n; j++) {
      const c = bytes[i + j];
      if (c === undefined || (c & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n + 1;
  }
  return i;
}

/** `bytes` as text, or the offset of the first invalid byte when they are not valid UTF-8. */
export function decodeUtf8(bytes: Uint8Array): { text: string } | { invalidAt: number } {
  if (isUtf8(bytes)) return { text: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8") };
  return { invalidAt: firstInvalidUtf8(bytes) };
}

const REPLACEMENT_BYTES = Buffer.from([0xef, 0xbf, 0xbd]);

/**
 * Where in a JSON body with invalid UTF-8 the bad bytes are, as a member path ("cloudevent.source", "items[2]") when
 * it can tell, else as a byte offset. Only runs on the error path: decodes leniently, parses, and takes the first
 * key or string holding U+FFFD, which is exact unless the body also holds a real U+FFFD.
 */
export function locateInvalidUtf8InJson(bytes: Uint8Array, invalidAt: number): string {
  const atOffset = `at byte offset ${invalidAt}`;
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lossless = !buf.includes(REPLACEMENT_BYTES) && !/\\u[fF][fF][fF][dD]/.test(text);
  if (!lossless) return atOffset;
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch {
    return atOffset;
  }
  const find = (v: unknown, path: string): string | undefined => {
    if (typeof v === "string") return v.includes("\ufffd") ? path || "the body" : undefined;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const hit = find(v[i], `${path}[${i}]`);
        if (hit) return hit;
      }
      return undefined;
    }
    if (typeof v === "object" && v !== null) {
      for (const [k, member] of Object.entries(v)) {
        const at = path ? `${path}.${k}` : k;
        if (k.includes("\ufffd")) return `a member name in ${path || "the body"}`;
        const hit = find(member, at);
        if (hit) return hit;
      }
    }
    return undefined;
  };
  const field = find(root, "");
  return field ? `in ${echo(field)}` : atOffset;
}
