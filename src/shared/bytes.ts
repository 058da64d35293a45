/** `b` as a Buffer: itself when it is one, else a view of the same memory (no copy). */
export function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}
