import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import WebSocket from "ws";
import { subscribeWeb, Code, type WebEventMessage } from "../../src/client/index.js";
import { createRuntime } from "../../src/runtime/index.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { wrapRuntime } from "../support/state-runtime.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { within } from "../support/client-helpers.js";

const KEY = "client-web-reconnect-key";
const silent = { debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function event(n: number): CloudEvent {
  return { id: `e${n}`, source: "urn:c", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: JSON.stringify({ n }), data: "text_data" } as CloudEvent;
}
const numbers = (got: WebEventMessage[]): number[] => got.map((e) => (e.cloudevent["data"] as { n: number }).n);
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Open `n` plain WebSockets straight to the gateway (no subscribe): they hold its connection slots. */
async function holdSlots(gw: TestGateway, n: number): Promise<WebSocket[]> {
  const held: WebSocket[] = [];
  for (let i = 0; i < n; i++) {
    const ws = new WebSocket(gw.http.replace(/^http/, "ws") + "/v1/pubsub/ws", ["pubsub.v1"], { headers: { "x-api-key": KEY } });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    held.push(ws);
  }
  return held;
}

async function release(held: WebSocket[]): Promise<void> {
  await Promise.all(
    held.map(
      (ws) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          ws.once("close", () => resolve());
          ws.terminate();
        }),
    ),
  );
}

describe("client: subscribeWeb reconnects once per drop, and only while it runs", () => {
  /** Refuses upgrades with 503 while SLOTS sockets hold its connection bound. */
  const SLOTS = 4;
  let gw: TestGateway;
  let proxy: TcpProxy;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], webMaxConnections: SLOTS });
    proxy = await startTcpProxy(gw.gateway.httpPort);
  });
  after(async () => {
    proxy.close();
    await gw.close();
  });
  const publish = async (topic: string, from: number, to: number): Promise<void> => {
    for (let n = from; n <= to; n++) await gw.gateway.context.runtime.pubsub.publish(topic, event(n));
  };

  it("websocket: upgrades refused 503 for a while, then accepted: one socket, each event once, nothing after close()", async () => {
    const topic = "cwr-refused";
    const held = await holdSlots(gw, SLOTS);
    const got: WebEventMessage[] = [];
    const sub = subscribeWeb({
      url: `http://127.0.0.1:${proxy.port}`,
      transport: "websocket",
      topics: [topic],
      apiKey: KEY,
      reconnect: { initialDelayMs: 30, maxDelayMs: 60, jitter: 0 },
      onEvent: (e) => got.push(e),
    });
    try {
      const before = proxy.accepted();
      // Every attempt is refused 503 (the gateway holds its most web subscribers): a few refusals, each one retry.
      await waitFor(() => proxy.accepted() - before >= 4, "four refused upgrades", 5000);
      await release(held);
      await waitFor(() => sub.position !== undefined, "the subscription to go live once the slots are free", 5000);
      // Past several backoff periods: a second reconnect loop would have opened (or tried) another socket by now.
      await sleep(400);
      assert.equal(proxy.open(), 1, "exactly one socket open");
      const settled = proxy.accepted();
      await sleep(300);
      assert.equal(proxy.accepted(), settled, "no further connection attempts once live");
      await publish(topic, 1, 5);
      await waitFor(() => got.length >= 5, "5 events");
      await sleep(200);
      assert.deepEqual(numbers(got), range(1, 5), "each event once, in order");
    } finally {
      sub.close();
      await release(held);
    }
    assert.equal(await within(sub.ended, "the closed subscription to end"), null);
    await waitFor(() => proxy.open() === 0, "the closed subscription's socket to close", 2000);
    const attempts = proxy.accepted();
    await publish(topic, 6, 8);
    await sleep(400);
    assert.deepEqual(numbers(got), range(1, 5), "nothing delivered after close()");
    assert.equal(proxy.accepted(), attempts, "no reconnect after close()");
    assert.equal(proxy.open(), 0);
  });

  for (const transport of ["websocket", "sse"] as const) {
    it(`${transport}: a process whose subscription was refused, then accepted, then closed exits on its own`, async () => {
      const topic = `cwr-exit-${transport}`;
      const held = await holdSlots(gw, SLOTS);
      // A child process: nothing of the test runner keeps it alive, so its exit shows every socket and timer is gone.
      const code = `
        const { subscribeWeb } = await import(${JSON.stringify(new URL("../../src/client/index.ts", import.meta.url).href)});
        const got = [];
        const sub = subscribeWeb({
          url: process.env.URL, transport: process.env.TRANSPORT, topics: [process.env.TOPIC], apiKey: process.env.KEY,
          reconnect: { initialDelayMs: 30, maxDelayMs: 60, jitter: 0 },
          onEvent: (e) => { got.push(e.cloudevent.data.n); if (got.length === 3) { sub.close(); console.log("closed " + JSON.stringify(got)); } },
        });
        const live = setInterval(() => { if (sub.position !== undefined) { clearInterval(live); console.log("live"); } }, 5);
      `;
      const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
        env: { ...process.env, URL: `http://127.0.0.1:${proxy.port}`, KEY, TRANSPORT: transport, TOPIC: topic },
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      child.stdout.on("data", (c: Buffer) => (out += c.toString()));
      const exited = new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
      try {
        const before = proxy.accepted();
        await waitFor(() => proxy.accepted() - before >= 4, "four refused upgrades", 15_000);
        await release(held);
        await waitFor(() => out.includes("live"), "the child's subscription to go live", 10_000);
        await publish(topic, 1, 3);
        await waitFor(() => out.includes("closed"), "the child to receive 3 events and close", 5000);
        assert.match(out, /closed \[1,2,3\]/);
        assert.equal(await within(exited, "the child process to exit on its own after close()", 3000), 0);
      } finally {
        child.kill();
        await release(held);
      }
    });
  }
});

