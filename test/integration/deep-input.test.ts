import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { openFrameSocket } from "../support/web.js";

/** `{"a":{"a":...}}` nested `depth` levels: small in bytes, far deeper than any recursive walk can follow. */
function nested(depth: number): string {
  return '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
}

describe("input nested too deeply", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ services: [{ name: "platform", state: { storeName: "statestore", keys: ["*"] } }] });
  });
  after(() => gw.close());

  const post = (path: string, body: string, type = "application/json") =>
    fetch(`${gw.http}${path}`, { method: "POST", body, headers: { "content-type": type } });

  it("is a 400 naming the problem on every JSON route, and changes nothing", async () => {
    const deep = nested(12_000);
    const cases: Array<[string, string, string?]> = [
      ["/v1/pubsub/deep", `{"specversion":"1.0","id":"1","source":"urn:a:b","type":"t","data":${deep}}`, "application/cloudevents+json"],
      ["/v1/state/save-state", `{"service":"platform","key":"k","value":"v","publish_change":true,"change":{"topic":"t","cloudevent":{"specversion":"1.0","id":"1","source":"urn:a:b","type":"t","data":${deep}}}}`],
      ["/v1/gateway/invoke", `{"service":"platform","method":"M","requestData":${deep}}`],
    ];
    for (const [path, body, type] of cases) {
      const res = await post(path, body, type);
      assert.equal(res.status, 400, path);
      const err = (await res.json()) as { code: number; message: string };
      assert.equal(err.code, 3, path);
      assert.match(err.message, /nests too deeply/, path);
    }
    const get = await fetch(`${gw.http}/v1/state/platform/k`);
    assert.equal(get.status, 404, "the save did not happen");
    assert.equal(gw.logs.filter((l) => l["level"] === "error").length, 0, "no error logged for client input");
  });

  it("the streaming invokes answer it as the caller's error and the gateway keeps serving", async () => {
    const deep = nested(12_000);
    const res = await post("/v1/gateway/invoke-stream", `{"service":"platform","method":"M","requestData":${deep}}`);
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { message: string }).message, /nests too deeply/);

    const c = await openFrameSocket(gw.http.replace("http:", "ws:") + "/v1/gateway/invoke-ws");
    c.ws.send(`{"op":"start","service":"platform","method":"M","requestData":${deep}}`);
    assert.equal(await c.closed, 1000);
    assert.equal(c.frames.length, 1);
    assert.equal(c.frames[0].op, "status");
    assert.equal(c.frames[0].status.success, false);
    assert.match(c.frames[0].status.message, /nests too deeply/);

    assert.equal((await fetch(`${gw.http}/health`)).status, 200, "still serving");
    assert.equal(gw.logs.filter((l) => l["level"] === "error").length, 0, "no error logged for client input");
  });
});
