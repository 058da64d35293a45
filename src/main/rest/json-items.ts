import type { StoredItem } from "../../runtime/state-port.js";
import { freeBuffer } from "./free-buffer.js";

/** Serialize about this many characters, then let the event loop run other requests before going on. */
const SLICE_CHARS = 128 * 1024;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The JSON body `{"items":[{key,value,etag}...]}` (plus `"token"` when given) of a state reply, built in slices of
 * about 128 Ki characters with a turn of the event loop between them, so a page of large values does not hold the
 * loop for its whole serialization (the reply is bounded by --max-reply-bytes; this bounds each slice of the work).
 * A long value is escaped piecewise: JSON escaping is per character, and a surrogate pair cut in two becomes two
 * `\uXXXX` escapes that a JSON parser joins again. Aborted with `signal` when the client goes away mid-way.
 */
export async function jsonItemsBody(items: readonly StoredItem[], token: string | undefined, signal?: AbortSignal): Promise<Buffer> {
  const parts: Buffer[] = [Buffer.from('{"items":[')];
  let budget = SLICE_CHARS;
  const spend = async (chars: number): Promise<void> => {
    budget -= chars;
    if (budget > 0) return;
    budget = SLICE_CHARS;
    await yieldToLoop();
    signal?.throwIfAborted();
  };
  for (let n = 0; n < items.length; n++) {
    const i = items[n]!;
    parts.push(Buffer.from(`${n > 0 ? "," : ""}{"key":${JSON.stringify(i.key)},"value":"`));
    for (let at = 0; at < i.value.length; at += SLICE_CHARS) {
      const piece = JSON.stringify(i.value.slice(at, at + SLICE_CHARS));
      parts.push(Buffer.from(piece.slice(1, -1)));
      await spend(piece.length);
    }
    parts.push(Buffer.from(`","etag":${JSON.stringify(i.etag)}}`));
    await spend(i.key.length + i.etag.length);
  }
  parts.push(Buffer.from(token === undefined ? "]}" : `],"token":${JSON.stringify(token)}}`));
  const body = Buffer.concat(parts);
  // The slices (as many bytes as the body) are garbage now: give them back at once rather than at the next collection.
  for (const part of parts) freeBuffer(part);
  return body;
}
