import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { createTracer } from "../../src/observe/tracing.js";
import { httpServerSpan } from "../../src/observe/span.js";
import type { Logger } from "../../src/observe/logger.js";
import { decodeTraceRequest, type ReceivedSpan } from "../support/otlp-receiver.js";

/** A receiver that answers each export after `delayMs` (a slow collector), recording what it got. */
async function slowReceiver(delayMs: number): Promise<{ url: string; requests: ReceivedSpan[][]; close(): Promise<void> }> {
  const requests: ReceivedSpan[][] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      requests.push(decodeTraceRequest(Buffer.concat(chunks), "application/x-protobuf"));
      setTimeout(() => res.end(), delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/traces`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function recordingLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const logger = { warn: (_o: object, msg: string) => warnings.push(msg), info() {}, error() {}, debug() {} } as unknown as Logger;
  return { logger, warnings };
}

const SPAN = httpServerSpan("GET", "/v1/things");

describe("trace export: batches, the queue bound, flush", () => {
  it("full batches go out one request at a time; spans beyond the queue bound are dropped and reported, the rest delivered", async () => {
    const rx = await slowReceiver(300);
    const { logger, warnings } = recordingLogger();
    const tracer = createTracer({ endpoint: rx.url, maxQueue: 6, exportBatch: 3, exportDelayMs: 60_000, logger });
    try {
      // 10 spans at once: 3 fill the first batch (exported now), 3 the second (waits for the first), the rest are
      // over the bound of 6 waiting spans.
      for (let i = 0; i < 10; i++) tracer.start({ traceparent: undefined, tracestate: undefined, server: SPAN }).end();
      await tracer.close();
      assert.deepEqual(rx.requests.map((r) => r.length), [3, 3], "two full batches, one after the other");
      assert.equal(new Set(rx.requests.flat().map((s) => s.spanId)).size, 6);
      assert.ok(warnings.some((w) => /4 spans dropped: 6 were waiting for export/.test(w)), warnings.join("; "));
    } finally {
      await rx.close();
    }
  });

  it("spans ended during a warm-up are never exported, full batches and the queue bound included; those after it are", async () => {
    const rx = await slowReceiver(0);
    const { logger, warnings } = recordingLogger();
    const tracer = createTracer({ endpoint: rx.url, maxQueue: 6, exportBatch: 3, exportDelayMs: 50, logger });
    try {
      const end = tracer.beginWarmup();
      // Four full batches and a part-filled one: more than the queue holds, none of it waiting at the end.
      for (let i = 0; i < 14; i++) tracer.start({ traceparent: undefined, tracestate: undefined, server: SPAN }).end();
      await new Promise((r) => setTimeout(r, 120));
      end();
      const after = tracer.start({ traceparent: undefined, tracestate: undefined, server: SPAN });
      after.end();
      await tracer.close();
      assert.deepEqual(rx.requests.flat().map((s) => s.spanId), [after.spanId]);
      assert.deepEqual(warnings, [], "nothing dropped or failed is reported");
    } finally {
      await rx.close();
    }
  });

  it("a part-filled batch leaves after the export delay, and close() sends what is left", async () => {
    const rx = await slowReceiver(0);
    const tracer = createTracer({ endpoint: rx.url, exportDelayMs: 100 });
    try {
      tracer.start({ traceparent: undefined, tracestate: undefined, server: SPAN }).end();
      const until = Date.now() + 5000;
      while (rx.requests.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(rx.requests.map((r) => r.length), [1], "the delay's export");
      tracer.start({ traceparent: undefined, tracestate: undefined, server: SPAN }).end();
      await tracer.close();
      assert.deepEqual(rx.requests.map((r) => r.length), [1, 1], "close() flushed the second");
    } finally {
      await rx.close();
    }
  });
});
