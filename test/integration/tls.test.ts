import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import https from "node:https";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import WebSocket from "ws";
import { createGatewayClient } from "../../src/client/index.js";
import { validateGatewayOptions } from "../../src/config/options.js";
import { gatewayPackageDefinition } from "../../src/shared/protos.js";
import { makeTestPki, type Pem, type TestPki } from "../support/certs.js";
import { runCli } from "../support/cli.js";
import { ceJson } from "../support/web.js";
import { startTestGateway, unary, waitFor, withKey, type TestGateway } from "../support/gateway.js";

const KEY = "tls-key";

/** Certificates for the whole file: RSA key generation in JS costs a few hundred ms each. */
let pki: TestPki;
let foreign: TestPki;
before(() => {
  pki = makeTestPki();
  foreign = makeTestPki();
});

function configClient(address: string, credentials: grpc.ChannelCredentials): grpc.Client {
  const Ctor = grpc.makeGenericClientConstructor(gatewayPackageDefinition()["platform.Config"] as grpc.ServiceDefinition, "platform.Config");
  // The certificate names 127.0.0.1 too; the override only keeps grpc-js from sending an IP address as SNI.
  return new Ctor(address, credentials, { "grpc.ssl_target_name_override": "localhost" });
}

/** A TLS handshake's outcome: the protocol and the server certificate's serial, or the error. */
function handshake(port: number, opts: tls.ConnectionOptions = {}): Promise<{ ok: true; serial: string; version: string; socket: tls.TLSSocket } | { ok: false; error: string }> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: "127.0.0.1", port, ca: pki.ca.cert, ...opts });
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ ok: false, error: "timeout" });
    }, 5000);
    s.once("secureConnect", () => {
      clearTimeout(timer);
      resolve({ ok: true, serial: s.getPeerX509Certificate()!.serialNumber, version: s.getProtocol() ?? "", socket: s });
    });
    s.once("error", (e) => {
      clearTimeout(timer);
      resolve({ ok: false, error: e.message });
    });
  });
}

/** One HTTP/1.1 GET on an open TLS socket (keep-alive); resolves the status code. */
function getOn(socket: tls.TLSSocket, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`no reply to GET ${path}`)), 5000);
    const onData = (d: Buffer): void => {
      buf += d.toString("latin1");
      const head = buf.indexOf("\r\n\r\n");
      const len = /content-length: (\d+)/i.exec(buf);
      if (head < 0 || !len || buf.length < head + 4 + Number(len[1])) return;
      clearTimeout(timer);
      socket.off("data", onData);
      resolve(Number(buf.slice(9, 12)));
    };
    socket.on("data", onData);
    socket.write(`GET ${path} HTTP/1.1\r\nhost: localhost\r\n\r\n`);
  });
}

function httpsGet(port: number, path: string, opts: https.RequestOptions = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: "127.0.0.1", port, path, ca: pki.ca.cert, agent: false, timeout: 5000, ...opts }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

/** A gRPC unary call on an open node:http2 session (raw framing): resolves grpc-status. */
function grpcOn(session: http2.ClientHttp2Session, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", "x-api-key": KEY });
    const timer = setTimeout(() => reject(new Error("no gRPC reply")), 5000);
    let status = "";
    req.on("response", (h) => (status = String(h["grpc-status"] ?? status)));
    req.on("trailers", (t) => (status = String(t["grpc-status"])));
    req.on("data", () => undefined);
    req.on("end", () => {
      clearTimeout(timer);
      resolve(status);
    });
    req.on("error", reject);
    req.end(Buffer.alloc(5));
  });
}

function wss(port: number, opts: WebSocket.ClientOptions = {}): Promise<{ ws: WebSocket; frames: any[] }> {
  const ws = new WebSocket(`wss://127.0.0.1:${port}/v1/pubsub/ws`, [], { ca: pki.ca.cert, headers: { "x-api-key": KEY }, ...opts });
  const frames: any[] = [];
  ws.on("message", (d) => frames.push(JSON.parse(String(d))));
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve({ ws, frames }));
    ws.once("error", reject);
  });
}

/** Replace the served pair in place (as a certificate manager does). */
function rotate(to: Pem): void {
  writeFileSync(pki.files.serverKey, to.key);
  writeFileSync(pki.files.serverCert, to.cert);
}

