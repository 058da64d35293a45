import { MessageChannel } from "node:worker_threads";

/**
 * The ArrayBuffer behind `bytes` when it can be handed over or freed whole (it is `bytes`' own, not a slice of Node's
 * shared Buffer pool nor a SharedArrayBuffer), else undefined.
 */
export function ownBuffer(bytes: Uint8Array): ArrayBuffer | undefined {
  const b = bytes.buffer;
  return b instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === b.byteLength && b.byteLength > 0 ? b : undefined;
}

/**
 * Give `bytes`' memory back now rather than at some later garbage collection: a large reply's bytes live outside the
 * V8 heap, and V8 frees them only when a collection finds the Buffer unreachable. A thread that has just written (or
 * dropped) hundreds of MiB of replies and then goes quiet allocates nothing, so nothing collects: measured, 10
 * stalled clients of 30 MiB replies left 150 MiB per uWS thread held after every one of them had closed. Moving the
 * ArrayBuffer into a message (transfer) detaches it here; closing the channel before the message is received drops
 * the message with the memory, at once (a port that received it would only have made a new ArrayBuffer of it, again
 * waiting for a collection). Only for bytes their owner never reads again (every view of them becomes empty); a slice
 * of the Buffer pool or a shared buffer is left to the collector. Costs one MessageChannel: for large buffers only.
 */
export function freeBuffer(bytes: Uint8Array): void {
  const b = ownBuffer(bytes);
  if (!b) return;
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(null, [b]);
  port1.close();
  port2.close();
}
