import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, withKey, type TestGateway } from "../support/gateway.js";
import { openFrameSocket } from "../support/web.js";
import { wsSocket } from "../support/ws-internals.js";

const KEY = "k1";

interface StreamResponse {
  response_data?: string;
  status?: { success: boolean; status: string; message: string };
}

type Duplex = grpc.ClientDuplexStream<object, StreamResponse>;

function open(gw: TestGateway, md = withKey(KEY), options: grpc.CallOptions = {}): Duplex {
  return (gw.client("platform.Gateway") as unknown as { InvokeStream(md: grpc.Metadata, o: grpc.CallOptions): Duplex }).InvokeStream(md, options);
}

/** Every response until the stream ends (bounded by a timeout), and the gRPC status. */
function collect(call: Duplex, timeoutMs = 5000): Promise<{ data: unknown[]; status: StreamResponse["status"]; grpcCode: number }> {
  return new Promise((resolve, reject) => {
    const data: unknown[] = [];
    let status: StreamResponse["status"];
    const t = setTimeout(() => reject(new Error(`stream did not end within ${timeoutMs} ms (got ${data.length} messages)`)), timeoutMs);
    call.on("data", (r: StreamResponse) => {
      if (r.status) status = r.status;
      else data.push(JSON.parse(r.response_data!));
    });
    call.on("error", (e: grpc.ServiceError) => {
      clearTimeout(t);
      resolve({ data, status, grpcCode: e.code });
    });
    call.on("status", (s: grpc.StatusObject) => {
      if (s.code !== grpc.status.OK) return;
      clearTimeout(t);
      resolve({ data, status, grpcCode: s.code });
    });
  });
}

async function run(gw: TestGateway, method: string, first: string, more: string[] = [], md?: grpc.Metadata, options?: grpc.CallOptions) {
  const call = open(gw, md, options);
  const done = collect(call);
  call.write({ service: "orders", method, request_data: first });
  for (const m of more) call.write({ request_data: m });
  call.end();
  return done;
}

