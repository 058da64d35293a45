import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

describe("declarative subscription callback (GET /dapr/subscribe)", () => {
  let open: TestGateway;
  let guarded: TestGateway;
  before(async () => {
    open = await startTestGateway({ apiKeys: ["k"] });
    guarded = await startTestGateway({ apiKeys: ["k"], appApiToken: "app-secret" });
  });
  after(async () => {
    await open.close();
    await guarded.close();
  });

  it("answers an empty list without an x-api-key (daprd never sends one)", async () => {
    const res = await fetch(`${open.http}/dapr/subscribe`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), []);
  });

  it("with APP_API_TOKEN set, requires that dapr-api-token", async () => {
    assert.equal((await fetch(`${guarded.http}/dapr/subscribe`)).status, 401);
    assert.equal((await fetch(`${guarded.http}/dapr/subscribe`, { headers: { "dapr-api-token": "nope" } })).status, 401);
    const ok = await fetch(`${guarded.http}/dapr/subscribe`, { headers: { "dapr-api-token": "app-secret" } });
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), []);
  });
});
