import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { invokeFronts } from "../support/backends/fronts.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const KEY = "k1";

// A Timestamp in an invoke request goes through the one strict RFC 3339 parser on every front: a date that does not
// exist is refused naming the field (the proto library alone would roll 2024-02-30 over to 1 March).
describe("invoke: Timestamp fields are strict RFC 3339", () => {
  let backend: OrderBackend;
  let gw: TestGateway;

  before(async () => {
    backend = await startOrderBackend({ reflection: ["v1"] });
    gw = await startTestGateway({ sidecar: "embedded", apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
  });
  after(async () => {
    await gw.close();
    backend.close();
  });

  for (const front of invokeFronts(KEY)) {
    it(`${front.name}: 2024-02-30 is INVALID_ARGUMENT naming the field; 2024-02-29 goes through`, async () => {
      const bad = await front.invoke(gw, "orders", "PutOrder", '{"orderId":"t","createdAt":"2024-02-30T00:00:00Z"}');
      assert.equal(bad.success, false);
      assert.equal(bad.status, "INVALID_ARGUMENT", bad.message);
      assert.equal(bad.message, 'field "createdAt": invalid google.protobuf.Timestamp: "2024-02-30T00:00:00Z" is not a date-time that exists');

      const nested = await front.invoke(gw, "orders", "PutOrder", '{"events":["2024-01-01T00:00:00Z","2023-02-29T12:00:00+01:00"]}');
      assert.equal(nested.status, "INVALID_ARGUMENT", nested.message);
      assert.match(nested.message, /^field "events\[1\]": /);

      const ok = await front.invoke(gw, "orders", "PutOrder", '{"orderId":"t","createdAt":"2024-02-29T23:30:00+01:00"}');
      assert.equal(ok.success, true, ok.message);
      assert.deepEqual(JSON.parse(ok.responseData), { orderId: "t", createdAt: "2024-02-29T22:30:00Z" });
    });
  }
});
