import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code } from "../../src/shared/code.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createDaprRuntime, type DaprRuntime } from "../../src/runtime/dapr/index.js";
import { createDaprConnection } from "../../src/runtime/dapr/connection.js";
import { createDaprPubsub } from "../../src/runtime/dapr/pubsub.js";
import { createDaprState, QUERY_PAGE_SIZE } from "../../src/runtime/dapr/state.js";
import { startTestDaprSidecar, type TestDaprSidecar } from "../support/dapr-sidecar/index.js";
import { failNextGetState } from "../support/dapr-sidecar/state.js";
import { rawDaprClient } from "../support/dapr-sidecar/raw-client.js";
import { waitFor } from "../support/gateway.js";
import { freePort } from "../support/ports.js";

const silent = { debug() {}, info() {}, warn() {}, error() {} };

function runtimeOn(port: number, extra: { apiToken?: string; pubsubName?: string; connectTimeoutMs?: number } = {}): DaprRuntime {
  return createDaprRuntime({
    pubsubName: extra.pubsubName ?? "pubsub",
    logger: silent,
    host: "127.0.0.1",
    grpcPort: port,
    connectTimeoutMs: extra.connectTimeoutMs ?? 1000,
    resubscribeBackoff: { initialMs: 20, maxMs: 200 },
    queryIndexes: new Map([["docs", "docs-index"]]),
    ...(extra.apiToken ? { apiToken: extra.apiToken } : {}),
  });
}

async function rejectsCode(p: Promise<unknown>, code: Code, message?: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof GatewayError, `a GatewayError, got ${String(e)}`);
    assert.equal(e.codeName, Code[code]);
    if (message) assert.match(e.message, message);
    return true;
  });
}

const event = (over: Partial<CloudEvent> = {}): CloudEvent => ({
  id: "e1",
  source: "urn:test:adapter",
  spec_version: "1.0",
  type: "com.example.thing",
  attributes: {},
  ...over,
});

