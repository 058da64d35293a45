import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { consoleDir } from "../../src/console/index.js";
import { isAbsoluteUri, validatePublish } from "../../src/ops/cloudevent-validate.js";
import type { CloudEvent } from "../../src/shared/cloudevent.js";

/** The console's browser modules are plain JS shipped as is; these import no DOM at load time. */
const load = (name: string): Promise<any> => import(pathToFileURL(join(consoleDir(), name)).href);

describe("console page logic", () => {
  it("checks an event source exactly as the gateway does, with the gateway's message", async () => {
    const { sourceProblem } = await load("cloudevent.js");
    const cases = ["", "a/b", "urn:x", "https://host/p", "https://host/p q", "1abc:x", "mailto:a@b", "x:", "urn:a\u0001b", "/rel", "HTTP://X"];
    for (const source of cases) {
      let gateway = "";
      try {
        validatePublish("t", { source } as CloudEvent);
      } catch (e) {
        gateway = (e as Error).message;
      }
      assert.equal(sourceProblem(source) === "", isAbsoluteUri(source) || false, `acceptance of ${JSON.stringify(source)}`);
      assert.equal(sourceProblem(source), gateway.replace(/^INVALID_ARGUMENT: /, ""), `message for ${JSON.stringify(source)}`);
    }
  });

  it("builds a request skeleton with proto3 JSON zero values", async () => {
    const { skeleton } = await load("services.js");
    const f = (name: string, type: string, extra: object = {}) => ({ name, type, typeName: "", isRepeated: false, isOptional: false, ...extra });
    const s = skeleton({
      fields: [
        f("id", "string"),
        f("n", "int32"),
        f("big", "int64"),
        f("ok", "bool"),
        f("tags", "string", { isRepeated: true }),
        f("labels", "map"),
        f("status", "enum", { typeName: "shop.v1.Status" }),
        f("at", "message", { typeName: "google.protobuf.Timestamp" }),
        f("item", "message", { typeName: "shop.v1.Item" }),
      ],
    });
    assert.deepEqual(s, { id: "", n: 0, big: "0", ok: false, tags: [], labels: {}, status: 0, at: "1970-01-01T00:00:00Z", item: {} });
  });

  it("parses Prometheus text and computes histogram quantiles as histogram_quantile does", async () => {
    const { parseMetrics, sum, buckets, quantile, bucketDelta } = await load("metrics.js");
    const text = [
      "# HELP platform_pubsub_web_subscribers Open web pub/sub subscribers",
      "# TYPE platform_pubsub_web_subscribers gauge",
      'platform_pubsub_web_subscribers{transport="websocket"} 3',
      'platform_pubsub_web_subscribers{transport="sse"} 2',
      'd_bucket{le="0.01",service="a",code="OK"} 50',
      'd_bucket{le="0.1",service="a",code="OK"} 90',
      'd_bucket{le="+Inf",service="a",code="OK"} 100',
      'd_bucket{le="0.01",service="b",code="OK"} 0',
      'd_bucket{le="0.1",service="b",code="OK"} 0',
      'd_bucket{le="+Inf",service="b",code="OK"} 0',
      'odd{label="with \\"quote\\""} 1',
      "garbage line",
    ].join("\n");
    const samples = parseMetrics(text);
    assert.equal(sum(samples, "platform_pubsub_web_subscribers"), 5);
    assert.equal(sum(samples, "platform_pubsub_web_subscribers", { transport: "sse" }), 2);
    assert.equal(samples.find((x: any) => x.name === "odd").labels.label, 'with "quote"');
    const b = buckets(samples, "d");
    assert.equal(quantile(0.5, b), 0.01);
    assert.ok(Math.abs(quantile(0.7, b) - 0.055) < 1e-9, "interpolated inside the bucket");
    assert.equal(quantile(0.99, b), 0.1, "past the last finite bucket: its upper bound");
    assert.ok(Number.isNaN(quantile(0.5, [])));
    assert.deepEqual(bucketDelta([[0.01, 60], [Infinity, 70]], [[0.01, 50], [Infinity, 60]]), [[0.01, 10], [Infinity, 10]]);
  });
});
