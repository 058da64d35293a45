import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { makeTestPki } from "../support/certs.js";

const services = [
  { name: "orders", grpc: { host: "127.0.0.1", port: 50999 }, pubsub: { pubsubName: "pubsub" }, state: { storeName: "orders-store", keys: ["order.*"] } },
  { name: "shared-components", pubsub: { pubsubName: "pubsub" } },
];

describe("config listing", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ services, apiKeys: ["k1"] });
  });
  after(() => gw.close());

  it("lists every registered service over REST, non-dialable included", async () => {
    const res = await fetch(`${gw.http}/v1/config/list-services`, { headers: { "x-api-key": "k1" } });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { services: Array<{ name: string }> };
    assert.deepEqual(body.services.map((s) => s.name), ["orders", "shared-components"]);
    assert.deepEqual(body.services[0], services[0]);
  });

  it("get-service returns the entry, null when unknown, 400 without name", async () => {
    const h = { headers: { "x-api-key": "k1" } };
    assert.deepEqual(await (await fetch(`${gw.http}/v1/config/get-service?name=orders`, h)).json(), services[0]);
    const unknown = await fetch(`${gw.http}/v1/config/get-service?name=nope`, h);
    assert.equal(unknown.status, 200);
    assert.equal(await unknown.json(), null);
    const missing = await fetch(`${gw.http}/v1/config/get-service`, h);
    assert.equal(missing.status, 400);
    assert.match(((await missing.json()) as { message: string }).message, /name/);
  });

  it("serves platform.Config over gRPC with NOT_FOUND for an unknown name", async () => {
    const c = gw.client("platform.Config");
    const list = await unary(c, "ListServices", {}, withKey("k1"));
    assert.deepEqual(list.services.map((s: { name: string }) => s.name), ["orders", "shared-components"]);
    assert.equal(list.services[0].state.store_name, "orders-store");
    assert.equal(list.services[1].grpc, null);
    const one = await unary(c, "GetService", { name: "orders" }, withKey("k1"));
    assert.deepEqual(one.service.grpc, { host: "127.0.0.1", port: 50999 });
    await assert.rejects(unary(c, "GetService", { name: "nope" }, withKey("k1")), (e: { code: number; details: string }) => {
      assert.equal(e.code, 5);
      assert.match(e.details, /nope/);
      return true;
    });
  });
});

describe("config listing: the spec's fields only", () => {
  let gw: TestGateway;
  const pki = makeTestPki();
  before(async () => {
    gw = await startTestGateway({
      apiKeys: ["k1"],
      services: [
        {
          name: "secure",
          grpc: { host: "127.0.0.1", port: 50998, channels: 3, tls: { ca: pki.files.ca, cert: pki.files.clientCert, key: pki.files.clientKey, serverName: "localhost" } },
          state: { storeName: "s", keys: ["*"], queryIndexName: "idx" },
          jobs: { crons: [{ name: "nightly", schedule: "0 0 0 * * *", targetTopic: "t" }] },
        },
      ],
    });
  });
  after(() => gw.close());

  it("leaves out how the gateway dials a backend (channels, the TLS key files) and the query index, on both fronts", async () => {
    const h = { headers: { "x-api-key": "k1" } };
    const expected = {
      name: "secure",
      grpc: { host: "127.0.0.1", port: 50998 },
      state: { storeName: "s", keys: ["*"] },
      jobs: { crons: [{ name: "nightly", schedule: "0 0 0 * * *", targetTopic: "t" }] },
    };
    const list = (await (await fetch(`${gw.http}/v1/config/list-services`, h)).json()) as { services: unknown[] };
    assert.deepEqual(list.services, [expected]);
    assert.deepEqual(await (await fetch(`${gw.http}/v1/config/get-service?name=secure`, h)).json(), expected);
    const text = JSON.stringify(list);
    assert.ok(!text.includes(pki.files.clientKey) && !text.includes("idx"), text);
    const grpcList = await unary(gw.client("platform.Config"), "ListServices", {}, withKey("k1"));
    assert.ok(!JSON.stringify(grpcList).includes(pki.files.clientKey));
  });
});
