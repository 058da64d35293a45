import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { CloudEvent } from "cloudevents";
import { backoffDelay, createGatewayClient, eventData, fromProtoCloudEvent, GatewayClientError, toProtoCloudEvent } from "../../src/client/index.js";
import { resolveReconnectOptions } from "../../src/client/options.js";

describe("client CloudEvent mapping", () => {
  it("maps a cloudevents SDK event: attributes, extensions, JSON data", () => {
    const sdk = new CloudEvent({
      source: "https://example.com/orders",
      type: "order.created",
      subject: "o-1",
      time: "2024-05-01T10:00:00.250Z",
      dataschema: "https://example.com/schema",
      data: { id: "o-1", total: 3 },
      tenant: "acme",
      attempt: 2,
      urgent: true,
    });
    const w = toProtoCloudEvent(sdk);
    assert.equal(w.id, sdk.id);
    assert.equal(w.source, "https://example.com/orders");
    assert.equal(w.spec_version, "1.0");
    assert.equal(w.type, "order.created");
    assert.deepEqual(JSON.parse(w.text_data!), { id: "o-1", total: 3 });
    assert.equal(w.binary_data, undefined);
    assert.deepEqual(w.attributes["subject"], { ce_string: "o-1" });
    assert.deepEqual(w.attributes["tenant"], { ce_string: "acme" });
    assert.deepEqual(w.attributes["attempt"], { ce_integer: 2 });
    assert.deepEqual(w.attributes["urgent"], { ce_boolean: true });
    assert.deepEqual(w.attributes["dataschema"], { ce_uri: "https://example.com/schema" });
    assert.deepEqual(w.attributes["time"], { ce_timestamp: { seconds: String(Date.parse("2024-05-01T10:00:00Z") / 1000), nanos: 250_000_000 } });
    assert.equal(w.attributes["datacontenttype"]?.ce_string, "application/json");
    // and back
    const back = fromProtoCloudEvent(w);
    assert.equal(back["time"], "2024-05-01T10:00:00.250Z");
    assert.equal(back["tenant"], "acme");
    assert.deepEqual(back.data, { id: "o-1", total: 3 });
    assert.equal(new CloudEvent(back as never).type, "order.created");
  });

  it("maps bytes to binary_data and strings to text_data; wire fields pass through", () => {
    const bin = toProtoCloudEvent({ source: "urn:a:b", type: "t", data: new Uint8Array([1, 2, 3]) });
    assert.deepEqual([...bin.binary_data!], [1, 2, 3]);
    assert.deepEqual(eventData({ ...bin, data: "binary_data" }), new Uint8Array([1, 2, 3]));
    const b64 = toProtoCloudEvent({ source: "urn:a:b", type: "t", data_base64: Buffer.from("hi").toString("base64") });
    assert.equal(Buffer.from(b64.binary_data!).toString(), "hi");
    const text = toProtoCloudEvent({ source: "urn:a:b", type: "t", data: "plain" });
    assert.equal(text.text_data, "plain");
    assert.equal(text.attributes["datacontenttype"], undefined);
    const raw = toProtoCloudEvent({ id: "x", source: "urn:a:b", spec_version: "1.0", type: "t", attributes: { k: { ce_uri_ref: "/r" }, n: 5 }, text_data: "{}" });
    assert.equal(raw.id, "x");
    assert.deepEqual(raw.attributes, { k: { ce_uri_ref: "/r" }, n: { ce_integer: 5 } });
    assert.equal(raw.text_data, "{}");
    const none = toProtoCloudEvent({ source: "urn:a:b", type: "t" });
    assert.equal(none.text_data, undefined);
    assert.equal(none.binary_data, undefined);
    assert.notEqual(none.id, "");
  });

  it("leaves source checks to the gateway but rejects unusable shapes naming the field", () => {
    assert.equal(toProtoCloudEvent({ source: "a/b", type: "t" }).source, "a/b");
    assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", "Bad-Name": 1 }), (e: unknown) => e instanceof GatewayClientError && /cloudevent\.Bad-Name/.test(e.message));
    assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", tenant: { nested: true } }), /cloudevent\.tenant/);
    assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", time: "not a time" }), /cloudevent\.time/);
    assert.throws(() => toProtoCloudEvent({ source: 5 as unknown as string }), /cloudevent\.source/);
    const circular: Record<string, unknown> = {};
    circular["self"] = circular;
    assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", type: "t", data: circular }), (e: unknown) => e instanceof GatewayClientError && /cloudevent\.data cannot be serialized as JSON/.test(e.message));
    assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", type: "t", data: { n: 1n } }), /cloudevent\.data cannot be serialized/);
    assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", type: "t", data_base64: "not base64!" }), /cloudevent\.data_base64 must be base64 text/);
  });
});

