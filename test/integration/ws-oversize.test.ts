import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { UWS_FRAME_LIMIT_FLOOR_BYTES } from "../../src/web/web-deps.js";

const KEY = "k1";
const MIB = 1024 * 1024;
/** The default --max-body-bytes, the largest frame a WebSocket client may send. */
const LIMIT = 4 * MIB;

/** A text frame of exactly `size` bytes: a JSON object `{...fields, "pad": "xxx"}`. */
function frameOf(size: number, fields: Record<string, unknown>): string {
  const empty = JSON.stringify({ ...fields, pad: "" });
  return JSON.stringify({ ...fields, pad: "x".repeat(size - empty.length) });
}

interface Outcome {
  /** Frames the gateway sent before the socket closed (parsed JSON). */
  frames: Array<Record<string, unknown>>;
  code: number;
  reason: string;
}

/** Open `path`, send one frame, and resolve with what came back once the socket closed (bounded). */
function sendOne(gw: TestGateway, path: string, frame: string, until: (frames: Array<Record<string, unknown>>) => boolean = () => false): Promise<Outcome> {
  const ws = new WebSocket(`${gw.http.replace("http", "ws")}${path}`, { headers: { "x-api-key": KEY } });
  const frames: Array<Record<string, unknown>> = [];
  return new Promise<Outcome>((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no close within 30 s after a frame of ${frame.length} bytes on ${path}`));
    }, 30_000);
    // A peer that drops the connection mid-frame shows as an error (EPIPE/ECONNRESET) before the close event.
    ws.on("error", () => undefined);
    ws.on("message", (d) => {
      frames.push(JSON.parse(String(d)) as Record<string, unknown>);
      // An answered frame leaves the socket open: the caller saw what it waited for, so close it ourselves.
      if (until(frames)) ws.close(1000);
    });
    ws.on("close", (code, reason) => {
      clearTimeout(timer);
      resolve({ frames, code, reason: reason.toString() });
    });
    ws.once("open", () => ws.send(frame));
  });
}

describe("WebSocket frames over the limit (--max-body-bytes, default 4 MiB)", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY] });
  });
  after(async () => {
    await gw.close();
  });

  it("/v1/pubsub/ws: a frame of exactly the limit is answered; one byte more, 9 MiB and 16 MiB get close 1009 with a reason", async () => {
    const atLimit = await sendOne(gw, "/v1/pubsub/ws", frameOf(LIMIT, { op: "subscribe", id: 7, topics: ["oversize"] }), (f) => f.some((x) => x["id"] === 7));
    assert.equal(atLimit.code, 1000, `the frame at the limit was not answered: ${JSON.stringify(atLimit)}`);
    assert.ok(atLimit.frames.some((f) => f["id"] === 7));
    // Before, uWS's own limit was twice ours: a 9 MiB frame had the TCP connection dropped (1006, no reason).
    for (const size of [LIMIT + 1, 9 * MIB, UWS_FRAME_LIMIT_FLOOR_BYTES]) {
      const over = await sendOne(gw, "/v1/pubsub/ws", frameOf(size, { op: "subscribe", topics: ["oversize"] }));
      assert.deepEqual({ code: over.code, reason: over.reason }, { code: 1009, reason: `frame larger than ${LIMIT} bytes` }, `frame of ${size} bytes`);
    }
  });

  it("/v1/gateway/invoke-ws: a 9 MiB frame gets a RESOURCE_EXHAUSTED status, then close 1009", async () => {
    const over = await sendOne(gw, "/v1/gateway/invoke-ws", frameOf(9 * MIB, { op: "start", service: "orders", method: "GetOrder" }));
    assert.deepEqual({ code: over.code, reason: over.reason }, { code: 1009, reason: `frame larger than ${LIMIT} bytes` });
    assert.equal(over.frames.length, 1);
    assert.equal((over.frames[0]!["status"] as { status: string }).status, "RESOURCE_EXHAUSTED");
  });

  it("past uWS's own limit (16 MiB here) the connection is dropped without a close frame, as docs/web-pubsub.md says", async () => {
    const over = await sendOne(gw, "/v1/pubsub/ws", frameOf(UWS_FRAME_LIMIT_FLOOR_BYTES + 1, { op: "subscribe", topics: ["oversize"] }));
    assert.equal(over.code, 1006);
  });

  it("the gateway still serves WebSockets and REST afterwards", async () => {
    const ok = await sendOne(gw, "/v1/pubsub/ws", JSON.stringify({ op: "subscribe", id: 1, topics: ["after"] }), (f) => f.some((x) => x["id"] === 1));
    assert.equal(ok.frames.find((f) => f["id"] === 1)?.["op"], "subscribed");
    assert.equal((await fetch(`${gw.http}/health`)).status, 200);
  });
});

describe("REST bodies over --max-body-bytes", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY] });
  });
  after(async () => {
    await gw.close();
  });

  it("a client that sends all of a 9 MiB or 40 MiB body reads a 413 naming the limit (not a reset), declared or chunked", async () => {
    const headers = { "x-api-key": KEY, "content-type": "application/octet-stream", "ce-source": "urn:test:oversize", "ce-type": "com.test.oversize", "ce-id": "1" };
    const chunked = (n: number): ReadableStream<Uint8Array> =>
      new ReadableStream({
        start(c) {
          for (let sent = 0; sent < n; sent += MIB) c.enqueue(new Uint8Array(Math.min(MIB, n - sent)).fill(7));
          c.close();
        },
      });
    for (const size of [9 * MIB, 40 * MIB]) {
      for (const [how, body] of [
        ["content-length", Buffer.alloc(size, 7)],
        ["chunked", chunked(size)],
      ] as const) {
        const res = await fetch(`${gw.http}/v1/pubsub/oversize`, { method: "POST", headers, body, ...(how === "chunked" ? { duplex: "half" } : {}) } as RequestInit);
        assert.equal(res.status, 413, `${how} ${size}`);
        const err = (await res.json()) as { code: number; message: string };
        assert.equal(err.code, 8, "RESOURCE_EXHAUSTED");
        assert.match(err.message, new RegExp(`exceeds the limit of ${LIMIT} bytes`), `${how} ${size}`);
      }
    }
  });
});
