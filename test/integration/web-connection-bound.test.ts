import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, createServer, type Server, type Socket } from "node:net";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { startTestDaprSidecar, type TestDaprSidecar } from "../support/dapr-sidecar/index.js";
import { connectSse, connectWs, type WsTestClient } from "../support/web.js";

const KEY = "bound-key";

/**
 * `webMaxConnections` (`--web-max-connections`): past it a WebSocket upgrade or an SSE request is refused 503 at once,
 * before the process could run out of descriptors; a subscriber that leaves makes room again.
 */
/** `attempt` until it resolves (the server side of a close lands a moment after the client's), bounded. */
async function eventually<T>(attempt: () => Promise<T>, what: string, timeoutMs = 5000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (e) {
      if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${(e as Error).message}`, { cause: e });
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

describe("web pub/sub: the bound on open web subscribers", () => {
  let gw: TestGateway;
  const clients: WsTestClient[] = [];

  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], webMaxConnections: 3, threads: 1 });
  });
  after(async () => {
    for (const c of clients) c.ws.terminate();
    await gw?.close();
  });

  it("takes WebSocket and SSE subscribers up to the bound, refuses the next with 503 naming it, and takes one again after a close", async () => {
    clients.push(await connectWs(gw.http, { key: KEY }), await connectWs(gw.http, { key: KEY }));
    const sse = await connectSse(gw.http, "topic=a", { "x-api-key": KEY });
    assert.equal(sse.status, 200, "the third subscriber, over SSE, is within the bound");

    await assert.rejects(connectWs(gw.http, { key: KEY }), /503/, "a fourth WebSocket is refused");
    // The refusal closes the connection: a kept-alive one would hold the descriptor the bound saves.
    const raw = await new Promise<{ head: string; closed: boolean }>((resolve, reject) => {
      const sock = connect(Number(new URL(gw.http).port), "127.0.0.1", () =>
        sock.write(`GET /v1/pubsub/ws HTTP/1.1\r\nHost: x\r\nx-api-key: ${KEY}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`),
      );
      let head = "";
      const timer = setTimeout(() => {
        sock.destroy();
        resolve({ head, closed: false });
      }, 3000);
      sock.on("data", (d) => (head += d.toString("latin1")));
      sock.on("close", () => {
        clearTimeout(timer);
        resolve({ head, closed: true });
      });
      sock.on("error", reject);
    });
    assert.match(raw.head, /^HTTP\/1\.1 503/);
    assert.equal(raw.closed, true, "the server closed the refused connection");
    const refusedSse = await connectSse(gw.http, "topic=a", { "x-api-key": KEY });
    assert.equal(refusedSse.status, 503);
    const body = JSON.parse(refusedSse.messages[0]!.data);
    assert.match(body.message, /web-max-connections/);
    assert.ok(
      gw.logs.some((l) => l["msg"] === "web subscriber refused: this thread holds its share of --web-max-connections" && l["max"] === 3),
      "the refusal is logged",
    );

    // One leaves: room for one more, and the bound holds again after it.
    clients.shift()!.ws.close();
    clients.push(await eventually(() => connectWs(gw.http, { key: KEY }), "a WebSocket accepted after one closed"));
    await assert.rejects(connectWs(gw.http, { key: KEY }), /503/);
    sse.abort();
    const again = await eventually(async () => {
      const c = await connectSse(gw.http, "topic=a", { "x-api-key": KEY });
      if (c.status !== 200) throw new Error(`status ${c.status}`);
      return c;
    }, "an SSE stream accepted after one ended");
    again.abort();
  });
});

/**
 * A TCP relay to 127.0.0.1:`target` whose answers can be held back (`hold()` until `release()`): a sidecar that is
 * slow to answer, so the gateway's first subscribe to a new topic waits.
 */
async function startHoldingRelay(target: number): Promise<{ port: number; hold(): void; release(): void; close(): Promise<void> }> {
  let held: Array<() => void> | undefined;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => sockets.delete(s));
    }
    client.on("data", (d) => upstream.write(d));
    upstream.on("data", (d) => (held ? held.push(() => client.write(d)) : client.write(d)));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    hold: () => (held ??= []),
    release: () => {
      const queued = held ?? [];
      held = undefined;
      for (const write of queued) write();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe("web pub/sub: the bound holds for a burst of SSE requests that wait on the runtime", () => {
  let sidecar: TestDaprSidecar;
  let relay: Awaited<ReturnType<typeof startHoldingRelay>>;
  let gw: TestGateway;

  before(async () => {
    sidecar = await startTestDaprSidecar();
    relay = await startHoldingRelay(sidecar.port);
    gw = await startTestGateway({ apiKeys: [KEY], webMaxConnections: 3, threads: 1, sidecar: "dapr", daprHost: "127.0.0.1", daprGrpcPort: relay.port });
  });
  after(async () => {
    relay?.release();
    await gw?.close();
    await relay?.close();
    await sidecar?.close();
  });

  it("counts each stream from its admission, not from when its new topic opened: 3 of 12 at once are taken", async () => {
    const port = Number(new URL(gw.http).port);
    relay.hold();
    const socks = await Promise.all(
      Array.from({ length: 12 }, () => new Promise<Socket>((resolve) => {
        const s = connect(port, "127.0.0.1", () => resolve(s));
        s.on("error", () => undefined);
      })),
    );
    try {
      const heads = socks.map(
        (s) => new Promise<string>((resolve) => {
          let text = "";
          s.on("data", (d: Buffer) => {
            text += d.toString("latin1");
            if (text.includes("\r\n")) resolve(text.slice(0, text.indexOf("\r\n")));
          });
        }),
      );
      for (const [i, s] of socks.entries()) s.write(`GET /v1/pubsub/events?topic=burst-${i} HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`);
      // The refusals come at once, while the admitted three still wait for the sidecar.
      await eventually(async () => {
        const answered = await Promise.all(heads.map((h) => Promise.race([h, new Promise<string>((r) => setTimeout(() => r(""), 10))])));
        if (answered.filter((h) => h.includes("503")).length < 9) throw new Error(`refused so far: ${answered.filter(Boolean).length}`);
      }, "nine refusals while the sidecar is held");
      relay.release();
      const statuses = await Promise.all(heads);
      assert.equal(statuses.filter((h) => / 200 /.test(h)).length, 3, statuses.join(" | "));
      assert.equal(statuses.filter((h) => / 503 /.test(h)).length, 9, statuses.join(" | "));
    } finally {
      relay.release();
      for (const s of socks) s.destroy();
    }
  });
});
