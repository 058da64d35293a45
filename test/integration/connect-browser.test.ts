/**
 * connect-es in a real browser: headless Chromium loads a page (served cross-origin by a tiny node:http server, so
 * CORS is exercised) whose script is @connectrpc/connect-web bundled with esbuild at test time, and calls the order
 * backend through the gateway with the Connect and gRPC-Web transports: unary, server streaming, and a stream the
 * page aborts (AbortController), which the backend must see cancelled.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import chromium from "@sparticuz/chromium";
import { build } from "esbuild";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { encodedFileDescriptorSet, SHOP_PROTO } from "../support/protos/descriptors.js";
import { gatewayFileDescriptors } from "../../src/shared/protos.js";

const KEY = "browser-rpc-key";
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The page's script: connect-es clients of shop.v1.OrderService built from the descriptor set the test hands it. */
const APP = `
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

let clients;
let gatewayClients;
const registryOf = (setBase64) => createFileRegistry(fromBinary(FileDescriptorSetSchema, Uint8Array.from(atob(setBase64), (c) => c.charCodeAt(0))));
window.setup = (baseUrl, key, shopSet, gatewaySet) => {
  const service = registryOf(shopSet).getService("shop.v1.OrderService");
  const gateway = registryOf(gatewaySet).getService("platform.Gateway");
  const interceptors = [(next) => (req) => { req.header.set("x-api-key", key); return next(req); }];
  const transports = {
    connect: createConnectTransport({ baseUrl, interceptors }),
    "connect-binary": createConnectTransport({ baseUrl, interceptors, useBinaryFormat: true }),
    "grpc-web": createGrpcWebTransport({ baseUrl, interceptors }),
  };
  clients = Object.fromEntries(Object.entries(transports).map(([k, t]) => [k, createClient(service, t)]));
  gatewayClients = Object.fromEntries(Object.entries(transports).map(([k, t]) => [k, createClient(gateway, t)]));
};
window.gatewayServices = async (kind) => {
  try { return { services: (await gatewayClients[kind].listServices({})).services }; } catch (e) { return failure(e); }
};
const failure = (e) => ({ error: { code: e.code, name: e.name, message: String(e.rawMessage ?? e.message) } });
window.unary = async (kind, orderId) => {
  try { return { orderId: (await clients[kind].getOrder({ orderId })).orderId }; } catch (e) { return failure(e); }
};
window.stream = async (kind, orderId) => {
  const seen = [];
  try { for await (const o of clients[kind].watchOrders({ orderId })) seen.push(o.orderId); return { seen }; } catch (e) { return { seen, ...failure(e) }; }
};
window.abortStream = async (kind, after) => {
  const ac = new AbortController();
  const seen = [];
  try {
    for await (const o of clients[kind].watchOrders({ orderId: "forever" }, { signal: ac.signal })) {
      seen.push(o.orderId);
      if (seen.length === after) ac.abort();
    }
    return { seen };
  } catch (e) { return { seen, ...failure(e) }; }
};
`;

async function bundle(): Promise<string> {
  const out = await build({ stdin: { contents: APP, resolveDir: ROOT, loader: "js" }, bundle: true, format: "iife", platform: "browser", target: "es2020", write: false, logLevel: "silent" });
  return out.outputFiles[0]!.text;
}

function servePage(script: string): Promise<{ server: Server; origin: string }> {
  const server = createHttpServer((req, res) => {
    const js = req.url === "/app.js";
    res.writeHead(200, { "content-type": js ? "text/javascript" : "text/html" });
    res.end(js ? script : `<!doctype html><meta charset="utf-8"><title>browser rpc</title><script src="/app.js"></script>`);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

describe("Connect and gRPC-Web from connect-web in headless Chromium", () => {
  let backend: OrderBackend;
  let gw: TestGateway;
  let browser: Browser;
  let site: { server: Server; origin: string };
  let stranger: { server: Server; origin: string };
  let page: Page;

  /** Hand the page the gateway's URL, the key and both descriptor sets (the shop protos, the gateway's own). */
  const setup = async (p: Page): Promise<void> => {
    const shop = Buffer.from(encodedFileDescriptorSet(SHOP_PROTO)).toString("base64");
    const own = toBinary(FileDescriptorSetSchema, create(FileDescriptorSetSchema, { file: gatewayFileDescriptors().map((f) => fromBinary(FileDescriptorProtoSchema, f)) }));
    await p.evaluate((u: string, k: string, s: string, g: string) => (globalThis as any).setup(u, k, s, g), gw.http, KEY, shop, Buffer.from(own).toString("base64"));
  };

  before(async () => {
    const script = await bundle();
    site = await servePage(script);
    stranger = await servePage(script);
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], corsOrigins: [site.origin], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    await waitFor(() => gw.logs.some((l) => l["msg"] === "backend schema loaded"), "the backend schema", 10_000);
    // @sparticuz/chromium's default args include --disable-web-security, which turns CORS and Origin off: drop it.
    const args = chromium.args.filter((a) => a !== "--disable-web-security");
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args, headless: true });
    page = await browser.newPage();
    await page.goto(site.origin + "/");
    await setup(page);
  });
  after(async () => {
    await browser?.close();
    site?.server.close();
    stranger?.server.close();
    await gw?.close();
    backend?.close();
  });

  for (const kind of ["connect", "connect-binary", "grpc-web"]) {
    it(`${kind}: unary and server streaming through the gateway, backend errors with their code`, async () => {
      assert.deepEqual(await page.evaluate((k: string) => (globalThis as any).unary(k, "b-1"), kind), { orderId: "b-1" });
      assert.deepEqual(await page.evaluate((k: string) => (globalThis as any).stream(k, "plain"), kind), { seen: ["w1", "w2", "w3"] });
      const failed = await page.evaluate((k: string) => (globalThis as any).unary(k, "fail:NOT_FOUND:no such order"), kind);
      assert.equal(failed.error.code, 5, JSON.stringify(failed));
      assert.equal(failed.error.message, "no such order");
    });

    it(`${kind}: the gateway's own services answer too (platform.Gateway/ListServices)`, async () => {
      assert.deepEqual(await page.evaluate((k: string) => (globalThis as any).gatewayServices(k), kind), { services: ["orders"] });
    });

    it(`${kind}: the page aborts a stream and the backend sees the cancel`, async () => {
      const was = backend.cancelled.filter((c) => c === "forever").length;
      const r = await page.evaluate((k: string) => (globalThis as any).abortStream(k, 3), kind);
      assert.deepEqual(r.seen, ["f1", "f2", "f3"]);
      assert.equal(r.error.code, 1, JSON.stringify(r)); // Code.Canceled
      // Chromium may keep reading an aborted HTTP/1.1 response for up to 5 s to reuse the connection
      // (HttpResponseBodyDrainer's timeout) before it closes it, which is when the gateway learns of the cancel.
      await waitFor(() => backend.cancelled.filter((c) => c === "forever").length > was, "the backend to see the cancel", 15_000);
    });
  }

  it("a page of an origin --cors-origin does not allow cannot call", async () => {
    const other = await browser.newPage();
    try {
      await other.goto(stranger.origin + "/");
      await setup(other);
      const before = backend.received.length;
      const r = await other.evaluate(() => (globalThis as any).unary("connect", "x"));
      assert.ok(r.error, JSON.stringify(r));
      assert.equal(backend.received.length, before);
    } finally {
      await other.close();
    }
  });
});
