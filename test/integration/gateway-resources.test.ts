import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { startTestGateway, waitFor, withKey } from "../support/gateway.js";
import { connectSse, connectWs } from "../support/web.js";
import { subscribe } from "./pubsub-support.js";

// Gateway.resources() is what the test gateway's close() checks after every test: it must count what is really open,
// or that check could never fail.

const KEY = "res-key";

describe("Gateway.resources()", () => {
  it("counts open gRPC, WebSocket and SSE subscribers and connections, and all are zero after close()", async () => {
    const gw = await startTestGateway({ apiKeys: [KEY] });
    let closed = false;
    try {
      const idle = gw.gateway.resources();
      for (const [k, v] of Object.entries(idle)) assert.equal(v, 0, `${k} before any client`);
      const sub = subscribe(gw.client("io.cloudevents.v1.Pubsub"), ["res.a"], withKey(KEY));
      await sub.ready();
      const ws = await connectWs(gw.http, { key: KEY });
      ws.send({ op: "subscribe", topics: ["res.b"] });
      await ws.next((f) => f.op === "subscribed", "WebSocket subscribed");
      const sse = await connectSse(gw.http, "topic=res.c", { "x-api-key": KEY });
      assert.equal(sse.status, 200);
      await waitFor(() => gw.gateway.resources()["pubsub.sse"] === 1, "the SSE subscriber to be counted");
      const open = gw.gateway.resources();
      assert.equal(open["grpc.sessions"], 1);
      assert.equal(open["pubsub.subscribers"], 1);
      assert.equal(open["pubsub.grpc-streams"], 1);
      assert.equal(open["pubsub.upstreams"], 3, "one runtime subscription per topic (gRPC, WebSocket, SSE)");
      assert.equal(open["pubsub.websockets"], 1);
      assert.equal(open["pubsub.sse"], 1);
      closed = true;
      await gw.close(); // asserts every counter reaches zero
      assert.equal((await sub.ended()).code, 14, "the Subscribe stream ended UNAVAILABLE");
      assert.ok((await ws.closed()).code > 0);
      await waitFor(() => sse.ended, "the SSE stream to end");
    } finally {
      if (!closed) await gw.close();
    }
  });
});
