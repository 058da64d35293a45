import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { startTestRedis, type TestRedisServer } from "../support/redis-server.js";
import { until } from "./support.js";

/** The `sidecar` entry of GET /health. */
async function sidecarHealth(gw: TestGateway): Promise<{ status: string; description: string }> {
  const r = await fetch(`${gw.http}/health`);
  const body = (await r.json()) as { entries?: Record<string, { status: string; description: string }> };
  const entry = body.entries?.["sidecar"];
  assert.ok(entry, `health has a sidecar entry: ${JSON.stringify(body)}`);
  return entry;
}

describe("a gateway on --sidecar redis", () => {
  let server: TestRedisServer;
  let gw: TestGateway;
  before(async () => {
    server = await startTestRedis();
    // A URL with credentials: the server takes no password (ioredis then only warns), and nothing may log it.
    gw = await startTestGateway({
      sidecar: "redis",
      redisUrl: `redis://:secretpw@127.0.0.1:${server.port}`,
      services: [{ name: "orders", state: { storeName: "orders-store", keys: [] } }],
    });
  });
  after(async () => {
    await gw?.close();
    await server?.close();
  });

  it("/health reports Redis with its address and version; Unhealthy while it is down; state works again after", async () => {
    await until(async () => (await sidecarHealth(gw)).status === "Healthy", 5000, "healthy");
    assert.match((await sidecarHealth(gw)).description, new RegExp(`^redis at 127\\.0\\.0\\.1:${server.port} \\(version 7\\.`));
    const save = () =>
      fetch(`${gw.http}/v1/state/save-state`, { method: "POST", body: JSON.stringify({ service: "orders", key: "k", value: "v" }), headers: { "content-type": "application/json" } });
    assert.equal((await save()).status, 200);

    await server.stop("kill");
    await until(async () => (await sidecarHealth(gw)).status === "Unhealthy", 5000, "unhealthy");
    assert.match((await sidecarHealth(gw)).description, /redis at 127\.0\.0\.1:\d+ is unreachable/);
    const t0 = Date.now();
    const down = await save();
    assert.equal(down.status, 503, "UNAVAILABLE while Redis is down");
    assert.ok(Date.now() - t0 < 5000, "fails fast");

    await server.restart();
    await until(async () => (await save()).status === 200, 10_000, "saves work again");
    const got = await fetch(`${gw.http}/v1/state/orders/k`);
    assert.equal(got.status, 200);
    assert.equal(JSON.stringify(gw.logs).includes("secretpw"), false, "the password is never logged");
  });
});