describe("InvokeStream over gRPC", () => {
  let backend: OrderBackend;
  let gw: TestGateway;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({
      apiKeys: [KEY],
      forwardHeaders: ["traceparent"],
      services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
    });
  });
  after(async () => {
    await gw.close();
    backend.close();
  });

  it("unary: one response then the OK status", async () => {
    const r = await run(gw, "GetOrder", '{"orderId":"u1"}');
    assert.deepEqual(r.status, { success: true, status: "OK", message: "" });
    assert.equal(r.data.length, 1);
    assert.equal((r.data[0] as { orderId: string }).orderId, "u1");
  });

  it("server-streaming: every message in order, then the status", async () => {
    const r = await run(gw, "WatchOrders", '{"orderId":"count:50"}');
    assert.deepEqual(r.status, { success: true, status: "OK", message: "" });
    assert.deepEqual(
      r.data.map((d) => (d as { orderId: string }).orderId),
      Array.from({ length: 50 }, (_, i) => `o${i + 1}`),
    );
  });

  it("client-streaming: every request reaches the backend in order", async () => {
    const r = await run(gw, "shop.v1.OrderService/UploadOrders", '{"orderId":"a"}', ['{"orderId":"b"}', '{"orderId":"c"}', "{}"]);
    assert.deepEqual(r.status, { success: true, status: "OK", message: "" });
    assert.deepEqual(r.data, [{ orders: [{ orderId: "a" }, { orderId: "b" }, { orderId: "c" }, {}] }]);
  });

  it("client-streaming: an empty first request_data sends no message", async () => {
    const r = await run(gw, "UploadOrders", "", ['{"orderId":"only"}']);
    assert.deepEqual(r.data, [{ orders: [{ orderId: "only" }] }]);
  });

  it("bidi: responses interleave with requests, in order", async () => {
    const call = open(gw);
    const seen: string[] = [];
    const done = collect(call);
    call.on("data", (r: StreamResponse) => r.response_data && seen.push((JSON.parse(r.response_data) as { orderId: string }).orderId));
    call.write({ service: "orders", method: "SyncOrders", request_data: '{"orderId":"1"}' });
    await waitFor(() => seen.length === 1, "first echo");
    for (let i = 2; i <= 20; i++) call.write({ request_data: `{"orderId":"${i}"}` });
    await waitFor(() => seen.length === 20, "20 echoes");
    call.end();
    const r = await done;
    assert.deepEqual(seen, Array.from({ length: 20 }, (_, i) => `echo:${i + 1}`));
    assert.deepEqual(r.status, { success: true, status: "OK", message: "" });
  });

  it("a backend error mid-stream: the messages before it, then the backend's status in-band", async () => {
    const r = await run(gw, "WatchOrders", '{"orderId":"count:3:fail"}');
    assert.equal(r.data.length, 3);
    assert.deepEqual(r.status, { success: false, status: "ABORTED", message: "failed after 3 orders" });
    assert.equal(r.grpcCode, grpc.status.OK);

    const b = await run(gw, "SyncOrders", '{"orderId":"x"}', ['{"orderId":"fail:DATA_LOSS:broken"}', '{"orderId":"y"}']);
    assert.deepEqual(b.data, [{ orderId: "echo:x" }]);
    assert.deepEqual(b.status, { success: false, status: "DATA_LOSS", message: "broken" });

    const u = await run(gw, "UploadOrders", '{"orderId":"fail:FAILED_PRECONDITION:no room"}');
    assert.deepEqual(u.status, { success: false, status: "FAILED_PRECONDITION", message: "no room" });
  });

  it("unknown service or method: NOT_FOUND in-band naming it", async () => {
    const s = await (async () => {
      const call = open(gw);
      const done = collect(call);
      call.write({ service: "nope", method: "GetOrder", request_data: "{}" });
      call.end();
      return done;
    })();
    assert.equal(s.status?.status, "NOT_FOUND");
    assert.match(s.status!.message, /service nope is not registered/);
    assert.equal(s.grpcCode, grpc.status.OK);
    const m = await run(gw, "NoSuchMethod", "{}");
    assert.equal(m.status?.status, "NOT_FOUND");
    assert.match(m.status!.message, /method NoSuchMethod not found on service orders/);
  });

  it("bad JSON in a later request ends the call INVALID_ARGUMENT in-band", async () => {
    const r = await run(gw, "UploadOrders", '{"orderId":"a"}', ['{"orderId":']);
    assert.equal(r.status?.status, "INVALID_ARGUMENT");
    assert.equal(r.status?.success, false);
  });

  it("a second request on a server-streaming call is INVALID_ARGUMENT in-band", async () => {
    const call = open(gw);
    const done = collect(call);
    call.write({ service: "orders", method: "WatchOrders", request_data: '{"orderId":"forever"}' });
    call.write({ request_data: "{}" });
    const r = await done;
    call.end();
    assert.equal(r.status?.status, "INVALID_ARGUMENT");
    assert.match(r.status!.message, /server-streaming: only the first request may carry request_data/);
    await waitFor(() => backend.cancelled.includes("forever"), "the backend call to be cancelled");
  });

  it("the caller cancelling cancels the backend call", async () => {
    const before = backend.cancelled.filter((c) => c === "forever").length;
    const call = open(gw);
    let got = 0;
    call.on("data", () => got++);
    call.on("error", () => undefined);
    call.write({ service: "orders", method: "WatchOrders", request_data: '{"orderId":"forever"}' });
    await waitFor(() => got >= 2, "two streamed orders");
    call.cancel();
    await waitFor(() => backend.cancelled.filter((c) => c === "forever").length === before + 1, "the backend to see the cancellation");
  });

  it("the backend ending early (bidi) ends the call OK while the caller still writes", async () => {
    const r = await run(gw, "SyncOrders", '{"orderId":"1"}', ['{"orderId":"end"}', '{"orderId":"3"}']);
    assert.deepEqual(r.data, [{ orderId: "echo:1" }]);
    assert.deepEqual(r.status, { success: true, status: "OK", message: "" });
  });

  it("the caller's deadline reaches the backend and ends the stream DEADLINE_EXCEEDED", async () => {
    const deadline = Date.now() + 300;
    const r = await run(gw, "WatchOrders", '{"orderId":"forever"}', [], withKey(KEY), { deadline });
    // The backend sees the same deadline; the gateway ends either in-band or with the gRPC status itself.
    const seen = backend.received.filter((c) => c.path.endsWith("WatchOrders")).at(-1)!;
    assert.ok(seen.deadline !== undefined && Math.abs(seen.deadline - deadline) < 100, `backend deadline ${seen.deadline} vs ${deadline}`);
    assert.ok(r.grpcCode === grpc.status.DEADLINE_EXCEEDED || r.status?.status === "DEADLINE_EXCEEDED", `got ${r.grpcCode} ${JSON.stringify(r.status)}`);
    assert.ok(r.data.length >= 1);
  });

  it("a slow reader slows the backend: nothing is buffered without bound", async () => {
    const total = 2000; // 16 KiB each: 32 MiB if nothing pushed back
    const writtenBefore = backend.watchWritten.count;
    const call = open(gw);
    let got = 0;
    call.on("data", () => got++);
    call.write({ service: "orders", method: "WatchOrders", request_data: `{"orderId":"big:${total}"}` });
    await waitFor(() => got >= 5, "the first orders");
    call.pause();
    // Let every buffer on the way fill up.
    await new Promise((r) => setTimeout(r, 500));
    const written = backend.watchWritten.count - writtenBefore;
    assert.ok(written < total / 4, `backend wrote ${written} of ${total} while the caller was not reading`);
    const done = collect(call, 20_000);
    call.resume();
    call.end();
    const r = await done;
    assert.equal(got, total + 1);
    assert.equal(r.status?.status, "OK");
  });

  it("forwards only allow-listed metadata; x-api-key never reaches the backend", async () => {
    const md = withKey(KEY);
    md.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    md.set("x-secret", "s3cret");
    const r = await run(gw, "WatchOrders", '{"orderId":"count:1"}', [], md);
    assert.equal(r.status?.status, "OK");
    const seen = backend.received.filter((c) => c.path.endsWith("WatchOrders")).at(-1)!;
    assert.equal(seen.metadata["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.equal(seen.metadata["x-secret"], undefined);
    assert.equal(seen.metadata["x-api-key"], undefined);
  });

  it("refuses a call without x-api-key with UNAUTHENTICATED before calling anything", async () => {
    const calls = backend.received.length;
    const r = await run(gw, "GetOrder", "{}", [], new grpc.Metadata());
    assert.equal(r.grpcCode, grpc.status.UNAUTHENTICATED);
    assert.equal(backend.received.length, calls);
  });

  it("counts streamed invocations by method kind", async () => {
    const text = await (await fetch(gw.http + "/metrics")).text();
    for (const kind of ["unary", "server-streaming", "client-streaming", "bidi-streaming"]) {
      assert.match(text, new RegExp(`platform_gateway_stream_invocations_total\\{kind="${kind}",code="OK"\\} [1-9]`), kind);
    }
    assert.match(text, /platform_gateway_stream_messages_total\{kind="server-streaming",direction="response"\} [1-9]/);
  });
});

