import type { Filter, JsonValue, SortKey } from "./ast.js";

/** Marks a dot path that leads nowhere in a value. */
export const MISSING: unique symbol = Symbol("missing");
type Found = JsonValue | typeof MISSING;

/** Follow a dot path into a JSON value; numeric segments index arrays. */
export function lookup(value: JsonValue, path: readonly string[]): Found {
  let cur: JsonValue = value;
  for (const seg of path) {
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(seg)) return MISSING;
      const next: JsonValue | undefined = cur[Number(seg)];
      if (next === undefined) return MISSING;
      cur = next;
    } else if (typeof cur === "object" && cur !== null) {
      if (!Object.prototype.hasOwnProperty.call(cur, seg)) return MISSING;
      cur = cur[seg]!;
    } else {
      return MISSING;
    }
  }
  return cur;
}

/** Structural equality of JSON values (object member order does not matter). */
export function jsonEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => jsonEqual(v, b[i]!));
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual(a[k]!, b[k]!));
}

/** Range comparison: only numbers with numbers and strings with strings are ordered; anything else is not. */
function ordered(a: Found, b: JsonValue): number | undefined {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  return undefined;
}

/** Whether a JSON value matches a filter. */
export function matches(filter: Filter, value: JsonValue): boolean {
  switch (filter.op) {
    case "AND":
      return filter.filters.every((f) => matches(f, value));
    case "OR":
      return filter.filters.some((f) => matches(f, value));
    case "IN": {
      const found = lookup(value, filter.path);
      return found !== MISSING && filter.values.some((v) => jsonEqual(found, v));
    }
    case "EQ": {
      const found = lookup(value, filter.path);
      return found !== MISSING && jsonEqual(found, filter.value);
    }
    case "NEQ": {
      // The negation of EQ: a value without the path is "not equal" too.
      const found = lookup(value, filter.path);
      return found === MISSING || !jsonEqual(found, filter.value);
    }
    default: {
      const c = ordered(lookup(value, filter.path), filter.value);
      if (c === undefined) return false;
      if (filter.op === "GT") return c > 0;
      if (filter.op === "GTE") return c >= 0;
      if (filter.op === "LT") return c < 0;
      return c <= 0;
    }
  }
}

// Sort rank of each kind of value, so mixed kinds still sort deterministically: missing first, then null,
// booleans, numbers, strings, arrays and objects (the last two by their JSON text).
function rank(v: Found): number {
  if (v === MISSING) return 0;
  if (v === null) return 1;
  switch (typeof v) {
    case "boolean":
      return 2;
    case "number":
      return 3;
    case "string":
      return 4;
    default:
      return Array.isArray(v) ? 5 : 6;
  }
}

/** Total order over found values (see `rank`). */
export function compareValues(a: Found, b: Found): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (a === MISSING || b === MISSING || a === null || b === null) return 0;
  if (typeof a === "boolean") return Number(a) - Number(b as boolean);
  if (typeof a === "number") return a - (b as number);
  if (typeof a === "string") return a < (b as string) ? -1 : a > (b as string) ? 1 : 0;
  const ja = JSON.stringify(a);
  const jb = JSON.stringify(b);
  return ja < jb ? -1 : ja > jb ? 1 : 0;
}

/** A comparator for items by sort keys, then by item key so pages are stable. `value` undefined = not JSON. */
export function comparator(sort: readonly SortKey[]): (a: { key: string; json: JsonValue | undefined }, b: { key: string; json: JsonValue | undefined }) => number {
  return (a, b) => {
    for (const s of sort) {
      const va = a.json === undefined ? MISSING : lookup(a.json, s.path);
      const vb = b.json === undefined ? MISSING : lookup(b.json, s.path);
      const c = compareValues(va, vb);
      if (c !== 0) return s.order === "DESC" ? -c : c;
    }
    return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  };
}
