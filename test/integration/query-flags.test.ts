import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { startOrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor } from "../support/gateway.js";

const KEY = "k1";

describe("boolean query parameters: one rule on every REST route", () => {
  it("?refresh and ?refresh= refresh (they read as false on /v1/gateway/list-methods), typos are 400 naming the parameter", async () => {
    let backend = await startOrderBackend({ admin: false });
    const port = backend.port;
    const gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port } }] });
    const get = (path: string, method = "GET"): Promise<Response> => fetch(`${gw.http}${path}`, { method, headers: { "x-api-key": KEY } });
    const methods = async (path: string): Promise<string[]> => {
      const res = await get(path);
      assert.equal(res.status, 200, path);
      return ((await res.json()) as { methods: Array<{ name: string }> }).methods.map((m) => m.name);
    };
    try {
      await waitFor(() => gw.logs.some((l) => l["msg"] === "backend services proxied"), "the backend to be routed");
      assert.ok(!(await methods("/v1/gateway/list-methods?service=orders")).includes("Ping"));
      // The backend gains ops.v1.Admin; the cached schema does not show it until a refresh.
      backend.close();
      backend = await startOrderBackend({ admin: true, port });
      assert.ok(!(await methods("/v1/gateway/list-methods?service=orders&refresh=false")).includes("Ping"), "refresh=false keeps the cache");
      assert.ok(!(await methods("/v1/gateway/list-methods?service=orders&refresh=0")).includes("Ping"), "refresh=0 keeps the cache");
      assert.ok((await methods("/v1/gateway/list-methods?service=orders&refresh")).includes("Ping"), "a bare ?refresh refreshes");

      for (const [method, path] of [
        ["GET", "/v1/gateway/list-methods?service=orders&refresh=yes"],
        ["GET", "/v1/grpc/orders/methods?refresh=TRUE"],
        ["DELETE", "/v1/state/orders/k?include_value=2"],
      ] as const) {
        const res = await get(path, method);
        assert.equal(res.status, 400, path);
        const body = (await res.json()) as { code: number; message: string };
        assert.equal(body.code, 3, path);
        assert.match(body.message, /^query parameter (refresh|include_value) must be true or false, got '(yes|TRUE|2)'$/, path);
      }
      for (const flag of ["refresh", "refresh=", "refresh=true", "refresh=1"]) {
        const res = await get(`/v1/grpc/orders/methods?${flag}`);
        assert.equal(res.status, 200, flag);
      }
    } finally {
      await gw.close();
      backend.close();
    }
  });
});
