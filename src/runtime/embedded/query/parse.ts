import { Code } from "../../../shared/code.js";
import { GatewayError } from "../../../shared/gateway-error.js";
import { COMPARISON_OPS, type ComparisonOp, type Filter, type JsonValue, type Query, type SortKey } from "./ast.js";
import { echo } from "../../../shared/echo.js";

/** Deepest filter nesting accepted: deeper queries are rejected rather than risking the stack. */
export const MAX_FILTER_DEPTH = 32;

const OPERATORS = [...COMPARISON_OPS, "IN", "AND", "OR"] as const;

function bad(where: string, problem: string): GatewayError {
  return new GatewayError(Code.INVALID_ARGUMENT, `query ${where} ${problem}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `${typeof v} ${JSON.stringify(v)}`;
}

function parsePath(raw: string, where: string): string[] {
  if (raw === "") throw bad(where, "has an empty key path");
  const segments = raw.split(".");
  if (segments.some((s) => s === "")) throw bad(where, `key path "${echo(raw)}" has an empty segment`);
  return segments;
}

function onlyPair(v: unknown, where: string): [string, unknown] {
  if (!isObject(v)) throw bad(where, `must be an object {"<key path>": <value>}, got ${describe(v)}`);
  const entries = Object.entries(v);
  if (entries.length !== 1) throw bad(where, `must have exactly one key path, got ${entries.length}`);
  return entries[0]!;
}

function parseFilter(raw: unknown, where: string, depth: number): Filter {
  if (depth > MAX_FILTER_DEPTH) throw bad(where, `nests filters deeper than ${MAX_FILTER_DEPTH} levels`);
  if (!isObject(raw)) throw bad(where, `must be an object with one operator (${OPERATORS.join(", ")}), got ${describe(raw)}`);
  const entries = Object.entries(raw);
  if (entries.length !== 1) {
    throw bad(where, `must have exactly one operator (${OPERATORS.join(", ")}), got ${entries.length === 0 ? "none" : entries.map(([k]) => k).join(", ")}`);
  }
  const [op, arg] = entries[0]!;
  const at = `${where}.${op}`;
  if ((COMPARISON_OPS as readonly string[]).includes(op)) {
    const [path, value] = onlyPair(arg, at);
    return { op: op as ComparisonOp, path: parsePath(path, at), value: value as JsonValue };
  }
  if (op === "IN") {
    const [path, values] = onlyPair(arg, at);
    if (!Array.isArray(values)) throw bad(`${at}.${path}`, `must be an array of values, got ${describe(values)}`);
    if (values.length === 0) throw bad(`${at}.${path}`, "must list at least one value");
    return { op, path: parsePath(path, at), values: values as JsonValue[] };
  }
  if (op === "AND" || op === "OR") {
    if (!Array.isArray(arg)) throw bad(at, `must be an array of filters, got ${describe(arg)}`);
    if (arg.length < 2) throw bad(at, `must combine at least two filters, got ${arg.length}`);
    return { op, filters: arg.map((f, i) => parseFilter(f, `${at}[${i}]`, depth + 1)) };
  }
  throw bad(where, `has unknown operator "${echo(op)}"; expected one of ${OPERATORS.join(", ")}`);
}

function parseSort(raw: unknown): SortKey[] {
  if (!Array.isArray(raw)) throw bad("sort", `must be an array of {key, order?}, got ${describe(raw)}`);
  return raw.map((s, i) => {
    const where = `sort[${i}]`;
    if (!isObject(s)) throw bad(where, `must be an object {key, order?}, got ${describe(s)}`);
    for (const k of Object.keys(s)) if (k !== "key" && k !== "order") throw bad(where, `has unknown field "${echo(k)}"; expected key, order`);
    if (typeof s["key"] !== "string") throw bad(`${where}.key`, `must be a string key path, got ${describe(s["key"])}`);
    const order = s["order"] ?? "ASC";
    if (order !== "ASC" && order !== "DESC") throw bad(`${where}.order`, `must be ASC or DESC, got ${describe(order)}`);
    return { path: parsePath(s["key"], `${where}.key`), order };
  });
}

function parsePage(raw: unknown): { pageLimit: number; offset: number } {
  if (!isObject(raw)) throw bad("page", `must be an object {limit, token?}, got ${describe(raw)}`);
  for (const k of Object.keys(raw)) if (k !== "limit" && k !== "token") throw bad("page", `has unknown field "${echo(k)}"; expected limit, token`);
  const limit = raw["limit"] ?? 0;
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
    throw bad("page.limit", `must be a non-negative integer, got ${describe(limit)}`);
  }
  const token = raw["token"] ?? "";
  if (typeof token !== "string") throw bad("page.token", `must be a string, got ${describe(token)}`);
  return { pageLimit: limit, offset: decodeToken(token) };
}

/** The page token is the decimal offset of the next item in the sorted result (Dapr's SQL stores do the same). */
export function decodeToken(token: string): number {
  if (token === "") return 0;
  if (!/^(0|[1-9][0-9]{0,14})$/.test(token)) throw bad("page.token", `"${echo(token)}" is not a token this store issued`);
  return Number(token);
}

/** The JSON text of a query parsed (not yet validated: see queryOf); INVALID_ARGUMENT when it is not JSON. */
export function parseQueryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `query is not valid JSON: ${(e as Error).message}`);
  }
}

/** Validate a query already parsed from JSON; INVALID_ARGUMENT saying what is wrong and where. */
export function queryOf(raw: unknown): Query {
  if (!isObject(raw)) throw new GatewayError(Code.INVALID_ARGUMENT, `query must be a JSON object {filter?, sort?, page?}, got ${describe(raw)}`);
  for (const k of Object.keys(raw)) {
    if (k !== "filter" && k !== "sort" && k !== "page") throw new GatewayError(Code.INVALID_ARGUMENT, `query has unknown field "${echo(k)}"; expected filter, sort, page`);
  }
  const q: Query = { sort: [], pageLimit: 0, offset: 0 };
  // `"filter": {}` is the same as no filter (Dapr accepts both).
  if (raw["filter"] !== undefined && !(isObject(raw["filter"]) && Object.keys(raw["filter"]).length === 0)) {
    q.filter = parseFilter(raw["filter"], "filter", 1);
  }
  if (raw["sort"] !== undefined) q.sort = parseSort(raw["sort"]);
  if (raw["page"] !== undefined) Object.assign(q, parsePage(raw["page"]));
  return q;
}

/** Parse and validate the JSON text of a query; INVALID_ARGUMENT saying what is wrong and where. */
export function parseQuery(text: string): Query {
  return queryOf(parseQueryJson(text));
}
