import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  attributeString,
  createGatewayClient,
  RequestTimeoutError,
  type GatewayClient,
  type Subscription,
  type SubscriptionMessage,
} from "../../src/client/index.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";
import { nextMessage } from "../support/client-helpers.js";

const KEY = "rr-key";

/** How many Subscribe calls the gateway has started (from its own metrics). */
async function subscribeCalls(gw: TestGateway): Promise<number> {
  const text = await gw.gateway.context.metrics.registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith("platform_grpc_requests_total{") && l.includes('method="io.cloudevents.v1.Pubsub/Subscribe"') && l.includes('code="STARTED"'));
  return line ? Number(line.split(" ").pop()) : 0;
}

for (const fixture of runtimeFixtures) {
  describe(`client request-reply (${fixture.name} runtime)`, () => {
    let gw: TestGateway;
    let requester: GatewayClient;
    let responderClient: GatewayClient;
    let responder: Subscription;
    let rt: Awaited<ReturnType<typeof fixture.setup>>;
    const handled: SubscriptionMessage[] = [];

    before(async () => {
      rt = await fixture.setup();
      gw = await startTestGateway({ ...rt.options, apiKeys: [KEY] }, rt.overrides);
      requester = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY });
      // The responder is another service: its own client. It echoes `data` after a delay the request asks for.
      responderClient = createGatewayClient({ address: gw.grpcAddress, apiKey: KEY });
      responder = responderClient.subscribe(["rr.requests"], (m) => {
        handled.push(m);
        const correlationid = attributeString(m.event, "correlationid");
        const replyTopic = attributeString(m.event, "replytopic");
        if (!correlationid || !replyTopic) return;
        const body = JSON.parse(m.event.text_data ?? "{}") as { delayMs?: number; n?: number };
        const reply = () =>
          responderClient.publish(replyTopic, { source: "urn:test:responder", type: "rr.reply", correlationid, data: { echo: body.n ?? null } }).catch(() => undefined);
        // Not awaited: replies go out in a different order from the requests.
        if (body.delayMs) setTimeout(reply, body.delayMs);
        else void reply();
      });
      await responder.ready;
    });
    after(async () => {
      requester.close();
      responderClient.close();
      await gw.close();
      await rt.close();
    });

    it("resolves the correlated reply; sets correlationid (generated) and replytopic on the request", async () => {
      const reply = await requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask", data: { n: 7 } }, "rr.replies.a", { timeoutMs: 5000 });
      assert.equal(reply.topic, "rr.replies.a");
      assert.equal(reply.event.type, "rr.reply");
      assert.deepEqual(JSON.parse(reply.event.text_data!), { echo: 7 });
      const sent = handled.at(-1)!;
      const id = attributeString(sent.event, "correlationid")!;
      assert.match(id, /^[0-9a-f-]{36}$/);
      assert.equal(attributeString(sent.event, "replytopic"), "rr.replies.a");
      assert.equal(attributeString(reply.event, "correlationid"), id);

      const given = await requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask", data: { n: 8 } }, "rr.replies.a", { correlationId: "my-id-1" });
      assert.equal(attributeString(given.event, "correlationid"), "my-id-1");
      assert.deepEqual(JSON.parse(given.event.text_data!), { echo: 8 });
    });

    it("matches 200 concurrent requests over one shared reply subscription", async () => {
      const before = await subscribeCalls(gw);
      const n = 200;
      const replies = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask", data: { n: i, delayMs: (i * 37) % 60 } }, "rr.replies.many", { timeoutMs: 10000 }),
        ),
      );
      replies.forEach((r, i) => assert.deepEqual(JSON.parse(r.event.text_data!), { echo: i }, `reply ${i}`));
      assert.equal(new Set(replies.map((r) => attributeString(r.event, "correlationid"))).size, n);
      assert.equal((await subscribeCalls(gw)) - before, 1, "one Subscribe call for the reply topic, shared by all 200 requests");
    });

    it("rejects with a timeout error naming the correlation id", async () => {
      const started = Date.now();
      await assert.rejects(
        requester.request("rr.nobody", { source: "urn:test:requester", type: "rr.ask" }, "rr.replies.none", { timeoutMs: 200, correlationId: "corr-timeout" }),
        (e: unknown) => {
          assert.ok(e instanceof RequestTimeoutError);
          assert.equal(e.codeName, "DEADLINE_EXCEEDED");
          assert.equal(e.correlationId, "corr-timeout");
          assert.match(e.message, /corr-timeout/);
          return true;
        },
      );
      assert.ok(Date.now() - started < 2000);
    });

    it("drops a reply that arrives after the timeout; later requests get their own replies", async () => {
      const observer = requester.subscribe("rr.replies.late");
      await observer.ready;
      const seen = observer[Symbol.asyncIterator]();
      await assert.rejects(
        requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask", data: { n: 1, delayMs: 400 } }, "rr.replies.late", { timeoutMs: 100, correlationId: "late-1" }),
        RequestTimeoutError,
      );
      // The late reply does reach the reply topic...
      const late = await nextMessage(seen, "the late reply");
      assert.equal(attributeString(late.event, "correlationid"), "late-1");
      // ...and is not taken for the next request on the same reply topic.
      const next = await requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask", data: { n: 2 } }, "rr.replies.late", { timeoutMs: 5000 });
      assert.deepEqual(JSON.parse(next.event.text_data!), { echo: 2 });
      assert.notEqual(attributeString(next.event, "correlationid"), "late-1");
      observer.close();
    });

    it("fails fast with the gateway's error when the reply subscription is refused", async () => {
      const bad = createGatewayClient({ address: gw.grpcAddress, apiKey: "wrong" });
      try {
        await assert.rejects(
          bad.request("rr.requests", { source: "urn:test:requester", type: "rr.ask" }, "rr.replies.denied", { timeoutMs: 10000 }),
          (e: { codeName?: string }) => e.codeName === "UNAUTHENTICATED",
        );
      } finally {
        bad.close();
      }
    });

    it("rejects a correlation id already in flight and a cancelled request", async () => {
      const first = requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask", data: { n: 3, delayMs: 200 } }, "rr.replies.dup", { correlationId: "dup" });
      await assert.rejects(
        requester.request("rr.requests", { source: "urn:test:requester", type: "rr.ask" }, "rr.replies.dup", { correlationId: "dup" }),
        (e: { codeName?: string }) => e.codeName === "ALREADY_EXISTS",
      );
      assert.deepEqual(JSON.parse((await first).event.text_data!), { echo: 3 });
      const ac = new AbortController();
      const cancelled = requester.request("rr.nobody", { source: "urn:test:requester", type: "rr.ask" }, "rr.replies.dup", { signal: ac.signal });
      ac.abort();
      await assert.rejects(cancelled, (e: { codeName?: string }) => e.codeName === "CANCELLED");
    });
  });
}
