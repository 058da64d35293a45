import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { StoredItem } from "../runtime/state-port.js";
import { freeBuffer } from "../http/free-buffer.js";

/** Serialize about this many characters, then let the event loop run other requests before going on. */
const SLICE_CHARS = 128 * 1024;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The bytes of state replies being built at once in this thread, bounded (`--max-unread-reply-bytes`, the figure each
 * HTTP thread may hold for clients that have not read): replies are built on the main thread whatever thread will
 * write them, and each is built into a Buffer of its whole size before any bound downstream sees it. Measured without
 * it: 40 requests for a 7.5 MiB page arriving at once had the main thread hold 293 MiB of them (its
 * `process.memoryUsage().arrayBuffers`) before the HTTP threads refused all but their 64 MiB each, RSS +350 MiB.
 */
export interface ReplyBuildBudget {
  readonly maxBytes: number;
  /** Bytes of the replies being built now. */
  readonly building: number;
  /** Replies being built now. */
  readonly count: number;
  /** Count a reply of `bytes` until `release`: yes when it fits beside the others or nothing else is being built. */
  admit(bytes: number): boolean;
  release(bytes: number): void;
}

/** A ReplyBuildBudget of `maxBytes`. */
export function createReplyBuildBudget(maxBytes: number): ReplyBuildBudget {
  let building = 0;
  let count = 0;
  return {
    maxBytes,
    get building() {
      return building;
    },
    get count() {
      return count;
    },
    admit(bytes) {
      if (count > 0 && building + bytes > maxBytes) return false;
      building += bytes;
      count++;
      return true;
    },
    release(bytes) {
      building -= bytes;
      count--;
    },
  };
}

/**
 * The JSON body `{"items":[{key,value,etag}...]}` (plus `"token"` when given) of a state reply, built in slices of
 * about 128 Ki characters with a turn of the event loop between them, so a page of large values does not hold the
 * loop for its whole serialization (the reply is bounded by --max-reply-bytes; this bounds each slice of the work).
 * A long value is escaped piecewise: JSON escaping is per character, and a surrogate pair cut in two becomes two
 * `\uXXXX` escapes that a JSON parser joins again. Aborted with `signal` when the client goes away mid-way.
 *
 * Each slice is encoded straight into the reply's one Buffer (sized for the page as if nothing needed escaping, grown
 * when something did) and every Buffer given up is freed at once (free-buffer.ts): a Buffer per slice joined at the
 * end cost the allocator twice the reply, and keeping the slices as strings until the end left them on the V8 heap
 * until a major collection. Either way a 30 MiB page left tens of MiB behind on an idle gateway.
 *
 * With `budget`, the body's size (as sized before escaping) is counted against it from before its Buffer is allocated
 * until it is returned (the caller hands it on in the same turn: moved to the HTTP thread, or counted by the router's
 * unread-reply bound) or given up; when it does not fit, UNAVAILABLE naming the bound, before anything is allocated.
 */
export async function jsonItemsBody(items: readonly StoredItem[], token: string | undefined, signal?: AbortSignal, budget?: ReplyBuildBudget): Promise<Buffer> {
  const head = (i: StoredItem, n: number): string => `${n > 0 ? "," : ""}{"key":${JSON.stringify(i.key)},"value":"`;
  const tail = (i: StoredItem): string => `","etag":${JSON.stringify(i.etag)}}`;
  const end = token === undefined ? "]}" : `],"token":${JSON.stringify(token)}}`;
  let size = 10 + Buffer.byteLength(end);
  items.forEach((i, n) => (size += Buffer.byteLength(head(i, n)) + i.value.length + Buffer.byteLength(tail(i))));
  if (budget && !budget.admit(size)) {
    throw new GatewayError(
      Code.UNAVAILABLE,
      `${budget.count} replies of ${budget.building} bytes are being built, the most this gateway builds at once (--max-unread-reply-bytes ${budget.maxBytes}); retry shortly`,
    );
  }
  try {
    return await build(items, size, head, tail, end, signal);
  } finally {
    budget?.release(size);
  }
}

async function build(
  items: readonly StoredItem[],
  size: number,
  head: (i: StoredItem, n: number) => string,
  tail: (i: StoredItem) => string,
  end: string,
  signal: AbortSignal | undefined,
): Promise<Buffer> {
  let body = Buffer.allocUnsafe(size);
  let at = 0;
  const add = (part: string): void => {
    const bytes = Buffer.byteLength(part);
    if (at + bytes > body.length) {
      const grown = Buffer.allocUnsafe(Math.max(at + bytes, Math.ceil(body.length * 1.5)));
      body.copy(grown, 0, 0, at);
      freeBuffer(body);
      body = grown;
    }
    at += body.write(part, at);
  };
  let budget = SLICE_CHARS;
  const spend = async (chars: number): Promise<void> => {
    budget -= chars;
    if (budget > 0) return;
    budget = SLICE_CHARS;
    await yieldToLoop();
    if (signal?.aborted) {
      freeBuffer(body);
      signal.throwIfAborted();
    }
  };
  add('{"items":[');
  for (let n = 0; n < items.length; n++) {
    const i = items[n]!;
    add(head(i, n));
    for (let from = 0; from < i.value.length; from += SLICE_CHARS) {
      const piece = JSON.stringify(i.value.slice(from, from + SLICE_CHARS));
      add(piece.slice(1, -1));
      await spend(piece.length);
    }
    add(tail(i));
    await spend(i.key.length + i.etag.length);
  }
  add(end);
  if (at === body.length) return body;
  // Escapes or multi-byte characters made it longer than sized: the reply gets a Buffer of its exact length (one it
  // owns whole, so it can be moved to a thread and freed), the grown one is freed.
  const exact = Buffer.allocUnsafe(at);
  body.copy(exact, 0, 0, at);
  freeBuffer(body);
  return exact;
}
