import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../src/shared/code.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { connectSse, connectWs, type SseTestClient, type WsTestClient } from "../support/web.js";
import { publish, subscribe, type Sub } from "./pubsub-support.js";

/*
 * One extension attribute name rule (shared/cloudevent.ts attributeNameProblem) on every publish front: gRPC
 * PublishEvent hands its decoded attributes map to the publish op as is, so the op's check (validatePublish) is where
 * its names are refused. A refused publish delivers nothing: the WebSocket, SSE and gRPC subscribers of the topic see
 * the next good event first. And whatever reaches the JSON format, an attribute cannot fake the event's own members.
 */

const KEY = "attr-key";
const TOPIC = "attr.names";

describe("CloudEvent attribute names on every publish front", () => {
  let gw: TestGateway;
  let client: grpc.Client;
  let ws: WsTestClient;
  let sse: SseTestClient;
  let sub: Sub;
  const md = (): grpc.Metadata => withKey(KEY);
  let sentinels = 0;

  /** Publish a good event and assert it is the next one every subscriber sees: nothing refused got through. */
  async function nothingDeliveredSince(seen: { ws: number; sse: number; grpc: number }): Promise<void> {
    const id = `sentinel-${++sentinels}`;
    const r = await publish(client, TOPIC, { id, source: "urn:test:attr", type: "t", text_data: "ok" }, md());
    assert.equal(r.status.success, true, JSON.stringify(r));
    await waitFor(() => ws.events().length > seen.ws && sse.events().length > seen.sse && sub.got.length > seen.grpc, `${id} on every subscriber`);
    assert.equal(ws.events()[seen.ws].cloudevent.id, id, "WebSocket: the next event is the sentinel");
    assert.equal(sse.events()[seen.sse].cloudevent.id, id, "SSE: the next event is the sentinel");
    assert.equal(sub.got[seen.grpc].cloudevent.id, id, "gRPC Subscribe: the next event is the sentinel");
  }
  const counts = () => ({ ws: ws.events().length, sse: sse.events().length, grpc: sub.got.length });

  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], corsOrigins: ["http://127.0.0.1:1"], tokenSecret: "a-test-secret-of-some-length" });
    client = gw.client("io.cloudevents.v1.Pubsub");
    ws = await connectWs(gw.http, { key: KEY });
    ws.send({ op: "subscribe", topics: [TOPIC], id: "s1" });
    await ws.next((f) => f.op === "subscribed", "subscribed");
    sse = await connectSse(gw.http, `topic=${TOPIC}`, { "x-api-key": KEY });
    assert.equal(sse.status, 200);
    sub = subscribe(client, [TOPIC], md());
    await sub.ready();
    // SSE goes live asynchronously: wait until a first event reaches it.
    await nothingDeliveredSince(counts());
  });
  after(async () => {
    ws.ws.terminate();
    sse.abort();
    sub.call.cancel();
    await waitFor(() => sub.status !== undefined, "the Subscribe stream to end");
    await gw.close();
  });

  it("gRPC PublishEvent: a reserved, empty, oversize or malformed attribute name is INVALID_ARGUMENT naming it; nothing is delivered", async () => {
    const seen = counts();
    const long = "x".repeat(300);
    const cases: Array<[string, RegExp]> = [
      ["data_base64", /^cloudevent\.attributes\.data_base64 is not a valid attribute name \(reserved: /],
      ["data", /^cloudevent\.attributes\.data is not a valid attribute name \(reserved: /],
      ["id", /^cloudevent\.attributes\.id is not a valid attribute name \(reserved: /],
      ["", /^cloudevent\.attributes\."" is not a valid attribute name \(it is empty\)$/],
      ["__proto__", /^cloudevent\.attributes\.__proto__ is not a valid attribute name \(lower-case letters and digits only\)$/],
      ["Tenant", /^cloudevent\.attributes\.Tenant is not a valid attribute name/],
      // The name is echoed cut (echo()), not whole.
      [long, /^cloudevent\.attributes\.x{256}…\(44 more characters\) is not a valid attribute name \(at most 64 characters, got 300\)$/],
    ];
    for (const [name, pattern] of cases) {
      // No data: an attribute named data/data_base64 would be the only "data" a JSON-format subscriber sees.
      const ce = { id: `bad-${name.slice(0, 10)}`, source: "urn:test:attr", type: "t", attributes: { tenant: { ce_string: "acme" }, [name]: { ce_string: "SGVsbG8=" } } };
      await assert.rejects(publish(client, TOPIC, ce, md()), (e: grpc.ServiceError) => {
        assert.equal(Code[e.code], "INVALID_ARGUMENT", `${name}: ${e.details}`);
        assert.match(e.details, pattern, JSON.stringify(name));
        return true;
      });
    }
    await nothingDeliveredSince(seen);
  });

  it("REST binary mode: ce-data (a reserved name) is 400 naming the header; nothing is delivered", async () => {
    const seen = counts();
    const res = await fetch(`${gw.http}/v1/pubsub/${TOPIC}`, {
      method: "POST",
      headers: { "x-api-key": KEY, "ce-specversion": "1.0", "ce-id": "b1", "ce-source": "urn:test:attr", "ce-type": "t", "ce-data": "SGVsbG8=" },
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { code: number; message: string };
    assert.equal(body.code, Code.INVALID_ARGUMENT);
    assert.match(body.message, /^ce-data is not a valid attribute name \(reserved: /);
    await nothingDeliveredSince(seen);
  });

  it("an event that reached the runtime with such attributes anyway cannot fake its data or id to JSON-format subscribers", async () => {
    const seen = counts();
    // Straight into the runtime, past every front's check: what a path that forgot the check would publish.
    const forged: CloudEvent = {
      id: "real-id",
      source: "urn:test:attr",
      spec_version: "1.0",
      type: "t",
      attributes: { data: { ce_string: "fake" }, data_base64: { ce_string: "ZmFrZQ==" }, id: { ce_string: "fake-id" }, tenant: { ce_string: "acme" } },
    };
    await gw.gateway.context.runtime.pubsub.publish(TOPIC, forged);
    await waitFor(() => ws.events().length > seen.ws && sse.events().length > seen.sse, "the event on WebSocket and SSE");
    for (const [front, e] of [
      ["WebSocket", ws.events()[seen.ws].cloudevent],
      ["SSE", sse.events()[seen.sse].cloudevent],
    ] as const) {
      assert.equal(e.id, "real-id", front);
      assert.equal(e.tenant, "acme", front);
      assert.equal(e.data, undefined, `${front}: no data the publisher never set`);
      assert.equal(e.data_base64, undefined, `${front}: no data_base64 the publisher never set`);
    }
  });
});
