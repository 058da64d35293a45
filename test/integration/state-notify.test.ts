import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { gunzipSync } from "node:zlib";
import type { Runtime } from "../../src/runtime/index.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { runtimeFixtures, useGatewayOn, type RuntimeFixture } from "../support/runtimes.js";
import { stateFronts, type StateFront } from "../support/state-fronts.js";
import { runtimeOf, wrapRuntime } from "../support/state-runtime.js";

const KEY = "k1";
const services = [
  { name: "orders", state: { storeName: "orders-store", keys: [] } },
  { name: "billing", state: { storeName: "billing-store", keys: [] } },
];
const LOG_TEXT = "State change publish failed after a successful write";

/** Events received on topics, by subscribing at the runtime (what a real subscriber would be fed). */
class Inbox {
  readonly events = new Map<string, CloudEvent[]>();
  on(topic: string): CloudEvent[] {
    let list = this.events.get(topic);
    if (!list) this.events.set(topic, (list = []));
    return list;
  }
  async listen(gw: TestGateway, topic: string): Promise<void> {
    await gw.gateway.context.runtime.pubsub.subscribe(topic, { onEvent: (e) => this.on(topic).push(e) });
  }
  /** Wait for the next event on `topic` after `seen` of them. */
  async next(topic: string, seen: number): Promise<CloudEvent> {
    await waitFor(() => this.on(topic).length > seen, `event ${seen + 1} on ${topic}`);
    return this.on(topic)[seen]!;
  }
}

function payloadOf(e: CloudEvent): unknown {
  assert.equal(e.text_data !== undefined, true, "Tier 0 data is text_data");
  return JSON.parse(e.text_data!);
}

/** Assert the exact Tier 0 shape; `fixture` decides whether extra attributes the sidecar adds are tolerated. */
function assertTier0(e: CloudEvent, type: "saved" | "deleted", payload: object, fixture: RuntimeFixture): void {
  assert.match(e.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(e.source, "urn:com.platform.api");
  assert.equal(e.spec_version, "1.0");
  assert.equal(e.type, `com.platform.api.state-${type}`);
  assert.equal(e.attributes["datacontenttype"]?.ce_string, "application/json");
  if (fixture.name === "embedded") assert.deepEqual(Object.keys(e.attributes), ["datacontenttype"]);
  assert.deepEqual(payloadOf(e), payload);
  // Members in the order docs/state.md "Change notifications" gives, nothing else.
  assert.equal(e.text_data, JSON.stringify(payload));
}

/** A runtime like `base` whose publish always fails. */
function failingPublish(base: Runtime): Runtime {
  return wrapRuntime(base, {
    pubsub: {
      publish: async () => {
        throw new GatewayError(Code.UNAVAILABLE, "injected: sidecar publish refused");
      },
    },
  });
}

/** A local OTLP/HTTP receiver collecting the bodies POSTed to /v1/metrics. */
async function startOtlpReceiver(): Promise<{ url: string; bodies: Buffer[]; close(): Promise<void> }> {
  const bodies: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/metrics") {
        const body = Buffer.concat(chunks);
        bodies.push(req.headers["content-encoding"] === "gzip" ? gunzipSync(body) : body);
      }
      res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The value of a counter sample on /metrics with exactly these labels (0 when absent). */
function sample(metricsText: string, name: string, labels: Record<string, string>): number {
  for (const line of metricsText.split("\n")) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries(m[2]!.split(",").map((p) => p.split("=") as [string, string]).map(([k, v]) => [k, JSON.parse(v)]));
    if (JSON.stringify(Object.entries(got).sort()) === JSON.stringify(Object.entries(labels).sort())) return Number(m[3]);
  }
  return 0;
}

