/**
 * The REST Origin and Host rules in a real browser (headless Chromium), against a gateway with no API key: a page of
 * another local port cannot write state with a `no-cors` fetch or a text/plain form post (simple requests: no
 * preflight), and a DNS-rebound page (`evil.example` resolving to 127.0.0.1, its fetches same-origin) can neither
 * write nor read. Each refusal is seen arriving at the gateway (its 403 in /metrics), so the browser did send it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import chromium from "@sparticuz/chromium";
import puppeteer, { type Browser } from "puppeteer-core";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const SERVICES = [{ name: "orders", state: { storeName: "orders-store", keys: [] } }];

/** A page server on its own port: another origin than the gateway's. */
function servePage(html: string): Promise<{ server: Server; origin: string }> {
  const server = createHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(html);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

describe("REST from another site, in headless Chromium (no API key)", () => {
  let gw: TestGateway;
  let browser: Browser;
  let page: { server: Server; origin: string };

  /** The gateway's count of REST requests refused 403 (any route), from /metrics. */
  const refusals = async (): Promise<number> => {
    const text = await (await fetch(`${gw.http}/metrics`)).text();
    return text
      .split("\n")
      .filter((l) => l.startsWith("platform_http_requests_total{") && l.includes('status="403"'))
      .reduce((n, l) => n + Number(l.split(" ").pop()), 0);
  };
  const stored = async (key: string): Promise<number> => (await fetch(`${gw.http}/v1/state/orders/${key}`)).status;

  before(async () => {
    gw = await startTestGateway({ services: SERVICES });
    page = await servePage(`<!doctype html><meta charset="utf-8"><title>another site</title><p>nothing here`);
    // @sparticuz/chromium's default args include --disable-web-security, which turns CORS and Origin off: drop it.
    // evil.example resolves to 127.0.0.1 in this browser: what a rebinding DNS server answers after the page loaded.
    // Chromium's Local Network Access checks would refuse the rebound page's fetches itself (a page from a public
    // address calling loopback): turned off, so this browser stands for those without them (Firefox, Safari) and the
    // gateway's own refusal is what is tested.
    const args = [
      ...chromium.args.filter((a) => a !== "--disable-web-security").map((a) => (a.startsWith("--disable-features=") ? `${a},LocalNetworkAccessChecks` : a)),
      "--host-resolver-rules=MAP evil.example 127.0.0.1",
    ];
    if (!args.some((a) => a.startsWith("--disable-features="))) args.push("--disable-features=LocalNetworkAccessChecks");
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args, headless: true });
  });
  after(async () => {
    await browser?.close();
    page?.server.close();
    await gw?.close();
  });

  it("a page of another local port: the no-cors fetch and the text/plain form post change nothing", async () => {
    const tab = await browser.newPage();
    await tab.goto(page.origin + "/");
    const before = await refusals();
    const target = `${gw.http}/v1/state/save-state`;
    const outcome = await tab.evaluate(async (url: string) => {
      try {
        const r = await fetch(url, { method: "POST", mode: "no-cors", body: JSON.stringify({ service: "orders", key: "k-fetch", value: "x" }) });
        return r.type;
      } catch (e) {
        return `threw ${String(e)}`;
      }
    }, target);
    assert.equal(outcome, "opaque", "the browser sent it (an opaque answer)");
    // The classic CSRF form: enctype text/plain posts `name=value`, here a JSON object.
    await Promise.all([
      tab.waitForNavigation({ timeout: 8000 }),
      tab.evaluate((url: string) => {
        const document = (globalThis as any).document;
        const f = document.createElement("form");
        f.method = "POST";
        f.action = url;
        f.enctype = "text/plain";
        const i = document.createElement("input");
        i.name = '{"service":"orders","key":"k-form","value":"x","pad":"';
        i.value = '"}';
        f.append(i);
        document.body.append(f);
        f.submit();
      }, target),
    ]);
    assert.match(await tab.evaluate(() => (globalThis as any).document.body.innerText as string), /origin http:\/\/127\.0\.0\.1:\d+ is not allowed/);
    assert.equal(await refusals(), before + 2, "both requests reached the gateway and were refused");
    assert.equal(await stored("k-fetch"), 404, "state unchanged");
    assert.equal(await stored("k-form"), 404, "state unchanged");
    await tab.close();
  });

  it("a DNS-rebound page (evil.example -> 127.0.0.1, same-origin fetches) can neither write nor read", async () => {
    const seeded = await fetch(`${gw.http}/v1/state/save-state`, { method: "POST", body: JSON.stringify({ service: "orders", key: "k-secret", value: "s" }) });
    assert.equal(seeded.status, 200);
    const tab = await browser.newPage();
    const origin = `http://evil.example:${gw.gateway.httpPort}`;
    // The attacker's page, as its server sent it before the name was rebound: served here, not by the gateway.
    await tab.setRequestInterception(true);
    tab.on("request", (r) => {
      if (r.isNavigationRequest() && r.url() === `${origin}/`) void r.respond({ status: 200, contentType: "text/html", body: "<!doctype html><title>rebound</title>" });
      else void r.continue();
    });
    await tab.goto(`${origin}/`);
    const before = await refusals();
    const seen = await tab.evaluate(async () => {
      const out: Record<string, number | string> = {};
      try {
        out["write"] = (await fetch("/v1/state/save-state", { method: "POST", body: JSON.stringify({ service: "orders", key: "k-rebound", value: "x" }) })).status;
        out["read"] = (await fetch("/v1/state/orders/k-secret")).status;
      } catch (e) {
        out["error"] = String(e);
      }
      return out;
    });
    assert.deepEqual(seen, { write: 403, read: 403 }, "same-origin for the browser, refused by the gateway (the page may read its statuses)");
    assert.equal(await refusals(), before + 2);
    assert.equal(await stored("k-rebound"), 404, "state unchanged");
    await tab.close();
  });
});
