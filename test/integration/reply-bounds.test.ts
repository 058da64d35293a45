import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";
import { QUERY_INDEX, QUERY_STORE, runtimeFixtures, useGatewayOn } from "../support/runtimes.js";

const KEY = "k1";
const KIB = 1024;

async function save(gw: TestGateway, service: string, key: string, value: string): Promise<void> {
  const res = await fetch(`${gw.http}/v1/state/save-state`, {
    method: "POST",
    headers: { "x-api-key": KEY, "content-type": "application/json" },
    body: JSON.stringify({ service, key, value }),
  });
  assert.equal(res.status, 200, await res.text());
}

function queryUrl(gw: TestGateway, service: string, query: object): string {
  return `${gw.http}/v1/state/${service}/query?query=${encodeURIComponent(JSON.stringify(query))}`;
}

/**
 * A raw HTTP/1.1 client that sends `requests` requests and reads nothing for `stallMs`; then it reads again, to see
 * what the gateway did meanwhile. `result` resolves once the socket is closed: how many bytes arrived after all.
 */
function nonReader(port: number, path: string, requests: number, stallMs: number): Promise<number> {
  const socket = net.connect(port, "127.0.0.1");
  let received = 0;
  socket.on("connect", () => {
    socket.pause(); // the reply piles up in the gateway unless it is bounded
    socket.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`.repeat(requests));
    setTimeout(() => socket.resume(), stallMs);
  });
  socket.on("data", (chunk: Buffer) => (received += chunk.length));
  socket.on("error", () => undefined);
  return new Promise<number>((resolve) => socket.on("close", () => resolve(received)));
}

describe("reply bounds", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      apiKeys: [KEY],
      maxReplyBytes: 1024 * KIB,
      writeStallTimeoutMs: 600,
      services: [
        { name: "paged", state: { storeName: "paged-store", keys: [] } },
        { name: "big", state: { storeName: "big-store", keys: [] } },
      ],
    });
    for (let i = 0; i < 10; i++) await save(gw, "paged", `k${i}`, JSON.stringify({ i, pad: "x".repeat(300 * KIB) }));
    for (let i = 0; i < 3; i++) await save(gw, "big", `b${i}`, "y".repeat(900 * KIB));
  });
  after(async () => {
    await gw.close();
  });

  it("cuts a REST query page at --max-reply-bytes and pages on with the token until every item is read", async () => {
    const keys: string[] = [];
    let token = "";
    for (let page = 0; page < 10; page++) {
      const res = await fetch(queryUrl(gw, "paged", { page: token ? { limit: 100, token } : { limit: 100 } }), { headers: { "x-api-key": KEY } });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.ok(text.length < 1100 * KIB, `page ${page} is ${text.length} bytes`);
      const body = JSON.parse(text) as { items: Array<{ key: string }>; token: string };
      assert.ok(body.items.length >= 1);
      keys.push(...body.items.map((i) => i.key));
      token = body.token;
      if (!token) break;
    }
    assert.deepEqual(keys, ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"]);
  });

  it("cuts a gRPC QueryState page the same way", async () => {
    const r = await unary<{ items: Array<{ key: string }>; token: string }>(gw.client("platform.State"), "QueryState", { service: "paged", query: "{}" }, withKey(KEY));
    assert.deepEqual(r.items.map((i) => i.key), ["k0", "k1", "k2"]);
    assert.ok(r.token, "a cut page carries a token for the rest");
    const next = await unary<{ items: Array<{ key: string }>; token: string }>(
      gw.client("platform.State"),
      "QueryState",
      { service: "paged", query: JSON.stringify({ page: { token: r.token } }) },
      withKey(KEY),
    );
    assert.deepEqual(next.items.map((i) => i.key), ["k3", "k4", "k5"]);
  });

  it("refuses a bulk get over --max-reply-bytes, saying how many keys fit (REST 429, gRPC RESOURCE_EXHAUSTED)", async () => {
    const res = await fetch(`${gw.http}/v1/state/big/bulk?keys=b0&keys=b1&keys=b2`, { headers: { "x-api-key": KEY } });
    assert.equal(res.status, 429);
    const body = (await res.json()) as { message: string };
    assert.match(body.message, /bulk get reply exceeds the limit of 1048576 bytes \(--max-reply-bytes\): the first 1 of 3 stored keys fit/);
    await assert.rejects(unary(gw.client("platform.State"), "GetBulkState", { service: "big", keys: ["b0", "b1"] }, withKey(KEY)), (e: grpc.ServiceError) => {
      assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
      return true;
    });
    const one = await fetch(`${gw.http}/v1/state/big/bulk?keys=b0`, { headers: { "x-api-key": KEY } });
    assert.equal(one.status, 200);
    await one.arrayBuffer();
  });

  it("closes connections that never read their large replies, and /health stays fast meanwhile", async () => {
    // Its own gateway with the default reply bound: pages of ~7.5 MiB, more than the kernel's socket buffers take.
    const big = await startTestGateway({ apiKeys: [KEY], writeStallTimeoutMs: 600, services: [{ name: "big", state: { storeName: "big-store", keys: [] } }] });
    try {
      for (let i = 0; i < 3; i++) await save(big, "big", `b${i}`, "y".repeat(2500 * KIB));
      const port = Number(new URL(big.http).port);
      const path = `/v1/state/big/query?query=${encodeURIComponent("{}")}`;
      const rssBefore = process.memoryUsage().rss;
      const clients = Array.from({ length: 12 }, () => nonReader(port, path, 1, 4000));
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        await (await fetch(`${big.http}/health`)).arrayBuffer();
        const ms = performance.now() - t;
        assert.ok(ms < 1000, `/health took ${ms.toFixed(0)} ms`);
      }
      // Each connection was closed after 600 ms without progress, its reply cut short (~7.5 MiB were due).
      const received = await Promise.race([
        Promise.all(clients),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the gateway did not close the non-reading connections")), 12_000)),
      ]);
      for (const n of received) assert.ok(n < 7 * 1024 * KIB, `a stalled client still got ${n} bytes`);
      const grown = (process.memoryUsage().rss - rssBefore) / (1024 * KIB);
      assert.ok(grown < 400, `RSS grew ${grown.toFixed(0)} MiB`);
      // gRPC: a raw HTTP/2 client asks QueryState for the same page and never reads; the stream is reset.
      const session = http2.connect(`http://${big.grpcAddress}`);
      session.on("error", () => undefined);
      const body = Buffer.concat([Buffer.from([0x0a, 3]), Buffer.from("big"), Buffer.from([0x12, 2]), Buffer.from("{}")]);
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body]);
      const st = session.request({ ":method": "POST", ":path": "/platform.State/QueryState", "content-type": "application/grpc", te: "trailers", "x-api-key": KEY });
      st.on("error", () => undefined);
      st.end(frame);
      st.pause();
      const rst = await Promise.race([
        new Promise<number>((resolve) => st.on("close", () => resolve(st.rstCode ?? -1))),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the gRPC stream that does not read was not reset")), 8000)),
      ]);
      session.destroy();
      assert.equal(rst, http2.constants.NGHTTP2_CANCEL);
      assert.ok(big.logs.some((l) => String(l["msg"]).startsWith("gRPC stream reset: its client read none of the reply")));
      // The gateway still answers a reader in full.
      const res = await fetch(`${big.http}${path}`, { headers: { "x-api-key": KEY } });
      assert.equal(((await res.json()) as { items: unknown[] }).items.length, 3);
    } finally {
      await big.close();
    }
  });
});