for (const fixture of runtimeFixtures) {
  describe(`state change notifications over ${fixture.name}`, () => {
    const gw = useGatewayOn(fixture, { services, apiKeys: [KEY] });
    const inbox = new Inbox();
    before(async () => {
      await inbox.listen(gw(), "state.change");
      await inbox.listen(gw(), "orders.domain");
    });

    for (const front of ["grpc", "rest"] as const) {
      const s = (): StateFront => stateFronts(gw(), KEY).find((f) => f.name === front)!;
      const t0 = () => inbox.on("state.change").length;

      it(`${front}: no event without publish_change; Tier 0 save event with and without the value`, async () => {
        const seen = t0();
        await s().save({ service: "orders", key: `${front}/quiet`, value: "q" });
        await s().save({ service: "orders", key: `${front}/a/b`, value: '{"n":1}', publish_change: true, include_value: true });
        const e = await inbox.next("state.change", seen);
        assertTier0(e, "saved", { service: "orders", key: `${front}/a/b`, action: "save", value: '{"n":1}' }, fixture);
        await s().save({ service: "orders", key: `${front}/novalue`, value: "secret", publish_change: true });
        const e2 = await inbox.next("state.change", seen + 1);
        assertTier0(e2, "saved", { service: "orders", key: `${front}/novalue`, action: "save" }, fixture);
        assert.notEqual(e.id, e2.id, "each event has a fresh id");
      });

      it(`${front}: Tier 0 delete event carries the deleted value only with include_value`, async () => {
        const seen = t0();
        await s().save({ service: "orders", key: `${front}/gone`, value: "old" });
        await s().delete({ service: "orders", key: `${front}/gone`, publish_change: true, include_value: true });
        assertTier0(await inbox.next("state.change", seen), "deleted", { service: "orders", key: `${front}/gone`, action: "delete", value: "old" }, fixture);
        await s().delete({ service: "orders", key: `${front}/gone`, publish_change: true });
        assertTier0(await inbox.next("state.change", seen + 1), "deleted", { service: "orders", key: `${front}/gone`, action: "delete" }, fixture);
      });

      it(`${front}: bulk delete publishes one event listing only the keys deleted; none deleted, no event`, async () => {
        const seen = t0();
        await s().save({ service: "orders", key: `${front}/x1`, value: "1" });
        await s().save({ service: "orders", key: `${front}/x2`, value: "2" });
        const r = await s().deleteBulk({ service: "orders", keys: [`${front}/x1`, `${front}/none`, `${front}/x2`], publish_change: true });
        assert.equal(r.status.message, "deleted 2 of 3 requested keys");
        assertTier0(await inbox.next("state.change", seen), "deleted", { service: "orders", keys: [`${front}/x1`, `${front}/x2`], action: "delete" }, fixture);
        await s().deleteBulk({ service: "orders", keys: [`${front}/x1`], publish_change: true });
        // Sentinel: the next event is this save, so the empty bulk delete published nothing.
        await s().save({ service: "orders", key: `${front}/sentinel`, value: "s", publish_change: true });
        assert.equal((payloadOf(await inbox.next("state.change", seen + 1)) as { key: string }).key, `${front}/sentinel`);
      });

      it(`${front}: a failed write publishes nothing`, async () => {
        const seen = t0();
        const { etag } = await s().save({ service: "orders", key: `${front}/cas`, value: "1" });
        await assert.rejects(s().save({ service: "orders", key: `${front}/cas`, value: "2", etag: etag + "x", publish_change: true }));
        await s().save({ service: "orders", key: `${front}/sentinel2`, value: "s", publish_change: true });
        assert.equal((payloadOf(await inbox.next("state.change", seen)) as { key: string }).key, `${front}/sentinel2`);
      });

      it(`${front}: only a topic, or only a cloudevent, is still Tier 0 on state.change`, async () => {
        const seen = t0();
        await s().save({ service: "orders", key: `${front}/only-topic`, value: "v", publish_change: true, change: { topic: "orders.domain" } });
        assertTier0(await inbox.next("state.change", seen), "saved", { service: "orders", key: `${front}/only-topic`, action: "save" }, fixture);
        const ce = { id: "x", source: "urn:test", spec_version: "1.0", type: "t" };
        await s().save({ service: "orders", key: `${front}/only-ce`, value: "v", publish_change: true, change: { cloudevent: ce } });
        assertTier0(await inbox.next("state.change", seen + 1), "saved", { service: "orders", key: `${front}/only-ce`, action: "save" }, fixture);
      });

      it(`${front}: Tier 1 publishes the given cloudevent verbatim on its topic and nothing on state.change`, async () => {
        const seen0 = t0();
        const seen1 = inbox.on("orders.domain").length;
        const ce = {
          id: `order-${front}-42`,
          source: "urn:com.example:orders",
          spec_version: "1.0",
          type: "com.example.order.updated",
          attributes: { sequence: { ce_string: "17" }, datacontenttype: { ce_string: "application/json" } },
          text_data: '{"order":42,"version":17}',
        };
        await s().save({ service: "orders", key: `${front}/order/42`, value: "v", publish_change: true, change: { topic: "orders.domain", cloudevent: ce } });
        const got = await inbox.next("orders.domain", seen1);
        assert.equal(got.id, ce.id);
        assert.equal(got.source, ce.source);
        assert.equal(got.spec_version, ce.spec_version);
        assert.equal(got.type, ce.type);
        assert.equal(got.text_data, ce.text_data);
        assert.equal(got.attributes["sequence"]?.ce_string, "17");
        assert.equal(got.attributes["datacontenttype"]?.ce_string, "application/json");
        // Tier 1 on delete and bulk delete too.
        await s().delete({ service: "orders", key: `${front}/order/42`, publish_change: true, change: { topic: "orders.domain", cloudevent: { ...ce, id: `${ce.id}-d` } } });
        assert.equal((await inbox.next("orders.domain", seen1 + 1)).id, `${ce.id}-d`);
        await s().save({ service: "orders", key: `${front}/order/43`, value: "v" });
        await s().deleteBulk({ service: "orders", keys: [`${front}/order/43`], publish_change: true, change: { topic: "orders.domain", cloudevent: { ...ce, id: `${ce.id}-b` } } });
        assert.equal((await inbox.next("orders.domain", seen1 + 2)).id, `${ce.id}-b`);
        if (front === "rest") {
          // The CloudEvents JSON format, as the REST publish route takes it, is accepted too.
          const structured = { specversion: "1.0", id: "json-format-1", source: "urn:com.example:orders", type: "com.example.order.updated", sequence: "18", datacontenttype: "application/json", data: { order: 42 } };
          await s().save({ service: "orders", key: `${front}/order/44`, value: "v", publish_change: true, change: { topic: "orders.domain", cloudevent: structured } });
          const j = await inbox.next("orders.domain", seen1 + 3);
          assert.equal(j.id, "json-format-1");
          assert.equal(j.spec_version, "1.0");
          assert.equal(j.type, "com.example.order.updated");
          assert.deepEqual(JSON.parse(j.text_data!), { order: 42 });
          assert.equal(j.attributes["datacontenttype"]?.ce_string, "application/json");
        }
        await s().save({ service: "orders", key: `${front}/sentinel3`, value: "s", publish_change: true });
        assert.equal((payloadOf(await inbox.next("state.change", seen0)) as { key: string }).key, `${front}/sentinel3`);
      });
    }

    it("counts every attempted publish by service, action and tier", async () => {
      const text = await (await fetch(`${gw().http}/metrics`)).text();
      assert.ok(sample(text, "platform_api_state_change_publishes_total", { service: "orders", action: "save", tier: "tier0" }) >= 10);
      assert.ok(sample(text, "platform_api_state_change_publishes_total", { service: "orders", action: "delete", tier: "tier1" }) >= 4);
      assert.equal(sample(text, "platform_api_state_change_publish_failures_total", { service: "orders", action: "save", tier: "tier0" }), 0);
    });
  });

  describe(`state change publish failure over ${fixture.name}`, () => {
    let gw: TestGateway;
    let teardown: () => Promise<void>;
    let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
    before(async () => {
      const f = await fixture.setup();
      teardown = f.close;
      const base = await runtimeOf(f);
      otlp = await startOtlpReceiver();
      // What OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_METRIC_EXPORT_INTERVAL become through the CLI (cli-args.test.ts).
      gw = await startTestGateway(
        { ...f.options, services, apiKeys: [KEY], otlpEndpoint: otlp.url, otlpIntervalMs: 100 },
        { ...f.overrides, runtime: failingPublish(base) },
      );
    });
    after(async () => {
      await gw.close();
      await otlp.close();
      await teardown();
    });

    it("reports the write as successful, logs the loss at Error level, counts attempts and failures", async () => {
      const [grpc, rest] = stateFronts(gw, KEY);
      const saved = await grpc!.save({ service: "billing", key: "inv/1", value: "v", publish_change: true });
      assert.deepEqual(saved.status, { success: true, status: "OK", message: "" });
      assert.equal((await grpc!.get("billing", "inv/1"))?.value, "v", "the write happened");
      assert.equal((await rest!.delete({ service: "billing", key: "inv/1", publish_change: true, change: { topic: "billing.domain", cloudevent: { id: "1", source: "urn:b", type: "t" } } })).status.success, true);
      await rest!.save({ service: "billing", key: "inv/2", value: "v" });
      const bulk = await rest!.deleteBulk({ service: "billing", keys: ["inv/2", "inv/3"], publish_change: true });
      assert.deepEqual(bulk.status, { success: true, status: "OK", message: "deleted 1 of 2 requested keys" });

      const lines = gw.logs.filter((l) => l["msg"] === LOG_TEXT);
      assert.equal(lines.length, 3, JSON.stringify(lines));
      assert.ok(lines.every((l) => l["level"] === "error"));
      assert.deepEqual(
        lines.map((l) => [l["service"], l["key"] ?? l["keys"], l["topic"], l["tier"], l["action"]]),
        [
          ["billing", "inv/1", "state.change", "tier0", "save"],
          ["billing", "inv/1", "billing.domain", "tier1", "delete"],
          ["billing", ["inv/2"], "state.change", "tier0", "delete"],
        ],
      );
      assert.match(JSON.stringify(lines[0]!["err"]), /injected: sidecar publish refused/);

      const text = await (await fetch(`${gw.http}/metrics`)).text();
      assert.match(text, /# HELP platform_api_state_change_publishes_total \S+/);
      assert.match(text, /# HELP platform_api_state_change_publish_failures_total \S+/);
      for (const [action, tier, n] of [["save", "tier0", 1], ["delete", "tier1", 1], ["delete", "tier0", 1]] as const) {
        const labels = { service: "billing", action, tier };
        assert.equal(sample(text, "platform_api_state_change_publishes_total", labels), n, `publishes ${action} ${tier}`);
        assert.equal(sample(text, "platform_api_state_change_publish_failures_total", labels), n, `failures ${action} ${tier}`);
      }
    });

    it("exports both counters over OTLP to the configured endpoint", async () => {
      const has = (name: string) => otlp.bodies.some((b) => b.includes(name));
      await waitFor(() => has("platform_api_state_change_publish_failures_total") && has("platform_api_state_change_publishes_total"), "an OTLP export with both counters", 10_000);
    });
  });
}
