import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import type { BackendTls } from "../../src/backends/backend-tls.js";
import { createH2UnaryClient } from "../../src/backends/h2-unary.js";
import { validateServicesConfig } from "../../src/config/services.js";
import { Code } from "../../src/shared/code.js";
import { makeTestPki, type TestPki } from "../support/certs.js";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, withKey, type TestGateway } from "../support/gateway.js";
import { protosDir, SHOP_PROTO } from "../support/protos/descriptors.js";

const KEY = "backend-tls-key";

function shopClient(address: string): any {
  const def = loadSync(SHOP_PROTO, { includeDirs: [protosDir], keepCase: false, longs: String, enums: String, defaults: false, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as any;
  return new pkg.shop.v1.OrderService(address, grpc.credentials.createInsecure());
}

describe("backends over TLS (a service's grpc.tls)", () => {
  let pki: TestPki;
  let foreign: TestPki;
  let backend: OrderBackend;
  let gw: TestGateway;
  let plainTls: tls.Server;

  const post = async (path: string, body: unknown): Promise<{ status: number; text: string }> => {
    const res = await fetch(gw.http + path, { method: "POST", headers: { "content-type": "application/json", "x-api-key": KEY }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
    return { status: res.status, text: await res.text() };
  };

  before(async () => {
    pki = makeTestPki();
    foreign = makeTestPki();
    // The backend requires a client certificate from the CA (mutual TLS).
    backend = await startOrderBackend({
      credentials: grpc.ServerCredentials.createSsl(Buffer.from(pki.ca.cert), [{ cert_chain: Buffer.from(pki.server.cert), private_key: Buffer.from(pki.server.key) }], true),
    });
    // A TLS server that selects no ALPN protocol: not HTTP/2 over TLS.
    plainTls = tls.createServer({ cert: pki.server.cert, key: pki.server.key }, (s) => s.end());
    await new Promise<void>((r) => plainTls.listen(0, "127.0.0.1", () => r()));
    const tlsOf = (extra: object = {}) => ({ ca: pki.files.ca, cert: pki.files.clientCert, key: pki.files.clientKey, serverName: "localhost", ...extra });
    gw = await startTestGateway({
      apiKeys: [KEY],
      services: [
        { name: "orders", grpc: { host: "127.0.0.1", port: backend.port, tls: tlsOf() } },
        // The backend's CA is not this one: every call fails the handshake.
        { name: "untrusted", grpc: { host: "127.0.0.1", port: backend.port, tls: tlsOf({ ca: foreign.files.ca }) } },
        // No client certificate: the backend refuses the handshake.
        { name: "anonymous", grpc: { host: "127.0.0.1", port: backend.port, tls: { ca: pki.files.ca, serverName: "localhost" } } },
        // The certificate names localhost and 127.0.0.1, not this.
        { name: "misnamed", grpc: { host: "127.0.0.1", port: backend.port, tls: tlsOf({ serverName: "orders.example" }) } },
      ],
    });
  });
  after(async () => {
    await gw.close();
    backend.close();
    plainTls.close();
  });

  it("unary invoke (the gateway's own HTTP/2 client over TLS with a client certificate)", async () => {
    const r = await post("/v1/gateway/invoke", { service: "orders", method: "GetOrder", requestData: { orderId: "t1" } });
    assert.equal(r.status, 200, r.text);
    assert.equal(JSON.parse(r.text).responseData.orderId, "t1");
    assert.ok(backend.received.some((c) => c.path === "/shop.v1.OrderService/GetOrder"));
  });

  it("a server stream (invoke-stream, grpc-js over TLS)", async () => {
    const r = await post("/v1/gateway/invoke-stream", { service: "orders", method: "WatchOrders", requestData: { orderId: "count:3" } });
    assert.equal(r.status, 200, r.text);
    const lines = r.text.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(lines.filter((l) => l.result).length, 3, r.text);
    assert.equal(lines.at(-1).status?.code ?? lines.at(-1).error?.code ?? 0, 0, r.text);
  });

  it("reflection (list-methods) and the transparent proxy reach the backend over TLS", async () => {
    const res = await fetch(`${gw.http}/v1/gateway/list-methods?service=orders`, { headers: { "x-api-key": KEY } });
    const body = await res.text();
    assert.equal(res.status, 200, body);
    assert.ok((JSON.parse(body).methods as Array<{ name: string }>).some((m) => m.name.endsWith("GetOrder")), body);
    const client = shopClient(gw.grpcAddress);
    try {
      // Routed once reflection answered (in the background after startup).
      const end = Date.now() + 5000;
      for (;;) {
        try {
          const r = await new Promise<any>((resolve, reject) => client.GetOrder({ orderId: "p1" }, withKey(KEY), { deadline: Date.now() + 3000 }, (e: Error | null, v: any) => (e ? reject(e) : resolve(v))));
          assert.equal(r.orderId, "p1");
          break;
        } catch (e) {
          if ((e as grpc.ServiceError).code !== grpc.status.UNIMPLEMENTED || Date.now() > end) throw e;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    } finally {
      client.close();
    }
  });

  it("a wrong CA, no client certificate or a wrong server name: UNAVAILABLE in-band, saying why", async () => {
    for (const [service, why] of [
      ["untrusted", /certificate/i],
      ["anonymous", /certificate|handshake|alert|socket|Connection dropped|ECONNRESET/i],
      ["misnamed", /orders\.example|altnames|Hostname/i],
    ] as const) {
      const r = await post("/v1/gateway/invoke", { service, method: "shop.v1.OrderService/GetOrder", requestData: { orderId: "x" } });
      const body = JSON.parse(r.text) as { success: boolean; status: string; message: string };
      assert.equal(body.success, false, `${service}: ${r.text}`);
      assert.equal(body.status, "UNAVAILABLE", `${service}: ${r.text}`);
      assert.match(body.message, why, `${service}: ${body.message}`);
    }
  });

  it("the unary client over TLS: verifies the certificate and its name, and refuses a server that selects no ALPN h2", async () => {
    const call = async (port: number, t: BackendTls) => {
      const c = createH2UnaryClient({ address: `127.0.0.1:${port}`, connections: 1, maxReceiveBytes: 1 << 20, tls: t });
      try {
        return await c.call("/shop.v1.OrderService/GetOrder", Buffer.alloc(0), new grpc.Metadata(), Date.now() + 5000);
      } finally {
        c.close();
      }
    };
    const client = { ca: Buffer.from(pki.ca.cert), cert: Buffer.from(pki.client.cert), key: Buffer.from(pki.client.key) };
    const ok = await call(backend.port, client);
    assert.equal(ok.ok, true, JSON.stringify(ok));
    const noAlpn = await call((plainTls.address() as AddressInfo).port, { ca: Buffer.from(pki.ca.cert) });
    assert.deepEqual({ ok: noAlpn.ok, code: !noAlpn.ok && noAlpn.code }, { ok: false, code: Code.UNAVAILABLE });
    assert.match(!noAlpn.ok ? noAlpn.message : "", /did not select HTTP\/2 over TLS \(ALPN h2/);
    const untrusted = await call(backend.port, { ...client, ca: Buffer.from(foreign.ca.cert) });
    assert.match(!untrusted.ok ? untrusted.message : "", /unavailable: .*(certificate|signature)/i);
    const misnamed = await call(backend.port, { ...client, serverName: "orders.example" });
    assert.match(!misnamed.ok ? misnamed.message : "", /orders\.example/);
  });

  it("the config is checked at load: a missing file, half a pair, a key for another certificate, an unknown field", () => {
    const doc = (tls: unknown) => ({ services: [{ name: "s", grpc: { host: "h", port: 1, tls } }] });
    assert.throws(() => validateServicesConfig(doc({ ca: `${pki.dir}/nope.pem` })), /service "s"\.grpc\.tls\.ca: ".*nope\.pem" cannot be read: ENOENT/);
    assert.throws(() => validateServicesConfig(doc({ cert: pki.files.clientCert })), /service "s"\.grpc\.tls: cert and key go together/);
    assert.throws(() => validateServicesConfig(doc({ cert: pki.files.clientCert, key: pki.files.serverKey })), /service "s"\.grpc\.tls\.key: .* is not a usable private key/);
    assert.throws(() => validateServicesConfig(doc({ insecure: true })), /service "s"\.grpc\.tls: unknown field "insecure"/);
    assert.throws(() => validateServicesConfig(doc(true)), /service "s"\.grpc\.tls: must be an object/);
    const ok = validateServicesConfig(doc({}));
    assert.deepEqual(ok.all[0]!.grpc!.tls, {});
  });
});
