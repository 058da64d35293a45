import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { subscribeWeb, Code, type WebEventMessage } from "../../src/client/index.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { within } from "../support/client-helpers.js";

const KEY = "client-web-key";

function event(n: number): CloudEvent {
  return { id: `e${n}`, source: "urn:c", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: JSON.stringify({ n }), data: "text_data" } as CloudEvent;
}

describe("client: subscribeWeb over WebSocket and SSE from Node", () => {
  let gw: TestGateway;
  let proxy: TcpProxy;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], tokenSecret: "client-web-secret-0123456789" });
    proxy = await startTcpProxy(gw.gateway.httpPort);
  });
  after(async () => {
    proxy.close();
    await gw.close();
  });
  const publish = async (topic: string, from: number, to: number): Promise<void> => {
    for (let n = from; n <= to; n++) await gw.gateway.context.runtime.pubsub.publish(topic, event(n));
  };

  for (const transport of ["websocket", "sse"] as const) {
    it(`${transport}: delivers in order and resumes after its connection is cut, nothing lost or duplicated`, async () => {
      const topic = `cw-${transport}`;
      const got: WebEventMessage[] = [];
      const recoveries: boolean[] = [];
      const sub = subscribeWeb({
        url: `http://127.0.0.1:${proxy.port}`,
        transport,
        topics: [topic],
        apiKey: KEY,
        reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
        onEvent: (e) => got.push(e),
        onRecovery: (r) => recoveries.push(r),
      });
      await waitFor(() => sub.position !== undefined, "live");
      await publish(topic, 1, 5);
      await waitFor(() => got.length === 5, "5 events");
      const at = sub.position;
      proxy.dropAll();
      await publish(topic, 6, 10);
      await waitFor(() => got.length === 10, "10 events after the reconnect", 8000);
      assert.deepEqual(got.map((e) => (e.cloudevent["data"] as { n: number }).n), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      assert.ok(at !== undefined);
      assert.ok(recoveries.includes(true), `resumed exactly (${JSON.stringify(recoveries)})`);
      sub.close();
      assert.equal(await within(sub.ended, "the closed subscription to end"), null);
    });
  }

  it("a refusal ends the subscription with the gateway's code", async () => {
    const sub = subscribeWeb({ url: gw.http, transport: "sse", topics: ["x"], apiKey: "wrong", onEvent: () => undefined });
    const ws = subscribeWeb({ url: gw.http, transport: "websocket", topics: ["x"], apiKey: "wrong", onEvent: () => undefined });
    // The WebSocket subscribe rides in the upgrade URL: a bad topic is refused with the upgrade, naming it.
    const long = subscribeWeb({ url: gw.http, transport: "websocket", topics: ["ok", "t".repeat(2000)], apiKey: KEY, onEvent: () => undefined });
    try {
      const tooLong = await within(long.ended, "the refused WebSocket subscription to end");
      assert.equal(tooLong?.code, Code.INVALID_ARGUMENT);
      assert.match(tooLong!.message, /topic\[1\] must be at most 1024 characters/);
      const err = await within(sub.ended, "the refused SSE subscription to end (not reconnect)");
      assert.equal(err?.code, Code.UNAUTHENTICATED);
      assert.equal((await within(ws.ended, "the refused WebSocket subscription to end (not reconnect)"))?.code, Code.UNAUTHENTICATED);
    } finally {
      // A client that kept retrying would otherwise hold the test process open.
      sub.close();
      ws.close();
      long.close();
    }
    assert.throws(() => subscribeWeb({ url: "ftp://x", transport: "sse", topics: ["x"], onEvent: () => undefined }), /url/);
  });
});

