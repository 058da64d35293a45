import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { runInNewContext } from "node:vm";
import type { ClientHttp2Session } from "node:http2";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { startOtlpReceiver, type OtlpReceiver } from "../support/otlp-receiver.js";
import { event, publish, subscribe } from "./pubsub-support.js";
import { warmUp } from "../../src/main/warmup.js";
import { invokeEcho } from "../../src/main/warmup-invoke.js";
import { WarmupClient } from "../../src/main/warmup-client.js";
import { validateGatewayOptions } from "../../src/config/options.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createGateway } from "../../src/main/gateway.js";
import { ownWarmup, warmUpThread } from "../../src/threads/warmup.js";
import { Writable } from "node:stream";
import { createServer } from "node:net";
import { createWorkerSlots } from "../../src/workers/worker-slots.js";
import { createLogger } from "../../src/observe/logger.js";
import type { RestServer } from "../../src/http/router.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { reflectionCall } from "../support/reflection.js";
import * as grpc from "@grpc/grpc-js";
import { startOrderBackend } from "../support/backends/order-backend.js";

/** A loopback port that was free a moment ago and has nothing listening on it. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const KEY = "warmup-test-key";
const EVENTS = 300;
/** Enough for every value of each kind the echo record takes in turn (src/threads/warmup.ts). */
const CALLS = 40;

