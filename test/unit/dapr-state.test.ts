import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import type { DaprConnection } from "../../src/runtime/dapr/connection.js";
import { createDaprState, QUERY_PAGE_SIZE } from "../../src/runtime/dapr/state.js";

/** What the fake sidecar answers a QueryStateAlpha1 request (its parsed query): a page, or an error to throw. */
type Answer = (q: { page: { limit: number; token?: string } }) => { results: Array<{ key: string }>; token: string } | GatewayError;

/** A DaprConnection whose QueryStateAlpha1 answers come from `answer`; records each request's page. */
function fakeConn(answer: Answer): { conn: DaprConnection; pages: Array<{ limit: number; token?: string }> } {
  const pages: Array<{ limit: number; token?: string }> = [];
  const conn = {
    address: "fake:50001",
    translate: (e: unknown) => GatewayError.from(e),
    async unary(method: string, req: { query: string }) {
      assert.equal(method, "QueryStateAlpha1");
      const q = JSON.parse(req.query) as { page: { limit: number; token?: string } };
      pages.push(q.page);
      const a = answer(q);
      if (a instanceof GatewayError) throw a;
      return { results: a.results.map((r) => ({ key: r.key, data: Buffer.from("{}"), etag: "1", error: "" })), token: a.token, metadata: {} };
    },
  } as unknown as DaprConnection;
  return { conn, pages };
}

/** Redis as contrib state/redis/redis_query.go answers it on Redis 7 / RediSearch 2.8: an empty page is "invalid output". */
function redis(rows: number): Answer {
  return (q) => {
    const offset = Number(q.page.token ?? "0");
    const n = Math.max(0, Math.min(q.page.limit, rows - offset));
    if (n === 0) return new GatewayError(Code.INTERNAL, "failed query in state store docs: invalid output");
    return { results: Array.from({ length: n }, (_, i) => ({ key: `k${offset + i}` })), token: String(offset + n) };
  };
}

describe("dapr state query paging (Redis's empty last page)", () => {
  it("a result count that is a multiple of the page size ends at daprd's 'invalid output' for the empty page", async () => {
    const { conn, pages } = fakeConn(redis(2 * QUERY_PAGE_SIZE));
    const r = await createDaprState(conn).query("docs", "{}", 0);
    assert.equal(r.items.length, 2 * QUERY_PAGE_SIZE);
    assert.equal(r.token, "");
    assert.deepEqual(pages.map((p) => p.token), [undefined, String(QUERY_PAGE_SIZE), String(2 * QUERY_PAGE_SIZE)]);
  });

  it("a short page is the end: no request for the page after it", async () => {
    const { conn, pages } = fakeConn(redis(QUERY_PAGE_SIZE + 5));
    const r = await createDaprState(conn).query("docs", "{}", 0);
    assert.equal(r.items.length, QUERY_PAGE_SIZE + 5);
    assert.equal(pages.length, 2);
  });

  it("a caller's token past the last row gives an empty page without a token", async () => {
    const { conn } = fakeConn(redis(4));
    const r = await createDaprState(conn).query("docs", JSON.stringify({ page: { limit: 2, token: "4" } }), 0);
    assert.deepEqual(r, { items: [], token: "" });
  });

  it("'invalid output' on a first page is a query that matches nothing (no rows); any other error after a token stays daprd's INTERNAL", async () => {
    const first = fakeConn(redis(0));
    assert.deepEqual(await createDaprState(first.conn).query("docs", "{}", 0), { items: [], token: "" });
    const other = fakeConn((q) =>
      q.page.token ? new GatewayError(Code.INTERNAL, "failed query in state store docs: connection reset") : redis(QUERY_PAGE_SIZE)(q),
    );
    await assert.rejects(createDaprState(other.conn).query("docs", "{}", 0), /connection reset/);
  });
});

describe("dapr state error messages", () => {
  it("quote a caller's key and etag through echo(): long input is cut", async () => {
    const key = "k".repeat(5000);
    const etag = "7".repeat(5000);
    const conn = {
      address: "fake:50001",
      translate: (e: unknown) => GatewayError.from(e),
      async unary(method: string) {
        if (method === "GetState") return { data: Buffer.alloc(0), etag: "", metadata: {} };
        if (method === "GetBulkState") return { items: [{ key, data: Buffer.alloc(0), etag: "", error: "boom" }] };
        throw new Error(`unexpected ${method}`);
      },
    } as unknown as DaprConnection;
    const state = createDaprState(conn);
    await assert.rejects(state.save("s", key, "v", { etag }), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, Code.ABORTED);
      assert.match(e.message, /etag mismatch for key k{256}…\(4744 more characters\): given 7{256}…\(4744 more characters\), but the key is not stored/);
      return true;
    });
    await assert.rejects(state.getBulk("s", [key]), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.match(e.message, /failed to read key k{256}…\(4744 more characters\): boom/);
      return true;
    });
  });
});
