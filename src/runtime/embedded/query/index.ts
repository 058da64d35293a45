import { Code } from "../../../shared/code.js";
import { GatewayError } from "../../../shared/gateway-error.js";
import type { QueryResult, StoredItem } from "../../state-port.js";
import type { JsonValue, Query } from "./ast.js";
import { comparator, matches } from "./evaluate.js";
import { parseQuery } from "./parse.js";

export type { Filter, JsonValue, Query, SortKey } from "./ast.js";
export { parseQuery, parseQueryJson, queryOf, MAX_FILTER_DEPTH } from "./parse.js";
export { matches, lookup, jsonEqual, compareValues } from "./evaluate.js";

function parseValue(value: string): JsonValue | undefined {
  try {
    return JSON.parse(value) as JsonValue;
  } catch {
    return undefined;
  }
}

/**
 * Run a parsed query over items. Without a filter every item matches, values that are not JSON included; with a
 * filter only JSON values can match. Sorted by the sort keys, then by key, so a page token (the offset of the next
 * item) stays meaningful between calls. `limit` (0 = none) caps the page size together with `page.limit`: the smaller
 * non-zero one wins, and a token is returned whenever items remain after the page.
 */
export function executeQuery(query: Query, items: Iterable<StoredItem>, limit = 0): QueryResult {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new GatewayError(Code.INVALID_ARGUMENT, `limit must be a non-negative integer, got ${limit}`);
  const rows: Array<{ key: string; json: JsonValue | undefined; item: StoredItem }> = [];
  // Values are parsed only when a filter or a sort looks into them: `{}` over large values must not parse them all.
  const needsJson = query.filter !== undefined || query.sort.length > 0;
  for (const item of items) {
    const json = needsJson ? parseValue(item.value) : undefined;
    if (query.filter && (json === undefined || !matches(query.filter, json))) continue;
    rows.push({ key: item.key, json, item });
  }
  rows.sort(comparator(query.sort));
  const size = [query.pageLimit, limit].filter((n) => n > 0).reduce((a, b) => Math.min(a, b), Infinity);
  const end = Math.min(rows.length, query.offset + size);
  const page = rows.slice(query.offset, end).map((r) => ({ key: r.item.key, value: r.item.value, etag: r.item.etag }));
  return { items: page, token: end < rows.length ? String(end) : "" };
}

/**
 * The query engine as one pure function: JSON query text (the runtime's query-state DSL) over a list of items.
 * INVALID_ARGUMENT saying what is wrong for a malformed query. Used by the embedded store and the Dapr test sidecar.
 */
export function runQuery(queryText: string, items: Iterable<StoredItem>, limit = 0): QueryResult {
  return executeQuery(parseQuery(queryText), items, limit);
}
