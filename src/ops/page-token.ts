import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { invalidArgument } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";

/**
 * Query page tokens the gateway can recognise as its own (docs/state.md: tokens the store did not issue are
 * rejected). A runtime's token is an offset or an opaque string that a caller could forge ("999" used to answer an
 * empty page); the gateway hands out `<runtime token>.<mac>` instead, where the MAC (HMAC-SHA256 under a key made at
 * start) covers the runtime token, the store and the query without its token. So a token only works for the query
 * and store it came from, and only until the gateway restarts. Works the same over every runtime.
 */
export interface PageTokens {
  /**
   * Open the `page.token` of a query the caller sent, parsed once by the operation (`query`, from `text`): a token
   * sealed here is replaced by the runtime's token; any other non-empty token is INVALID_ARGUMENT. A query that is not
   * a JSON object comes back as it is (the query parser reports it).
   */
  open(store: string, text: string, query: unknown): OpenedQuery;
}

/** A query whose page token was opened. */
export interface OpenedQuery {
  /** The query for the runtime: the caller's, with the runtime's token in place of the sealed one. */
  readonly query: unknown;
  /** The same as JSON text (the caller's own text when it carried no token). */
  readonly text: string;
  /** The token to give the caller for the runtime's `token` of this query ("" stays ""). */
  seal(token: string): string;
}

const MAC_BYTES = 16;

/** JSON with object keys sorted, so reordered members do not change what the MAC covers. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/** The query object without `page.token`, and that token ("" when absent or when `parsed` is not a JSON object). */
function split(parsed: unknown): { query: Record<string, unknown>; token: string } {
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { query: {}, token: "" };
  const query = parsed as Record<string, unknown>;
  const page = query["page"];
  if (typeof page !== "object" || page === null || Array.isArray(page)) return { query, token: "" };
  const { token, ...rest } = page as Record<string, unknown>;
  // `{}` and `{"page":{"token":...}}` are the same query: a page left empty by removing its token is dropped.
  const { page: _page, ...withoutPage } = query;
  return { query: Object.keys(rest).length > 0 ? { ...query, page: rest } : withoutPage, token: typeof token === "string" ? token : "" };
}

/** Page tokens under a fresh random key (`key` for tests). */
export function createPageTokens(key: Buffer = randomBytes(32)): PageTokens {
  // What the MAC covers of a query (its canonical form) is computed at most once per call, for the open and the seal.
  const mac = (store: string, covered: string, inner: string): Buffer =>
    createHmac("sha256", key).update(`${store}\n${covered}\n${inner}`).digest().subarray(0, MAC_BYTES);
  return {
    open(store, text, parsed) {
      const { query, token } = split(parsed);
      let covered: string | undefined;
      const coveredText = (): string => (covered ??= canonical(query));
      const seal = (next: string): string => (next === "" ? "" : `${next}.${mac(store, coveredText(), next).toString("base64url")}`);
      if (token === "") return { query: parsed, text, seal };
      const dot = token.lastIndexOf(".");
      const inner = token.slice(0, Math.max(dot, 0));
      const macText = token.slice(dot + 1);
      const given = Buffer.from(macText, "base64url");
      // Re-encoding refuses the other spellings of the same bytes (base64url's last character carries unused bits).
      if (dot <= 0 || given.length !== MAC_BYTES || given.toString("base64url") !== macText || !timingSafeEqual(given, mac(store, coveredText(), inner))) {
        throw invalidArgument("query page.token", `"${echo(token)}" is not a token this gateway issued for this query`);
      }
      const opened = { ...query, page: { ...(query["page"] as object), token: inner } };
      return { query: opened, text: JSON.stringify(opened), seal };
    },
  };
}
