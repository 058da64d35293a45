import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { MAX_TRIGGER_NAME } from "../../src/ops/trigger.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { startTestGateway, unary, withKey, type TestGateway } from "../support/gateway.js";

// Each limit at its exact edge: the value at the limit is accepted, one past it is refused.

const KEY = "edge-key";
const MAX_BODY = 2048;

describe("limits at their boundary", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], maxBodyBytes: MAX_BODY, pubsubEventBytes: MAX_BODY });
  });
  after(() => gw.close());

  const post = (path: string, body: string | Buffer | ReadableStream<Uint8Array>, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${gw.http}${path}`, { method: "POST", headers: { "x-api-key": KEY, ...headers }, body, ...(body instanceof ReadableStream ? { duplex: "half" } : {}) } as RequestInit);

  it(`a trigger name of exactly ${MAX_TRIGGER_NAME} characters is accepted, ${MAX_TRIGGER_NAME + 1} is refused naming the field (REST and gRPC)`, async () => {
    const atLimit = "a".repeat(MAX_TRIGGER_NAME);
    const past = "b".repeat(MAX_TRIGGER_NAME + 1);
    const body = JSON.stringify({ target_topic: "edge.tick", schedule: "@hourly" });
    const ok = await post(`/v1/trigger/${atLimit}`, body, { "content-type": "application/json" });
    assert.equal(ok.status, 200, await ok.clone().text());
    const refused = await post(`/v1/trigger/${past}`, body, { "content-type": "application/json" });
    assert.equal(refused.status, 400);
    const err = (await refused.json()) as { code: number; message: string };
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.match(err.message, new RegExp(`^name is ${MAX_TRIGGER_NAME + 1} characters long; the limit is ${MAX_TRIGGER_NAME}`));

    const client = gw.client("platform.Trigger");
    const g1 = await unary(client, "ScheduleTrigger", { name: "c".repeat(MAX_TRIGGER_NAME), target_topic: "edge.tick", schedule: "@hourly" }, withKey(KEY));
    assert.equal(g1.status.success, true, g1.status.message);
    const g2 = await unary(client, "ScheduleTrigger", { name: "d".repeat(MAX_TRIGGER_NAME + 1), target_topic: "edge.tick", schedule: "@hourly" }, withKey(KEY));
    assert.equal(g2.status.success, false);
    assert.equal(g2.status.status, "INVALID_ARGUMENT");
    assert.match(g2.status.message, /^name is 201 characters long/);
    const names = (await unary(client, "ListTriggers", {}, withKey(KEY))).triggers.map((t: { name: string }) => t.name).sort();
    assert.deepEqual(names, [atLimit, "c".repeat(MAX_TRIGGER_NAME)], "only the names at the limit were stored");
    for (const name of names) assert.equal((await unary(client, "DeleteTrigger", { name }, withKey(KEY))).status.success, true);
  });

  it(`a REST body of exactly --max-body-bytes (${MAX_BODY}) is accepted, one byte more is 413, with and without content-length`, async () => {
    const headers = { "content-type": "application/octet-stream", "ce-source": "urn:test:edge", "ce-type": "com.test.edge", "ce-id": "x" };
    /** The same bytes as a stream: fetch sends them chunked, so the gateway counts them as they arrive. */
    const chunked = (n: number): ReadableStream<Uint8Array> =>
      new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(n - 1).fill(7));
          c.enqueue(new Uint8Array(1).fill(7));
          c.close();
        },
      });
    for (const [how, body] of [
      ["content-length", (n: number) => Buffer.alloc(n, 7)],
      ["chunked", chunked],
    ] as const) {
      const ok = await post("/v1/pubsub/edge", body(MAX_BODY), headers);
      assert.equal(ok.status, 200, `${how}: ${await ok.clone().text()}`);
      assert.deepEqual(await ok.json(), { status: { success: true, status: "OK", message: "" } });
      const over = await post("/v1/pubsub/edge", body(MAX_BODY + 1), headers);
      assert.equal(over.status, 413, how);
      const err = (await over.json()) as { code: number; message: string };
      assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(err.message, new RegExp(`exceeds the limit of ${MAX_BODY} bytes`));
    }
  });

  it(`a gRPC request message of exactly --max-body-bytes is accepted, one byte more is RESOURCE_EXHAUSTED`, async () => {
    const def = (gatewayPackageDefinition()["platform.Config"] as grpc.ServiceDefinition)["GetService"]!;
    /** A GetService request whose serialized size is exactly n bytes (a name of the right length). */
    const sized = (n: number): { name: string } => {
      for (let len = n; len > 0; len--) {
        const req = { name: "n".repeat(len) };
        if (def.requestSerialize(req).length === n) return req;
      }
      throw new Error(`no GetService request of ${n} bytes`);
    };
    assert.equal(def.requestSerialize(sized(MAX_BODY)).length, MAX_BODY);
    const client = gw.client("platform.Config");
    // At the limit the message is read and answered (NOT_FOUND: no service of that name), not refused for its size.
    await assert.rejects(unary(client, "GetService", sized(MAX_BODY), withKey(KEY)), (e: grpc.ServiceError) => e.code === grpc.status.NOT_FOUND);
    await assert.rejects(
      unary(client, "GetService", sized(MAX_BODY + 1), withKey(KEY)),
      (e: grpc.ServiceError) => e.code === grpc.status.RESOURCE_EXHAUSTED && /larger than max \(2049 vs 2048\)/.test(e.details),
    );
  });
});
