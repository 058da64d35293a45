import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { connect } from "node:net";
import { Code } from "../../src/shared/code.js";
import { GatewayError } from "../../src/shared/gateway-error.js";
import { createAuthenticator } from "../../src/ops/auth.js";
import { createLogger } from "../../src/observe/logger.js";
import { createMetrics } from "../../src/observe/metrics.js";
import { DISCARD_BYTES, json, startRestServer, type RestServer, type RestServerDeps } from "../../src/http/router.js";
import { freePort } from "../support/ports.js";
import { waitFor } from "../support/gateway.js";

/** A raw HTTP/1.1 exchange: write `request`, resolve with everything the server sent until it closed or `ms` passed. */
function raw(port: number, request: string | Buffer, ms = 2000): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(port, "127.0.0.1");
    let data = "";
    sock.on("data", (d) => (data += d.toString()));
    sock.on("error", () => resolve(data));
    sock.on("close", () => resolve(data));
    sock.write(request);
    setTimeout(() => sock.destroy(), ms).unref();
  });
}

/** Write `head` then `body` as fast as the socket takes them; resolve with what came back and any socket error. */
function exchange(port: number, head: string, body: Buffer): Promise<{ data: string; error?: string }> {
  return new Promise((resolve) => {
    const sock = connect(port, "127.0.0.1");
    let data = "";
    let error: string | undefined;
    sock.on("data", (d) => (data += d.toString()));
    sock.on("error", (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    sock.on("close", () => resolve({ data, error }));
    sock.write(head);
    sock.write(body);
    setTimeout(() => sock.destroy(), 5000).unref();
  });
}

describe("REST router over uWS", () => {
  let server: RestServer;
  let base: string;
  let started = 0;
  let release: (() => void) | undefined;
  before(async () => {
    const metrics = createMetrics({ processMetrics: false });
    server = await startRestServer(
      "127.0.0.1",
      0,
      [
        {
          method: "POST",
          path: "/v1/echo",
          handler: async (req) => {
            const body = req.json();
            if (typeof body["name"] !== "string") throw new GatewayError(Code.INVALID_ARGUMENT, `field name must be a string (got ${typeof body["name"]})`);
            return json({ name: body["name"], size: req.body.length });
          },
        },
        { method: "GET", path: "/v1/items/{service}/{key+}", handler: async (req) => json(req.params) },
        { method: "GET", path: "/v1/items/{service}/bulk", handler: async (req) => json({ bulk: req.params["service"], keys: req.query.getAll("keys") }) },
        {
          method: "GET",
          path: "/v1/slow",
          handler: (req) =>
            new Promise((resolve) => {
              started++;
              release = () => resolve(json({}));
              req.signal.addEventListener("abort", () => resolve(json({})));
            }),
        },
      ],
      {
        auth: createAuthenticator([]),
        logger: createLogger("silent"),
        maxBodyBytes: 1024,
        bodyDiscardMs: 300,
        isClosing: () => false,
        requests: metrics.counter("t_requests_total", "test", ["route", "method", "status"]),
        latency: metrics.histogram("t_latency_seconds", "test", ["route", "method", "status"]),
      },
    );
    base = `http://127.0.0.1:${server.port}`;
  });
  after(() => server.stopListening());

  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/v1/echo`, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });

  it("parses a JSON body", async () => {
    const res = await post('{"name":"a"}');
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { name: "a", size: 12 });
  });

  it("malformed JSON, non-object JSON and wrong field types are 400 with a message saying what is wrong", async () => {
    for (const [body, pattern] of [
      ['{"name":', /not valid JSON/],
      ["[1,2]", /must be a JSON object/],
      ["", /empty/],
      ['{"name": 5}', /field name must be a string \(got number\)/],
    ] as const) {
      const res = await post(body);
      assert.equal(res.status, 400, body);
      const err = (await res.json()) as { code: number; message: string; details: unknown[] };
      assert.equal(err.code, Code.INVALID_ARGUMENT);
      assert.match(err.message, pattern);
      assert.deepEqual(err.details, []);
    }
  });

  it("unknown paths are 404, wrong methods 405 with Allow", async () => {
    const missing = await fetch(`${base}/v1/nothing`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as { code: number }).code, Code.NOT_FOUND);
    const wrong = await fetch(`${base}/v1/echo`);
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "POST");
  });

  it("a declared oversize body is read to its end and thrown away, then 413, so a client still sending reads the answer, not a reset", async () => {
    const head = `POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n`;
    for (let i = 0; i < 20; i++) {
      const got = await exchange(server.port, head, Buffer.alloc(4_000_000, 0x20));
      assert.equal(got.error, undefined, `exchange ${i}: ${got.error}`);
      assert.match(got.data, /^HTTP\/1\.1 413 /);
      assert.match(got.data, /request body of 4000000 bytes exceeds the limit of 1024 bytes/);
    }
  });

  it("the 413 for a declared oversize body waits for the body, and the connection then closes", async () => {
    const sock = connect(server.port, "127.0.0.1");
    let data = "";
    sock.on("data", (d) => (data += d.toString()));
    const closed = new Promise((resolve) => sock.on("close", resolve));
    sock.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n${"x".repeat(2000)}`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(data, "", "no answer while the body is still coming");
    sock.write("y".repeat(3000));
    await closed;
    assert.match(data, /^HTTP\/1\.1 413 /);
  });

  it("a declared length past the discard bound is 413 at once", async () => {
    const head = `POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: ${1024 + DISCARD_BYTES + 1}\r\n\r\n`;
    const reply = await raw(server.port, head);
    assert.match(reply, /^HTTP\/1\.1 413 /);
    assert.match(reply, /exceeds the limit of 1024 bytes/);
  });

  it("a chunked body that keeps coming past the discard bound is cut off: the server stops reading it", async () => {
    const sock = connect(server.port, "127.0.0.1");
    sock.on("error", () => undefined);
    let closed = false;
    const ended = new Promise<void>((resolve) => sock.on("close", () => resolve(void (closed = true))));
    sock.write("POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const MIB = 1024 * 1024;
    const chunk = Buffer.concat([Buffer.from(`${MIB.toString(16)}\r\n`), Buffer.alloc(MIB, 0x78), Buffer.from("\r\n")]);
    let sent = 0;
    // Never a last chunk: only the bound ends this body. At most twice the bound is offered.
    while (!closed && sent < 2 * DISCARD_BYTES) {
      // (a write after the server closed fails: EPIPE, and the close follows)
      if (!sock.write(chunk)) await Promise.race([once(sock, "drain").catch(() => undefined), ended]);
      sent += MIB;
    }
    assert.ok(sent < 2 * DISCARD_BYTES, `the server still read after ${sent} bytes`);
    await waitFor(() => closed, "the connection to close");
  });

  it("a declared oversize body that stops coming is answered 413 after bodyDiscardMs", async () => {
    const t0 = performance.now();
    const reply = await raw(server.port, `POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n`, 5000);
    assert.match(reply, /^HTTP\/1\.1 413 /);
    const waited = performance.now() - t0;
    assert.ok(waited >= 250 && waited < 4000, `answered after ${waited.toFixed(0)} ms (bodyDiscardMs 300)`);
  });

  it("a chunked body that grows past the limit is 413", async () => {
    const chunk = "x".repeat(600);
    const req = `POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${(600).toString(16)}\r\n${chunk}\r\n${(600).toString(16)}\r\n${chunk}\r\n0\r\n\r\n`;
    const reply = await raw(server.port, req);
    assert.match(reply, /^HTTP\/1\.1 413 /);
  });

  it("path parameters are percent-decoded; a {key+} parameter keeps slashes; literal segments win", async () => {
    let res = await fetch(`${base}/v1/items/orders/a/b%2Fc/d%20e`);
    assert.deepEqual(await res.json(), { service: "orders", key: "a/b/c/d e" });
    res = await fetch(`${base}/v1/items/orders/bulk?keys=a&keys=b`);
    assert.deepEqual(await res.json(), { bulk: "orders", keys: ["a", "b"] });
    res = await fetch(`${base}/v1/items/orders/%E0%A4%A`);
    assert.equal(res.status, 400);
  });

  it("a client that aborts mid-request leaks nothing", async () => {
    const before = server.inflight;
    const ac = new AbortController();
    const pending = fetch(`${base}/v1/slow`, { signal: ac.signal }).catch(() => undefined);
    await waitFor(() => started === 1, "the slow handler to start");
    assert.equal(server.inflight, before + 1);
    ac.abort();
    await pending;
    await waitFor(() => server.inflight === before, "the aborted request to be released");
    release?.(); // resolving after the abort must not write to the dead response
    const res = await post('{"name":"still fine"}');
    assert.equal(res.status, 200);
  });

  it("an aborted upload mid-body leaks nothing", async () => {
    const before = server.inflight;
    await raw(server.port, `POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"name":`, 200);
    await waitFor(() => server.inflight === before, "the aborted upload to be released");
  });
});

describe("REST router shutdown", () => {
  it("closeInflight() closes the connections of requests still running; their handlers see the abort", async () => {
    let closing = false;
    let aborted = 0;
    let entered = 0;
    const metrics = createMetrics({ processMetrics: false });
    const server = await startRestServer(
      "127.0.0.1",
      0,
      [
        {
          method: "GET",
          path: "/hang",
          handler: (req) =>
            new Promise(() => {
              entered++;
              req.signal.addEventListener("abort", () => aborted++);
            }),
        },
        { method: "GET", path: "/quick", handler: async () => json({ ok: true }) },
      ],
      {
        auth: createAuthenticator([]),
        logger: createLogger("silent"),
        maxBodyBytes: 1024,
        isClosing: () => closing,
        requests: metrics.counter("s_requests_total", "test", ["route", "method", "status"]),
        latency: metrics.histogram("s_latency_seconds", "test", ["route", "method", "status"]),
      },
    );
    try {
      const hanging = fetch(`http://127.0.0.1:${server.port}/hang`).then(
        () => "answered",
        () => "connection closed",
      );
      await waitFor(() => entered === 1, "the hanging handler to start");
      // While closing, new requests get 503 and the response tells the client to close its kept-alive connection.
      closing = true;
      const quick = await raw(server.port, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n", 1000);
      assert.match(quick, /^HTTP\/1\.1 503 /);
      assert.match(quick, /connection: close/i);
      server.closeInflight();
      assert.equal(await hanging, "connection closed");
      assert.equal(aborted, 1);
      assert.equal(server.inflight, 0);
      server.closeInflight();
    } finally {
      server.stopListening();
    }
  });
});

describe("REST router warm-up before listening", () => {
  const deps = (beforeListen: NonNullable<RestServerDeps["beforeListen"]>): RestServerDeps => {
    const metrics = createMetrics({ processMetrics: false });
    return {
      auth: createAuthenticator([]),
      logger: createLogger("silent"),
      maxBodyBytes: 1024,
      isClosing: () => false,
      requests: metrics.counter("w_requests_total", "test", ["route", "method", "status"]),
      latency: metrics.histogram("w_latency_seconds", "test", ["route", "method", "status"]),
      beforeListen,
    };
  };
  const routes = [{ method: "GET" as const, path: "/quick", handler: async () => json({ ok: true }) }];
  const get = (port: number): Promise<number | string> => fetch(`http://127.0.0.1:${port}/quick`).then((r) => r.status, (e: Error) => `refused: ${(e.cause as Error)?.message ?? e.message}`);

  it("serves the app on a loopback port while beforeListen runs, and on its own port only after", async () => {
    const port = await freePort();
    const seen: Array<number | string> = [];
    let loopback = 0;
    const server = await startRestServer("127.0.0.1", port, routes, deps(async (w) => {
      loopback = w.port;
      seen.push(await get(w.port), await get(port));
    }));
    try {
      assert.equal(seen[0], 200, "the loopback port serves the routes");
      assert.match(String(seen[1]), /refused/, "the server's own port does not listen yet");
      assert.equal(await get(port), 200);
      // A new connection: the one fetch keeps alive to it is still served, as stopListening leaves open connections.
      const refused = await new Promise<boolean>((resolve) => {
        const sock = connect(loopback, "127.0.0.1");
        sock.on("connect", () => (sock.destroy(), resolve(false)));
        sock.on("error", () => resolve(true));
      });
      assert.ok(refused, "the loopback port closed");
    } finally {
      server.closeAll();
    }
  });

  it("closed during beforeListen, it does not listen and says why", async () => {
    const port = await freePort();
    await assert.rejects(startRestServer("127.0.0.1", port, routes, deps(async (w) => w.closeAll())), /closed during its warm-up/);
    assert.match(String(await get(port)), /refused/);
  });
});
