import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import https from "node:https";
import type { AddressInfo } from "node:net";
import chromium from "@sparticuz/chromium";
import puppeteer, { type Browser } from "puppeteer-core";
import { makeTestPki, spkiHash, type TestPki } from "../support/certs.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const KEY = "browser-tls-key";

describe("the HTTP port over TLS in a real browser (headless Chromium)", () => {
  let pki: TestPki;
  let foreign: TestPki;
  let gw: TestGateway;
  let browser: Browser;
  let other: https.Server;

  before(async () => {
    pki = makeTestPki();
    foreign = makeTestPki();
    gw = await startTestGateway({ apiKeys: [KEY], tlsCert: pki.files.serverCert, tlsKey: pki.files.serverKey });
    // Another HTTPS server, with a certificate the browser has no pin for.
    other = https.createServer({ cert: foreign.server.cert, key: foreign.server.key }, (_req, res) => res.end("other"));
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", () => r()));
    // The test CA is not in Chromium's trust store; pinning the server certificate's public key is the honest
    // equivalent: Chromium still checks the chain it is given against that key (no --ignore-certificate-errors).
    const args = [...chromium.args.filter((a) => a !== "--disable-web-security"), `--ignore-certificate-errors-spki-list=${spkiHash(pki.server.cert)}`];
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args, headless: true });
  });
  after(async () => {
    await browser?.close();
    other?.close();
    await gw?.close();
  });

  it("loads /health and the console over https, and a fetch from the page works", async () => {
    const page = await browser.newPage();
    try {
      const base = `https://127.0.0.1:${gw.gateway.httpPort}`;
      const health = await page.goto(`${base}/health`, { timeout: 15_000 });
      assert.equal(health?.status(), 200);
      assert.match(await page.evaluate(() => (globalThis as any).document.body.innerText as string), /"status":"Healthy"/);
      assert.equal(await page.evaluate(() => (globalThis as any).location.protocol as string), "https:");
      const console = await page.goto(`${base}/console/`, { timeout: 15_000 });
      assert.equal(console?.status(), 200);
      assert.match(await page.content(), /<html/i);
      const listed = await page.evaluate(async (key: string) => {
        const r = await fetch("/v1/config/list-services", { headers: { "x-api-key": key } });
        return { status: r.status, body: await r.json() };
      }, KEY);
      assert.deepEqual(listed, { status: 200, body: { services: [] } });
    } finally {
      await page.close();
    }
  });

  it("a certificate whose key is not pinned (and not trusted) is refused", async () => {
    const page = await browser.newPage();
    try {
      await assert.rejects(page.goto(`https://127.0.0.1:${(other.address() as AddressInfo).port}/`, { timeout: 15_000 }), /ERR_CERT/);
    } finally {
      await page.close();
    }
  });
});
