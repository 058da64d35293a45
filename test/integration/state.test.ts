import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code } from "../../src/shared/code.js";
import { QUERY_INDEX, QUERY_STORE, runtimeFixtures, useGatewayOn } from "../support/runtimes.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { keyPath, rejectsWith, stateFronts } from "../support/state-fronts.js";
import { runtimeOf, wrapRuntime } from "../support/state-runtime.js";

const KEY = "k1";
const services = [
  { name: "orders", state: { storeName: "orders-store", keys: [] } },
  { name: "inventory", state: { storeName: "inventory-store", keys: [] } },
  // queryIndexName: the Redis Stack index the dapr fixture's catalog-store has (ignored by the embedded runtime).
  { name: "catalog", state: { storeName: QUERY_STORE, keys: [], queryIndexName: QUERY_INDEX } },
  { name: "no-state", pubsub: { pubsubName: "pubsub" } },
];

const products = [
  { key: "p1", value: { name: "apple", price: 3, tags: { color: "red" }, stock: 10 } },
  { key: "p2", value: { name: "banana", price: 1, tags: { color: "yellow" }, stock: 0 } },
  { key: "p3", value: { name: "cherry", price: 7, tags: { color: "red" }, stock: 5 } },
  { key: "p4", value: { name: "date", price: 7, tags: { color: "brown" } } },
  { key: "p5", value: "not json at all" },
];