describe("POST /v1/gateway/invoke-stream", () => {
  let backend: OrderBackend;
  let gw: TestGateway;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({
      apiKeys: [KEY],
      forwardHeaders: ["traceparent"],
      services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }],
    });
  });
  after(async () => {
    await gw.close();
    backend.close();
  });

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(gw.http + "/v1/gateway/invoke-stream", { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY, ...headers }, body: JSON.stringify(body) });

  it("streams NDJSON: one result line per message, then the status line", async () => {
    const res = await post({ service: "orders", method: "WatchOrders", requestData: { orderId: "count:5" } }, { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-secret": "s" });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/x-ndjson");
    const lines = (await res.text()).trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.slice(0, 5).map((l) => l.result.orderId),
      ["o1", "o2", "o3", "o4", "o5"],
    );
    assert.deepEqual(lines[5], { status: { success: true, status: "OK", message: "" } });
    const seen = backend.received.filter((c) => c.path.endsWith("WatchOrders")).at(-1)!;
    assert.ok(seen.metadata["traceparent"]);
    assert.equal(seen.metadata["x-secret"], undefined);
    assert.equal(seen.metadata["x-api-key"], undefined);
  });

  it("streams SSE when Accept asks for text/event-stream", async () => {
    const res = await post({ service: "orders", method: "WatchOrders", requestData: { orderId: "count:2:fail" } }, { accept: "text/event-stream" });
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const events = (await res.text()).split("\n\n").filter(Boolean);
    assert.deepEqual(events.slice(0, 2), ['data: {"result":{"orderId":"o1"}}', 'data: {"result":{"orderId":"o2"}}']);
    assert.deepEqual(JSON.parse(events[2]!.slice("data: ".length)), { status: { success: false, status: "ABORTED", message: "failed after 2 orders" } });
  });

  it("unary methods answer one result line; unknown methods NOT_FOUND in-band; client streaming is refused in-band", async () => {
    const u = (await (await post({ service: "orders", method: "GetOrder", requestData: { orderId: "r1" } })).text()).trim().split("\n");
    assert.equal(JSON.parse(u[0]!).result.orderId, "r1");
    assert.equal(JSON.parse(u[1]!).status.status, "OK");
    const n = JSON.parse((await (await post({ service: "orders", method: "Nope" })).text()));
    assert.equal(n.status.status, "NOT_FOUND");
    const c = JSON.parse((await (await post({ service: "orders", method: "UploadOrders" })).text()));
    assert.equal(c.status.status, "INVALID_ARGUMENT");
    assert.match(c.status.message, /client-streaming: use the WebSocket front/);
    const bad = JSON.parse((await (await post({ service: "orders", method: "GetOrder", request_data: "{}" })).text()));
    assert.match(bad.status.message, /request_data is not a field/);
    assert.equal((await fetch(gw.http + "/v1/gateway/invoke-stream", { method: "POST", body: "{}" })).status, 401);
  });

  it("a slow reader holds the backend, and disconnecting cancels it", async () => {
    const total = 2000;
    const writtenBefore = backend.watchWritten.count;
    const res = await post({ service: "orders", method: "WatchOrders", requestData: { orderId: `big:${total}` } });
    const reader = res.body!.getReader();
    await reader.read();
    await new Promise((r) => setTimeout(r, 500));
    const written = backend.watchWritten.count - writtenBefore;
    assert.ok(written < total / 4, `backend wrote ${written} of ${total} while the client was not reading`);
    const cancelledBefore = backend.cancelled.filter((c) => c === `big:${total}`).length;
    await reader.cancel();
    await waitFor(() => backend.cancelled.filter((c) => c === `big:${total}`).length === cancelledBefore + 1, "the backend call to be cancelled");
  });

  it("a client that stops reading is closed after --write-stall-timeout, which cancels the backend call", async () => {
    const stallGw = await startTestGateway({ apiKeys: [KEY], writeStallTimeoutMs: 300, services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    try {
      // A raw socket that sends the request and reads nothing: the gateway's writes back up into uWS.
      const body = JSON.stringify({ service: "orders", method: "WatchOrders", requestData: { orderId: "big:3000" } });
      const socket = net.connect(Number(new URL(stallGw.http).port), "127.0.0.1");
      let received = "";
      socket.setEncoding("latin1");
      socket.on("data", (chunk: string) => (received += chunk));
      socket.on("error", () => undefined);
      const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
      socket.on("connect", () => {
        socket.pause();
        socket.write(`POST /v1/gateway/invoke-stream HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      });
      // Without the clock uWS's own timeout would close it only after 10 s.
      await waitFor(() => backend.cancelled.includes("big:3000"), "the stalled stream's backend call to be cancelled", 6000);
      // Then the client reads what reached it: the body was cut before its status line, and the connection is closed.
      socket.resume();
      await Promise.race([closed, new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the stalled connection was not closed")), 5000))]);
      assert.ok(received.startsWith("HTTP/1.1 200 OK"), received.slice(0, 100));
      assert.ok(!received.includes('"status"'), "the stream was cut before its status line");
      assert.ok(received.length < 3000 * 16 * 1024, `the stalled client still got ${received.length} bytes`);
      const metrics = await (await fetch(stallGw.http + "/metrics")).text();
      assert.ok(metrics.includes('platform_http_requests_total{route="/v1/gateway/invoke-stream",method="POST",status="499"} 1'), "the cut stream counts as a 499");
      // A client that reads keeps its stream to the end.
      const res = await fetch(stallGw.http + "/v1/gateway/invoke-stream", {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": KEY },
        body: JSON.stringify({ service: "orders", method: "WatchOrders", requestData: { orderId: "big:1000" } }),
      });
      const lines = (await res.text()).trim().split("\n");
      assert.equal(lines.length, 1001);
      assert.deepEqual(JSON.parse(lines[1000]!), { status: { success: true, status: "OK", message: "" } });
    } finally {
      await stallGw.close();
    }
  });
});

describe("WebSocket /v1/gateway/invoke-ws", () => {
  let backend: OrderBackend;
  let gw: TestGateway;
  let wsUrl: string;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    wsUrl = gw.http.replace("http:", "ws:") + "/v1/gateway/invoke-ws";
  });
  after(async () => {
    await gw.close();
    backend.close();
  });

  /** Open a socket; frames received are collected; `closed` resolves with the close code. */
  const connect = (key = KEY) => openFrameSocket(wsUrl, [], { headers: { "x-api-key": key } });

  it("bidi: send frames, results come back in order, then the status and a normal close", async () => {
    const c = await connect();
    c.send({ op: "start", service: "orders", method: "SyncOrders", requestData: { orderId: "1" } });
    for (let i = 2; i <= 10; i++) c.send({ op: "send", requestData: { orderId: String(i) } });
    await waitFor(() => c.frames.length === 10, "ten results");
    c.send({ op: "end" });
    assert.equal(await c.closed, 1000);
    assert.deepEqual(
      c.frames.slice(0, 10).map((f) => f.result.orderId),
      Array.from({ length: 10 }, (_, i) => `echo:${i + 1}`),
    );
    assert.deepEqual(c.frames[10], { op: "status", status: { success: true, status: "OK", message: "" } });
  });

  it("client-streaming: one result after end", async () => {
    const c = await connect();
    c.send({ op: "start", service: "orders", method: "UploadOrders" });
    c.send({ op: "send", requestData: { orderId: "a" } });
    c.send({ op: "send", requestData: { orderId: "b" } });
    c.send({ op: "end" });
    await c.closed;
    assert.deepEqual(c.frames, [
      { op: "result", result: { orders: [{ orderId: "a" }, { orderId: "b" }] } },
      { op: "status", status: { success: true, status: "OK", message: "" } },
    ]);
  });

  // gRPC InvokeStream and REST invoke-stream cannot express this: gRPC's end of requests is the caller's half-close
  // (HTTP/2 allows no DATA after END_STREAM), and REST carries one request in its body (client streaming is refused).
  for (const method of ["UploadOrders", "SyncOrders"]) {
    it(`${method}: request data after op end is FAILED_PRECONDITION in-band and never reaches the backend`, async () => {
      const tag = `late-${method}`;
      const cancelToken = method === "UploadOrders" ? "upload" : "sync";
      const cancelledBefore = backend.cancelled.filter((x) => x === cancelToken).length;
      const c = await connect();
      // One TCP write: the frames reach the gateway together, so the late frame is read before the backend could
      // answer the half-close (the backend ends these methods when the requests end).
      const socket = wsSocket(c.ws);
      socket.cork();
      c.send({ op: "start", service: "orders", method, requestData: { orderId: `${tag}-1` } });
      c.send({ op: "send", requestData: { orderId: `${tag}-2` } });
      c.send({ op: "end" });
      c.send({ op: "send", requestData: { orderId: `${tag}-late` } });
      socket.uncork();
      assert.equal(await c.closed, 1000);
      assert.deepEqual(c.frames.at(-1), { op: "status", status: { success: false, status: "FAILED_PRECONDITION", message: "request_data after the end of the request stream" } });
      // Before the status, at most the echoes of the requests sent before the end (bidi).
      for (const f of c.frames.slice(0, -1)) assert.match(f.result.orderId, new RegExp(`^echo:${tag}-[12]$`));
      // The gateway cancels the backend call; once the backend saw that, nothing more can arrive for it.
      await waitFor(() => backend.cancelled.filter((x) => x === cancelToken).length === cancelledBefore + 1, "the backend call to be cancelled");
      const got = backend.streamed.filter((id) => id.startsWith(tag));
      assert.ok(got.every((id) => id === `${tag}-1` || id === `${tag}-2`), `the backend got ${JSON.stringify(got)}`);
    });
  }

  it("closing the socket cancels the backend call; op cancel ends it CANCELLED", async () => {
    const before = backend.cancelled.filter((x) => x === "forever").length;
    const c = await connect();
    c.send({ op: "start", service: "orders", method: "WatchOrders", requestData: { orderId: "forever" } });
    await waitFor(() => c.frames.length >= 2, "two results");
    c.ws.close();
    await waitFor(() => backend.cancelled.filter((x) => x === "forever").length === before + 1, "the backend to see the cancellation");
    const d = await connect();
    d.send({ op: "start", service: "orders", method: "WatchOrders", requestData: { orderId: "forever" } });
    await waitFor(() => d.frames.length >= 1, "a result");
    d.send({ op: "cancel" });
    await d.closed;
    assert.equal(d.frames.at(-1).status.status, "CANCELLED");
  });

  it("protocol errors end the call INVALID_ARGUMENT in-band; unknown methods NOT_FOUND", async () => {
    const a = await connect();
    a.send({ op: "send", requestData: {} });
    await a.closed;
    assert.equal(a.frames[0].status.status, "INVALID_ARGUMENT");
    assert.match(a.frames[0].status.message, /first frame must be \{"op":"start"/);
    const b = await connect();
    b.send({ op: "start", service: "orders", method: "SyncOrders" });
    b.send({ op: "bogus" });
    await b.closed;
    assert.match(b.frames.at(-1).status.message, /unknown op "bogus"/);
    const n = await connect();
    n.send({ op: "start", service: "orders", method: "Nope" });
    await n.closed;
    assert.equal(n.frames[0].status.status, "NOT_FOUND");
  });

  it("a slow reader holds the backend (uWS backpressure), then gets everything", async () => {
    const total = 4000; // 16 KiB each: 64 MiB if nothing pushed back
    const writtenBefore = backend.watchWritten.count;
    const c = await connect();
    c.send({ op: "start", service: "orders", method: "WatchOrders", requestData: { orderId: `big:${total}` } });
    await waitFor(() => c.frames.length >= 1, "a result");
    c.ws.pause();
    await new Promise((r) => setTimeout(r, 500));
    const written = backend.watchWritten.count - writtenBefore;
    assert.ok(written < total / 4, `backend wrote ${written} of ${total} while the client was not reading`);
    c.ws.resume();
    await c.closed;
    assert.equal(c.frames.length, total + 1);
    assert.equal(c.frames.at(-1).status.status, "OK");
  });

  it("refuses the upgrade without a valid x-api-key", async () => {
    await assert.rejects(connect("wrong"), /401/);
  });

  it("more than 64 request messages waiting for the backend end the call RESOURCE_EXHAUSTED", async () => {
    // A TCP relay to the backend that can be frozen: bytes stop flowing both ways, nothing is closed, and a connection
    // made while frozen is held unanswered. The gateway cannot resolve the method (reflection), so request messages
    // wait for it.
    const held: net.Socket[] = [];
    let frozen = false;
    const relay = net.createServer((client) => {
      client.on("error", () => undefined);
      held.push(client);
      if (frozen) return void client.pause();
      const upstream = net.connect(backend.port, "127.0.0.1");
      upstream.on("error", () => undefined);
      held.push(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((r) => relay.listen(0, "127.0.0.1", r));
    const relayGw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: (relay.address() as net.AddressInfo).port } }] });
    try {
      frozen = true;
      for (const s of held) {
        s.unpipe();
        s.pause();
      }
      const c = await openFrameSocket(relayGw.http.replace("http:", "ws:") + "/v1/gateway/invoke-ws", [], { headers: { "x-api-key": KEY } });
      c.send({ op: "start", service: "orders", method: "SyncOrders" });
      for (let i = 0; i < 64; i++) c.send({ op: "send", requestData: { orderId: String(i) } });
      // 64 waiting is within the limit: the call is still open.
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(c.frames, []);
      c.send({ op: "send", requestData: { orderId: "64" } });
      const code = await Promise.race([c.closed, new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the call did not end")), 5000))]);
      assert.equal(code, 1000);
      assert.deepEqual(c.frames, [{ op: "status", status: { success: false, status: "RESOURCE_EXHAUSTED", message: "more than 64 request messages are waiting for the backend" } }]);
    } finally {
      for (const s of held) s.destroy();
      await relayGw.close();
      await new Promise<void>((r) => relay.close(() => r()));
    }
  });
});