describe("client attribute names: the gateway's one rule, before anything is sent", () => {
  /** A GatewayClientError with code INVALID_ARGUMENT whose field and message name the attribute. */
  const refused = (field: string, message: RegExp) => (e: unknown): boolean => {
    assert.ok(e instanceof GatewayClientError, `expected a GatewayClientError, got ${String(e)}`);
    assert.equal(e.codeName, "INVALID_ARGUMENT", e.message);
    assert.equal(e.field, field);
    assert.match(e.message, message);
    return true;
  };

  it("an explicit attributes map with a reserved, empty or malformed name is INVALID_ARGUMENT naming cloudevent.attributes.<name>", () => {
    const cases: Array<[string, string, RegExp]> = [
      ["data_base64", "cloudevent.attributes.data_base64", /^cloudevent\.attributes\.data_base64 is not a valid attribute name \(reserved: /],
      ["data", "cloudevent.attributes.data", /^cloudevent\.attributes\.data is not a valid attribute name \(reserved: /],
      ["id", "cloudevent.attributes.id", /^cloudevent\.attributes\.id is not a valid attribute name \(reserved: /],
      ["specversion", "cloudevent.attributes.specversion", /reserved: /],
      ["", 'cloudevent.attributes.""', /^cloudevent\.attributes\."" is not a valid attribute name \(it is empty\)$/],
      ["__proto__", "cloudevent.attributes.__proto__", /lower-case letters and digits only/],
      ["Tenant", "cloudevent.attributes.Tenant", /lower-case letters and digits only/],
      ["x".repeat(300), `cloudevent.attributes.${"x".repeat(256)}…(44 more characters)`, /at most 64 characters, got 300\)$/],
    ];
    for (const [name, field, message] of cases) {
      // A computed key: `__proto__` becomes an own key, as JSON.parse makes it.
      const attributes = { tenant: "acme", [name]: { ce_string: "SGVsbG8=" } };
      assert.throws(() => toProtoCloudEvent({ source: "urn:a:b", type: "t", attributes }), refused(field, message), JSON.stringify(name.slice(0, 20)));
    }
    // The rule's good names still pass, in the map and as extension properties.
    const ok = toProtoCloudEvent({ source: "urn:a:b", type: "t", attributes: { tenant: "acme", ["a".repeat(64)]: 1 }, region: "eu" });
    assert.deepEqual(Object.keys(ok.attributes).sort(), ["a".repeat(64), "region", "tenant"]);
  });

  it("publish and a Tier 1 change refuse a reserved attribute name without calling the gateway", async () => {
    // Nothing listens on port 1: a call that went out would fail UNAVAILABLE, not INVALID_ARGUMENT.
    const gw = createGatewayClient({ address: "127.0.0.1:1" });
    try {
      const event = { source: "urn:a:b", type: "t", attributes: { data_base64: "ZmFrZQ==" } };
      await assert.rejects(gw.publish("orders", event), refused("cloudevent.attributes.data_base64", /reserved: /));
      await assert.rejects(
        gw.saveState({ service: "orders", key: "k", value: "v", publishChange: true, change: { topic: "orders", cloudevent: event } }),
        refused("cloudevent.attributes.data_base64", /reserved: /),
      );
    } finally {
      gw.close();
    }
  });
});

describe("client reconnect backoff", () => {
  it("grows exponentially, is jittered within bounds and never exceeds maxDelayMs", () => {
    const r = resolveReconnectOptions({ initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0.2 });
    assert.equal(backoffDelay(r, 0, () => 0.5), 100);
    assert.equal(backoffDelay(r, 1, () => 0.5), 200);
    assert.equal(backoffDelay(r, 3, () => 0.5), 800);
    assert.equal(backoffDelay(r, 10, () => 0.5), 1000);
    assert.equal(backoffDelay(r, 0, () => 0), 80);
    assert.equal(backoffDelay(r, 0, () => 1), 120);
    for (let a = 0; a < 30; a++) {
      const d = backoffDelay(r, a);
      assert.ok(d >= 0 && d <= 1000, `attempt ${a}: ${d}`);
    }
  });

  it("fills defaults and rejects bad fields by name", () => {
    assert.deepEqual({ ...resolveReconnectOptions() }, { initialDelayMs: 100, maxDelayMs: 5000, multiplier: 2, jitter: 0.2, maxAttempts: Infinity });
    assert.throws(() => resolveReconnectOptions({ jitter: 2 }), /reconnect\.jitter/);
    assert.throws(() => resolveReconnectOptions({ multiplier: 0.5 }), /reconnect\.multiplier/);
    assert.throws(() => resolveReconnectOptions({ initialDelayMs: 500, maxDelayMs: 100 }), /reconnect\.maxDelayMs/);
    assert.throws(() => resolveReconnectOptions({ maxAttempts: 0 }), /reconnect\.maxAttempts/);
  });
});