// The bound on each runtime: bulk get answers the same on both; a query page over it is cut with a token on embedded
// (its tokens are offsets) and RESOURCE_EXHAUSTED asking for a smaller page.limit on Dapr (the store's tokens), where
// page.limit then pages through everything.
for (const fixture of runtimeFixtures) {
  describe(`reply bounds over ${fixture.name}`, () => {
    // On Dapr a query needs the Redis Stack store and its index; the embedded runtime ignores the index.
    const gw = useGatewayOn(fixture, {
      apiKeys: [KEY],
      maxReplyBytes: 1024 * KIB,
      services: [{ name: "docs", state: { storeName: QUERY_STORE, keys: [], queryIndexName: QUERY_INDEX } }],
    });
    const get = (path: string) => fetch(`${gw().http}${path}`, { headers: { "x-api-key": KEY } });
    before(async () => {
      for (let i = 0; i < 3; i++) await save(gw(), "docs", `d${i}`, JSON.stringify({ name: `d${i}`, pad: "z".repeat(400 * KIB) }));
    });

    it("a bulk get over --max-reply-bytes is 429 / RESOURCE_EXHAUSTED saying how many keys fit", async () => {
      const res = await get("/v1/state/docs/bulk?keys=d0&keys=d1&keys=d2");
      assert.equal(res.status, 429);
      assert.deepEqual(await res.json(), {
        code: 8,
        message: "bulk get reply exceeds the limit of 1048576 bytes (--max-reply-bytes): the first 2 of 3 stored keys fit; ask for fewer keys",
        details: [],
      });
      await assert.rejects(unary(gw().client("platform.State"), "GetBulkState", { service: "docs", keys: ["d0", "d1", "d2"] }, withKey(KEY)), (e: grpc.ServiceError) => {
        assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
        assert.match(e.details, /the first 2 of 3 stored keys fit/);
        return true;
      });
      const two = await get("/v1/state/docs/bulk?keys=d0&keys=d1");
      assert.equal(two.status, 200);
      assert.deepEqual(((await two.json()) as { items: Array<{ key: string }> }).items.map((i) => i.key), ["d0", "d1"]);
    });

    it("a query over --max-reply-bytes: every item is still reachable", async () => {
      const query = (q: object) => get(`/v1/state/docs/query?query=${encodeURIComponent(JSON.stringify(q))}`);
      const whole = await query({});
      if (fixture.name === "embedded") {
        assert.equal(whole.status, 200);
        const page = (await whole.json()) as { items: Array<{ key: string }>; token: string };
        assert.deepEqual(page.items.map((i) => i.key), ["d0", "d1"]);
        assert.ok(page.token);
      } else {
        assert.equal(whole.status, 429);
        assert.deepEqual(await whole.json(), {
          code: 8,
          message: "query reply exceeds the limit of 1048576 bytes (--max-reply-bytes) after 2 items; ask for fewer with page.limit",
          details: [],
        });
      }
      // page.limit pages through all of it on both runtimes, with the gateway's sealed tokens.
      const keys: string[] = [];
      let token = "";
      for (let n = 0; n < 5; n++) {
        const res = await query({ sort: [{ key: "name" }], page: { limit: 2, ...(token ? { token } : {}) } });
        assert.equal(res.status, 200);
        const page = (await res.json()) as { items: Array<{ key: string }>; token: string };
        keys.push(...page.items.map((i) => i.key));
        token = page.token;
        if (!token) break;
      }
      assert.deepEqual(keys, ["d0", "d1", "d2"]);
    });
  });
}
