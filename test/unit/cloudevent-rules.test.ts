import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fromProtoCloudEvent, GatewayClientError, toProtoCloudEvent } from "../../src/client/index.js";
import { cloudEventFromJson, cloudEventToJson } from "../../src/shared/cloudevent-json.js";
import { MAX_ATTRIBUTE_NAME_CHARS } from "../../src/shared/cloudevent.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { Code } from "../../src/shared/code.js";
import { formatRfc3339, parseRfc3339, parseRfc3339Ms } from "../../src/shared/rfc3339.js";
import { resolveTimeSpec } from "../../src/runtime/schedule/index.js";

/** What the server's JSON-format mapping makes of an event: the event, or the INVALID_ARGUMENT message. */
function server(obj: Record<string, unknown>): { ok: true } | { error: string } {
  try {
    cloudEventFromJson(obj);
    return { ok: true };
  } catch (e) {
    assert.ok(e instanceof GatewayError && e.code === Code.INVALID_ARGUMENT, String(e));
    return { error: e.message };
  }
}

/** The same for the client library. */
function client(obj: Record<string, unknown>): { ok: true } | { error: string } {
  try {
    toProtoCloudEvent({ source: "urn:a:b", ...obj });
    return { ok: true };
  } catch (e) {
    assert.ok(e instanceof GatewayClientError && e.code === Code.INVALID_ARGUMENT, String(e));
    return { error: e.message.replace(/^INVALID_ARGUMENT: /, "") };
  }
}

describe("one RFC 3339 parser, to the nanosecond", () => {
  it("keeps nine fraction digits and applies the offset", () => {
    assert.deepEqual(parseRfc3339("2024-05-01T10:00:00.123456789Z"), { seconds: Date.parse("2024-05-01T10:00:00Z") / 1000, nanos: 123_456_789 });
    assert.deepEqual(parseRfc3339("2024-05-01t12:00:00.5+02:00"), { seconds: Date.parse("2024-05-01T10:00:00Z") / 1000, nanos: 500_000_000 });
    assert.deepEqual(parseRfc3339("1969-12-31T23:59:59.9999999999z"), { seconds: -1, nanos: 999_999_999 });
    assert.deepEqual(parseRfc3339("0001-01-01T00:00:00Z"), { seconds: -62135596800, nanos: 0 });
    assert.equal(parseRfc3339Ms("2024-05-01T10:00:00.0299Z"), Date.parse("2024-05-01T10:00:00.029Z"));
  });

  it("refuses what is not RFC 3339 or names a time that does not exist", () => {
    for (const bad of [
      "2024-02-30T00:00:00Z",
      "2023-02-29T00:00:00Z",
      "2024-01-01T24:00:00Z",
      "2024-01-01T00:60:00Z",
      "2024-01-01T00:00:60Z",
      "2024-13-01T00:00:00Z",
      "2024-01-01T00:00:00+24:00",
      "2024-01-01 00:00:00Z",
      "2024-01-01T00:00:00",
      "2024-01-01T00:00:00.Z",
      "2024-05-01",
      "yesterday",
    ]) {
      assert.equal(parseRfc3339(bad), undefined, bad);
    }
    assert.deepEqual(parseRfc3339("2024-02-29T23:59:59Z"), { seconds: Date.parse("2024-02-29T23:59:59Z") / 1000, nanos: 0 });
  });

  it("formats Go style (trimmed) for the wire and toISOString style for the client, losing no digit", () => {
    const seconds = Date.parse("2024-05-01T10:00:00Z") / 1000;
    assert.equal(formatRfc3339({ seconds, nanos: 0 }), "2024-05-01T10:00:00Z");
    assert.equal(formatRfc3339({ seconds: String(seconds), nanos: 250_000_000 }), "2024-05-01T10:00:00.25Z");
    assert.equal(formatRfc3339({ seconds, nanos: 0 }, "millis"), "2024-05-01T10:00:00.000Z");
    assert.equal(formatRfc3339({ seconds, nanos: 250_000_000 }, "millis"), "2024-05-01T10:00:00.250Z");
    assert.equal(formatRfc3339({ seconds, nanos: 250_100_000 }, "millis"), "2024-05-01T10:00:00.250100Z");
    assert.equal(formatRfc3339({ seconds, nanos: 250_000_001 }, "millis"), "2024-05-01T10:00:00.250000001Z");
  });

  it("is the parser of trigger due_time as well as of CloudEvent time", () => {
    const due = resolveTimeSpec("due_time", "2030-02-30T00:00:00Z", 0);
    assert.ok("error" in due && /^due_time "2030-02-30T00:00:00Z" is neither an RFC 3339 timestamp/.test(due.error.message));
    assert.match((server({ source: "urn:a:b", time: "2030-02-30T00:00:00Z" }) as { error: string }).error, /^time '2030-02-30T00:00:00Z' is not an RFC 3339 timestamp/);
  });
});

describe("one CloudEvents mapping for server and client", () => {
  it("server and client agree on extension names: lower-case a-z/0-9, 1 to 64 characters", () => {
    assert.equal(MAX_ATTRIBUTE_NAME_CHARS, 64);
    const cases: Array<[string, boolean]> = [
      ["tenant", true],
      ["a1", true],
      // 21 characters: past the CloudEvents 1.0 SHOULD of 20. The client refused it while the gateway took it.
      ["comexampleextension21", true],
      ["x".repeat(64), true],
      ["x".repeat(65), false],
      ["Tenant", false],
      ["my-ext", false],
      ["my_ext", false],
    ];
    for (const [name, ok] of cases) {
      const s = server({ source: "urn:a:b", [name]: "v" });
      const c = client({ [name]: "v" });
      assert.equal("ok" in s, ok, `server ${name}`);
      assert.equal("ok" in c, ok, `client ${name}`);
      if (!ok) assert.equal((c as { error: string }).error, `cloudevent.${(s as { error: string }).error}`, name);
    }
  });

  it("server and client agree on time: RFC 3339 of a time that exists, nanoseconds kept", () => {
    for (const time of ["2024-02-30T00:00:00Z", "2024-01-01T24:00:00Z", "2024-05-01", "2024-05-01 10:00:00Z"]) {
      // The client turned the first two into March 1 / January 2 and the last two into a Date's guess.
      assert.match((client({ time }) as { error: string }).error, /^cloudevent\.time '.*' is not an RFC 3339 timestamp$/, time);
      assert.match((server({ source: "urn:a:b", time }) as { error: string }).error, /^time '.*' is not an RFC 3339 timestamp$/, time);
    }
    const time = "2024-05-01T10:00:00.123456789Z";
    const wire = toProtoCloudEvent({ source: "urn:a:b", time });
    assert.deepEqual(wire.attributes["time"], { ce_timestamp: { seconds: String(Date.parse("2024-05-01T10:00:00Z") / 1000), nanos: 123_456_789 } });
    assert.deepEqual(wire.attributes["time"], cloudEventFromJson({ source: "urn:a:b", time }).attributes["time"]);
    // A received event keeps its nanoseconds in the client (it cut them to milliseconds: ...00.123Z).
    assert.equal(fromProtoCloudEvent(wire)["time"], "2024-05-01T10:00:00.123456789Z");
    assert.equal(cloudEventToJson(wire)["time"], "2024-05-01T10:00:00.123456789Z");
    // A Date carries milliseconds, and they come back as JavaScript writes them.
    const fromDate = toProtoCloudEvent({ source: "urn:a:b", time: new Date("2024-05-01T10:00:00.120Z") });
    assert.equal(fromProtoCloudEvent(fromDate)["time"], "2024-05-01T10:00:00.120Z");
  });
});
