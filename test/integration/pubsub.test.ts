import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { constants as h2constants } from "node:http2";
import type * as grpc from "@grpc/grpc-js";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import type { PubsubPort } from "../../src/runtime/pubsub-port.js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures } from "../support/runtimes.js";
import { event, metric, publish, stalledSubscribe, subscribe, type Sub } from "./pubsub-support.js";

const KEY = "k1";
const md = (): grpc.Metadata => withKey(KEY);
const LINGER_MS = 150;

/** Count runtime subscribe/close per topic by wrapping the port in place (the facility calls through it). */
function countUpstreams(port: PubsubPort): { opened: Map<string, number>; closed: Map<string, number> } {
  const opened = new Map<string, number>();
  const closed = new Map<string, number>();
  const original = port.subscribe.bind(port);
  port.subscribe = async (topic, handlers, signal) => {
    const sub = await original(topic, handlers, signal);
    opened.set(topic, (opened.get(topic) ?? 0) + 1);
    return {
      async close() {
        closed.set(topic, (closed.get(topic) ?? 0) + 1);
        await sub.close();
      },
    };
  };
  return { opened, closed };
}

for (const fixture of runtimeFixtures) {
  describe(`pub/sub on the ${fixture.name} runtime`, () => {
    let gw: TestGateway;
    let teardown: () => Promise<void>;
    let client: grpc.Client;
    let upstreams: ReturnType<typeof countUpstreams>;
    const subs: Sub[] = [];
    const track = (s: Sub): Sub => (subs.push(s), s);

    before(async () => {
      const rt = await fixture.setup();
      teardown = rt.close;
      gw = await startTestGateway({ ...rt.options, apiKeys: [KEY], subscriptionLingerMs: LINGER_MS, sweepIntervalMs: 60_000 }, rt.overrides);
      client = gw.client("io.cloudevents.v1.Pubsub");
      upstreams = countUpstreams(gw.gateway.context.runtime.pubsub);
    });
    after(async () => {
      for (const s of subs) s.call.cancel();
      // Nothing leaks: every stream the tests opened is released.
      try {
        await waitFor(() => subs.every((s) => s.status !== undefined), "every test stream to end");
        const live = async (): Promise<number | undefined> => metric(gw.http, "platform_pubsub_subscribers");
        let n = await live();
        for (let i = 0; i < 100 && n !== 0; i++) {
          await new Promise((r) => setTimeout(r, 20));
          n = await live();
        }
        assert.equal(n, 0, "no subscriber left attached");
      } finally {
        await gw.close();
        await teardown();
      }
    });

    it("sends x-subscription-id headers before any event and delivers in publish order", async () => {
      const s = track(subscribe(client, ["order"], md()));
      await s.ready();
      assert.match(s.id(), /^[0-9a-f-]{36}$/);
      // Live as soon as the headers arrived: publish right away, nothing may be lost.
      for (let i = 0; i < 50; i++) await publish(client, "order", event(i), md());
      await s.count(50);
      assert.equal(s.order[0], "headers");
      assert.deepEqual(s.got.map((e) => e.cloudevent.text_data), Array.from({ length: 50 }, (_, i) => String(i)));
      const first = s.got[0];
      assert.equal(first.topic, "order");
      assert.equal(first.cloudevent.id, "e-0");
      assert.equal(first.cloudevent.source, "urn:test:pubsub");
      assert.equal(first.cloudevent.spec_version, "1.0", "spec_version filled on publish");
      assert.equal(first.cloudevent.type, "com.test.event");
    });

    it("fills a missing id with a UUID, and an empty topic list means state.change", async () => {
      const s = track(subscribe(client, [], md()));
      await s.ready();
      await publish(client, "not.state", event("x"), md());
      await publish(client, "state.change", { source: "urn:test:pubsub", type: "t", text_data: "hello" }, md());
      await s.count(1);
      assert.equal(s.got[0].topic, "state.change");
      assert.equal(s.got[0].cloudevent.text_data, "hello");
      assert.match(s.got[0].cloudevent.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    });

    it("delivers each event twice to a caller that lists a topic twice, on one stream, filtering by topic only", async () => {
      const s = track(subscribe(client, ["dup", "dup", "other"], md()));
      await s.ready();
      await publish(client, "dup", event(1), md());
      await publish(client, "elsewhere", event(2), md());
      await publish(client, "other", event(3, { type: "another.type" }), md());
      await s.count(3);
      assert.deepEqual(s.got.map((e) => `${e.topic}:${e.cloudevent.text_data}`), ["dup:1", "dup:1", "other:3"]);
    });

    it("delivers every event to 500 concurrent subscribers of one topic", async () => {
      const many = Array.from({ length: 500 }, () => track(subscribe(client, ["fan"], md())));
      await Promise.all(many.map((s) => s.ready()));
      for (let i = 0; i < 20; i++) await publish(client, "fan", event(i), md());
      await Promise.all(many.map((s) => s.count(20, 15_000)));
      for (const s of many) assert.deepEqual(s.got.map((e) => e.cloudevent.text_data), Array.from({ length: 20 }, (_, i) => String(i)));
      assert.equal(upstreams.opened.get("fan"), 1, "one runtime subscription for 500 subscribers");
      for (const s of many) s.call.cancel();
    });

    it("keeps a reading subscriber up with a burst of 2000 events published 100 at a time: nothing reaped, order kept", async () => {
      const s = track(subscribe(client, ["burst"], md()));
      await s.ready();
      const total = 2000;
      for (let i = 0; i < total; i += 100) {
        await Promise.all(Array.from({ length: 100 }, (_, j) => publish(client, "burst", event(i + j), md())));
      }
      await s.count(total, 15_000);
      assert.equal(s.status, undefined, `stream still open (${s.status?.details ?? ""})`);
      assert.deepEqual(s.got.map((e) => Number(e.cloudevent.text_data)), Array.from({ length: total }, (_, i) => i));
      s.call.cancel();
    });

    it("reaps a subscriber that stopped reading once it is more than 1024 events behind; the others get everything", async () => {
      const others = [track(subscribe(client, ["slow"], md())), track(subscribe(client, ["slow"], md()))];
      await Promise.all(others.map((s) => s.ready()));
      const stalled = await stalledSubscribe(gw.grpcAddress, ["slow"], KEY);
      try {
        assert.ok(stalled.headers?.["x-subscription-id"]);
        const total = 1300;
        // A bursty publisher (50 in flight): the readers keep up; only the stalled one falls behind.
        for (let i = 0; i < total; i += 50) {
          await Promise.all(Array.from({ length: Math.min(50, total - i) }, (_, j) => publish(client, "slow", event(i + j), md())));
        }
        await Promise.all(others.map((s) => s.count(total, 10_000)));
        for (const s of others) assert.equal(s.got.length, total);
        await waitFor(() => gw.logs.some((l) => /more than 1024 events behind/.test(String(l["msg"]))), "the reap to be logged");
        assert.equal(await metric(gw.http, "platform_pubsub_subscribers_reaped_total", '{reason="slow"}'), 1);
        // Once it reads again it drains what was already in flight and sees why it was dropped.
        const { trailers } = await stalled.resume();
        assert.equal(Number(trailers["grpc-status"]), Code.RESOURCE_EXHAUSTED);
        assert.match(decodeURIComponent(String(trailers["grpc-message"])), /fell more than 1024 events behind/);
      } finally {
        stalled.close();
      }
    });

    it("keeps one ref-counted runtime subscription per topic and releases it after the linger", async () => {
      const a = track(subscribe(client, ["rc"], md()));
      const b = track(subscribe(client, ["rc"], md()));
      await Promise.all([a.ready(), b.ready()]);
      assert.equal(upstreams.opened.get("rc"), 1);
      a.call.cancel();
      assert.equal((await a.ended()).code, Code.CANCELLED);
      await new Promise((r) => setTimeout(r, LINGER_MS * 2));
      assert.equal(upstreams.closed.get("rc") ?? 0, 0, "still referenced by b");
      await publish(client, "rc", event("after-cancel"), md());
      await b.count(1);
      b.call.cancel();
      await waitFor(() => upstreams.closed.get("rc") === 1, "the runtime subscription to be released after the linger");
      // A new subscriber opens it again.
      const c = track(subscribe(client, ["rc"], md()));
      await c.ready();
      assert.equal(upstreams.opened.get("rc"), 2);
      c.call.cancel();
    });

    it("ends the stream with OK on Unsubscribe by x-subscription-id; an unknown id is NOT_FOUND in-band", async () => {
      const s = track(subscribe(client, ["unsub"], md()));
      await s.ready();
      const ok = await new Promise<any>((resolve, reject) =>
        (client as any).Unsubscribe({ subscription_id: s.id() }, md(), (e: Error | null, r: any) => (e ? reject(e) : resolve(r))),
      );
      assert.deepEqual(ok.status, { success: true, status: "OK", message: "" });
      assert.equal((await s.ended()).code, Code.OK);
      const unknown = await new Promise<any>((resolve, reject) =>
        (client as any).Unsubscribe({ subscription_id: s.id() }, md(), (e: Error | null, r: any) => (e ? reject(e) : resolve(r))),
      );
      assert.equal(unknown.status.success, false);
      assert.equal(unknown.status.status, "NOT_FOUND");
      assert.match(unknown.status.message, new RegExp(s.id()));
    });

    it("rejects invalid publish input with INVALID_ARGUMENT naming the field, over gRPC", async () => {
      const cases: Array<[string, object | null, RegExp]> = [
        ["", event(1), /topic must not be empty/],
        ["t", null, /cloudevent is required/],
        ["t", { ...event(1), source: "" }, /cloudevent\.source must not be empty/],
        ["t", { ...event(1), source: "a/b" }, /cloudevent\.source 'a\/b' is not an absolute URI/],
      ];
      for (const [topic, ce, re] of cases) {
        await assert.rejects(publish(client, topic, ce, md()), (e: grpc.ServiceError) => {
          assert.equal(e.code, Code.INVALID_ARGUMENT);
          assert.match(e.details, re);
          return true;
        });
      }
      for (const source of ["https://host/path", "urn:ns:name"]) {
        const r = await publish(client, "t", { ...event(1), source }, md());
        assert.equal(r.status.success, true, source);
      }
    });

    it("publishes over REST in structured and binary mode with the same validation", async () => {
      const s = track(subscribe(client, ["rest"], md()));
      await s.ready();
      const post = (path: string, headers: Record<string, string>, body: string | Buffer): Promise<Response> =>
        fetch(`${gw.http}${path}`, { method: "POST", headers: { "x-api-key": KEY, ...headers }, body });
      const structured = await post(
        "/v1/pubsub/rest",
        { "content-type": "application/cloudevents+json" },
        JSON.stringify({ specversion: "1.0", id: "s1", source: "https://host/orders", type: "com.test.created", subject: "o-1", data: { n: 1 }, tenant: "acme" }),
      );
      assert.equal(structured.status, 200);
      assert.deepEqual(await structured.json(), { status: { success: true, status: "OK", message: "" } });
      const binary = await post(
        "/v1/pubsub/rest",
        { "content-type": "text/plain", "ce-specversion": "1.0", "ce-id": "b1", "ce-source": "urn:test:bin", "ce-type": "com.test.text", "ce-tenant": "a%20b" },
        "plain text",
      );
      assert.equal(binary.status, 200);
      const bytes = await post("/v1/pubsub/rest", { "content-type": "application/octet-stream", "ce-source": "urn:test:bin", "ce-type": "com.test.bytes" }, Buffer.from([0, 1, 2, 255]));
      assert.equal(bytes.status, 200);
      await s.count(3);
      const [e1, e2, e3] = s.got.map((g) => g.cloudevent);
      assert.equal(e1.id, "s1");
      assert.equal(e1.type, "com.test.created");
      assert.deepEqual(JSON.parse(e1.text_data), { n: 1 });
      assert.equal(e1.attributes.datacontenttype.ce_string, "application/json");
      // Optional and extension attributes survive every runtime.
      assert.equal(e1.attributes.subject.ce_string, "o-1");
      assert.equal(e1.attributes.tenant.ce_string, "acme");
      assert.equal(e2.id, "b1");
      assert.equal(e2.text_data, "plain text");
      assert.equal(e2.attributes.datacontenttype.ce_string, "text/plain");
      assert.equal(e2.attributes.tenant.ce_string, "a b");
      assert.ok(e3.id, "id filled");
      assert.equal(e3.spec_version, "1.0");
      assert.deepEqual([...e3.binary_data], [0, 1, 2, 255]);

      const bad: Array<[string, Record<string, string>, string, RegExp]> = [
        ["/v1/pubsub", { "content-type": "application/cloudevents+json" }, JSON.stringify({ source: "urn:a:b" }), /topic must not be empty/],
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, "", /cloudevent is required/],
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, JSON.stringify({ type: "t" }), /cloudevent\.source must not be empty/],
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, JSON.stringify({ source: "a/b" }), /'a\/b' is not an absolute URI/],
        ["/v1/pubsub/rest", { "content-type": "text/plain", "ce-source": "a/b" }, "x", /'a\/b' is not an absolute URI/],
        ["/v1/pubsub/rest", { "content-type": "application/json" }, "{}", /structured mode .* or binary mode/],
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, JSON.stringify({ source: "urn:a:b", time: "yesterday" }), /time 'yesterday' is not an RFC 3339 timestamp/],
        // Dates and times that do not exist are refused, not rolled over to March 1 / the next day (they were).
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, JSON.stringify({ source: "urn:a:b", time: "2024-02-30T00:00:00Z" }), /^time '2024-02-30T00:00:00Z' is not an RFC 3339 timestamp/],
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, JSON.stringify({ source: "urn:a:b", time: "2024-01-01T24:00:00Z" }), /^time '2024-01-01T24:00:00Z' is not an RFC 3339 timestamp/],
        ["/v1/pubsub/rest", { "content-type": "text/plain", "ce-source": "urn:a:b", "ce-time": "2024-02-30T00:00:00Z" }, "x", /^ce-time '2024-02-30T00:00:00Z' is not an RFC 3339 timestamp/],
        ["/v1/pubsub/rest", { "content-type": "application/cloudevents+json" }, JSON.stringify({ source: "urn:a:b", ["x".repeat(65)]: "v" }), /at most 64 characters, got 65/],
      ];
      for (const [path, headers, body, re] of bad) {
        const r = await post(path, headers, body);
        assert.equal(r.status, 400, `${path} ${body}`);
        const j = (await r.json()) as { code: number; message: string };
        assert.equal(j.code, Code.INVALID_ARGUMENT);
        assert.match(j.message, re);
      }
      assert.equal(s.got.length, 3, "nothing invalid was published");
    });

    it("reports runtime publish failures in-band over gRPC and REST", async () => {
      const port = gw.gateway.context.runtime.pubsub;
      const original = port.publish;
      port.publish = async () => {
        throw new GatewayError(Code.UNAVAILABLE, "sidecar is down");
      };
      try {
        const r = await publish(client, "t", event(1), md());
        assert.equal(r.status.success, false);
        assert.equal(r.status.status, "UNAVAILABLE");
        assert.match(r.status.message, /sidecar is down/);
        const rest = await fetch(`${gw.http}/v1/pubsub/t`, {
          method: "POST",
          headers: { "x-api-key": KEY, "content-type": "application/cloudevents+json" },
          body: JSON.stringify({ source: "urn:a:b", type: "t" }),
        });
        assert.equal(rest.status, 200);
        const body = (await rest.json()) as { status: { success: boolean; status: string; message: string } };
        assert.equal(body.status.success, false);
        assert.match(body.status.message, /sidecar is down/);
      } finally {
        port.publish = original;
      }
    });

    it("fails the Subscribe call and keeps nothing when the runtime refuses the topic", async () => {
      const port = gw.gateway.context.runtime.pubsub;
      const original = port.subscribe;
      port.subscribe = async (topic, h, signal) => {
        if (topic === "refused") throw new GatewayError(Code.INVALID_ARGUMENT, "pubsub pubsub is not found");
        return original(topic, h, signal);
      };
      try {
        const s = track(subscribe(client, ["fine", "refused"], md()));
        const st = await s.ended();
        assert.equal(st.code, Code.INVALID_ARGUMENT);
        assert.match(st.details, /topic 'refused'.*pubsub pubsub is not found/);
        assert.equal(s.got.length, 0);
      } finally {
        port.subscribe = original;
      }
      await waitFor(() => (upstreams.closed.get("fine") ?? 0) === (upstreams.opened.get("fine") ?? 0), "the other topic's reference to be released");
    });
  });

  describe(`pub/sub reaping on the ${fixture.name} runtime`, () => {
    it("resets a reaped stream whose client never reads again once the grace (sweepIntervalMs) has passed", async () => {
      const rt = await fixture.setup();
      const graceMs = 300;
      const gw = await startTestGateway({ ...rt.options, apiKeys: [KEY], sweepIntervalMs: graceMs }, rt.overrides);
      const client = gw.client("io.cloudevents.v1.Pubsub");
      const stalled = await stalledSubscribe(gw.grpcAddress, ["gone"], KEY);
      try {
        const closed = new Promise<number>((resolve) => stalled.stream.on("close", () => resolve(stalled.stream.rstCode ?? -1)));
        for (let i = 0; i < 1100; i += 50) {
          await Promise.all(Array.from({ length: 50 }, (_, j) => publish(client, "gone", event(i + j), md())));
        }
        await waitFor(() => gw.logs.some((l) => /more than 1024 events behind|no progress/.test(String(l["msg"]))), "the reap to be logged");
        // The stalled client never reads: the status cannot reach it behind the buffered events, so the gateway
        // must reset the stream rather than hold it (and its buffered events) open forever.
        const rst = await Promise.race([closed, new Promise<string>((r) => setTimeout(() => r("still open"), graceMs + 5000).unref())]);
        assert.equal(rst, h2constants.NGHTTP2_CANCEL);
      } finally {
        stalled.close();
        await gw.close();
        await rt.close();
      }
    });
  });

  describe(`pub/sub shutdown on the ${fixture.name} runtime`, () => {
    it("ends open Subscribe streams with UNAVAILABLE when the gateway closes", async () => {
      const rt = await fixture.setup();
      const gw = await startTestGateway({ ...rt.options, apiKeys: [KEY] }, rt.overrides);
      try {
        const client = gw.client("io.cloudevents.v1.Pubsub");
        const s = subscribe(client, ["bye"], md());
        await s.ready();
        const closing = gw.close();
        const st = await s.ended();
        assert.equal(st.code, Code.UNAVAILABLE);
        assert.match(st.details, /gateway is shutting down/);
        await closing;
      } finally {
        await gw.close();
        await rt.close();
      }
    });
  });
}