describe("TLS on both ports", () => {
  let gw: TestGateway;
  let grpcPort: number;
  let httpPort: number;
  const original = (): Pem => pki.server;

  before(async () => {
    // With the invoke warm-up asked for: over TLS it runs on the private gateways only (docs/warmup.md, steps 8 and 9).
    gw = await startTestGateway({ apiKeys: [KEY], tlsCert: pki.files.serverCert, tlsKey: pki.files.serverKey, tlsReloadIntervalMs: 100, warmupCalls: 10 });
    grpcPort = gw.gateway.grpcPort;
    httpPort = gw.gateway.httpPort;
  });
  after(async () => {
    rotate(original());
    await gw.close();
  });

  it("warms up on its private gateways only: the warm-up through its own ports needs cleartext loopback listeners", () => {
    const msgs = gw.logs.map((l) => l["msg"]);
    assert.equal(gw.logs.find((l) => l["msg"] === "warmed up")?.["calls"], 20, "gRPC and REST invokes on the private gateways");
    assert.ok(!msgs.some((m) => /through its own port/.test(String(m))), JSON.stringify(msgs));
  });

  it("gRPC from grpc-js and from the client library over TLS; a cleartext client cannot call", async () => {
    const c = configClient(`127.0.0.1:${grpcPort}`, grpc.credentials.createSsl(Buffer.from(pki.ca.cert)));
    try {
      assert.deepEqual(await unary(c, "ListServices", {}, withKey(KEY)), { services: [] });
    } finally {
      c.close();
    }
    const lib = createGatewayClient({ address: `localhost:${grpcPort}`, apiKey: KEY, tls: grpc.credentials.createSsl(Buffer.from(pki.ca.cert)) });
    try {
      assert.deepEqual(await lib.listConfigServices({ timeoutMs: 5000 }), []);
    } finally {
      lib.close();
    }
    const plain = configClient(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
    try {
      await assert.rejects(unary(plain, "ListServices", {}, withKey(KEY), { deadline: Date.now() + 3000 }), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.DEADLINE_EXCEEDED);
    } finally {
      plain.close();
    }
  });

  it("gRPC port: ALPN other than h2 fails the handshake; no ALPN is closed before any frame; TLS 1.1 is refused", async () => {
    const h1 = await handshake(grpcPort, { ALPNProtocols: ["http/1.1"] });
    assert.equal(h1.ok, false);
    assert.match((h1 as { error: string }).error, /no application protocol/);
    const none = await handshake(grpcPort);
    assert.equal(none.ok, true, "the handshake itself completes without ALPN");
    const s = (none as { socket: tls.TLSSocket }).socket;
    const got: Buffer[] = [];
    s.on("data", (d: Buffer) => got.push(d));
    await new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once("close", () => resolve())));
    assert.equal(Buffer.concat(got).length, 0, "no HTTP/2 frame was sent to a client without ALPN h2");
    for (const port of [grpcPort, httpPort]) {
      const old = await handshake(port, { minVersion: "TLSv1", maxVersion: "TLSv1.1", ALPNProtocols: ["h2"] });
      assert.equal(old.ok, false, `TLS 1.1 on port ${port}`);
      const v12 = await handshake(port, { maxVersion: "TLSv1.2", ALPNProtocols: ["h2"] });
      assert.equal(v12.ok && v12.version, "TLSv1.2");
      if (v12.ok) v12.socket.destroy();
    }
  });

  it("HTTP port: REST over https, WebSocket over wss; a client that does not trust the CA is refused", async () => {
    const health = await httpsGet(httpPort, "/health");
    assert.equal(health.status, 200);
    assert.match(health.body, /"status":"Healthy"/);
    const list = await httpsGet(httpPort, "/v1/config/list-services", { headers: { "x-api-key": KEY } });
    assert.deepEqual(JSON.parse(list.body), { services: [] });
    await assert.rejects(httpsGet(httpPort, "/health", { ca: foreign.ca.cert }), /self-signed|unable to verify|certificate/);
    const { ws, frames } = await wss(httpPort);
    try {
      ws.send(JSON.stringify({ op: "subscribe", topics: ["tls"], id: "s" }));
      await waitFor(() => frames.some((f) => f.op === "subscribed"), "subscribed over wss");
    } finally {
      ws.terminate();
    }
  });

  it("a new certificate is served to new connections on both ports; connections open before it keep working", async () => {
    const before = await Promise.all([handshake(grpcPort, { ALPNProtocols: ["h2"] }), handshake(httpPort)]);
    for (const h of before) {
      assert.equal(h.ok && h.serial, original().serial);
      if (h.ok) h.socket.destroy();
    }
    // Open before the reload: a gRPC session, a kept-alive HTTPS connection, a WebSocket subscriber.
    const session = http2.connect(`https://127.0.0.1:${grpcPort}`, { ca: pki.ca.cert });
    session.on("error", () => undefined);
    assert.equal(await grpcOn(session, "/platform.Config/ListServices"), "0");
    const keep = await handshake(httpPort);
    assert.ok(keep.ok);
    assert.equal(await getOn(keep.socket, "/health"), 200);
    const oldWs = await wss(httpPort);
    oldWs.ws.send(JSON.stringify({ op: "subscribe", topics: ["rotated"], id: "old" }));
    await waitFor(() => oldWs.frames.some((f) => f.op === "subscribed"), "old subscriber subscribed");

    const next = pki.issueServer("gateway test server (rotated)");
    rotate(next);
    await waitFor(() => gw.logs.filter((l) => l["msg"] === "TLS certificate reloaded").length >= 2, "both ports reloaded", 5000);
    for (const port of [grpcPort, httpPort]) {
      const h = await handshake(port, { ALPNProtocols: ["h2"] });
      assert.equal(h.ok && h.serial, next.serial, `port ${port} serves the new certificate`);
      if (h.ok) h.socket.destroy();
    }
    // The connections made before still work, on the old certificate.
    assert.equal(await grpcOn(session, "/platform.Config/ListServices"), "0");
    assert.equal(session.closed || session.destroyed, false);
    assert.equal(await getOn(keep.socket, "/health"), 200);
    assert.equal(keep.serial, original().serial, "the kept connection was made with the old certificate");
    assert.equal(keep.socket.destroyed, false);
    // A subscriber on the new app publishes; the one on the old app gets the event too.
    const newWs = await wss(httpPort);
    newWs.ws.send(JSON.stringify({ op: "subscribe", topics: ["rotated"], id: "new" }));
    await waitFor(() => newWs.frames.some((f) => f.op === "subscribed"), "new subscriber subscribed");
    newWs.ws.send(JSON.stringify({ op: "publish", topic: "rotated", cloudevent: ceJson(1), id: 1 }));
    await waitFor(() => oldWs.frames.some((f) => f.op === "event") && newWs.frames.some((f) => f.op === "event"), "the event on both subscribers").catch((e) => {
      throw new Error(`${(e as Error).message}: old ${JSON.stringify(oldWs.frames)} new ${JSON.stringify(newWs.frames)}`);
    });
    session.close();
    keep.socket.destroy();
    oldWs.ws.terminate();
    newWs.ws.terminate();
    const logged = JSON.stringify(gw.logs);
    assert.ok(!logged.includes("PRIVATE KEY") && !logged.includes(next.key.split("\n")[1]!), "no key material in the logs");
  });

  it("a broken new pair is logged and the current certificate stays in use", async () => {
    const current = (await handshake(httpPort)) as { ok: true; serial: string; socket: tls.TLSSocket };
    current.socket.destroy();
    const warnings = (): number => gw.logs.filter((l) => l["msg"] === "TLS certificate change not applied; the previous certificate stays in use").length;
    const before = warnings();
    // A certificate with another pair's key.
    writeFileSync(pki.files.serverCert, pki.issueServer().cert);
    await waitFor(() => warnings() >= before + 2, "both ports refuse the mismatched pair", 5000);
    const warn = gw.logs.filter((l) => l["level"] === 40 || l["level"] === "warn").at(-1)!;
    assert.match(String(warn["reason"]), /is not a usable private key/);
    assert.ok(!JSON.stringify(warn).includes("PRIVATE KEY"));
    for (const port of [grpcPort, httpPort]) {
      const h = await handshake(port, { ALPNProtocols: ["h2"] });
      assert.equal(h.ok && h.serial, current.serial, `port ${port} kept its certificate`);
      if (h.ok) h.socket.destroy();
    }
    const c = configClient(`127.0.0.1:${grpcPort}`, grpc.credentials.createSsl(Buffer.from(pki.ca.cert)));
    try {
      assert.deepEqual(await unary(c, "ListServices", {}, withKey(KEY)), { services: [] });
    } finally {
      c.close();
    }
  });

  it("files rewritten with the same bytes change nothing; the HTTP port keeps the last 4 certificates' connections", async () => {
    const reloads = (port: string): number => gw.logs.filter((l) => l["msg"] === "TLS certificate reloaded" && l["port"] === port).length;
    const rotateAndWait = async (to: Pem): Promise<void> => {
      const [g, h] = [reloads("grpc"), reloads("http")];
      rotate(to);
      await waitFor(() => reloads("grpc") > g && reloads("http") > h, "both ports reloaded", 5000);
    };
    const first = pki.issueServer();
    await rotateAndWait(first);
    const [g, h] = [reloads("grpc"), reloads("http")];
    rotate(first);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual([reloads("grpc"), reloads("http")], [g, h], "the same bytes again: no reload");
    // A WebSocket on the app of `first`; four more certificates keep it, the fifth closes it.
    const { ws } = await wss(httpPort);
    let closed = false;
    ws.on("close", () => (closed = true));
    for (let i = 0; i < 4; i++) await rotateAndWait(pki.issueServer());
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(closed, false, "open through four reloads");
    await rotateAndWait(pki.issueServer());
    await waitFor(() => closed, "the oldest app's connection closed at the fifth reload", 2000);
  });
});