describe("client: subscribeWeb reconnects after a retryable error frame, stops on a fatal one", () => {
  let gw: TestGateway;
  /** Topic -> the errors its next runtime subscribes fail with, in order. */
  const failures = new Map<string, GatewayError[]>();
  before(async () => {
    const base = await createRuntime("embedded", { pubsubName: "pubsub", host: "127.0.0.1", grpcPort: 0, logger: silent });
    const subscribe = base.pubsub.subscribe.bind(base.pubsub);
    const runtime = wrapRuntime(base, {
      pubsub: {
        subscribe: async (topic, handlers, signal) => {
          const e = failures.get(topic)?.shift();
          if (e) throw e;
          return subscribe(topic, handlers, signal);
        },
      },
    });
    gw = await startTestGateway({ apiKeys: [KEY] }, { runtime });
  });
  after(() => gw.close());

  for (const transport of ["websocket", "sse"] as const) {
    it(`${transport}: the runtime refuses the subscribe (UNAVAILABLE, then RESOURCE_EXHAUSTED): the subscription recovers`, async () => {
      const topic = `cwr-shed-${transport}`;
      failures.set(topic, [new GatewayError(Code.UNAVAILABLE, "injected: sidecar down"), new GatewayError(Code.RESOURCE_EXHAUSTED, "injected: subscribe again shortly")]);
      const got: WebEventMessage[] = [];
      const sub = subscribeWeb({ url: gw.http, transport, topics: [topic], apiKey: KEY, reconnect: { initialDelayMs: 20, maxDelayMs: 40 }, onEvent: (e) => got.push(e) });
      try {
        await waitFor(() => sub.position !== undefined, "the subscription to go live after two refusals", 5000);
        assert.equal(failures.get(topic)!.length, 0, "both refusals were met");
        const ended = await Promise.race([sub.ended, sleep(50).then(() => "running")]);
        assert.equal(ended, "running", `the subscription goes on (ended with ${String(ended)})`);
        for (let n = 1; n <= 3; n++) await gw.gateway.context.runtime.pubsub.publish(topic, event(n));
        await waitFor(() => got.length >= 3, "3 events");
        assert.deepEqual(numbers(got), [1, 2, 3]);
      } finally {
        sub.close();
      }
      assert.equal(await within(sub.ended, "the closed subscription to end"), null);
    });
  }

  it("websocket: a PERMISSION_DENIED error frame ends it with that code (the fatal set of gRPC subscriptions)", async () => {
    const topic = "cwr-denied";
    failures.set(topic, [new GatewayError(Code.PERMISSION_DENIED, "injected: not allowed")]);
    const sub = subscribeWeb({ url: gw.http, transport: "websocket", topics: [topic], apiKey: KEY, reconnect: { initialDelayMs: 20, maxDelayMs: 40 }, onEvent: () => undefined });
    try {
      const err = await within(sub.ended, "the refused subscription to end");
      assert.equal(err?.code, Code.PERMISSION_DENIED);
      assert.match(err!.message, /not allowed/);
    } finally {
      sub.close();
    }
  });
});