describe("warm-up before listening", () => {
  let gw: TestGateway | undefined;
  let rx: OtlpReceiver | undefined;
  after(async () => {
    await gw?.close();
    await rx?.close();
  });

  it("publishes every warm-up event to every private subscriber and echoes every warm-up invoke before the gateway listens, and the gateway keeps none of it", async () => {
    rx = await startOtlpReceiver();
    gw = await startTestGateway({
      warmupEvents: EVENTS,
      warmupCalls: CALLS,
      apiKeys: [KEY],
      services: [{ name: "platform", pubsub: { pubsubName: "pubsub" } }],
      otlpTracesEndpoint: rx.url,
      traceExportDelayMs: 20,
      tokenSecret: "warmup-test-token-secret",
    });
    const msgs = gw.logs.map((l) => l["msg"]);
    const warmed = gw.logs.filter((l) => l["msg"] === "warmed up");
    assert.equal(warmed.length, 1);
    const w = warmed[0]!;
    assert.equal(w["events"], EVENTS);
    assert.equal(w["deliveries"], EVENTS * (w["subscribers"] as number), "every event reached every private subscriber");
    assert.equal(w["traced"], true, "the real gateway traces, so the warm-up ran the traced path");
    // Every invoke came back as its echo (the warm-up fails otherwise): gRPC, and REST too, as the test gateway serves
    // HTTP on its main thread.
    assert.equal(w["calls"], 2 * CALLS);
    assert.ok(msgs.indexOf("warmed up") < msgs.indexOf("gateway listening"));
    // Then the same invokes through the real gateway's own gRPC front and REST server, on loopback ports, before it
    // listens on its own.
    const own = gw.logs.filter((l) => l["msg"] === "warmed up through its own ports");
    assert.deepEqual(own.map((l) => l["calls"]), [2 * CALLS]);
    assert.ok(msgs.indexOf("warmed up through its own ports") < msgs.indexOf("gateway listening"));
    // Its closing garbage collection leaves V8's gc() unexposed, here and in any context made later.
    assert.equal(typeof (globalThis as { gc?: unknown }).gc, "undefined");
    assert.equal(runInNewContext("typeof gc"), "undefined");
    // The private gateway logs errors only: none of its start-up warnings (its key is random, its host loopback).
    assert.equal(gw.logs.filter((l) => l["level"] === "warn" || l["level"] === "error").length, 0, JSON.stringify(gw.logs.filter((l) => l["level"] === "warn")));

    // The real gateway serves as usual.
    const client = gw.client("io.cloudevents.v1.Pubsub");
    const sub = subscribe(client, ["orders"], withKey(KEY));
    await sub.ready();
    await publish(client, "orders", event(1), withKey(KEY));
    await sub.count(1);
    assert.equal(sub.got[0].cloudevent.id, "e-1");
    sub.call.cancel();

    // The warm-up's echo backend is not one of its services, nor served by reflection, the transparent proxy, the
    // OpenAPI document or health.
    const reflected = await reflectionCall(gw.grpcAddress, "v1", { list_services: "*" }, withKey(KEY));
    assert.match(JSON.stringify(reflected), /platform\.Gateway/);
    assert.doesNotMatch(JSON.stringify(reflected), /warmup|Echo/);
    for (const path of ["/v1/openapi.json", "/health"]) {
      const res = await fetch(`${gw.http}${path}`, { headers: { "x-api-key": KEY } });
      assert.equal(res.status, 200, path);
      assert.doesNotMatch(await res.text(), /warmup|Echo/, path);
    }
    const proxied = await new Promise<{ code?: number }>((resolve) => {
      const c = new (grpc.makeGenericClientConstructor({}, "x"))(gw!.grpcAddress, grpc.credentials.createInsecure());
      c.makeUnaryRequest("/platform.warmup.v1.Echo/Echo", (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), withKey(KEY), (err: grpc.ServiceError | null) => {
        c.close();
        resolve({ ...(err ? { code: err.code } : {}) });
      });
    });
    assert.equal(proxied.code, grpc.status.UNIMPLEMENTED, "no route to the echo backend");
    const invoked = await fetch(`${gw.http}/v1/gateway/invoke-json`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": KEY },
      body: JSON.stringify({ service: "warmup-echo", method: "Echo", request_data: "{}" }),
    });
    assert.match(JSON.stringify(await invoked.json()), /service warmup-echo is not registered/);
    for (const path of ["/v1/config/list-services", "/v1/gateway/list-services"]) {
      const res = await fetch(`${gw.http}${path}`, { headers: { "x-api-key": KEY } });
      assert.equal(res.status, 200, path);
      const listed = JSON.stringify(await res.json());
      if (path.startsWith("/v1/config")) assert.match(listed, /platform/, path);
      assert.doesNotMatch(listed, /warmup|Echo/, path);
    }

    // Its metrics count only its own calls: one publish, one subscribe, the one invoke above, no warm-up topic or
    // backend.
    const text = await (await fetch(`${gw.http}/metrics`)).text();
    assert.doesNotMatch(text, /warmup/);
    // The series the warm-up's calls made for the gateway's own routes stay, at zero.
    assert.deepEqual(text.split("\n").filter((l) => l.includes("InvokeJson") && !/ 0$/.test(l)), []);
    assert.match(text, /^platform_http_requests_total\{route="\/v1\/gateway\/invoke-json",method="POST",status="\d+"\} 1$/m);
    assert.match(text, /^platform_grpc_requests_total\{method="io\.cloudevents\.v1\.Pubsub\/PublishEvent",code="OK"\} 1$/m);
    // Its spans are only its own: the publish of "orders" arrives, nothing of the private gateway's.
    await waitFor(() => rx!.spans.some((s) => s.name === "publish orders"), "the real publish span");
    const foreign = rx.spans.filter((s) => Object.values(s.attributes).some((v) => String(v).includes("warmup")) || s.name.includes("warmup"));
    assert.deepEqual(foreign, []);
  });

  it("with two HTTP threads each thread warms up its own REST invoke path before listening, keeps none of it, and a restarted thread starts without", async () => {
    const backend = await startOrderBackend();
    const trx = await startOtlpReceiver();
    const g = await startTestGateway({
      threads: 2,
      warmupCalls: CALLS,
      apiKeys: [KEY],
      services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
      otlpTracesEndpoint: trx.url,
      traceExportDelayMs: 20,
      tokenSecret: "warmup-test-token-secret",
    });
    try {
      const msgs = g.logs.map((l) => l["msg"]);
      const threads = g.logs.filter((l) => l["msg"] === "thread warmed up");
      assert.deepEqual(threads.map((l) => [l["thread"], l["calls"]]).sort(), [[1, CALLS], [2, CALLS]], "every REST invoke of each thread came back as its echo");
      // Then as many again through each thread's own server, before the gateway listens.
      const own = g.logs.filter((l) => l["msg"] === "thread warmed up through its own port");
      assert.deepEqual(own.map((l) => [l["thread"], l["calls"]]).sort(), [[1, CALLS], [2, CALLS]]);
      assert.ok(msgs.lastIndexOf("thread warmed up through its own port") < msgs.indexOf("gateway listening"));
      // The main thread's warm-ups invoke over gRPC only (its private gateways', then its own front's): REST is the
      // threads'.
      assert.equal(g.logs.find((l) => l["msg"] === "warmed up")?.["calls"], CALLS);
      assert.equal(g.logs.find((l) => l["msg"] === "warmed up through its own ports")?.["calls"], CALLS);
      assert.equal(g.logs.filter((l) => l["level"] === "warn" || l["level"] === "error").length, 0, JSON.stringify(g.logs.filter((l) => l["level"] === "warn" || l["level"] === "error")));

      // The threads serve REST invoke to the real backend, and count and trace only that.
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${g.http}/v1/gateway/invoke-json`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-key": KEY },
          body: JSON.stringify({ service: "orders", method: "GetOrder", request_data: JSON.stringify({ orderId: `o-${i}` }) }),
        });
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as { success: boolean }).success, true);
      }
      const text = await (await fetch(`${g.http}/metrics`)).text();
      assert.doesNotMatch(text, /warmup/);
      assert.match(text, /^platform_gateway_invocations_total\{service="orders",code="OK"\} 4$/m);
      assert.deepEqual(text.split("\n").filter((l) => l.includes("InvokeJson") && !/ 0$/.test(l)), []);
      assert.match(text, /^platform_http_requests_total\{route="\/v1\/gateway\/invoke-json",method="POST",status="200"\} 4$/m);
      await waitFor(() => trx.spans.filter((s) => s.name === "POST /v1/gateway/invoke-json").length === 4, "the four REST server spans");
      const foreign = trx.spans.filter((s) => Object.values(s.attributes).some((v) => String(v).includes("warmup")) || s.name.includes("warmup") || s.name.includes("Echo"));
      assert.deepEqual(foreign, []);

      // A thread started again after a crash has no echo backend to call: it starts cold, without a word of warm-up.
      g.gateway.threads!.crash(1);
      await waitFor(() => g.logs.some((l) => l["msg"] === "uWS worker thread started again" && l["thread"] === 1), "the thread restarted", 30_000);
      assert.equal(g.logs.filter((l) => /^thread warm(ed up|-up)/.test(String(l["msg"]))).length, 4);
    } finally {
      await g.close();
      await trx.close();
      backend.close();
    }
  });

  it("a thread's warm-up whose backend does not answer rejects naming the call, and closes its private server", async () => {
    const opts = validateGatewayOptions({ threads: 2 });
    const tracked: Array<RestServer | undefined> = [];
    const logs: string[] = [];
    const logger = createLogger("error", new Writable({ write: (c: Buffer, _e, cb) => (logs.push(c.toString()), cb()) }));
    // A port nothing listens on: the first call's reflection fails, and with it the call.
    const port = await closedPort();
    await assert.rejects(
      warmUpThread({ echoPort: port, calls: 3 }, opts, { slots: createWorkerSlots(1), logger, runtime: {} as Runtime, track: (s) => tracked.push(s) }),
      /warm-up invoke-json \d+ failed: UNAVAILABLE backend 127\.0\.0\.1:\d+ is unavailable/,
    );
    assert.equal(tracked.length, 2);
    assert.equal(tracked[1], undefined, "the private server was closed");
    const res = await fetch(`http://127.0.0.1:${tracked[0]!.port}/health`).catch((e: Error) => e);
    assert.ok(res instanceof Error, "nothing listens on the private port any more");
  });

  it("a service of yours named as the echo backend keeps its name: the warm-up through the gateway's own ports says why it did not run, and the gateway serves", async () => {
    const backend = await startOrderBackend();
    const g = await startTestGateway({ warmupCalls: 10, apiKeys: [KEY], services: [{ name: "warmup-echo", grpc: { host: "127.0.0.1", port: backend.port } }] });
    try {
      const failed = g.logs.filter((l) => l["msg"] === "warm-up through its own ports failed: starting cold");
      assert.equal(failed.length, 1);
      assert.match(String(failed[0]!["err"]), /backend warmup-echo is already registered/);
      assert.equal(g.logs.filter((l) => l["msg"] === "warmed up through its own ports").length, 0);
      const res = await fetch(`${g.http}/v1/config/list-services`, { headers: { "x-api-key": KEY } });
      assert.match(JSON.stringify(await res.json()), /warmup-echo/, "your service is listed as ever");
      // And invoked as ever: its calls reach your backend.
      const invoked = await fetch(`${g.http}/v1/gateway/invoke-json`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": KEY },
        body: JSON.stringify({ service: "warmup-echo", method: "GetOrder", request_data: JSON.stringify({ orderId: "o-1" }) }),
      });
      assert.equal(((await invoked.json()) as { success: boolean }).success, true);
    } finally {
      await g.close();
      backend.close();
    }
  });

  it("a warm-up through the gateway's own objects past its bound drops its backend, lets its calls fail, and only then puts the metrics back", async () => {
    const events: string[] = [];
    let fail: (e: Error) => void = () => {};
    const parts = {
      dispatch: {
        hideBackend: (name: string) => {
          events.push(`hide ${name}`);
          // Dropping the backend ends its connections: the calls in flight fail a little later.
          return () => (events.push("drop"), void setTimeout(() => (events.push("calls failed"), fail(new Error("backend gone"))), 20));
        },
      },
      metrics: { beginWarmup: () => (events.push("metrics held"), (hidden: string) => void events.push(`metrics put back, ${hidden} forgotten`)) },
      tracer: { beginWarmup: () => (events.push("spans held"), () => void events.push("spans resumed")) },
    };
    const calls = (): Promise<number> => new Promise((_, reject) => (fail = reject));
    await assert.rejects(ownWarmup(parts, 1, calls, 50), /warm-up did not finish within 50 ms/);
    assert.deepEqual(events, ["hide warmup-echo", "metrics held", "spans held", "drop", "calls failed", "metrics put back, warmup-echo forgotten", "spans resumed"]);
  });

  it("runs its events through two private gateways in turn, each closed before the next starts, and its subscribers leave before each closes", async () => {
    const log: string[] = [];
    const start = async (o: Parameters<typeof createGateway>[0]): Promise<{ grpcPort: number; httpPort: number; close(): Promise<void> }> => {
      const g = await createGateway(o);
      const n = log.filter((e) => e.startsWith("start")).length + 1;
      log.push(`start ${n}`);
      return {
        grpcPort: g.grpcPort,
        httpPort: g.httpPort,
        close: async () => {
          // Every subscriber has reset its stream before the warm-up closes the gateway: none is left open.
          const open = Object.entries(g.resources()).filter(([name, count]) => (name === "pubsub.subscribers" || name === "pubsub.grpc-streams") && count > 0);
          log.push(`close ${n}${open.length ? ` with ${JSON.stringify(open)}` : ""}`);
          await g.close();
        },
      };
    };
    const report = await warmUp(validateGatewayOptions({ warmupEvents: 20, warmupCalls: 10, threads: 2 }), start);
    assert.deepEqual(log, ["start 1", "close 1", "start 2", "close 2"]);
    assert.equal(report.deliveries, 20 * report.subscribers, "every event of both gateways reached every subscriber");
    assert.equal(report.calls, 10, "with two HTTP threads REST runs in other isolates: gRPC invokes only");
  });

  it("an invoke that does not come back as its echo fails the warm-up, naming the call and the gateway's answer", async () => {
    // A gateway with no echo backend registered: the first InvokeJson is answered, unsuccessfully.
    const bare = await startTestGateway({ apiKeys: [KEY], services: [{ name: "platform", pubsub: { pubsubName: "pubsub" } }] });
    const sessions: ClientHttp2Session[] = [];
    try {
      const httpPort = Number(new URL(bare.http).port);
      await assert.rejects(invokeEcho(new WarmupClient(`http://${bare.grpcAddress}`, KEY, sessions), httpPort, 3, false), /warm-up InvokeJson 0 failed: .*warmup-echo/);
    } finally {
      for (const s of sessions) s.destroy();
      await bare.close();
    }
  });

  it("a warm-up whose private gateway cannot start rejects with the reason and leaves nothing open", async () => {
    // Traced, so the warm-up opens its span receiver first: it must be closed again.
    const opts = validateGatewayOptions({ warmupEvents: 10, otlpTracesEndpoint: "http://127.0.0.1:9/v1/traces" });
    const servers = (): number => process.getActiveResourcesInfo().filter((r) => r === "TCPServerWrap").length;
    const before = servers();
    const failed = warmUp(opts, () => Promise.reject(new GatewayError(14, "no ports today")));
    await assert.rejects(failed, /no ports today/);
    // A closed server leaves the list of active handles a turn after its close callback.
    await waitFor(() => servers() === before, "the warm-up's span receiver closed", 2000);
  });

  it("a warm-up past its bound rejects naming it, and a private gateway that starts after that is closed at once", async () => {
    let closed = 0;
    const late = new Promise<{ grpcPort: number; httpPort: number; close(): Promise<void> }>((resolve) =>
      setTimeout(() => resolve({ grpcPort: 1, httpPort: 1, close: async () => void closed++ }), 200),
    );
    await assert.rejects(warmUp(validateGatewayOptions({ warmupEvents: 10 }), () => late, 50), /warm-up did not finish within 50 ms/);
    await waitFor(() => closed === 1, "the late private gateway closed", 2000);
  });
});