describe("TLS with uWS worker threads", () => {
  it("every thread serves https and each reloads a changed certificate", async () => {
    const own = makeTestPki();
    const gw = await startTestGateway({ apiKeys: [KEY], threads: 2, tlsCert: own.files.serverCert, tlsKey: own.files.serverKey, tlsReloadIntervalMs: 100 });
    try {
      const port = gw.gateway.httpPort;
      const serials = async (): Promise<Set<string>> => {
        const seen = new Set<string>();
        // The kernel spreads connections over the threads: a few handshakes reach each.
        for (let i = 0; i < 12; i++) {
          const h = await handshake(port, { ca: own.ca.cert });
          if (h.ok) {
            seen.add(h.serial);
            h.socket.destroy();
          }
        }
        return seen;
      };
      assert.deepEqual([...(await serials())], [own.server.serial]);
      assert.equal((await httpsGet(port, "/health", { ca: own.ca.cert })).status, 200);
      const next = own.issueServer();
      writeFileSync(own.files.serverKey, next.key);
      writeFileSync(own.files.serverCert, next.cert);
      const end = Date.now() + 5000;
      let seen = await serials();
      while (!(seen.size === 1 && seen.has(next.serial)) && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 100));
        seen = await serials();
      }
      assert.deepEqual([...seen], [next.serial]);
    } finally {
      await gw.close();
    }
  });
});

