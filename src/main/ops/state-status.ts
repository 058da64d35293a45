import type { DeleteBulkResult } from "./state-types.js";

/** The in-band Status of a successful state write (docs/contract.md "Status object"). */
export interface StatusObject {
  success: boolean;
  status: string;
  message: string;
}

/** `{success: true, status: "OK", message}`. */
export function okStatus(message = ""): StatusObject {
  return { success: true, status: "OK", message };
}

/** The bulk delete message: how many of the requested keys were deleted. */
export function deleteBulkMessage(r: DeleteBulkResult): string {
  return `deleted ${r.deleted.length} of ${r.requested} requested keys`;
}
