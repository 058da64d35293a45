/**
 * A backend whose schema comes from another thread (a uWS thread's SchemaSource, the main thread's one reflection):
 * what it asks for, and when. The main thread's side (answering a miss on an older schema with its newer one, not a
 * second reflection) is checked end to end in test/integration/threads-process.test.ts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createBackend, type SchemaSource } from "../../src/backends/backend.js";
import { GATEWAY_SERVICES, gatewayFileDescriptors } from "../../src/shared/protos.js";
import { Code } from "../../src/shared/code.js";

describe("a backend's schema from a SchemaSource", () => {
  it("takes the source's current schema first; a method it lacks asks for a fresh one, naming the schema that missed it", async () => {
    const asked: Array<{ fresh: boolean; stale: string | undefined }> = [];
    const source: SchemaSource = async (_service, fresh, _signal, stale) => {
      asked.push({ fresh, stale });
      return { files: gatewayFileDescriptors(), services: [...GATEWAY_SERVICES], version: "v1" };
    };
    const b = createBackend({ name: "own", host: "127.0.0.1", port: 1, channels: 1, maxReceiveBytes: 1 << 20, minRefreshIntervalMs: 0, schemaSource: source });
    try {
      const schema = await b.schema();
      assert.deepEqual(asked, [{ fresh: false, stale: undefined }]);
      await assert.rejects(b.resolve("platform.Gateway/NoSuchMethod"), (e: any) => e.code === Code.NOT_FOUND && /NoSuchMethod/.test(e.message));
      assert.deepEqual(asked[1], { fresh: true, stale: schema.set.id }, "the miss names the schema it missed the method in");
      await b.refresh();
      assert.deepEqual(asked[2], { fresh: true, stale: undefined }, "an explicit refresh names none: the source reflects again");
      assert.equal((await b.resolve("platform.Gateway/InvokeJson")).method.fullName, "platform.Gateway/InvokeJson");
      assert.equal(asked.length, 3, "a method the schema has asks nothing");
    } finally {
      b.close();
    }
  });
});