describe("client: subscribeWeb resumes from the gateway's position after recovered: false", () => {
  let gw: TestGateway;
  let proxy: TcpProxy;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY] });
    proxy = await startTcpProxy(gw.gateway.httpPort);
  });
  after(async () => {
    proxy.close();
    await gw.close();
  });

  it("websocket: a stale since is reported once; the next reconnect resumes exactly", async () => {
    // Another process's position (an epoch this gateway never issued): the gateway cannot replay after it.
    const stale = "abcdefabcdef-7";
    const recoveries: boolean[] = [];
    const got: WebEventMessage[] = [];
    const sub = subscribeWeb({
      url: `http://127.0.0.1:${proxy.port}`,
      transport: "websocket",
      topics: ["cwr-stale"],
      apiKey: KEY,
      since: stale,
      reconnect: { initialDelayMs: 20, maxDelayMs: 40 },
      onEvent: (e) => got.push(e),
      onRecovery: (r) => recoveries.push(r),
    });
    try {
      await waitFor(() => recoveries.length === 1, "the first subscribed answer");
      assert.deepEqual(recoveries, [false]);
      assert.notEqual(sub.position, stale, "the position moved to the gateway's");
      assert.match(sub.position ?? "", /^[0-9a-f]{12}-\d+$/);
      // No event in between: only the subscribed answer's position can make the next resume exact.
      proxy.dropAll();
      await waitFor(() => recoveries.length === 2, "the answer after the reconnect", 5000);
      assert.deepEqual(recoveries, [false, true], "the reconnect resumed exactly");
      await gw.gateway.context.runtime.pubsub.publish("cwr-stale", event(1));
      await waitFor(() => got.length === 1, "the event after the reconnect");
    } finally {
      sub.close();
    }
  });
});

/**
 * A server that speaks just enough HTTP to leave a client waiting: "silent" accepts the TCP connection and never
 * answers; "ws-then-silent" completes the WebSocket upgrade (101) and then sends nothing; "ws-pings" completes it
 * and sends a ping every `pingMs`; "sse-then-silent" answers 200 text/event-stream and then sends nothing.
 */
interface QuietServer {
  port: number;
  /** When each connection was accepted, and when the client closed it (ms, performance.now()). */
  conns: Array<{ at: number; closedAt?: number }>;
  close(): Promise<void>;
}