describe("dapr adapter against the test sidecar", () => {
  let sidecar: TestDaprSidecar;
  let rt: DaprRuntime;
  before(async () => {
    sidecar = await startTestDaprSidecar({
      stateStores: {
        s1: { kind: "redis" },
        plain: { kind: "redis" },
        mem: { kind: "in-memory" },
        docs: { kind: "redis-stack", queryIndexes: { "docs-index": ["n", "kind", "name"] } },
      },
      defaultStoreKind: null,
      pubsubNames: ["pubsub"],
    });
    rt = runtimeOn(sidecar.port);
    await rt.start();
  });
  after(async () => {
    await rt.close();
    await sidecar.close();
  });

  describe("state", () => {
    it("saves and reads back with etags; first-write-wins with an etag, last-write-wins without", async () => {
      const e1 = await rt.state.save("s1", "a", "one");
      assert.ok(e1);
      assert.deepEqual(await rt.state.get("s1", "a"), { key: "a", value: "one", etag: e1 });
      const e2 = await rt.state.save("s1", "a", "two", { etag: e1 });
      assert.notEqual(e2, e1);
      await rejectsCode(rt.state.save("s1", "a", "stale", { etag: e1 }), Code.ABORTED);
      assert.equal((await rt.state.get("s1", "a"))?.value, "two");
      await rt.state.save("s1", "a", "three");
      assert.equal((await rt.state.get("s1", "a"))?.value, "three");
      await rejectsCode(rt.state.delete("s1", "a", { etag: e1 }), Code.ABORTED);
      await rt.state.delete("s1", "a");
      assert.equal(await rt.state.get("s1", "a"), undefined);
      // An empty value is still a stored key.
      await rt.state.save("s1", "empty", "");
      assert.equal((await rt.state.get("s1", "empty"))?.value, "");
    });

    it("bulk get keeps request order and leaves out missing keys; bulk delete removes them", async () => {
      await rt.state.save("s1", "b1", "x");
      await rt.state.save("s1", "b2", "y");
      const items = await rt.state.getBulk("s1", ["b2", "missing", "b1"]);
      assert.deepEqual(items.map((i) => [i.key, i.value]), [["b2", "y"], ["b1", "x"]]);
      await rt.state.deleteBulk("s1", ["b1", "b2", "missing"]);
      assert.deepEqual(await rt.state.getBulk("s1", ["b1", "b2"]), []);
    });

    it("a value comes back byte-identical on redis and in-memory stores (no contentType is sent)", async () => {
      // daprd would decode and re-encode a value sent with contentType application/json: keys sorted, <>& escaped,
      // integers past 2^53 rounded. Without that metadata the bytes are stored as they are.
      const value = '{"z":1,"a":12345678901234567891,"s":"<b>&amp;</b>","f":0.1234567891}';
      for (const store of ["s1", "mem"]) {
        await rt.state.save(store, "exact", value);
        assert.equal((await rt.state.get(store, "exact"))?.value, value, store);
        assert.deepEqual((await rt.state.getBulk(store, ["exact"])).map((i) => i.value), [value], store);
      }
      // The sidecar does re-encode when asked to (what the adapter avoids).
      const raw = rawDaprClient(sidecar.port);
      try {
        await raw.unary("SaveState", { store_name: "mem", states: [{ key: "re", value: Buffer.from(value), metadata: { contentType: "application/json" } }] });
        const back = await raw.unary("GetState", { store_name: "mem", key: "re" });
        assert.equal(Buffer.from(back.data).toString(), '{"a":12345678901234567000,"f":0.1234567891,"s":"\\u003cb\\u003e\\u0026amp;\\u003c/b\\u003e","z":1}');
      } finally {
        raw.close();
      }
    });

    it("redis etags are integers (a malformed one is INVALID_ARGUMENT); in-memory etags are uuids and a stale one on a missing key is ABORTED", async () => {
      const e1 = await rt.state.save("s1", "v", "one");
      assert.match(e1, /^\d+$/);
      await rejectsCode(rt.state.save("s1", "v", "x", { etag: "not-a-number" }), Code.INVALID_ARGUMENT, /etag/);
      const m1 = await rt.state.save("mem", "v", "one");
      assert.match(m1, /^[0-9a-f-]{36}$/);
      await rejectsCode(rt.state.save("mem", "missing", "x", { etag: m1 }), Code.ABORTED);
    });

    it("Redis Stack: JSON documents are saved, read, bulk read, deleted with their etag checked and bulk deleted", async () => {
      const etag = await rt.state.save("docs", "d1", '{"name":"apple","n":1}');
      assert.equal(etag, "1");
      const got = await rt.state.get("docs", "d1");
      assert.deepEqual(JSON.parse(got!.value), { name: "apple", n: 1 });
      assert.deepEqual((await rt.state.getBulk("docs", ["d1", "nope"])).map((i) => i.key), ["d1"]);
      await rejectsCode(rt.state.delete("docs", "d1", { etag: "7" }), Code.ABORTED);
      assert.ok(await rt.state.get("docs", "d1"), "a stale etag deletes nothing");
      await rt.state.delete("docs", "d1", { etag: "1" });
      assert.equal(await rt.state.get("docs", "d1"), undefined);
      await rt.state.save("docs", "d2", "[1,2]");
      await rt.state.save("docs", "d3", '"text"');
      await rt.state.deleteBulk("docs", ["d2", "d3"]);
      assert.deepEqual(await rt.state.getBulk("docs", ["d2", "d3"]), []);
      // A value that is not JSON cannot be a document: refused in-band, naming the store and its index.
      await rejectsCode(rt.state.save("docs", "bad", "not json"), Code.INVALID_ARGUMENT, /value must be JSON.*docs.*docs-index/);
    });

    it("Redis Stack: the sidecar refuses what daprd refuses (without contentType WRONGTYPE, no queryIndexName, 10-row default page)", async () => {
      await rt.state.save("docs", "w1", '{"n":1}');
      const raw = rawDaprClient(sidecar.port);
      try {
        await assert.rejects(raw.unary("GetState", { store_name: "docs", key: "w1" }), /WRONGTYPE/);
        await assert.rejects(raw.unary("QueryStateAlpha1", { store_name: "docs", query: "{}", metadata: { contentType: "application/json" } }), /query index not found/);
        for (let i = 0; i < 12; i++) await rt.state.save("docs", `ten${i}`, JSON.stringify({ n: 100 + i }));
        const noLimit = await raw.unary("QueryStateAlpha1", { store_name: "docs", query: "{}", metadata: { contentType: "application/json", queryIndexName: "docs-index" } });
        assert.equal(noLimit.results.length, 10);
        assert.equal(noLimit.token, "");
      } finally {
        raw.close();
        for (let i = 0; i < 12; i++) await rt.state.delete("docs", `ten${i}`);
        await rt.state.delete("docs", "w1");
      }
    });

    it("Redis Stack queries send queryIndexName and an explicit page.limit: 25 documents come back whole, limit pages", async () => {
      for (let i = 1; i <= 25; i++) await rt.state.save("docs", `q${i}`, JSON.stringify({ n: i, kind: i % 2 ? "odd" : "even" }));
      const all = await rt.state.query("docs", "{}", 0);
      assert.equal(all.items.length, 25, "not cut at RediSearch's 10 rows");
      const odd = await rt.state.query("docs", JSON.stringify({ filter: { EQ: { kind: "odd" } }, sort: [{ key: "n" }] }), 0);
      assert.deepEqual(odd.items.map((i) => i.key), Array.from({ length: 13 }, (_, i) => `q${2 * i + 1}`));
      const capped = await rt.state.query("docs", JSON.stringify({ filter: { GTE: { n: 1 } }, sort: [{ key: "n", order: "DESC" }] }), 2);
      assert.deepEqual(capped.items.map((i) => i.key), ["q25", "q24"]);
      assert.ok(capped.token);
      await rejectsCode(rt.state.query("docs", JSON.stringify({ filter: { EQ: { other: 1 } } }), 0), Code.INTERNAL, /not indexed/);
      await rejectsCode(rt.state.query("docs", "{not json", 0), Code.INVALID_ARGUMENT, /query/);
    });

    it("a save is reported done once SaveState succeeded: a failed, slow or abandoned etag read-back leaves the etag unknown", async () => {
      const conn = createDaprConnection({ host: "127.0.0.1", grpcPort: sidecar.port, connectTimeoutMs: 1000 });
      const state = createDaprState(conn, new Map(), { saveReadBackTimeoutMs: 300 });
      try {
        // The read-back fails (daprd's store error, or the sidecar answering UNAVAILABLE): stored, etag "".
        for (const code of [Code.INTERNAL, Code.UNAVAILABLE]) {
          failNextGetState("plain", { code });
          assert.equal(await state.save("plain", `rb-${code}`, "stored"), "", Code[code]);
          assert.equal((await state.get("plain", `rb-${code}`))?.value, "stored", Code[code]);
        }
        // The read-back hangs: the save ends with its own deadline, not the call's 10 s one.
        failNextGetState("plain", { delayMs: 5000 });
        const started = Date.now();
        assert.equal(await state.save("plain", "rb-slow", "stored"), "");
        assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
        assert.equal((await state.get("plain", "rb-slow"))?.value, "stored");
        // The caller gives up while the etag is being read: the write happened, so the save still succeeds.
        const ac = new AbortController();
        failNextGetState("plain", { delayMs: 100, onCall: () => ac.abort(new Error("caller went away")) });
        const etag = await state.save("plain", "rb-abort", "stored", { signal: ac.signal });
        assert.match(etag, /^\d+$/);
        assert.equal((await state.get("plain", "rb-abort"))?.etag, etag);
      } finally {
        conn.close();
      }
    });

    it("Redis Stack: a no-limit query whose result count is a multiple of the page size ends on daprd's empty page", async () => {
      const n = 2 * QUERY_PAGE_SIZE;
      for (let i = 0; i < n; i++) await rt.state.save("docs", `pg${i}`, JSON.stringify({ n: 1000 + i, kind: "paged" }));
      try {
        const paged = JSON.stringify({ filter: { EQ: { kind: "paged" } }, sort: [{ key: "n" }] });
        const all = await rt.state.query("docs", paged, 0);
        assert.equal(all.items.length, n);
        assert.equal(all.token, "");
        assert.deepEqual(all.items.map((i) => i.key), Array.from({ length: n }, (_, i) => `pg${i}`));
        // A caller following the tokens of full pages reaches the end as an empty page with no token.
        const page = (token?: string) => JSON.stringify({ filter: { EQ: { kind: "paged" } }, page: { limit: QUERY_PAGE_SIZE, ...(token ? { token } : {}) } });
        const first = await rt.state.query("docs", page(), 0);
        const second = await rt.state.query("docs", page(first.token), 0);
        assert.equal(second.items.length, QUERY_PAGE_SIZE);
        assert.ok(second.token);
        assert.deepEqual(await rt.state.query("docs", page(second.token), 0), { items: [], token: "" });
        // What the sidecar answers there, as daprd on Redis 7 / RediSearch 2.8 (contrib parseQueryResponsePost28).
        const raw = rawDaprClient(sidecar.port);
        try {
          await assert.rejects(
            raw.unary("QueryStateAlpha1", { store_name: "docs", query: page(second.token), metadata: { contentType: "application/json", queryIndexName: "docs-index" } }),
            (e: { code: number; details: string }) => e.code === Code.INTERNAL && e.details === "failed query in state store docs: invalid output",
          );
        } finally {
          raw.close();
        }
      } finally {
        await rt.state.deleteBulk("docs", Array.from({ length: n }, (_, i) => `pg${i}`));
      }
    });

    it("maps daprd's codes: unknown store INVALID_ARGUMENT, store without query support INTERNAL", async () => {
      await rejectsCode(rt.state.get("nope", "k"), Code.INVALID_ARGUMENT, /nope/);
      await rejectsCode(rt.state.query("plain", "{}", 0), Code.INTERNAL, /redis-json server support is required/);
      await rejectsCode(rt.state.query("mem", "{}", 0), Code.INTERNAL, /does not support querying/);
    });
  });

  describe("pub/sub", () => {
    it("subscribe resolves once the sidecar's stream is live, and every data form round-trips", async () => {
      const got: CloudEvent[] = [];
      const sub = await rt.pubsub.subscribe("round", { onEvent: (e) => got.push(e) });
      assert.equal(sidecar.broker.count("round"), 1);
      const sent: CloudEvent[] = [
        event({ id: "json", text_data: '{"a":1}', data: "text_data", attributes: { datacontenttype: { ce_string: "application/json", attr: "ce_string" } } }),
        event({ id: "text", text_data: "plain words", data: "text_data" }),
        event({ id: "bin", binary_data: Buffer.from([0, 1, 2, 255]), data: "binary_data" }),
        event({ id: "proto", proto_data: { type_url: "type.googleapis.com/x.Y", value: Buffer.from([8, 1]) }, data: "proto_data" }),
        event({ id: "xml", text_data: "<a/>", data: "text_data", attributes: { datacontenttype: { ce_string: "application/weird", attr: "ce_string" } } }),
        event({
          id: "attrs",
          attributes: {
            correlationid: { ce_string: "c-1", attr: "ce_string" },
            retries: { ce_integer: 3, attr: "ce_integer" },
            urgent: { ce_boolean: true, attr: "ce_boolean" },
            time: { ce_timestamp: { seconds: "1700000000", nanos: 5000 }, attr: "ce_timestamp" },
          },
        }),
      ];
      for (const e of sent) await rt.pubsub.publish("round", e);
      await waitFor(() => got.length === sent.length, "every published event");
      const byId = new Map(got.map((e) => [e.id, e]));
      assert.equal(byId.get("json")!.text_data, '{"a":1}');
      assert.equal(byId.get("text")!.text_data, "plain words");
      assert.equal(byId.get("text")!.attributes["datacontenttype"]!.ce_string, "text/plain");
      assert.deepEqual(Buffer.from(byId.get("bin")!.binary_data!), Buffer.from([0, 1, 2, 255]));
      assert.deepEqual(byId.get("proto")!.proto_data!.type_url, "type.googleapis.com/x.Y");
      assert.deepEqual(Buffer.from(byId.get("proto")!.proto_data!.value), Buffer.from([8, 1]));
      // An unknown content type would arrive EMPTY from daprd: the adapter sends such text as data_base64.
      assert.deepEqual(Buffer.from(byId.get("xml")!.binary_data!).toString(), "<a/>");
      const attrs = byId.get("attrs")!;
      assert.equal(attrs.data, undefined);
      assert.equal(attrs.source, "urn:test:adapter");
      assert.equal(attrs.type, "com.example.thing");
      assert.equal(attrs.attributes["correlationid"]!.ce_string, "c-1");
      assert.equal(attrs.attributes["retries"]!.ce_integer, 3);
      assert.equal(attrs.attributes["urgent"]!.ce_boolean, true);
      assert.deepEqual(attrs.attributes["time"]!.ce_timestamp, { seconds: "1700000000", nanos: 5000 });
      assert.equal(attrs.attributes["topic"]!.ce_string, "round"); // daprd overwrites topic and adds traceparent
      assert.ok(attrs.attributes["traceparent"]!.ce_string);
      await sub.close();
      await waitFor(() => sidecar.broker.count("round") === 0, "the stream to close at the sidecar");
    });

    it("a subscription to an unknown pubsub component is INVALID_ARGUMENT and leaves nothing open", async () => {
      const other = runtimeOn(sidecar.port, { pubsubName: "missing" });
      try {
        await rejectsCode(other.pubsub.subscribe("t", { onEvent() {} }), Code.INVALID_ARGUMENT, /pubsub missing is not found/);
        await rejectsCode(other.pubsub.publish("t", event()), Code.INVALID_ARGUMENT, /pubsub missing is not found/);
      } finally {
        await other.close();
      }
    });

    it("a publish the sidecar rejects fails with its code; the next one succeeds", async () => {
      sidecar.failNextPublish();
      await rejectsCode(rt.pubsub.publish("t", event()), Code.INTERNAL, /injected/);
      await rt.pubsub.publish("t", event());
    });

    it("resubscribes after a sidecar restart: the same handlers get later events", async () => {
      const got: string[] = [];
      let errors = 0;
      const sub = await rt.pubsub.subscribe("restart", { onEvent: (e) => got.push(e.id), onError: () => errors++ });
      await rt.pubsub.publish("restart", event({ id: "before" }));
      await waitFor(() => got.length === 1, "the first event");
      // Its ack must reach the sidecar first: an unacked event is redelivered after the restart (daprd does the same).
      await waitFor(() => sidecar.broker.unacked("restart") === 0, "the ack of the first event");
      await sidecar.stop();
      await rejectsCode(rt.pubsub.publish("restart", event({ id: "down" })), Code.UNAVAILABLE, new RegExp(`dapr sidecar at 127.0.0.1:${sidecar.port} is unreachable`));
      await rejectsCode(rt.state.get("s1", "x"), Code.UNAVAILABLE, /is unreachable/);
      assert.equal((await rt.health()).status, "Unhealthy");
      await sidecar.restart();
      await waitFor(() => sidecar.broker.count("restart") === 1, "the adapter to resubscribe", 5000);
      await rt.pubsub.publish("restart", event({ id: "after" }));
      await waitFor(() => got.length === 2, "the event after the restart");
      assert.deepEqual(got, ["before", "after"]);
      assert.equal(errors, 0);
      assert.equal((await rt.health()).status, "Healthy");
      await sub.close();
    });

    it("a resubscribe answered INVALID_ARGUMENT 'subscriber is closed' (daprd reloading) is retried, not given up", async () => {
      const got: string[] = [];
      let errors = 0;
      const sub = await rt.pubsub.subscribe("reload", { onEvent: (e) => got.push(e.id), onError: () => errors++ });
      // stop() ends the stream UNKNOWN "stream closed", as daprd does on SIGTERM; then three resubscribes are refused.
      sidecar.rejectNextSubscribes(3);
      await sidecar.stop();
      await sidecar.restart();
      await waitFor(() => sidecar.broker.count("reload") === 1, "the adapter to resubscribe past the refusals", 8000);
      await rt.pubsub.publish("reload", event({ id: "after-reload" }));
      await waitFor(() => got.length === 1, "the event after the reload");
      assert.equal(errors, 0, "the subscription was never reported dead");
      await sub.close();
    });
    it("a first subscribe answered 'subscriber is closed' (daprd reloading) is retried and succeeds once the reload ends", async () => {
      const got: string[] = [];
      let errors = 0;
      sidecar.rejectNextSubscribes(3);
      const sub = await rt.pubsub.subscribe("first-reload", { onEvent: (e) => got.push(e.id), onError: () => errors++ });
      assert.equal(sidecar.broker.count("first-reload"), 1);
      await rt.pubsub.publish("first-reload", event({ id: "after-first-reload" }));
      await waitFor(() => got.length === 1, "the event after the reload");
      assert.equal(errors, 0);
      await sub.close();
    });

    it("a reload that outlasts the subscribe timeout fails the first subscribe UNAVAILABLE, not INVALID_ARGUMENT", async () => {
      const conn = createDaprConnection({ host: "127.0.0.1", grpcPort: sidecar.port, connectTimeoutMs: 1000 });
      const pubsub = createDaprPubsub(conn, "pubsub", silent, { initialMs: 20, maxMs: 100 }, 400);
      try {
        sidecar.rejectNextSubscribes(1_000_000);
        await rejectsCode(pubsub.subscribe("long-reload", { onEvent() {} }), Code.UNAVAILABLE, /kept refusing the subscription to long-reload .*subscriber is closed/);
        assert.equal(pubsub.openStreams, 0);
        // An unknown component is still final at once.
        const other = createDaprPubsub(conn, "missing", silent, { initialMs: 20, maxMs: 100 }, 400);
        await rejectsCode(other.subscribe("t", { onEvent() {} }), Code.INVALID_ARGUMENT, /pubsub missing is not found/);
      } finally {
        sidecar.rejectNextSubscribes(0);
        pubsub.close();
        conn.close();
      }
    });
  });

  describe("jobs", () => {
    it("schedules, gets, lists and deletes with Dapr's rules", async () => {
      await rt.jobs.schedule({ name: "j1", schedule: "@every 1h", repeats: 3, data: '{"topic":"x"}' });
      const got = await rt.jobs.get("j1");
      assert.deepEqual(got, { name: "j1", schedule: "@every 1h", repeats: 3, data: '{"topic":"x"}' });
      await rejectsCode(rt.jobs.schedule({ name: "j1", schedule: "@daily", data: "" }), Code.ALREADY_EXISTS);
      // daprd leaves schedule checks to the Scheduler and answers its refusal INTERNAL "job failed validation"; the
      // adapter turns that into INVALID_ARGUMENT naming the field (the gateway validates triggers itself first too:
      // src/ops/trigger.ts toJobSpec).
      await rejectsCode(
        rt.jobs.schedule({ name: "bad", schedule: "* * * * *", data: "" }),
        Code.INVALID_ARGUMENT,
        /^schedule "\* \* \* \* \*" is refused by Dapr's Scheduler: expected exactly 6 fields, found 5/,
      );
      assert.ok((await rt.jobs.list()).some((j) => j.name === "j1"));
      assert.equal(await rt.jobs.get("nope"), undefined);
      await rt.jobs.delete("j1");
      assert.equal(await rt.jobs.get("j1"), undefined);
      await rejectsCode(rt.jobs.delete("j1"), Code.NOT_FOUND);
    });
  });

  describe("health and api token", () => {
    it("reports Healthy with the app id, Degraded without the pubsub component", async () => {
      const h = await rt.health();
      assert.equal(h.status, "Healthy");
      assert.match(h.description, new RegExp(`127.0.0.1:${sidecar.port}`));
      const other = runtimeOn(sidecar.port, { pubsubName: "elsewhere" });
      try {
        const d = await other.health();
        assert.equal(d.status, "Degraded");
        assert.match(d.description, /elsewhere/);
      } finally {
        await other.close();
      }
    });

    it("sends dapr-api-token; the sidecar rejects calls without it", async () => {
      const guarded = await startTestDaprSidecar({ apiToken: "sekret" });
      const good = runtimeOn(guarded.port, { apiToken: "sekret" });
      const bad = runtimeOn(guarded.port);
      try {
        await good.state.save("s", "k", "v");
        assert.equal((await good.state.get("s", "k"))?.value, "v");
        await rejectsCode(bad.state.get("s", "k"), Code.UNAUTHENTICATED);
        await rejectsCode(bad.pubsub.subscribe("t", { onEvent() {} }), Code.UNAUTHENTICATED);
        assert.equal((await bad.health()).status, "Unhealthy");
      } finally {
        await good.close();
        await bad.close();
        await guarded.close();
      }
    });
  });

  it("start() returns at once when no sidecar listens; calls fail UNAVAILABLE naming it; health is Unhealthy", async () => {
    const port = await freePort();
    const late = runtimeOn(port, { connectTimeoutMs: 300 });
    try {
      const t0 = Date.now();
      await late.start();
      assert.ok(Date.now() - t0 < 100, "start() must not wait for the sidecar");
      await rejectsCode(late.state.get("s", "k"), Code.UNAVAILABLE, new RegExp(`dapr sidecar at 127.0.0.1:${port} is unreachable`));
      const h = await late.health();
      assert.equal(h.status, "Unhealthy");
      assert.match(h.description, /unreachable/);
      // The sidecar comes up late on that port: the same runtime starts working.
      const sc = await startTestDaprSidecar({ port });
      try {
        await late.state.save("s", "k", "v");
        assert.equal((await late.health()).status, "Healthy");
      } finally {
        await sc.close();
      }
    } finally {
      await late.close();
    }
  });
});

