import type { CloudEvent } from "../../shared/cloudevent.js";

/** `ChangeNotification`: both fields set selects Tier 1, anything else Tier 0. */
export interface ChangeInput {
  topic?: string;
  cloudevent?: CloudEvent | null;
}

/** SaveStateRequest (proto field names). */
export interface SaveStateInput {
  service: string;
  key: string;
  value: string;
  etag?: string;
  publish_change?: boolean;
  include_value?: boolean;
  change?: ChangeInput | null;
}

/** DeleteStateRequest (proto field names). */
export interface DeleteStateInput {
  service: string;
  key: string;
  etag?: string;
  publish_change?: boolean;
  include_value?: boolean;
  change?: ChangeInput | null;
}

/** DeleteBulkStateRequest (proto field names). */
export interface DeleteBulkStateInput {
  service: string;
  keys: readonly string[];
  publish_change?: boolean;
  change?: ChangeInput | null;
}

/** QueryStateRequest (proto field names). `limit` 0 or unset = no limit. */
export interface QueryStateInput {
  service: string;
  query: string;
  limit?: number;
}

/** What a bulk delete did: how many keys were asked for and which of them existed and are now gone. */
export interface DeleteBulkResult {
  requested: number;
  deleted: string[];
}
