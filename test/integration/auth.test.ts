import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { reflectionCall } from "../support/reflection.js";

describe("x-api-key authentication", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: ["key-one", "key-two"] });
  });
  after(() => gw.close());

  it("REST: a missing or wrong key is 401 with the error body; every configured key works", async () => {
    const url = `${gw.http}/v1/config/list-services`;
    for (const headers of [{}, { "x-api-key": "wrong" }, { "x-api-key": "" }, { "x-api-key": "key-on" }] as Array<Record<string, string>>) {
      const res = await fetch(url, { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.deepEqual(await res.json(), { code: 16, message: "missing or invalid x-api-key", details: [] });
    }
    for (const key of ["key-one", "key-two"]) {
      assert.equal((await fetch(url, { headers: { "x-api-key": key } })).status, 200);
    }
  });

  it("REST: an unauthenticated request runs nothing, even on an unknown path it gets 404 not data", async () => {
    const res = await fetch(`${gw.http}/v1/config/get-service?name=x`);
    assert.equal(res.status, 401);
  });

  it("/health and /metrics need no key", async () => {
    assert.equal((await fetch(`${gw.http}/health`)).status, 200);
    assert.equal((await fetch(`${gw.http}/metrics`)).status, 200);
  });

  it("gRPC: a missing or wrong key is UNAUTHENTICATED", async () => {
    const c = gw.client("platform.Config");
    for (const md of [new grpc.Metadata(), withKey("nope")]) {
      await assert.rejects(unary(c, "ListServices", {}, md), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
    }
    const ok = await unary(c, "ListServices", {}, withKey("key-two"));
    assert.deepEqual(ok.services, []);
  });

  it("gRPC reflection needs the key too", async () => {
    await assert.rejects(reflectionCall(gw.grpcAddress, "v1", { list_services: "*" }), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
    const res = await reflectionCall(gw.grpcAddress, "v1", { list_services: "*" }, withKey("key-one"));
    assert.ok(res.list_services_response);
  });
});

describe("no key configured", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({});
  });
  after(() => gw.close());

  it("accepts callers without a key on loopback and warns in the log", async () => {
    assert.equal((await fetch(`${gw.http}/v1/config/list-services`)).status, 200);
    assert.ok(gw.logs.some((l) => l["level"] === "warn" && String(l["msg"]).includes("no API key configured")));
  });
});
