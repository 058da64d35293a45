import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fromTopicEvent } from "../../src/runtime/dapr/cloudevent-json.js";
import { formatRfc3339 as timestampToRfc3339, rfc3339ToTimestamp } from "../../src/shared/rfc3339.js";
import { cloudEventToJson } from "../../src/shared/cloudevent-json.js";
import { objectToStruct, packString, structToObject, unpackString } from "../../src/runtime/dapr/struct.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";

const base: CloudEvent = { id: "1", source: "urn:a:b", spec_version: "1.0", type: "t", attributes: {} };

describe("CloudEvent <-> Dapr conversions", () => {
  it("always sets datacontenttype and picks data / data_base64 by type", () => {
    assert.deepEqual(cloudEventToJson(base), { specversion: "1.0", id: "1", source: "urn:a:b", type: "t", datacontenttype: "application/json" });
    assert.equal(cloudEventToJson({ ...base, text_data: "hi", data: "text_data" })["data"], "hi");
    assert.equal(cloudEventToJson({ ...base, text_data: "hi", data: "text_data" })["datacontenttype"], "text/plain");
    const json = cloudEventToJson({ ...base, text_data: '{"a":[1]}', data: "text_data", attributes: { datacontenttype: { ce_string: "application/json", attr: "ce_string" } } });
    assert.deepEqual(json["data"], { a: [1] });
    const badJson = cloudEventToJson({ ...base, text_data: "{nope", data: "text_data", attributes: { datacontenttype: { ce_string: "application/json", attr: "ce_string" } } });
    assert.equal(Buffer.from(badJson["data_base64"] as string, "base64").toString(), "{nope");
    const bin = cloudEventToJson({ ...base, binary_data: Buffer.from([1, 2]), data: "binary_data" });
    assert.deepEqual([bin["datacontenttype"], bin["data_base64"]], ["application/octet-stream", "AQI="]);
    const attrs = cloudEventToJson({
      ...base,
      attributes: {
        n: { ce_integer: 7, attr: "ce_integer" },
        b: { ce_boolean: false, attr: "ce_boolean" },
        raw: { ce_bytes: Buffer.from("x"), attr: "ce_bytes" },
        time: { ce_timestamp: { seconds: "0", nanos: 1 }, attr: "ce_timestamp" },
      },
    });
    assert.deepEqual([attrs["n"], attrs["b"], attrs["raw"], attrs["time"]], [7, false, "eA==", "1970-01-01T00:00:00.000000001Z"]);
  });

  it("turns a TopicEventRequest back into a CloudEvent with typed extensions", () => {
    const ev = fromTopicEvent({
      id: "9",
      source: "urn:s",
      type: "t",
      spec_version: "1.0",
      data_content_type: "text/plain",
      data: Buffer.from("hello"),
      topic: "x",
      pubsub_name: "pubsub",
      path: "",
      extensions: objectToStruct({ time: "2024-05-01T10:00:00.5Z", n: 3, ok: true, big: 1e12, obj: { a: 1 } }),
    });
    assert.equal(ev.text_data, "hello");
    assert.deepEqual(ev.attributes["time"]!.ce_timestamp, { seconds: String(Date.parse("2024-05-01T10:00:00Z") / 1000), nanos: 500_000_000 });
    assert.equal(ev.attributes["n"]!.ce_integer, 3);
    assert.equal(ev.attributes["ok"]!.ce_boolean, true);
    assert.equal(ev.attributes["big"]!.ce_string, "1000000000000");
    assert.equal(ev.attributes["obj"]!.ce_string, '{"a":1}');
    assert.equal(ev.attributes["datacontenttype"]!.ce_string, "text/plain");
    const empty = fromTopicEvent({ id: "1", source: "s", type: "t", spec_version: "", data_content_type: "", data: Buffer.alloc(0), topic: "", pubsub_name: "", path: "" });
    assert.equal(empty.data, undefined);
    assert.equal(empty.spec_version, "1.0");
  });

  it("round-trips timestamps, structs and StringValue job data", () => {
    assert.deepEqual(rfc3339ToTimestamp(timestampToRfc3339({ seconds: "1700000000", nanos: 120 })), { seconds: "1700000000", nanos: 120 });
    assert.equal(rfc3339ToTimestamp("yesterday"), undefined);
    const o = { a: "x", b: [1, true, null], c: { d: 2 } };
    assert.deepEqual(structToObject(objectToStruct(o)), o);
    const long = "é".repeat(300);
    assert.equal(unpackString(packString(long)), long);
    assert.equal(unpackString(packString("")), "");
    assert.equal(unpackString({ type_url: "type.googleapis.com/other", value: Buffer.from("raw") }), "raw");
    assert.equal(unpackString(null), "");
  });

  it("packs job data into the bytes Dapr SDKs send: Any{StringValue}, field 1 with a varint length", () => {
    const short = packString("hé");
    assert.equal(short.type_url, "type.googleapis.com/google.protobuf.StringValue");
    assert.deepEqual([...short.value], [0x0a, 0x03, 0x68, 0xc3, 0xa9]);
    // 600 bytes of UTF-8: a two-byte varint length (0xd8 0x04), then the text.
    const long = packString("é".repeat(300));
    assert.deepEqual([...long.value.subarray(0, 3)], [0x0a, 0xd8, 0x04]);
    assert.equal(long.value.length, 603);
    assert.deepEqual([...packString("").value], []);
    const bytesValue = { type_url: "type.googleapis.com/google.protobuf.BytesValue", value: Buffer.from([0x0a, 0x02, 0x6f, 0x6b]) };
    assert.equal(unpackString(bytesValue), "ok");
  });
});
