import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MessageChannel } from "node:worker_threads";
import { createBridge, withTransfer, type Bridge, type BridgeHandler } from "../../src/threads/bridge.js";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";

/** Two bridge ends over a real MessageChannel: `a` calls, `b` answers with `handlers`. */
function pair(handlers: Record<string, BridgeHandler>, opts: { timeoutMs?: number; maxPending?: number } = {}): { a: Bridge; b: Bridge; close(): void } {
  const { port1, port2 } = new MessageChannel();
  const a = createBridge(port1, {}, { timeoutMs: opts.timeoutMs ?? 2000, maxPending: opts.maxPending ?? 100, peer: "the main thread" });
  const b = createBridge(port2, handlers, { timeoutMs: 2000, maxPending: 100, peer: "thread 1" });
  port1.on("message", (m) => a.receive(m));
  port2.on("message", (m) => b.receive(m));
  return {
    a,
    b,
    close() {
      port1.close();
      port2.close();
    },
  };
}

const codeOf = (e: unknown): number => (e as GatewayError).code;

describe("thread bridge (request/reply over a MessagePort)", () => {
  it("moves the buffers a payload or reply names (withTransfer) instead of copying them", async () => {
    const reply = Buffer.alloc(256 * 1024, 7);
    const p = pair({ take: async (x: { body: Uint8Array }) => withTransfer({ got: x.body.byteLength, body: reply }, [reply.buffer as ArrayBuffer]) });
    const sent = Buffer.alloc(128 * 1024, 1);
    const r = await p.a.call<{ got: number; body: Uint8Array }>("take", withTransfer({ body: sent }, [sent.buffer as ArrayBuffer]));
    p.close();
    assert.equal(r.got, 128 * 1024);
    assert.equal(r.body.byteLength, 256 * 1024);
    assert.equal(r.body[0], 7);
    // Moved: the sender's views are empty now.
    assert.equal(sent.byteLength, 0);
    assert.equal(reply.byteLength, 0);
  });

  it("answers a call, and an error crosses as the GatewayError code and message only", async () => {
    const p = pair({
      echo: async (x: { n: number }) => ({ n: x.n + 1 }),
      missing: async () => {
        throw new GatewayError(Code.NOT_FOUND, "service x is not registered");
      },
      broken: async () => {
        throw new TypeError("boom");
      },
    });
    try {
      assert.deepEqual(await p.a.call("echo", { n: 1 }), { n: 2 });
      const e = await p.a.call("missing", {}).catch((x: unknown) => x);
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, Code.NOT_FOUND);
      assert.equal(e.rawMessage, "service x is not registered");
      const b = await p.a.call("broken", {}).catch((x: unknown) => x);
      assert.equal(codeOf(b), Code.INTERNAL);
      assert.equal((b as GatewayError).rawMessage, "boom");
      assert.equal(codeOf(await p.a.call("nope", {}).catch((x: unknown) => x)), Code.UNIMPLEMENTED);
    } finally {
      p.close();
    }
  });

  it("times a call out DEADLINE_EXCEEDED naming the op and the peer, and aborts it on the other side", async () => {
    let aborted: unknown;
    const p = pair({ hang: (_p, signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject((aborted = signal.reason)))) }, { timeoutMs: 50 });
    try {
      const e = await p.a.call("hang", {}).catch((x: unknown) => x);
      assert.equal(codeOf(e), Code.DEADLINE_EXCEEDED);
      assert.match((e as GatewayError).rawMessage, /the main thread did not answer hang within 50 ms/);
      const by = Date.now() + 2000;
      while (aborted === undefined && Date.now() < by) await new Promise((r) => setTimeout(r, 5));
      assert.equal(codeOf(aborted), Code.CANCELLED);
      assert.equal(p.a.pending, 0);
    } finally {
      p.close();
    }
  });

  it("takes a per-call timeout in place of the bridge's (an invoke's deadline), capped at what a timer holds", async () => {
    const p = pair({ hang: (_p, signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))), slow: () => new Promise((r) => setTimeout(() => r("late"), 150)) }, { timeoutMs: 5000 });
    try {
      const started = Date.now();
      const e = await p.a.call("hang", {}, undefined, 40).catch((x: unknown) => x);
      assert.equal(codeOf(e), Code.DEADLINE_EXCEEDED);
      assert.match((e as GatewayError).rawMessage, /within 40 ms/);
      assert.ok(Date.now() - started < 2000);
      // A bound past 2^31-1 ms (which Node would fire at once) or an unbounded one waits for the answer.
      assert.equal(await p.a.call("slow", {}, undefined, 2 ** 40), "late");
      assert.equal(await p.a.call("slow", {}, undefined, Infinity), "late");
    } finally {
      p.close();
    }
  });

  it("bounds the calls waiting at once (RESOURCE_EXHAUSTED past it) and passes a caller's abort to the handler", async () => {
    const signals: AbortSignal[] = [];
    const p = pair({ hang: (_p, signal) => new Promise((_, reject) => (signals.push(signal), signal.addEventListener("abort", () => reject(signal.reason)))) }, { maxPending: 2 });
    try {
      const ac = new AbortController();
      const first = p.a.call("hang", {}, ac.signal).catch((x: unknown) => x);
      const second = p.a.call("hang", {}).catch((x: unknown) => x);
      const third = await p.a.call("hang", {}).catch((x: unknown) => x);
      assert.equal(codeOf(third), Code.RESOURCE_EXHAUSTED);
      assert.match((third as GatewayError).rawMessage, /2 calls to the main thread are waiting already/);
      while (signals.length < 2) await new Promise((r) => setTimeout(r, 5));
      ac.abort(new GatewayError(Code.CANCELLED, "the client closed the request"));
      assert.equal(codeOf(await first), Code.CANCELLED);
      while (!signals[0]!.aborted) await new Promise((r) => setTimeout(r, 5));
      assert.equal(signals[1]!.aborted, false);
      // Closing fails what still waits, and every later call, UNAVAILABLE with the reason.
      p.a.close("uWS worker thread 1 exited");
      const e = await second;
      assert.equal(codeOf(e), Code.UNAVAILABLE);
      assert.equal((e as GatewayError).rawMessage, "uWS worker thread 1 exited");
      assert.equal(codeOf(await p.a.call("hang", {}).catch((x: unknown) => x)), Code.UNAVAILABLE);
    } finally {
      p.b.close("done");
      p.close();
    }
  });
});
