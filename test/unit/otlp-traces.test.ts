import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { jsonBatches, protobufBatches, OtlpKind, type SpanData } from "../../src/observe/otlp-traces.js";
import { parseTraceparent, type TraceId } from "../../src/observe/trace-ids.js";
import { decodeTraceRequest } from "../support/otlp-receiver.js";

/** The trace of 32 hex digits. */
function traceOf(hex: string): TraceId {
  return parseTraceparent(`00-${hex}-0000000000000001-01`)!.trace;
}

/** A span as the tracer hands it over; times are performance.now() values. */
function span(over: Partial<SpanData>): SpanData {
  return {
    trace: traceOf("0af7651916cd43dd8448eb211c80319c"),
    s0: 0xb7ad6b71,
    s1: 0x69203331,
    p0: 0,
    p1: 0,
    traceState: undefined,
    flags: 1,
    name: "GET /v1/things",
    kind: OtlpKind.SERVER,
    startTime: 1000.5,
    endTime: 1002.25,
    attributes: undefined,
    extra: undefined,
    code: -1,
    dropped: 0,
    events: undefined,
    links: undefined,
    status: 0,
    statusMessage: undefined,
    ...over,
  };
}

const RESOURCE = { "service.name": "gw", "gateway.thread": 2 };

/** The request of a batch of `spans`, decoded by the receiver the integration tests use (opentelemetry-proto's schema). */
function roundTrip(spans: SpanData[]): { proto: ReturnType<typeof decodeTraceRequest>; json: ReturnType<typeof decodeTraceRequest> } {
  const p = protobufBatches(RESOURCE, "platform-gateway")();
  const j = jsonBatches(RESOURCE, "platform-gateway")();
  for (const s of spans) {
    p.add(s);
    j.add(s);
  }
  assert.equal(p.count, spans.length);
  return { proto: decodeTraceRequest(p.request(), "application/x-protobuf"), json: decodeTraceRequest(j.request(), "application/json") };
}

/** Unix nanoseconds of a performance.now() value, as a decimal string (microsecond precision). */
function nanos(now: number): string {
  return `${Math.round(performance.timeOrigin * 1000 + now * 1000)}000`;
}