describe("test sidecar protocol rules (dapr-facts.md)", () => {
  let sidecar: TestDaprSidecar;
  let raw: ReturnType<typeof rawDaprClient>;
  before(async () => {
    sidecar = await startTestDaprSidecar({ pubsubNames: ["pubsub"] });
    raw = rawDaprClient(sidecar.port);
  });
  after(async () => {
    raw.close();
    await sidecar.close();
  });

  it("requires an initial request first and rejects an unknown pubsub", async () => {
    const call = (raw.client as any).SubscribeTopicEventsAlpha1() as import("@grpc/grpc-js").ClientDuplexStream<any, any>;
    const err = await new Promise<any>((resolve) => {
      call.on("error", resolve);
      call.on("data", () => undefined);
      call.write({ event_processed: { id: "x", status: { status: "SUCCESS" } } });
    });
    assert.match(err.details, /initial request is required/);
    await assert.rejects(raw.subscribe("t", { pubsub: "other" }), /pubsub other is not found/);
  });

  it("delivers data of an unknown content type EMPTY, text and JSON as bytes", async () => {
    const sub = await raw.subscribe("ct");
    await raw.unary("PublishEvent", { pubsub_name: "pubsub", topic: "ct", data: Buffer.from("zzz"), data_content_type: "application/x-unknown" });
    await raw.unary("PublishEvent", { pubsub_name: "pubsub", topic: "ct", data: Buffer.from("hi"), data_content_type: "text/plain" });
    await raw.unary("PublishEvent", { pubsub_name: "pubsub", topic: "ct", data: Buffer.from('{"a": 1}'), data_content_type: "application/json" });
    await waitFor(() => sub.events.length === 3, "three events");
    assert.deepEqual(sub.events.map((e) => Buffer.from(e.data).toString()), ["", "hi", '{"a":1}']);
    assert.equal(sub.events[0].type, "com.dapr.event.sent");
    sub.cancel();
  });

  it("maps delivery data like daprd: data_base64 exact, text/* and application/xml as strings, exactly application/json re-encoded, every other type EMPTY", async () => {
    // (text/* or application/xml with data that is not a string is not delivered at all: dapr-sidecar.test.ts.)
    const sub = await raw.subscribe("map");
    const json = '{"z":1,"a":"<&>","big":12345678901234567891}';
    const cases: Array<[string, string, string]> = [
      // [datacontenttype, data member of the published CloudEvent (JSON), data bytes delivered]
      ["application/json", json, '{"a":"\\u003c\\u0026\\u003e","big":12345678901234567000,"z":1}'],
      ["application/problem+json", json, ""],
      ["application/vnd.x+json", json, ""],
      ["application/atom+xml", '"<feed/>"', ""],
      ["application/xml", '"<a/>"', "<a/>"],
      ["text/plain", '"hi"', "hi"],
    ];
    for (const [i, [ct, data]] of cases.entries()) {
      const ce = `{"specversion":"1.0","id":"m${i}","source":"urn:x","type":"t","datacontenttype":"${ct}","data":${data}}`;
      await raw.unary("PublishEvent", { pubsub_name: "pubsub", topic: "map", data: Buffer.from(ce), data_content_type: "application/cloudevents+json" });
    }
    const b64 = Buffer.from(json).toString("base64");
    const ce = `{"specversion":"1.0","id":"b64","source":"urn:x","type":"t","datacontenttype":"application/problem+json","data_base64":"${b64}"}`;
    await raw.unary("PublishEvent", { pubsub_name: "pubsub", topic: "map", data: Buffer.from(ce), data_content_type: "application/cloudevents+json" });
    await waitFor(() => sub.events.length === cases.length + 1, "every event");
    for (const [i, [ct, , want]] of cases.entries()) assert.equal(Buffer.from(sub.events[i].data).toString(), want, ct);
    assert.equal(Buffer.from(sub.events[cases.length].data).toString(), json, "data_base64 comes back byte for byte");
    assert.equal(sub.events[cases.length].data_content_type, "application/problem+json");
    sub.cancel();
  });

  it("answers protocol errors with daprd's codes: UNKNOWN for a missing or duplicate initial request", async () => {
    const grpc = await import("@grpc/grpc-js");
    const call = (raw.client as any).SubscribeTopicEventsAlpha1() as import("@grpc/grpc-js").ClientDuplexStream<any, any>;
    const err = await new Promise<any>((resolve) => {
      call.on("error", resolve);
      call.on("data", () => undefined);
      call.write({ event_processed: { id: "x", status: { status: "SUCCESS" } } });
    });
    assert.equal(err.code, grpc.status.UNKNOWN);
    const sub = await raw.subscribe("dup");
    const dup = await new Promise<any>((resolve) => {
      sub.call.on("error", resolve);
      sub.call.write({ initial_request: { pubsub_name: "pubsub", topic: "dup", metadata: {} } });
    });
    assert.equal(dup.code, grpc.status.UNKNOWN);
    assert.match(dup.details, /duplicate initial request/);
  });

  it("refuses job names the Scheduler refuses (not a DNS-1123 subdomain) with INTERNAL, like daprd", async () => {
    for (const name of ["nightly#1", "a..b", "x.", "Nightly", "caf\u00e9", "n".repeat(254)]) {
      await assert.rejects(raw.unary("ScheduleJobAlpha1", { job: { name, due_time: "1h" }, overwrite: false }), (e: any) => {
        assert.equal(e.code, 13, name);
        assert.match(e.details, /failed to schedule job due to: .*job name is invalid/);
        return true;
      });
    }
    await raw.unary("ScheduleJobAlpha1", { job: { name: "nightly-1.report_x", due_time: "1h" }, overwrite: false });
    await raw.unary("DeleteJobAlpha1", { name: "nightly-1.report_x" });
  });

  it("delivers jobs only while the app is healthy, probing HealthCheck and listing subscriptions without a token", async () => {
    const grpcJs = await import("@grpc/grpc-js");
    const { appCallbackWithJobEvent, daprService } = await import("../../src/runtime/dapr/protos.js");
    let healthy = false;
    const seen: Array<{ method: string; token: unknown }> = [];
    const app = new grpcJs.Server();
    const record = (method: string, md: import("@grpc/grpc-js").Metadata): void => void seen.push({ method, token: md.get("dapr-api-token")[0] });
    app.addService(daprService("AppCallbackHealthCheck"), {
      HealthCheck: (call: any, cb: any) => {
        record("HealthCheck", call.metadata);
        cb(healthy ? null : { code: grpcJs.status.UNAVAILABLE, details: "not yet" }, {});
      },
    });
    app.addService(appCallbackWithJobEvent(), {
      ListTopicSubscriptions: (call: any, cb: any) => {
        record("ListTopicSubscriptions", call.metadata);
        cb(null, { subscriptions: [] });
      },
      OnJobEvent: (call: any, cb: any) => {
        record("OnJobEvent", call.metadata);
        cb(null, {});
      },
    });
    const appPort = await new Promise<number>((resolve, reject) =>
      app.bindAsync("127.0.0.1:0", grpcJs.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    const sc = await startTestDaprSidecar({ appAddress: `127.0.0.1:${appPort}`, appApiToken: "app-tok", appHealthCheck: { intervalMs: 30 } });
    const scRaw = rawDaprClient(sc.port);
    try {
      await scRaw.unary("ScheduleJobAlpha1", { job: { name: "gated", due_time: "0s" }, overwrite: false });
      await waitFor(() => seen.filter((c) => c.method === "HealthCheck").length >= 3, "three failed probes");
      assert.equal(sc.appHealthy, false);
      assert.equal(seen.some((c) => c.method === "OnJobEvent"), false, "no job while the app is unhealthy");
      healthy = true;
      await waitFor(() => seen.some((c) => c.method === "OnJobEvent"), "the job once the app is healthy", 5000);
      const list = seen.find((c) => c.method === "ListTopicSubscriptions");
      assert.ok(list, "ListTopicSubscriptions is called when the app turns healthy");
      assert.equal(list.token, undefined);
      assert.ok(seen.filter((c) => c.method === "HealthCheck").every((c) => c.token === undefined), "probes carry no token");
      assert.equal(seen.find((c) => c.method === "OnJobEvent")!.token, "app-tok", "job callbacks carry the app token");
    } finally {
      scRaw.close();
      await sc.close();
      app.forceShutdown();
    }
  });

  it("pubsub.in-memory never redelivers: an event unacked when its stream closes is gone", async () => {
    const mem = await startTestDaprSidecar({ pubsubNames: ["pubsub"], pubsubKind: "in-memory" });
    const memRaw = rawDaprClient(mem.port);
    try {
      const first = await memRaw.subscribe("once", { autoAck: false });
      await memRaw.unary("PublishEvent", { pubsub_name: "pubsub", topic: "once", data: Buffer.from("x"), data_content_type: "text/plain" });
      await waitFor(() => first.events.length === 1, "the delivery");
      first.cancel();
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(mem.broker.backlog("once"), 0);
      const second = await memRaw.subscribe("once");
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(second.events.length, 0);
      second.cancel();
    } finally {
      memRaw.close();
      await mem.close();
    }
  });

  it("redelivers events that were not acked when their stream closed, once processingTimeout has passed", async () => {
    // contrib pubsub/redis: the entry stays pending in the app's consumer group; the reclaim loop of a later
    // subscription claims it once it has been idle processingTimeout (default 60 s, short here).
    const sc = await startTestDaprSidecar({ pubsubNames: ["pubsub"], pubsubComponent: { processingTimeoutMs: 600, redeliverIntervalMs: 100 } });
    const scRaw = rawDaprClient(sc.port);
    try {
      const first = await scRaw.subscribe("redeliver", { autoAck: false });
      await scRaw.unary("PublishEvent", {
        pubsub_name: "pubsub",
        topic: "redeliver",
        data: Buffer.from(JSON.stringify({ specversion: "1.0", id: "r1", source: "urn:x", type: "t" })),
        data_content_type: "application/cloudevents+json",
      });
      await waitFor(() => first.events.length === 1, "the first delivery");
      const deliveredAt = Date.now();
      first.cancel();
      await waitFor(() => sc.broker.count("redeliver") === 0, "the first stream to close");
      assert.equal(sc.broker.backlog("redeliver"), 1, "pending in the group");
      const second = await scRaw.subscribe("redeliver");
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(second.events.length, 0, "not at once: only after processingTimeout");
      await waitFor(() => second.events.length === 1, "the redelivery", 5000);
      assert.ok(Date.now() - deliveredAt >= 550, `redelivered after ${Date.now() - deliveredAt} ms`);
      assert.equal(second.events[0].id, "r1");
      await waitFor(() => sc.broker.backlog("redeliver") === 0, "the redelivery acked");
      second.cancel();
    } finally {
      scRaw.close();
      await sc.close();
    }
  });
});