describe("mutual TLS (--tls-client-ca)", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], tlsCert: pki.files.serverCert, tlsKey: pki.files.serverKey, tlsClientCa: pki.files.ca });
  });
  after(async () => {
    await gw.close();
  });

  it("gRPC port: no client certificate or one from another CA fails the handshake; the CA's client certificate works", async () => {
    const port = gw.gateway.grpcPort;
    const ca = Buffer.from(pki.ca.cert);
    const none = configClient(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca));
    const wrong = configClient(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca, Buffer.from(foreign.client.key), Buffer.from(foreign.client.cert)));
    const right = configClient(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca, Buffer.from(pki.client.key), Buffer.from(pki.client.cert)));
    try {
      for (const c of [none, wrong]) {
        await assert.rejects(unary(c, "ListServices", {}, withKey(KEY), { deadline: Date.now() + 3000 }), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.DEADLINE_EXCEEDED);
      }
      assert.deepEqual(await unary(right, "ListServices", {}, withKey(KEY)), { services: [] });
    } finally {
      for (const c of [none, wrong, right]) c.close();
    }
    const raw = await handshake(port, { ALPNProtocols: ["h2"] });
    if (raw.ok) {
      // TLS 1.3: the server's refusal of a missing certificate arrives after the client's handshake completed.
      const closed = await new Promise<string>((resolve) => {
        raw.socket.once("error", (e) => resolve(e.message));
        raw.socket.once("close", () => resolve("closed"));
      });
      assert.match(closed, /certificate required|closed/);
    }
  });

  it("HTTP port: a certificate from another CA is refused, the CA's is accepted; uWS cannot require one (a warning says so)", async () => {
    const port = gw.gateway.httpPort;
    await assert.rejects(httpsGet(port, "/health", { cert: foreign.client.cert, key: foreign.client.key }));
    assert.equal((await httpsGet(port, "/health", { cert: pki.client.cert, key: pki.client.key })).status, 200);
    assert.ok(gw.logs.some((l) => String(l["msg"]).includes("uWebSockets.js cannot require one")));
  });
});