describe("OTLP trace encoding: protobuf and JSON say the same", () => {
  it("ids, parent, kind, times, attributes of every type, resource", () => {
    const frozen = Object.freeze({ "rpc.system": "grpc", "server.port": 50051 });
    const spans = [
      span({ attributes: { "http.request.method": "GET", ok: true, ratio: 0.25, big: 2 ** 40, negative: -7 }, extra: ["http.response.status_code", 200] }),
      span({ s0: 1, s1: 2, p0: 0xb7ad6b71, p1: 0x69203331, name: "backend", kind: OtlpKind.CLIENT, attributes: frozen, traceState: "vendor=x" }),
      // the same frozen set again: the second copy comes from the cache of encoded sets
      span({ s0: 3, s1: 4, p0: 0xb7ad6b71, p1: 0x69203331, name: "backend again", kind: OtlpKind.CLIENT, attributes: frozen, extra: ["gateway.retry", true], code: 14 }),
      // ids as the tracer keeps them: signed 32-bit words
      span({ s0: 0xb7ad6b71 | 0, s1: -1, p0: 0x80000000 | 0, p1: 1, name: "signed words" }),
    ];
    const { proto, json } = roundTrip(spans);
    for (const got of [proto, json]) {
      assert.equal(got.length, 4);
      assert.deepEqual(
        got.map((s) => [s.traceId, s.spanId, s.parentSpanId, s.kind, s.flags]),
        [
          ["0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "", 2, 1],
          ["0af7651916cd43dd8448eb211c80319c", "0000000100000002", "b7ad6b7169203331", 3, 1],
          ["0af7651916cd43dd8448eb211c80319c", "0000000300000004", "b7ad6b7169203331", 3, 1],
          ["0af7651916cd43dd8448eb211c80319c", "b7ad6b71ffffffff", "8000000000000001", 2, 1],
        ],
      );
      assert.deepEqual(got[0]!.attributes, { "http.request.method": "GET", ok: true, ratio: 0.25, big: 2 ** 40, negative: -7, "http.response.status_code": 200 });
      assert.deepEqual(got[1]!.attributes, { "rpc.system": "grpc", "server.port": 50051 });
      assert.deepEqual(got[2]!.attributes, { "rpc.system": "grpc", "server.port": 50051, "gateway.retry": true, "rpc.grpc.status_code": 14 });
      assert.equal(got[1]!.traceState, "vendor=x");
      assert.equal(got[0]!.startTimeUnixNano, nanos(1000.5));
      assert.equal(got[0]!.endTimeUnixNano, nanos(1002.25));
      assert.deepEqual(got[0]!.resource, { "service.name": "gw", "gateway.thread": 2 });
    }
  });

  it("rpc.grpc.status_code for every gRPC code (encoded once each) and for a code past them (encoded per span)", () => {
    const codes = [0, 1, 14, 16, 17, 1000];
    const { proto, json } = roundTrip(codes.map((code, i) => span({ s0: i + 1, s1: 1, kind: OtlpKind.CLIENT, attributes: { "rpc.system": "grpc" }, code })));
    for (const got of [proto, json]) {
      assert.deepEqual(
        got.map((s) => s.attributes),
        codes.map((code) => ({ "rpc.system": "grpc", "rpc.grpc.status_code": code })),
      );
    }
  });

  it("long and non-ASCII strings (multi-byte lengths), events, links, error status, dropped counts", () => {
    const long = "x".repeat(300);
    const spans = [
      span({
        name: "publish café ☕",
        kind: OtlpKind.PRODUCER,
        attributes: { long, "messaging.destination.name": "orders/東京" },
        events: [{ name: "retry", time: 1001, attributes: { attempt: 2 } }],
        links: [{ trace: traceOf("4bf92f3577b34da6a3ce929d0e0e4736"), s0: 0x00f067aa, s1: 0x0ba902b7, traceState: undefined, flags: 1 }],
        status: 2,
        statusMessage: `backend said ${long}`,
        dropped: 3,
      }),
    ];
    const { proto, json } = roundTrip(spans);
    for (const got of [proto, json]) {
      const s = got[0]!;
      assert.equal(s.name, "publish café ☕");
      assert.equal(s.kind, 4);
      assert.equal(s.attributes["long"], long);
      assert.equal(s.attributes["messaging.destination.name"], "orders/東京");
      assert.deepEqual(s.events, [{ name: "retry", attributes: { attempt: 2 } }]);
      assert.deepEqual(s.links, [{ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" }]);
      assert.deepEqual(s.status, { code: 2, message: `backend said ${long}` });
      assert.equal(s.droppedAttributesCount, 3);
    }
  });

  it("a batch of many spans (a request longer than 2^14 bytes) decodes whole", () => {
    const spans = Array.from({ length: 500 }, (_, i) => span({ s0: i + 1, name: `span ${i}`, attributes: { i } }));
    const { proto, json } = roundTrip(spans);
    assert.equal(proto.length, 500);
    assert.deepEqual(proto.map((s) => s.name), json.map((s) => s.name));
    assert.equal(proto[499]!.attributes["i"], 499);
  });

  it("a sent batch's memory holds the next batch, which decodes whole", () => {
    const make = protobufBatches(RESOURCE, "gateway");
    const first = make();
    for (let i = 0; i < 300; i++) first.add(span({ s0: i + 1, name: `first ${i}` }));
    const firstBytes = first.request();
    assert.equal(decodeTraceRequest(firstBytes, "application/x-protobuf").length, 300);
    first.release();
    const second = make();
    for (let i = 0; i < 200; i++) second.add(span({ s0: i + 1, name: `second ${i}` }));
    const secondBytes = second.request();
    assert.equal(secondBytes.buffer, firstBytes.buffer, "the second batch is written where the first was");
    const got = decodeTraceRequest(secondBytes, "application/x-protobuf");
    assert.deepEqual(got.map((s) => s.name), Array.from({ length: 200 }, (_, i) => `second ${i}`));
  });

  it("a span of more than 2^14 bytes between short ones", () => {
    const huge = "y".repeat(20_000);
    const spans = [span({ name: "a" }), span({ name: "huge", attributes: { huge }, extra: ["after", 1] }), span({ name: "b" })];
    const { proto, json } = roundTrip(spans);
    for (const got of [proto, json]) {
      assert.deepEqual(got.map((s) => s.name), ["a", "huge", "b"]);
      assert.deepEqual(got[1]!.attributes, { huge, after: 1 });
    }
  });
});
