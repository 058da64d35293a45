import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import * as grpc from "@grpc/grpc-js";
import { startTestGateway, unary } from "../support/gateway.js";

/** GET over an explicit keep-alive agent so a second request reuses the first one's connection. */
function get(url: string, agent: import("node:http").Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { agent }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

describe("graceful shutdown", () => {
  it("refuses new work with UNAVAILABLE / 503 once closing, then stops; close() twice is safe", async () => {
    const gw = await startTestGateway({ shutdownTimeoutMs: 2000 });
    const { Agent } = await import("node:http");
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const c = gw.client("platform.Config");
    assert.equal((await get(`${gw.http}/v1/config/list-services`, agent)).status, 200);
    await unary(c, "ListServices", {});

    const closing = gw.gateway.close();
    const rest = await get(`${gw.http}/v1/config/list-services`, agent).catch((e: Error) => ({ status: -1, body: e.message }));
    // Either the kept-alive connection answers 503, or it was already closed: never a 200.
    assert.ok(rest.status === 503 || rest.status === -1, `status ${rest.status}`);
    if (rest.status === 503) assert.equal((JSON.parse(rest.body) as { code: number }).code, 14);
    await assert.rejects(unary(c, "ListServices", {}), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
    assert.equal(gw.gateway.close(), closing, "close() twice returns the same promise");
    await closing;
    gw.gateway.destroy();
    gw.gateway.destroy();
    assert.ok(gw.logs.some((l) => l["msg"] === "gateway stopped"));
    agent.destroy();
    c.close();
  });
});