async function startQuietServer(mode: "silent" | "ws-then-silent" | "ws-pings" | "sse-then-silent", pingMs = 100): Promise<QuietServer> {
  const conns: QuietServer["conns"] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    const c: { at: number; closedAt?: number } = { at: performance.now() };
    conns.push(c);
    sockets.add(s);
    let pinger: NodeJS.Timeout | undefined;
    s.on("error", () => undefined);
    s.on("close", () => {
      c.closedAt = performance.now();
      sockets.delete(s);
      clearInterval(pinger);
    });
    let head = "";
    s.on("data", (d: Buffer) => {
      if (head.includes("\r\n\r\n")) return; // after the request: whatever the client sends is ignored
      head += d.toString("latin1");
      if (!head.includes("\r\n\r\n") || mode === "silent") return;
      if (mode === "sse-then-silent") {
        s.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n");
        return;
      }
      const key = /sec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? "";
      const accept = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
      s.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\nsec-websocket-protocol: pubsub.v1\r\n\r\n`);
      if (mode === "ws-pings") pinger = setInterval(() => s.write(Buffer.from([0x89, 0x00])), pingMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    conns,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe("client: subscribeWeb bounds the handshake and the silence of an open connection", () => {
  const BOUND = 300;
  const cases = [
    { name: "websocket: a server that accepts the upgrade and then goes silent", transport: "websocket", mode: "ws-then-silent", option: "livenessTimeoutMs" },
    { name: "websocket: a server that never answers the upgrade", transport: "websocket", mode: "silent", option: "handshakeTimeoutMs" },
    { name: "sse: a server that answers the headers and then goes silent", transport: "sse", mode: "sse-then-silent", option: "livenessTimeoutMs" },
    { name: "sse: a server that never answers", transport: "sse", mode: "silent", option: "handshakeTimeoutMs" },
  ] as const;
  for (const c of cases) {
    it(`${c.name}: the connection is dropped after ${c.option} and retried`, async () => {
      const srv = await startQuietServer(c.mode);
      const sub = subscribeWeb({
        url: `http://127.0.0.1:${srv.port}`,
        transport: c.transport,
        topics: ["quiet"],
        [c.option]: BOUND,
        reconnect: { initialDelayMs: 20, maxDelayMs: 20, jitter: 0 },
        onEvent: () => undefined,
      });
      try {
        await waitFor(() => srv.conns.length >= 3, "two reconnects", 5000);
        // The second connection: the first one's timing includes the client's cold start.
        const [, b, next] = srv.conns;
        assert.ok(b!.closedAt !== undefined, "the client closed the silent connection");
        const quietFor = b!.closedAt! - b!.at;
        assert.ok(quietFor >= BOUND - 50, `dropped after the bound, not before (${quietFor.toFixed(0)} ms)`);
        assert.ok(quietFor < BOUND + 1000, `dropped within the bound (${quietFor.toFixed(0)} ms)`);
        assert.ok(next!.at - b!.closedAt! < 1000, "reconnected with the backoff");
      } finally {
        sub.close();
      }
      assert.equal(await within(sub.ended, "the closed subscription to end"), null);
      // fetch (undici) keeps a socket whose request was aborted before it was sent in its pool, unref'd, for its 4 s
      // keep-alive: it holds no process open and closes then. Any other socket closes at once.
      await waitFor(() => srv.conns.every((x) => x.closedAt !== undefined), `every connection closed after close() ${JSON.stringify(srv.conns)}`, c.transport === "sse" ? 6000 : 2000);
      await srv.close();
    });
  }

  it("websocket: the gateway's pings keep a quiet socket open past the liveness bound", async () => {
    const srv = await startQuietServer("ws-pings", 100);
    const sub = subscribeWeb({ url: `http://127.0.0.1:${srv.port}`, transport: "websocket", topics: ["quiet"], livenessTimeoutMs: BOUND, onEvent: () => undefined });
    try {
      await waitFor(() => srv.conns.length === 1, "the connection");
      await sleep(BOUND * 4);
      assert.equal(srv.conns.length, 1, "no reconnect");
      assert.equal(srv.conns[0]!.closedAt, undefined, "the socket stayed open");
    } finally {
      sub.close();
    }
    await waitFor(() => srv.conns[0]!.closedAt !== undefined, "the socket closed after close()", 2000);
    await srv.close();
  });

  it("refuses a bad timeout naming the option", () => {
    for (const option of ["handshakeTimeoutMs", "livenessTimeoutMs"] as const) {
      for (const bad of [0, -1, Infinity, Number.NaN]) {
        assert.throws(
          () => subscribeWeb({ url: "http://127.0.0.1:1", transport: "websocket", topics: ["x"], [option]: bad, onEvent: () => undefined }),
          (e: unknown) => e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT && e.message.includes(option),
        );
      }
    }
  });
});
