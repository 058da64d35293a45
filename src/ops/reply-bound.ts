import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { QueryResult, StoredItem } from "../runtime/state-port.js";

/**
 * What one item counts against `--max-reply-bytes`: the UTF-8 bytes of its key, value and etag plus a fixed 16 for
 * framing. That is close to its protobuf size; the REST JSON body can be larger by the escaping of the value.
 */
export function itemBytes(i: StoredItem): number {
  return Buffer.byteLength(i.key) + Buffer.byteLength(i.value) + Buffer.byteLength(i.etag) + 16;
}

/**
 * Cut a query page to `maxBytes`. When the runtime's page tokens are offsets into the sorted result (`offset` is
 * the page's own offset), the page ends at the last item that fits (always at least one) and the token points at
 * the next; the caller pages on with it as with any token. Otherwise the page cannot be split, and a page over the
 * bound is RESOURCE_EXHAUSTED asking for a smaller `page.limit`.
 */
export function boundQueryPage(result: QueryResult, maxBytes: number, offset: number | undefined): QueryResult {
  let size = 0;
  for (let n = 0; n < result.items.length; n++) {
    size += itemBytes(result.items[n]!);
    if (size <= maxBytes) continue;
    if (offset === undefined) {
      throw new GatewayError(
        Code.RESOURCE_EXHAUSTED,
        `query reply exceeds the limit of ${maxBytes} bytes (--max-reply-bytes) after ${n} items; ask for fewer with page.limit`,
      );
    }
    const keep = Math.max(1, n);
    if (keep === result.items.length) return result;
    return { items: result.items.slice(0, keep), token: String(offset + keep) };
  }
  return result;
}

/** Bulk get has no paging: a reply over `maxBytes` is RESOURCE_EXHAUSTED saying how many of the keys fit. */
export function checkBulkReply(items: readonly StoredItem[], maxBytes: number): void {
  let size = 0;
  for (let n = 0; n < items.length; n++) {
    size += itemBytes(items[n]!);
    if (size > maxBytes) {
      throw new GatewayError(
        Code.RESOURCE_EXHAUSTED,
        `bulk get reply exceeds the limit of ${maxBytes} bytes (--max-reply-bytes): the first ${n} of ${items.length} stored keys fit; ask for fewer keys`,
      );
    }
  }
}
