import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

describe("REST invoke envelopes", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({});
  });
  after(() => gw.close());

  const post = async (path: string, body: object) => {
    const res = await fetch(`${gw.http}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
    assert.equal(res.status, 200, "outcomes are in-band");
    return (await res.json()) as Record<string, unknown>;
  };

  it("an unknown field fails in-band naming it instead of being dropped (invoke takes requestData, not request_data)", async () => {
    const r = await post("/v1/gateway/invoke", { service: "orders", method: "GetOrder", request_data: { orderId: "1" } });
    assert.deepEqual(r, {
      success: false,
      status: "INVALID_ARGUMENT",
      message: "request_data is not a field of the invoke request (fields: service, method, requestData)",
      responseData: null,
    });
  });

  it("invoke-json rejects unknown fields too, and accepts requestData as an alias", async () => {
    const r = await post("/v1/gateway/invoke-json", { service: "orders", method: "GetOrder", request_data: "{}", extra: 1 });
    assert.equal(r["success"], false);
    assert.equal(r["status"], "INVALID_ARGUMENT");
    assert.match(String(r["message"]), /^extra is not a field of the invoke-json request/);
    const alias = await post("/v1/gateway/invoke-json", { service: "nope", method: "GetOrder", requestData: "{}" });
    assert.equal(alias["status"], "NOT_FOUND", "the alias passes the envelope check and reaches service lookup");
  });
});
