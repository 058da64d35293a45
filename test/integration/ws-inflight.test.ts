import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createRuntime } from "../../src/runtime/index.js";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { wrapRuntime } from "../support/state-runtime.js";
import { ceJson, connectWs, type WsTestClient } from "../support/web.js";

const KEY = "inflight-key";
/** Requests one WebSocket may have in flight, as docs/web-pubsub.md states it (not read from the code under test). */
const MAX_WS_INFLIGHT = 32;
/** Publishes to this topic wait in the runtime until the test releases them. */
const HELD = "held";
/** Longest a held publish waits before it fails on its own, so nothing outlives a failed test. */
const HOLD_MS = 15_000;

/** Publishes to HELD, held in the runtime until release(): they stay in flight on the socket that sent them. */
class PublishGate {
  private readonly waiting: Array<{ resolve(): void; reject(e: Error): void }> = [];
  /** Publishes being held now. */
  get held(): number {
    return this.waiting.length;
  }
  hold(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new GatewayError(Code.DEADLINE_EXCEEDED, "held too long")), HOLD_MS);
      t.unref();
      this.waiting.push({
        resolve: () => (clearTimeout(t), resolve()),
        reject: (e) => (clearTimeout(t), reject(e)),
      });
    });
  }
  /** Let every held publish succeed, or fail with UNAVAILABLE. */
  release(outcome: "ok" | "fail"): void {
    for (const w of this.waiting.splice(0)) {
      if (outcome === "ok") w.resolve();
      else w.reject(new GatewayError(Code.UNAVAILABLE, "injected: the broker refused the held publish"));
    }
  }
}

const REFUSAL = { op: "error", code: "RESOURCE_EXHAUSTED", message: `more than ${MAX_WS_INFLIGHT} requests in flight on this socket` };

describe(`WebSocket: at most ${MAX_WS_INFLIGHT} requests in flight per socket (RESOURCE_EXHAUSTED past it)`, () => {
  let gw: TestGateway;
  const gate = new PublishGate();

  before(async () => {
    const base = await createRuntime("embedded", { pubsubName: "pubsub", host: "127.0.0.1", grpcPort: 0, logger: { debug() {}, info() {}, warn() {}, error() {} } });
    const publish = base.pubsub.publish.bind(base.pubsub);
    const runtime = wrapRuntime(base, { pubsub: { publish: async (topic, event, signal) => (topic === HELD ? gate.hold() : publish(topic, event, signal)) } });
    gw = await startTestGateway({ apiKeys: [KEY] }, { runtime });
  });
  after(async () => {
    gate.release("ok");
    await gw.close();
  });

  /**
   * Send `n` held publishes with ids from `first`, then one more: the first `n` reach the runtime and stay there, and
   * the extra one is refused at once (never published) and is the only frame the socket gets meanwhile.
   */
  async function fill(c: WsTestClient, first: number, n: number): Promise<void> {
    const framesBefore = c.frames.length;
    for (let i = 0; i < n + 1; i++) c.send({ op: "publish", topic: HELD, cloudevent: ceJson(first + i), id: first + i });
    // The refusal, or (a bound too loose) one publish too many held: whichever comes first.
    await waitFor(() => c.frames.length > framesBefore || gate.held > n, `the refusal of request ${n + 1} or more than ${n} held publishes`);
    await waitFor(() => gate.held >= n, `${n} publishes held in the runtime`);
    assert.equal(gate.held, n, `publishes that reached the runtime (${n} expected)`);
    // The refusal names no id: it is decided before the frame is parsed.
    assert.deepEqual(c.frames.slice(framesBefore), [REFUSAL]);
  }

  it("32 in flight are taken, the 33rd is refused; completed or failed ones free their place", async () => {
    const c = await connectWs(gw.http, { key: KEY });
    try {
      // 32 publishes held in the runtime, the 33rd refused.
      await fill(c, 1, MAX_WS_INFLIGHT);
      // They complete: each is acknowledged by id, and all 32 places are free again.
      let mark = c.frames.length;
      gate.release("ok");
      await waitFor(() => c.frames.length === mark + MAX_WS_INFLIGHT, `${MAX_WS_INFLIGHT} acknowledgements`);
      assert.deepEqual(
        c.frames.slice(mark).map((f) => f.op + ":" + f.id),
        Array.from({ length: MAX_WS_INFLIGHT }, (_, i) => `published:${i + 1}`),
      );

      await fill(c, 100, MAX_WS_INFLIGHT);
      // They fail in the runtime: each gets its error frame by id, and the places are free again too.
      mark = c.frames.length;
      gate.release("fail");
      await waitFor(() => c.frames.length === mark + MAX_WS_INFLIGHT, `${MAX_WS_INFLIGHT} error frames`);
      for (const [i, f] of c.frames.slice(mark).entries()) {
        assert.equal(f.op, "error");
        assert.equal(f.id, 100 + i);
        assert.equal(f.code, "UNAVAILABLE");
        assert.match(f.message, /publishing to topic 'held' failed: injected: the broker refused the held publish/);
      }

      await fill(c, 200, MAX_WS_INFLIGHT);
      mark = c.frames.length;
      gate.release("ok");
      await waitFor(() => c.frames.length === mark + MAX_WS_INFLIGHT, `${MAX_WS_INFLIGHT} acknowledgements`);
      // A request that completes at once is still taken after all that.
      c.send({ op: "unsubscribe", topics: [], id: "u" });
      assert.deepEqual(await c.next((f) => f.id === "u", "the unsubscribe answer"), { op: "unsubscribed", id: "u", topics: [] });
    } finally {
      gate.release("ok");
      c.ws.terminate();
    }
  });

  it("the bound is per socket: another socket's requests are taken while one is full", async () => {
    const a = await connectWs(gw.http, { key: KEY });
    const b = await connectWs(gw.http, { key: KEY });
    try {
      await fill(a, 1, MAX_WS_INFLIGHT);
      b.send({ op: "publish", topic: HELD, cloudevent: ceJson(500), id: 500 });
      await waitFor(() => gate.held === MAX_WS_INFLIGHT + 1, "the other socket's publish held too");
      assert.deepEqual(b.frames, []);
      gate.release("ok");
      await b.next((f) => f.op === "published" && f.id === 500, "the other socket's acknowledgement");
    } finally {
      gate.release("ok");
      a.ws.terminate();
      b.ws.terminate();
    }
  });
});
