import type { DeleteBulkResult } from "./state-types.js";

/** The bulk delete message: how many of the requested keys were deleted. */
export function deleteBulkMessage(r: DeleteBulkResult): string {
  return `deleted ${r.deleted.length} of ${r.requested} requested keys`;
}