describe("startup checks of the TLS options", () => {
  it("a non-loopback host without TLS is refused unless --allow-plaintext says so", async () => {
    assert.throws(() => validateGatewayOptions({ host: "0.0.0.0", apiKeys: [KEY] }), /refusing to serve cleartext on non-loopback host 0\.0\.0\.0.*--tls-cert.*--allow-plaintext/);
    assert.equal(validateGatewayOptions({ host: "0.0.0.0", apiKeys: [KEY], allowPlaintext: true }).host, "0.0.0.0");
    assert.equal(validateGatewayOptions({ host: "0.0.0.0", apiKeys: [KEY], tlsCert: pki.files.serverCert, tlsKey: pki.files.serverKey }).tls?.cert, pki.files.serverCert);
    const r = await runCli(["--host", "0.0.0.0", "--api-key", KEY, "--grpc-port", "0", "--http-port", "0"]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /refusing to serve cleartext on non-loopback host 0\.0\.0\.0/);
    const env = await runCli(["--host", "0.0.0.0", "--api-key", KEY, "--grpc-port", "0", "--http-port", "0", "--threads", "1"], { GATEWAY_ALLOW_PLAINTEXT: "maybe" });
    assert.match(env.stderr, /GATEWAY_ALLOW_PLAINTEXT must be true or false/);
  });

  it("a certificate that expires within 14 days is served with a warning", async () => {
    const soon = pki.issueServer("gateway test server (expiring)", 3);
    const cert = `${pki.dir}/soon.pem`;
    const key = `${pki.dir}/soon-key.pem`;
    writeFileSync(cert, soon.cert);
    writeFileSync(key, soon.key);
    const gw = await startTestGateway({ tlsCert: cert, tlsKey: key });
    try {
      const warned = gw.logs.filter((l) => l["msg"] === "TLS certificate expires soon");
      assert.deepEqual(warned.map((l) => [l["port"], l["serial"], l["daysLeft"]]).sort(), [["grpc", soon.serial, 2], ["http", soon.serial, 2]]);
    } finally {
      await gw.close();
    }
  });

  it("a missing, unreadable or mismatched file, or half a pair, is an error naming the flag; no key material in it", async () => {
    const mismatched = `${pki.dir}/mismatched-key.pem`;
    copyFileSync(pki.files.clientKey, mismatched);
    const cases: Array<[string[], RegExp]> = [
      [["--tls-cert", pki.files.serverCert], /tlsCert \(--tls-cert\) needs --tls-key/],
      [["--tls-key", pki.files.serverKey], /tlsKey \(--tls-key\) needs --tls-cert/],
      [["--tls-client-ca", pki.files.ca], /tlsClientCa \(--tls-client-ca\) needs --tls-cert and --tls-key/],
      [["--tls-cert", `${pki.dir}/nope.pem`, "--tls-key", pki.files.serverKey], /option tlsCert \(--tls-cert\) ".*nope\.pem" cannot be read: ENOENT/],
      [["--tls-cert", pki.files.serverKey, "--tls-key", pki.files.serverKey], /option tlsCert \(--tls-cert\) ".*" is not a PEM certificate/],
      [["--tls-cert", pki.files.serverCert, "--tls-key", mismatched], /option tlsKey \(--tls-key\) ".*mismatched-key\.pem" is not a usable private key for option tlsCert/],
      [["--tls-cert", pki.files.serverCert, "--tls-key", pki.files.serverCert], /option tlsKey \(--tls-key\) .* is not a usable private key/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli([...args, "--grpc-port", "0", "--http-port", "0", "--threads", "1"]);
      assert.notEqual(r.code, 0, args.join(" "));
      assert.match(r.stderr, message, args.join(" "));
      assert.ok(!r.stderr.includes("PRIVATE KEY") && !r.stderr.includes(pki.client.key.split("\n")[1]!), "no key material");
    }
    const viaEnv = await runCli(["--grpc-port", "0", "--http-port", "0"], { GATEWAY_TLS_CERT: pki.files.serverCert });
    assert.match(viaEnv.stderr, /needs --tls-key/);
  });
});
