import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createPageTokens } from "../../src/ops/page-token.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Code } from "../../src/shared/code.js";

const tokens = createPageTokens(Buffer.alloc(32, 7));

/** Open `query` as the state operation does (text and its one parse). */
const open = (store: string, query: object) => {
  const text = JSON.stringify(query);
  return tokens.open(store, text, JSON.parse(text));
};

const refused = (e: unknown): boolean => {
  assert.ok(e instanceof GatewayError);
  assert.equal(e.code, Code.INVALID_ARGUMENT);
  assert.match(e.message, /query page\.token ".*" is not a token this gateway issued for this query/);
  return true;
};

describe("query page tokens", () => {
  const query = { filter: { EQ: { "a.b": 1 } }, sort: [{ key: "n", order: "DESC" }], page: { limit: 2 } };

  it("seals the same bytes as before the query was parsed once (HMAC-SHA256 over store, canonical query, token)", () => {
    // Values computed by the sealer that re-parsed the query text for every step: a token issued before the change
    // still opens after it, and member order does not change what the MAC covers.
    assert.equal(open("store-a", query).seal("2"), "2.h38X2a5MISgQmirR64Vdlg");
    assert.equal(open("store-a", { page: { limit: 2 }, sort: [{ order: "DESC", key: "n" }], filter: { EQ: { "a.b": 1 } } }).seal("2"), "2.h38X2a5MISgQmirR64Vdlg");
    assert.equal(open("store-a", {}).seal("abc"), "abc.v8GCNWSbO3YgmrZD_72D8Q");
    assert.equal(open("store-a", {}).seal(""), "");
  });

  it("opens an issued token into the runtime's token, for the text and the parsed query alike", () => {
    const opened = open("store-a", { ...query, page: { limit: 2, token: "2.h38X2a5MISgQmirR64Vdlg" } });
    assert.deepEqual(opened.query, { ...query, page: { limit: 2, token: "2" } });
    assert.deepEqual(JSON.parse(opened.text), opened.query);
    // A page that held only the token: the same query as `{}`.
    assert.deepEqual(open("store-a", { page: { token: "abc.v8GCNWSbO3YgmrZD_72D8Q" } }).query, { page: { token: "abc" } });
    // The next page's token is sealed for the same query.
    assert.equal(opened.seal("4"), open("store-a", query).seal("4"));
  });

  it("a query without a token passes as the caller wrote it", () => {
    const text = '{"page": {"limit": 1}}';
    const parsed: unknown = JSON.parse(text);
    const opened = tokens.open("store-a", text, parsed);
    assert.equal(opened.text, text);
    assert.equal(opened.query, parsed);
  });

  it("refuses forged tokens, other spellings, and tokens of another query, store or key", () => {
    const good = "2.h38X2a5MISgQmirR64Vdlg";
    for (const forged of ["999", "2", ".h38X2a5MISgQmirR64Vdlg", "3.h38X2a5MISgQmirR64Vdlg", good.replace(/g$/, "h"), `${good}A`]) {
      assert.throws(() => open("store-a", { ...query, page: { limit: 2, token: forged } }), refused, forged);
    }
    assert.throws(() => open("store-b", { ...query, page: { limit: 2, token: good } }), refused);
    assert.throws(() => open("store-a", { ...query, page: { limit: 3, token: good } }), refused);
    assert.throws(() => createPageTokens(Buffer.alloc(32, 8)).open("store-a", "{}", { ...query, page: { limit: 2, token: good } }), refused);
  });
});