for (const fixture of runtimeFixtures) {
  describe(`state over ${fixture.name}`, () => {
    const gw = useGatewayOn(fixture, { services, apiKeys: [KEY] });
    // On Dapr the catalog store is a Redis Stack query store: it keeps JSON documents only (docs/dapr.md "State").
    const jsonOnly = fixture.name === "dapr";
    const stored = jsonOnly ? products.filter((p) => typeof p.value !== "string") : products;
    before(async () => {
      const [grpc] = stateFronts(gw(), KEY);
      for (const p of products) {
        const save = grpc!.save({ service: "catalog", key: p.key, value: typeof p.value === "string" ? p.value : JSON.stringify(p.value) });
        if (jsonOnly && typeof p.value === "string") await rejectsWith(save, Code.INVALID_ARGUMENT, /value must be JSON: state store catalog-store is configured for query/);
        else await save;
      }
    });

    for (const front of ["grpc", "rest"] as const) {
      const use = () => stateFronts(gw(), KEY).find((f) => f.name === front)!;
      describe(`${front} front end`, () => {
        it("saves, reads back with the etag, and answers the in-band status", async () => {
          const s = use();
          const saved = await s.save({ service: "orders", key: `${front}/a`, value: "hello" });
          assert.deepEqual(saved.status, { success: true, status: "OK", message: "" });
          assert.ok(saved.etag);
          assert.deepEqual(await s.get("orders", `${front}/a`), { key: `${front}/a`, value: "hello", etag: saved.etag });
          // Another service's store is separate.
          assert.equal(await s.get("inventory", `${front}/a`), undefined);
        });

        it("handles keys with slashes, spaces, percent signs and unicode", async () => {
          const s = use();
          for (const key of [`${front}/deep/path/to/key`, `${front}/with space`, `${front}/pct%2Fliteral`, `${front}/ünï?&#=`]) {
            const { etag } = await s.save({ service: "orders", key, value: `v:${key}` });
            assert.deepEqual(await s.get("orders", key), { key, value: `v:${key}`, etag }, key);
            assert.deepEqual((await s.getBulk("orders", [key])).map((i) => i.key), [key]);
            await s.delete({ service: "orders", key });
            assert.equal(await s.get("orders", key), undefined, key);
          }
        });

        it("a missing key reads as not found (gRPC: empty value and etag; REST: 404)", async () => {
          assert.equal(await use().get("orders", `${front}/never-saved`), undefined);
        });

        it("etags: a matching etag wins, a stale one is ABORTED and changes nothing; no etag = last write wins", async () => {
          const s = use();
          const key = `${front}/etag`;
          const e1 = (await s.save({ service: "orders", key, value: "v1" })).etag;
          const e2 = (await s.save({ service: "orders", key, value: "v2", etag: e1 })).etag;
          assert.notEqual(e1, e2);
          await rejectsWith(s.save({ service: "orders", key, value: "v3", etag: e1 }), Code.ABORTED, /etag/);
          await rejectsWith(s.delete({ service: "orders", key, etag: e1 }), Code.ABORTED, /etag/);
          assert.equal((await s.get("orders", key))?.value, "v2");
          const e3 = (await s.save({ service: "orders", key, value: "v3" })).etag;
          await s.delete({ service: "orders", key, etag: e3 });
          assert.equal(await s.get("orders", key), undefined);
          await rejectsWith(s.save({ service: "orders", key, value: "v4", etag: e3 }), Code.ABORTED, /not stored/);
        });

        it("two concurrent writers with the same etag: exactly one wins", async () => {
          const s = use();
          const key = `${front}/race`;
          for (let round = 0; round < 10; round++) {
            const { etag } = await s.save({ service: "orders", key, value: "base" });
            const results = await Promise.allSettled([
              s.save({ service: "orders", key, value: "writer-a", etag }),
              s.save({ service: "orders", key, value: "writer-b", etag }),
            ]);
            const won = results.filter((r) => r.status === "fulfilled");
            assert.equal(won.length, 1, `round ${round}: ${JSON.stringify(results)}`);
            const lost = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
            assert.equal(lost.reason.code, Code.ABORTED);
            const winner = results[0]!.status === "fulfilled" ? "writer-a" : "writer-b";
            assert.equal((await s.get("orders", key))?.value, winner);
          }
        });

        it("deletes; deleting a missing key without etag succeeds", async () => {
          const s = use();
          await s.save({ service: "orders", key: `${front}/del`, value: "x" });
          assert.deepEqual((await s.delete({ service: "orders", key: `${front}/del` })).status, { success: true, status: "OK", message: "" });
          assert.equal(await s.get("orders", `${front}/del`), undefined);
          assert.equal((await s.delete({ service: "orders", key: `${front}/del` })).status.success, true);
        });

        it("bulk get returns stored keys in request order; bulk delete reports how many were deleted", async () => {
          const s = use();
          const keys = [`${front}/b1`, `${front}/b2`, `${front}/b3`];
          for (const k of keys) await s.save({ service: "orders", key: k, value: k });
          const items = await s.getBulk("orders", [keys[2]!, `${front}/missing`, keys[0]!]);
          assert.deepEqual(items.map((i) => [i.key, i.value]), [[keys[2], keys[2]], [keys[0], keys[0]]]);
          assert.ok(items.every((i) => i.etag));
          const r = await s.deleteBulk({ service: "orders", keys: [keys[0]!, keys[1]!, `${front}/missing`] });
          assert.deepEqual(r.status, { success: true, status: "OK", message: "deleted 2 of 3 requested keys" });
          assert.deepEqual((await s.getBulk("orders", keys)).map((i) => i.key), [keys[2]]);
        });

        it("queries the DSL operator by operator", async () => {
          const s = use();
          const cases: Array<[object, string[]]> = [
            [{}, stored.map((p) => p.key)],
            [{ filter: { EQ: { "tags.color": "red" } } }, ["p1", "p3"]],
            [{ filter: { NEQ: { "tags.color": "red" } } }, ["p2", "p4"]],
            [{ filter: { GT: { price: 3 } } }, ["p3", "p4"]],
            [{ filter: { GTE: { price: 3 } } }, ["p1", "p3", "p4"]],
            [{ filter: { LT: { price: 3 } } }, ["p2"]],
            [{ filter: { LTE: { price: 3 } } }, ["p1", "p2"]],
            [{ filter: { IN: { name: ["banana", "date", "fig"] } } }, ["p2", "p4"]],
            [{ filter: { AND: [{ EQ: { price: 7 } }, { EQ: { "tags.color": "red" } }] } }, ["p3"]],
            [{ filter: { OR: [{ EQ: { stock: 0 } }, { EQ: { name: "date" } }] } }, ["p2", "p4"]],
          ];
          for (const [q, want] of cases) {
            const r = await s.query("catalog", JSON.stringify(q));
            assert.deepEqual(r.items.map((i) => i.key).sort(), want, JSON.stringify(q));
            assert.equal(r.token, "");
          }
          const one = await s.query("catalog", JSON.stringify({ filter: { EQ: { name: "apple" } } }));
          assert.deepEqual(JSON.parse(one.items[0]!.value), products[0]!.value);
          assert.ok(one.items[0]!.etag);
        });

        it("sorts on several keys ASC and DESC", async () => {
          const s = use();
          const q = { filter: { GTE: { price: 0 } }, sort: [{ key: "price", order: "DESC" }, { key: "name", order: "ASC" }] };
          if (jsonOnly) {
            // RediSearch sorts on one key only (contrib state/redis/redis_query.go ErrMultipleSortBy).
            await rejectsWith(s.query("catalog", JSON.stringify(q)), Code.INTERNAL, /multiple SORTBY/);
            const one = { filter: { GTE: { price: 0 } }, sort: [{ key: "name", order: "DESC" }] };
            assert.deepEqual((await s.query("catalog", JSON.stringify(one))).items.map((i) => i.key), ["p4", "p3", "p2", "p1"]);
            return;
          }
          assert.deepEqual((await s.query("catalog", JSON.stringify(q))).items.map((i) => i.key), ["p3", "p4", "p1", "p2"]);
          const asc = { filter: { GTE: { price: 0 } }, sort: [{ key: "price" }, { key: "name", order: "DESC" }] };
          assert.deepEqual((await s.query("catalog", JSON.stringify(asc))).items.map((i) => i.key), ["p2", "p1", "p4", "p3"]);
        });

        it("pages with page.limit and token, and caps with the request limit", async () => {
          const s = use();
          const page = (token?: string) =>
            JSON.stringify({ filter: { GTE: { price: 0 } }, sort: [{ key: "name" }], page: { limit: 3, ...(token ? { token } : {}) } });
          const first = await s.query("catalog", page());
          assert.deepEqual(first.items.map((i) => i.key), ["p1", "p2", "p3"]);
          assert.notEqual(first.token, "");
          const second = await s.query("catalog", page(first.token));
          assert.deepEqual(second.items.map((i) => i.key), ["p4"]);
          assert.equal(second.token, "");
          const limited = await s.query("catalog", JSON.stringify({ sort: [{ key: "name", order: "DESC" }] }), 2);
          assert.deepEqual(limited.items.map((i) => i.key), ["p4", "p3"]);
          assert.equal((await s.query("catalog", "{}", 0)).items.length, stored.length);
        });

        it("names the service: unknown is NOT_FOUND, one without a state section is INVALID_ARGUMENT", async () => {
          const s = use();
          await rejectsWith(s.save({ service: "ghost", key: "k", value: "v" }), Code.NOT_FOUND, /service ghost is not registered/);
          await rejectsWith(s.get("ghost", "k"), Code.NOT_FOUND, /ghost/);
          await rejectsWith(s.query("ghost", "{}"), Code.NOT_FOUND, /ghost/);
          await rejectsWith(s.getBulk("ghost", ["k"]), Code.NOT_FOUND, /ghost/);
          await rejectsWith(s.deleteBulk({ service: "ghost", keys: ["k"] }), Code.NOT_FOUND, /ghost/);
          await rejectsWith(s.delete({ service: "ghost", key: "k" }), Code.NOT_FOUND, /ghost/);
          await rejectsWith(s.save({ service: "no-state", key: "k", value: "v" }), Code.INVALID_ARGUMENT, /service no-state has no state store/);
          await rejectsWith(s.get("no-state", "k"), Code.INVALID_ARGUMENT, /no-state/);
        });

        it("names missing required fields, and bad input changes nothing", async () => {
          const s = use();
          await rejectsWith(s.save({ service: "", key: "k", value: "v" }), Code.INVALID_ARGUMENT, /^service is required/);
          await rejectsWith(s.save({ service: "orders", key: "", value: "v" }), Code.INVALID_ARGUMENT, /^key is required/);
          await rejectsWith(s.save({ service: "orders", key: `${front}/nv`, value: "" }), Code.INVALID_ARGUMENT, /^value is required/);
          assert.equal(await s.get("orders", `${front}/nv`), undefined);
          await rejectsWith(s.query("orders", ""), Code.INVALID_ARGUMENT, /^query is required/);
          await rejectsWith(s.deleteBulk({ service: "orders", keys: [] }), Code.INVALID_ARGUMENT, /keys is required/);
          await rejectsWith(s.getBulk("orders", []), Code.INVALID_ARGUMENT, /keys is required/);
          // A Tier 1 notification with a bad source is refused before the write.
          await rejectsWith(
            s.save({ service: "orders", key: `${front}/t1`, value: "v", publish_change: true, change: { topic: "t", cloudevent: { id: "1", source: "a/b", type: "x" } } }),
            Code.INVALID_ARGUMENT,
            /change\.cloudevent\.source 'a\/b' is not an absolute URI/,
          );
          assert.equal(await s.get("orders", `${front}/t1`), undefined);
        });

        it("rejects a malformed query saying what is wrong", async () => {
          const s = use();
          await rejectsWith(s.query("catalog", "{not json"), Code.INVALID_ARGUMENT, /query is not valid JSON/);
          await rejectsWith(s.query("catalog", '{"filter":{"EQ":{"a":1,"b":2}}}'), Code.INVALID_ARGUMENT, /filter\.EQ must have exactly one key path/);
          await rejectsWith(s.query("catalog", '{"filter":{"LIKE":{"a":1}}}'), Code.INVALID_ARGUMENT, /unknown operator "LIKE"/);
          await rejectsWith(s.query("catalog", '{"sort":[{"key":"a","order":"up"}]}'), Code.INVALID_ARGUMENT, /sort\[0\]\.order/);
        });
      });
    }

    describe("front-end specifics", () => {
      const rest = (path: string, init: RequestInit = {}) =>
        fetch(gw().http + path, { ...init, headers: { "x-api-key": KEY, "content-type": "application/json", ...(init.headers ?? {}) } });
      const bad = async (res: Response, pattern: RegExp) => {
        assert.equal(res.status, 400);
        const body = (await res.json()) as { code: number; message: string };
        assert.equal(body.code, Code.INVALID_ARGUMENT);
        assert.match(body.message, pattern);
      };

      it("REST: wrong JSON types are 400 naming the field", async () => {
        const post = (body: unknown) => rest("/v1/state/save-state", { method: "POST", body: JSON.stringify(body) });
        await bad(await post({ service: "orders", key: 5, value: "v" }), /^key must be a string, got number/);
        await bad(await post({ service: "orders", key: "k", value: { a: 1 } }), /^value must be a string, got object/);
        await bad(await post({ service: "orders", key: "k", value: "v", publish_change: "yes" }), /^publish_change must be a boolean/);
        await bad(await post({ service: "orders", key: "k", value: "v", include_value: 1 }), /^include_value must be a boolean/);
        await bad(await post({ service: "orders", key: "k", value: "v", change: "t" }), /^change must be an object/);
        await bad(await post({ service: "orders", key: "k", value: "v", change: { topic: 1 } }), /^change\.topic must be a string/);
        await bad(await post({ service: "orders", key: "k", value: "v", change: { topic: "t", cloudevent: { source: 7 } } }), /^change\.cloudevent\.source must be a string/);
        await bad(await post({ service: "orders", key: "k", value: "v", publishchange: true }), /^publishchange is not a known field/);
        await bad(await rest("/v1/state/save-state", { method: "POST", body: "{oops" }), /not valid JSON/);
        await bad(await rest("/v1/state/save-state", { method: "POST", body: "[]" }), /must be a JSON object/);
        assert.equal(await stateFronts(gw(), KEY)[0]!.get("orders", "k"), undefined);
      });

      it("REST: camelCase body fields are accepted", async () => {
        const res = await rest("/v1/state/save-state", { method: "POST", body: JSON.stringify({ service: "orders", key: "camel", value: "v", publishChange: false, includeValue: false }) });
        assert.equal(res.status, 200);
        const body = (await res.json()) as { status: object; etag: string };
        assert.deepEqual(body.status, { success: true, status: "OK", message: "" });
        assert.ok(body.etag);
      });

      it("REST: query-string errors name the parameter", async () => {
        await bad(await rest("/v1/state/orders/query?query=%7B%7D&limit=-1"), /query parameter limit must be a non-negative integer/);
        await bad(await rest("/v1/state/orders/query?query=%7B%7D&limit=ten"), /query parameter limit/);
        await bad(await rest("/v1/state/orders/bulk"), /query parameter keys is required/);
        await bad(await rest("/v1/state/orders/bulk", { method: "DELETE" }), /query parameter keys is required/);
        await bad(await rest("/v1/state/orders/bulk?keys=a&publish_change=maybe", { method: "DELETE" }), /query parameter publish_change must be true or false/);
        await bad(await rest("/v1/state/orders/x?include_value=2", { method: "DELETE" }), /query parameter include_value/);
        await bad(await rest("/v1/state/orders/%E0%A4%A", {}), /percent-encoding/);
      });

      it("REST: an encoded slash and a literal slash name the same key; the REST 404 body names the key", async () => {
        const s = stateFronts(gw(), KEY)[1]!;
        await s.save({ service: "orders", key: "x/y", value: "v" });
        const res = await rest("/v1/state/orders/x%2Fy");
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { key: string }).key, "x/y");
        const missing = await rest(`/v1/state/orders/${keyPath("nope/here")}`);
        assert.equal(missing.status, 404);
        assert.deepEqual(await missing.json(), { code: Code.NOT_FOUND, message: "key nope/here is not stored for service orders", details: [] });
      });

      it("REST: the key is required; etag conflicts are 409", async () => {
        const s = stateFronts(gw(), KEY)[1]!;
        const { etag } = await s.save({ service: "orders", key: "conflict", value: "v" });
        const res = await rest(`/v1/state/orders/conflict?etag=${encodeURIComponent(etag + "0")}`, { method: "DELETE" });
        assert.equal(res.status, 409);
        assert.equal(((await res.json()) as { code: number }).code, Code.ABORTED);
        const empty = await rest("/v1/state/orders/", {});
        assert.equal(empty.status, 404);
      });

      it("both: a request without the API key is refused", async () => {
        const res = await fetch(`${gw().http}/v1/state/orders/k`);
        assert.equal(res.status, 401);
        await rejectsWith(stateFronts(gw(), "wrong")[0]!.get("orders", "k"), Code.UNAUTHENTICATED, /x-api-key/);
      });

      it("gRPC: a negative limit is INVALID_ARGUMENT naming limit", async () => {
        await rejectsWith(stateFronts(gw(), KEY)[0]!.query("catalog", "{}", -1), Code.INVALID_ARGUMENT, /^limit must be a non-negative integer/);
      });
    });
  });

  describe(`state over ${fixture.name} when the store cannot query`, () => {
    const gw = useGatewayOn(fixture, { services, apiKeys: [KEY] }, async (f) => {
      const runtime = wrapRuntime(await runtimeOf(f), {
        state: {
          query: async () => {
            throw new GatewayError(Code.INTERNAL, "state store does not support querying");
          },
        },
      });
      return { ...f.overrides, runtime };
    });

    it("answers INTERNAL (HTTP 500) on both front ends, even for {}; a malformed query is still INVALID_ARGUMENT", async () => {
      for (const s of stateFronts(gw(), KEY)) {
        await rejectsWith(s.query("catalog", "{}"), Code.INTERNAL, /does not support querying/);
        await rejectsWith(s.query("catalog", "{"), Code.INVALID_ARGUMENT, /not valid JSON/);
        // Bulk get, the documented fallback, still works.
        await s.save({ service: "catalog", key: "fallback", value: "v" });
        assert.deepEqual((await s.getBulk("catalog", ["fallback"])).map((i) => i.value), ["v"]);
      }
    });
  });
}
