/**
 * The console's API view in headless Chromium over a real gateway and the annotated library backend: sign in, the
 * operations of /v1/openapi.json grouped by service with the proto comments as summaries, an operation's parameters,
 * body skeleton and responses, and its try-it form. The request the form sends is read off the wire with puppeteer's
 * request interception (method, URL, key header, body) and then continues to the gateway, whose reply (status and the
 * backend's answer) the page shows.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import chromium from "@sparticuz/chromium";
import puppeteer, { type Browser, type HTTPRequest, type Page } from "puppeteer-core";
import { startLibraryBackend, type LibraryBackend } from "../support/backends/library-backend.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const KEY = "console-api-key";

describe("console API view in headless Chromium", () => {
  let gw: TestGateway;
  let backend: LibraryBackend;
  let browser: Browser;

  before(async () => {
    backend = await startLibraryBackend();
    gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "library", grpc: { host: "127.0.0.1", port: backend.port } }] });
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true });
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    backend?.close();
  });

  const text = (page: Page, selector: string): Promise<string> => page.$eval(selector, (el) => (el as any).innerText as string);
  const waitText = async (page: Page, selector: string, re: RegExp, timeout = 8000): Promise<string> => {
    try {
      await page.waitForFunction((s: string, src: string, flags: string) => new RegExp(src, flags).test(((globalThis as any).document.querySelector(s) as any)?.innerText ?? ""), { timeout }, selector, re.source, re.flags);
    } catch (e) {
      const got = await text(page, selector).catch(() => "(no such element)");
      throw new Error(`${selector} never matched ${re}: ${got.slice(0, 500)}`, { cause: e });
    }
    return text(page, selector);
  };

  it("lists the library's operations with their summaries, shows GetBook and sends its try-it request with the key", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(`uncaught: ${(e as Error).message}`));
    page.on("console", (m) => {
      // The browser reports a non-2xx reply of the try-it call itself; that is the reply the page shows, not an error.
      if (m.type() === "error" && !/status of (404|501)/.test(m.text())) errors.push(m.text());
    });
    const sent: Array<{ method: string; url: string; key: string | undefined; body: string | undefined }> = [];
    await page.setRequestInterception(true);
    page.on("request", (r: HTTPRequest) => {
      const url = new URL(r.url());
      if (url.pathname.startsWith("/v1/shelves/")) sent.push({ method: r.method(), url: url.pathname + url.search, key: r.headers()["x-api-key"], body: r.postData() });
      void r.continue();
    });
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(`${gw.http}/console`);
    await page.waitForSelector("input[name=secret]");
    await page.type("input[name=secret]", KEY);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#nav a[data-page=api]");
    await page.click("#nav a[data-page=api]");

    // Grouped by service (tag), each operation with method, path and the summary from the proto comment.
    await page.waitForSelector("button[data-operation=Library_GetBook]");
    const groups = await page.$$eval(".tag h3", (hs) => hs.map((x) => (x as any).innerText as string));
    assert.deepEqual(groups, ["library.v1.Messaging", "library.v1.Library"]);
    assert.match(await text(page, "button[data-operation=Library_GetBook]"), /GET\s+\/v1\/shelves\/\{shelf\}\/books\/\{book\}\s+Gets one book\./);
    assert.match(await text(page, "button[data-operation=Library_ListBooks]"), /Lists the books of a shelf\./);
    // PURGE is refused by the gateway (uWS cannot receive it), so the document and the page leave it out.
    assert.equal(await page.$("button[data-operation=Library_PurgeShelf]"), null);

    await page.click("button[data-operation=Library_GetBook]");
    await page.waitForSelector("form.try input[name='path:shelf']");
    const detail = await text(page, ".detail");
    assert.match(detail, /Gets one book\./);
    assert.match(detail, /shelf \*\s+path\s+string/);
    assert.match(detail, /200 library\.v1\.Book/);
    assert.match(detail, /default An error/);
    // Sending with a path parameter missing says so and sends nothing.
    await page.click("form.try button[type=submit]");
    assert.match(await waitText(page, "form.try .status", /required/), /path parameter shelf is required/);
    assert.equal(sent.length, 0);
    await page.type("form.try input[name='path:shelf']", "fiction");
    await page.type("form.try input[name='path:book']", "dune 1");
    assert.match(await text(page, "pre.cmd"), /curl -sS -i -X GET '.*\/v1\/shelves\/fiction\/books\/dune%201' \\\n {2}-H "x-api-key: \$GATEWAY_API_KEY"$/);
    assert.doesNotMatch(await text(page, ".detail"), new RegExp(KEY), "the key is never printed");
    await page.click("form.try button[type=submit]");
    // The gateway's reply is shown with its status, headers and body: the backend has no such book.
    await waitText(page, "form.try .status", /^HTTP 404 /);
    assert.match(await text(page, "pre.reply.headers"), /content-type: application\/json/);
    assert.deepEqual(JSON.parse(await text(page, "pre.reply:not(.headers)")), { code: 5, message: "book shelves/fiction/books/dune 1 not found", details: [] });
    assert.deepEqual(sent, [{ method: "GET", url: "/v1/shelves/fiction/books/dune%201", key: KEY, body: undefined }]);

    // A POST with a body field: the body is prefilled from the Book schema and sent as JSON; a query parameter too.
    await page.click("button[data-operation=Library_CreateBook]");
    await page.waitForSelector("form.try textarea[name=body]");
    const skeleton = JSON.parse(await page.$eval("form.try textarea[name=body]", (t) => (t as any).value as string));
    assert.deepEqual(skeleton, { name: "", title: "", author: "", genre: "GENRE_UNSPECIFIED", tags: [], published: "1970-01-01T00:00:00Z", pages: 0, archived: false });
    await page.type("form.try input[name='path:shelf']", "fiction");
    await page.$eval("form.try details", (d) => ((d as any).open = true));
    await page.type("form.try input[name='query:requestId']", "r1");
    await page.$eval("form.try textarea[name=body]", (t) => ((t as any).value = '{"title": "Dune"}'));
    await page.click("form.try button[type=submit]");
    await waitText(page, "form.try .status", /^HTTP 200 /);
    const created = JSON.parse(await text(page, "pre.reply:not(.headers)")) as Record<string, unknown>;
    assert.equal(created["name"], "shelves/fiction/books/r1");
    assert.equal(created["title"], "Dune");
    assert.deepEqual(sent[1], { method: "POST", url: "/v1/shelves/fiction/books?requestId=r1", key: KEY, body: '{"title": "Dune"}' });

    assert.deepEqual(errors, []);
    await page.close();
  });
});
