import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseQuery, runQuery } from "../../src/runtime/embedded/query/index.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Code } from "../../src/shared/code.js";

const people = [
  { key: "p1", value: JSON.stringify({ name: "ann", age: 31, city: { name: "Oslo" }, tags: ["a"] }), etag: "1" },
  { key: "p2", value: JSON.stringify({ name: "bob", age: 25, city: { name: "Rome" } }), etag: "2" },
  { key: "p3", value: JSON.stringify({ name: "cid", age: 40, city: { name: "Oslo" }, vip: true }), etag: "3" },
  { key: "p4", value: JSON.stringify({ name: "dee", age: "40", city: null }), etag: "4" },
  { key: "p5", value: "plain text, not JSON", etag: "5" },
];

const keys = (q: object | string, limit = 0): string[] =>
  runQuery(typeof q === "string" ? q : JSON.stringify(q), people, limit).items.map((i) => i.key);

function invalid(q: string, pattern: RegExp): void {
  assert.throws(
    () => parseQuery(q),
    (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, Code.INVALID_ARGUMENT);
      assert.match(e.message, pattern);
      return true;
    },
  );
}

describe("query DSL: filters", () => {
  it("{} matches everything, non-JSON values included, and an empty filter is the same", () => {
    assert.deepEqual(keys({}), ["p1", "p2", "p3", "p4", "p5"]);
    assert.deepEqual(keys({ filter: {} }), ["p1", "p2", "p3", "p4", "p5"]);
  });
  it("EQ on top-level and nested dot paths, strict JSON types", () => {
    assert.deepEqual(keys({ filter: { EQ: { "city.name": "Oslo" } } }), ["p1", "p3"]);
    assert.deepEqual(keys({ filter: { EQ: { age: 40 } } }), ["p3"]);
    assert.deepEqual(keys({ filter: { EQ: { age: "40" } } }), ["p4"]);
    assert.deepEqual(keys({ filter: { EQ: { city: null } } }), ["p4"]);
    assert.deepEqual(keys({ filter: { EQ: { city: { name: "Rome" } } } }), ["p2"]);
    assert.deepEqual(keys({ filter: { EQ: { "tags.0": "a" } } }), ["p1"]);
  });
  it("NEQ is the negation of EQ over JSON values (a missing path is not equal); non-JSON never matches a filter", () => {
    assert.deepEqual(keys({ filter: { NEQ: { "city.name": "Oslo" } } }), ["p2", "p4"]);
    assert.deepEqual(keys({ filter: { NEQ: { vip: true } } }), ["p1", "p2", "p4"]);
  });
  it("GT, GTE, LT, LTE order numbers with numbers and strings with strings only", () => {
    assert.deepEqual(keys({ filter: { GT: { age: 31 } } }), ["p3"]);
    assert.deepEqual(keys({ filter: { GTE: { age: 31 } } }), ["p1", "p3"]);
    assert.deepEqual(keys({ filter: { LT: { age: 31 } } }), ["p2"]);
    assert.deepEqual(keys({ filter: { LTE: { age: 31 } } }), ["p1", "p2"]);
    assert.deepEqual(keys({ filter: { GT: { name: "bob" } } }), ["p3", "p4"]);
    assert.deepEqual(keys({ filter: { GTE: { age: "4" } } }), ["p4"]);
  });
  it("IN matches any listed value", () => {
    assert.deepEqual(keys({ filter: { IN: { name: ["ann", "dee", "zed"] } } }), ["p1", "p4"]);
    assert.deepEqual(keys({ filter: { IN: { age: [25, "40"] } } }), ["p2", "p4"]);
  });
  it("AND and OR combine, and nest", () => {
    assert.deepEqual(keys({ filter: { AND: [{ EQ: { "city.name": "Oslo" } }, { GT: { age: 35 } }] } }), ["p3"]);
    assert.deepEqual(keys({ filter: { OR: [{ EQ: { name: "bob" } }, { EQ: { vip: true } }] } }), ["p2", "p3"]);
    assert.deepEqual(
      keys({ filter: { OR: [{ AND: [{ EQ: { "city.name": "Oslo" } }, { LT: { age: 35 } }] }, { EQ: { name: "dee" } }] } }),
      ["p1", "p4"],
    );
  });
});

