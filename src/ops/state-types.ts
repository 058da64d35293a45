import type { CloudEvent } from "../shared/cloudevent.js";
import type { ChangeNotification__Output } from "../gen/gateway/platform/ChangeNotification.js";
import type { DeleteBulkStateRequest__Output } from "../gen/gateway/platform/DeleteBulkStateRequest.js";
import type { DeleteStateRequest__Output } from "../gen/gateway/platform/DeleteStateRequest.js";
import type { QueryStateRequest__Output } from "../gen/gateway/platform/QueryStateRequest.js";
import type { SaveStateRequest__Output } from "../gen/gateway/platform/SaveStateRequest.js";

/**
 * An operation's input from the generated message type `T` (proto field names, proto-loader's value types): the
 * fields in `Required` must be given, the rest may be left out (REST bodies set fewer fields than gRPC decodes), and
 * `change` is the in-process ChangeInput. A proto field renamed or retyped changes these types, so the gRPC handlers
 * (which pass the decoded request as is) and the REST parsers (rest/state-body.ts) stop compiling until they follow.
 */
type WireInput<T, Required extends keyof T> = Pick<T, Required> & Partial<Omit<T, Required | "change">> & ("change" extends keyof T ? { change?: ChangeInput | null } : unknown);

/** `ChangeNotification`: both fields set selects Tier 1, anything else Tier 0. */
export type ChangeInput = Partial<Pick<ChangeNotification__Output, "topic">> & { cloudevent?: CloudEvent | null };

/** SaveStateRequest (proto field names). */
export type SaveStateInput = WireInput<SaveStateRequest__Output, "service" | "key" | "value">;

/** DeleteStateRequest (proto field names). */
export type DeleteStateInput = WireInput<DeleteStateRequest__Output, "service" | "key">;

/** DeleteBulkStateRequest (proto field names). */
export type DeleteBulkStateInput = Omit<WireInput<DeleteBulkStateRequest__Output, "service">, "keys"> & { keys: readonly string[] };

/** QueryStateRequest (proto field names). `limit` 0 or unset = no limit. */
export type QueryStateInput = WireInput<QueryStateRequest__Output, "service" | "query">;

/** What a bulk delete did: how many keys were asked for and which of them existed and are now gone. */
export interface DeleteBulkResult {
  requested: number;
  deleted: string[];
}
