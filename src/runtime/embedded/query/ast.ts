/** A JSON value as JSON.parse returns it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

/** Comparison operators of the query DSL: exactly one `{path: value}` pair each. */
export const COMPARISON_OPS = ["EQ", "NEQ", "GT", "GTE", "LT", "LTE"] as const;
export type ComparisonOp = (typeof COMPARISON_OPS)[number];

/** A parsed filter. `path` is the dot path split into segments. */
export type Filter =
  | { op: ComparisonOp; path: string[]; value: JsonValue }
  | { op: "IN"; path: string[]; values: JsonValue[] }
  | { op: "AND" | "OR"; filters: Filter[] };

/** One sort key. */
export interface SortKey {
  path: string[];
  order: "ASC" | "DESC";
}

/** A parsed, validated query (the runtime's query-state DSL). */
export interface Query {
  /** Undefined when the query has no filter: it then matches every item, non-JSON values included. */
  filter?: Filter;
  sort: SortKey[];
  /** Page size; 0 = no page limit. */
  pageLimit: number;
  /** Offset the page starts at, decoded from the page token; 0 without a token. */
  offset: number;
}
