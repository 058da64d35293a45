import { after, before, describe, it } from "node:test";
import { connect } from "node:net";
import assert from "node:assert/strict";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { connectWs, type WsTestClient } from "../support/web.js";
import { metric } from "./pubsub-support.js";
import { wsSocket } from "../support/ws-internals.js";

const KEY = "slow-key";
/** The default nominal event size: the bound is 1024 x 1 KiB = 1 MiB of queued frames. */
const EVENT_BYTES = 1024;
const OTHERS = 500;

/** An event whose WebSocket frame is about EVENT_BYTES long. */
function event(n: number): CloudEvent {
  return { id: `e${n}`, source: "urn:t", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "text/plain" } }, text_data: "x".repeat(EVENT_BYTES - 140), data: "text_data" } as CloudEvent;
}

describe("web pub/sub: a WebSocket subscriber that stops reading", () => {
  let gw: TestGateway;
  const clients: WsTestClient[] = [];
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], logLevel: "info" });
  });
  after(async () => {
    for (const c of clients) c.ws.terminate();
    await gw.close();
  });

  it(`is closed slow past the 1024-event bound while ${OTHERS} others get every event on time`, async () => {
    const counts = new Array<number>(OTHERS).fill(0);
    const inOrder = new Array<boolean>(OTHERS).fill(true);
    for (let i = 0; i < OTHERS; i++) {
      const c = await connectWs(gw.http, { key: KEY });
      clients.push(c);
      // Count instead of keeping 500 x N frames.
      c.ws.removeAllListeners("message");
      // No JSON.parse per frame (2 M frames): the event id is found in the text.
      c.ws.on("message", (d) => {
        const text = d.toString();
        if (!text.startsWith('{"op":"event"')) return;
        if (!text.includes(`"id":"e${counts[i]}"`)) inOrder[i] = false;
        counts[i]!++;
      });
      c.send({ op: "subscribe", topics: ["fan"] });
    }
    const slow = await connectWs(gw.http, { key: KEY });
    clients.push(slow);
    slow.send({ op: "subscribe", topics: ["fan"] });
    await slow.next((f) => f.op === "subscribed", "slow subscribed");
    await waitFor(() => gw.gateway.context.runtime !== undefined && clients.length === OTHERS + 1, "clients");
    await new Promise((r) => setTimeout(r, 300));
    // Stop reading: the kernel buffers fill, then uWS backpressure grows past the bound.
    wsSocket(slow.ws).pause();
    const before = (await metric(gw.http, "platform_pubsub_web_reaped_total", '{transport="websocket",reason="slow"}')) ?? 0;
    const started = Date.now();
    let sent = 0;
    let reapedAt = 0;
    // Publish until the slow one is reaped (plus a margin), bounded.
    for (; sent < 20_000; sent++) {
      await gw.gateway.context.runtime.pubsub.publish("fan", event(sent));
      if (sent % 100 === 99) {
        await new Promise((r) => setImmediate(r));
        if (!reapedAt && ((await metric(gw.http, "platform_pubsub_web_reaped_total", '{transport="websocket",reason="slow"}')) ?? 0) > before) reapedAt = sent;
        if (reapedAt && sent >= reapedAt + 200) break;
      }
    }
    sent++;
    assert.ok(reapedAt > 0, `the slow subscriber was reaped (published ${sent})`);
    assert.ok(reapedAt >= 1024, `not before the bound: reaped after ${reapedAt} events`);
    await waitFor(() => counts.every((n) => n === sent), `every one of ${OTHERS} others got all ${sent} events`, 15_000);
    const elapsed = Date.now() - started;
    assert.ok(inOrder.every(Boolean), "in order");
    wsSocket(slow.ws).resume();
    const closed = await slow.closed(10_000);
    assert.ok(closed.code === 4008 || closed.code === 1006, `closed ${closed.code}`);
    if (closed.code === 4008) assert.equal(closed.reason, "slow");
    assert.ok(slow.events().length < sent, "the slow one did not get everything");
    console.log(`# ${sent} events x ${OTHERS} subscribers in ${elapsed} ms; slow reaped after ${reapedAt}`);
  });

  it("an SSE subscriber that stops reading is closed slow past 1024 events buffered in the gateway", async () => {
    const before = (await metric(gw.http, "platform_pubsub_web_reaped_total", '{transport="sse",reason="slow"}')) ?? 0;
    const sock = connect(gw.gateway.httpPort, "127.0.0.1");
    await new Promise((r) => sock.once("connect", r));
    sock.write(`GET /v1/pubsub/events?topic=sse-slow HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`);
    let head = "";
    await new Promise<void>((resolve) => {
      const onData = (d: Buffer): void => {
        head += d.toString();
        if (head.includes("id: ")) {
          sock.off("data", onData);
          resolve();
        }
      };
      sock.on("data", onData);
    });
    assert.match(head, /^HTTP\/1\.1 200/);
    sock.pause();
    let reapedAt = 0;
    for (let sent = 0; sent < 30_000 && !reapedAt; sent++) {
      await gw.gateway.context.runtime.pubsub.publish("sse-slow", event(sent));
      if (sent % 200 === 199 && ((await metric(gw.http, "platform_pubsub_web_reaped_total", '{transport="sse",reason="slow"}')) ?? 0) > before) reapedAt = sent;
    }
    assert.ok(reapedAt >= 1024, `reaped after ${reapedAt} events, not before the bound`);
    sock.destroy();
  });
});