describe("query DSL: sort, paging, limit", () => {
  it("sorts ASC (default) and DESC, numbers before strings, missing first", () => {
    assert.deepEqual(keys({ sort: [{ key: "age" }] }), ["p5", "p2", "p1", "p3", "p4"]);
    assert.deepEqual(keys({ filter: { NEQ: { name: "x" } }, sort: [{ key: "age", order: "DESC" }] }), ["p4", "p3", "p1", "p2"]);
  });
  it("sorts on several keys, ties broken by item key", () => {
    assert.deepEqual(keys({ filter: { NEQ: { name: "x" } }, sort: [{ key: "city.name", order: "DESC" }, { key: "age", order: "DESC" }] }), [
      "p2",
      "p3",
      "p1",
      "p4",
    ]);
    assert.deepEqual(keys({ filter: { EQ: { "city.name": "Oslo" } }, sort: [{ key: "city.name" }] }), ["p1", "p3"]);
  });
  it("pages with limit and token until the token is empty", () => {
    const q = (token?: string) => JSON.stringify({ sort: [{ key: "name" }], page: { limit: 2, ...(token ? { token } : {}) } });
    const p1 = runQuery(q(), people);
    assert.deepEqual(p1.items.map((i) => i.key), ["p5", "p1"]);
    assert.notEqual(p1.token, "");
    const p2 = runQuery(q(p1.token), people);
    assert.deepEqual(p2.items.map((i) => i.key), ["p2", "p3"]);
    const p3 = runQuery(q(p2.token), people);
    assert.deepEqual(p3.items.map((i) => i.key), ["p4"]);
    assert.equal(p3.token, "");
  });
  it("the request limit caps the page (smaller of the two wins) and yields a token", () => {
    const r = runQuery("{}", people, 3);
    assert.deepEqual(r.items.map((i) => i.key), ["p1", "p2", "p3"]);
    assert.equal(r.token, "3");
    assert.equal(runQuery(JSON.stringify({ page: { limit: 2 } }), people, 4).items.length, 2);
    assert.equal(runQuery(JSON.stringify({ page: { limit: 4 } }), people, 1).items.length, 1);
    assert.equal(runQuery("{}", people, 0).items.length, 5);
    assert.equal(runQuery("{}", people, 10).token, "");
  });
  it("returns items with value and etag untouched", () => {
    assert.deepEqual(runQuery(JSON.stringify({ filter: { EQ: { name: "bob" } } }), people).items, [people[1]]);
  });
});

describe("query DSL: malformed queries say what is wrong", () => {
  it("rejects non-JSON and non-object queries", () => {
    invalid("{", /not valid JSON/);
    invalid("[]", /must be a JSON object/);
    invalid('{"filters":{}}', /unknown field "filters"/);
  });
  it("rejects bad filters, naming where", () => {
    invalid('{"filter":{"LIKE":{"a":1}}}', /unknown operator "LIKE"/);
    invalid('{"filter":{"EQ":{"a":1},"NEQ":{"b":2}}}', /exactly one operator/);
    invalid('{"filter":{"EQ":{"a":1,"b":2}}}', /filter\.EQ must have exactly one key path, got 2/);
    invalid('{"filter":{"EQ":5}}', /filter\.EQ must be an object/);
    invalid('{"filter":{"EQ":{"":5}}}', /empty key path/);
    invalid('{"filter":{"EQ":{"a..b":5}}}', /empty segment/);
    invalid('{"filter":{"IN":{"a":1}}}', /filter\.IN\.a must be an array/);
    invalid('{"filter":{"IN":{"a":[]}}}', /at least one value/);
    invalid('{"filter":{"AND":[{"EQ":{"a":1}}]}}', /filter\.AND must combine at least two filters/);
    invalid('{"filter":{"OR":{"EQ":{"a":1}}}}', /filter\.OR must be an array/);
    invalid('{"filter":{"AND":[{"EQ":{"a":1}},{"GT":[]}]}}', /filter\.AND\[1\]\.GT must be an object/);
  });
  it("rejects filters nested too deep instead of overflowing the stack", () => {
    let text = '{"EQ":{"a":1}}';
    for (let i = 0; i < 5000; i++) text = `{"AND":[${text},{"EQ":{"a":1}}]}`;
    invalid(`{"filter":${text}}`, /deeper than 32/);
  });
  it("rejects bad sort and page", () => {
    invalid('{"sort":{"key":"a"}}', /sort must be an array/);
    invalid('{"sort":[{"key":"a","order":"UP"}]}', /sort\[0\]\.order must be ASC or DESC/);
    invalid('{"sort":[{"order":"ASC"}]}', /sort\[0\]\.key must be a string/);
    invalid('{"sort":[{"key":"a","dir":"ASC"}]}', /unknown field "dir"/);
    invalid('{"page":{"limit":-1}}', /page\.limit must be a non-negative integer/);
    invalid('{"page":{"limit":1.5}}', /page\.limit/);
    invalid('{"page":{"limit":1,"token":"abc"}}', /page\.token "abc" is not a token/);
    invalid('{"page":{"limit":1,"token":7}}', /page\.token must be a string/);
  });
});
