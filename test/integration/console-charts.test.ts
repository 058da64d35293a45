import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import chromium from "@sparticuz/chromium";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const KEY = "charts-key";
const INVOKES = 12;
const PUBLISHES = 6;
/** The Health page's scrape period, ms. */
const SCRAPE_MS = 2000;

describe("console Health page: live charts of the last five minutes in headless Chromium", () => {
  let gw: TestGateway;
  let backend: OrderBackend;
  let browser: Browser;

  before(async () => {
    backend = await startOrderBackend();
    gw = await startTestGateway({ apiKeys: [KEY], services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port } }] });
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true });
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    backend?.close();
  });

  /** The latest value a chart's legend shows for `series` (NaN when none yet). */
  const latest = (page: Page, series: string): Promise<number> =>
    page.$eval(`.chart li[data-series=${series}]`, (li) => {
      const v = (li as any).dataset.latest as string;
      return v === "" ? Number.NaN : Number(v);
    });
  const waitLatest = async (page: Page, series: string, ok: (v: number) => boolean, what: string, timeout = 15_000): Promise<number> => {
    const until = Date.now() + timeout;
    for (;;) {
      const v = await latest(page, series).catch(() => Number.NaN);
      if (ok(v)) return v;
      if (Date.now() > until) throw new Error(`${what}: the ${series} chart's latest value stayed ${v}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  /** The cells a chart's data table shows for `series`, newest first (opens the table). */
  const tableTexts = async (page: Page, chart: string, series: string): Promise<string[]> => {
    await page.$eval(`.chart[data-chart=${chart}] details`, (d) => ((d as any).open = true));
    await page.waitForSelector(`.chart[data-chart=${chart}] details table`);
    return page.$$eval(`.chart[data-chart=${chart}] td[data-series=${series}]`, (tds) => tds.map((td) => (td as any).innerText as string));
  };
  /** The rates a chart's table shows (intervals with a rate: "—" before the second scrape is left out). */
  const tableValues = async (page: Page, chart: string, series: string): Promise<number[]> =>
    (await tableTexts(page, chart, series)).filter((t) => t !== "—").map(Number);

  /** Make the page hidden or shown as a background tab would be (document.hidden and a visibilitychange event). */
  const setHidden = (page: Page, hidden: boolean): Promise<unknown> =>
    // A string, so the test's compiler adds nothing to what runs in the page.
    page.evaluate(`Object.defineProperty(document, "hidden", { configurable: true, get: () => ${hidden} }); document.dispatchEvent(new Event("visibilitychange"));`);

  it("after publishes and invokes, each chart has points, plausible values, a described image and a table", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push((e as Error).message));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(`${gw.http}/console`);
    await page.waitForSelector("input[name=secret]");
    await page.type("input[name=secret]", KEY);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#nav a[data-page=health]", { visible: true });
    await page.click("#nav a[data-page=health]");
    await page.waitForSelector(".chart[data-chart=invokes] svg[role=img]");
    // Rates exist from the second scrape on: wait for a zero rate before the traffic.
    await waitLatest(page, "invokes", (v) => v === 0, "an idle rate before traffic");

    // One SSE subscriber, so each publish is delivered once.
    const sub = new AbortController();
    const sse = await fetch(`${gw.http}/v1/pubsub/events?topic=charts.t`, { headers: { "x-api-key": KEY }, signal: sub.signal });
    assert.equal(sse.status, 200);
    try {
      for (let i = 0; i < INVOKES; i++) {
        const r = await fetch(`${gw.http}/v1/gateway/invoke`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ service: "orders", method: "GetOrder", requestData: { orderId: `c${i}` } }) });
        assert.equal(((await r.json()) as { success: boolean }).success, true);
      }
      for (let i = 0; i < PUBLISHES; i++) {
        const r = await fetch(`${gw.http}/v1/pubsub/charts.t`, { method: "POST", headers: { "x-api-key": KEY, "content-type": "application/cloudevents+json" },
          body: JSON.stringify({ specversion: "1.0", id: `e${i}`, source: "urn:test:charts", type: "test.event", data: { i } }),
        });
        assert.equal(r.status, 200, await r.text());
      }
      await waitLatest(page, "sse", (v) => v === 1, "the SSE subscriber");
      // The traffic is over once a later interval shows no invocations and no deliveries again.
      await waitLatest(page, "invokes", (v) => v > 0, "a non-zero invoke rate");
      await waitLatest(page, "invokes", (v) => v === 0, "the invoke rate falling back to zero");
      await waitLatest(page, "deliveries", (v) => v === 0, "the delivery rate falling back to zero");

      for (const [chart, series, count] of [["invokes", "invokes", INVOKES], ["publishes", "publishes", PUBLISHES], ["deliveries", "deliveries", PUBLISHES]] as const) {
        const lines = await page.$$eval(`.chart[data-chart=${chart}] polyline[data-series=${series}]`, (ps) => ps.map((p) => (p as any).getAttribute("points").split(" ").length as number));
        assert.ok(lines.length >= 1 && Math.max(...lines) >= 3, `${chart}: a line of at least three points (${lines.join(", ")})`);
        const values = await tableValues(page, chart, series);
        const peak = Math.max(...values);
        assert.ok(peak > 0, `${chart}: a non-zero rate (${values.join(", ")})`);
        assert.ok(peak <= count, `${chart}: at most all ${count} in one second (peak ${peak}/s)`);
        // Each rate covers about one scrape period: added up they account for the traffic (loosely: periods vary).
        const total = values.reduce((a, b) => a + b, 0) * (SCRAPE_MS / 1000);
        assert.ok(total > count * 0.4 && total < count * 1.8, `${chart}: the rates add up to about ${count} (got ${total.toFixed(1)})`);
      }
      // Percentiles only for intervals with calls, each a latency in milliseconds (or a few seconds on a slow machine).
      for (const q of ["p50", "p99"]) {
        const shown = (await tableTexts(page, "latency", q)).filter((t) => t !== "—");
        assert.ok(shown.length >= 1, `a ${q} for the intervals with calls`);
        assert.ok(shown.every((t) => /^\d+(\.\d+)? ms$/.test(t) || (/^\d+\.\d+ s$/.test(t) && Number.parseFloat(t) < 10)), `${q}: ${shown.join(", ")}`);
      }
      assert.ok((await page.$$(".chart[data-chart=latency] polyline, .chart[data-chart=latency] circle")).length >= 1, "the latency chart draws its points");

      // Accessible: each chart is an image labelled by its title and a description naming the latest values.
      const described = await page.$$eval(".chart svg[role=img]", (svgs) =>
        svgs.map((s) => (s as any).getAttribute("aria-labelledby").split(" ").map((id: string) => (globalThis as any).document.getElementById(id)?.textContent ?? "").join(" | ")),
      );
      assert.equal(described.length, 5);
      assert.ok(described.some((d) => /^Subscribers by transport \| Last 5 minutes, .*SSE 1/.test(d)), described.join("\n"));
      assert.ok(described.every((d) => /Latest: /.test(d)), described.join("\n"));
      const shots = await mkdtemp(join(tmpdir(), "console-charts-"));
      await page.screenshot({ path: join(shots, "health-charts-1280.png"), fullPage: true });
      await page.setViewport({ width: 390, height: 844 });
      await page.screenshot({ path: join(shots, "health-charts-390.png"), fullPage: true });
      const over = await page.evaluate(`document.documentElement.scrollWidth - document.documentElement.clientWidth`);
      assert.ok(Number(over) <= 1, `the page is ${String(over)}px wider than a 390px phone screen`);
      await page.setViewport({ width: 1280, height: 900 });
      process.stderr.write(`console chart screenshots: ${shots}\n`);
    } finally {
      sub.abort();
    }

    // Hidden: no scrape at all until the page is shown again.
    const scrapes: string[] = [];
    page.on("request", (r) => r.url().endsWith("/metrics") && scrapes.push(r.url()));
    await setHidden(page, true);
    await new Promise((r) => setTimeout(r, SCRAPE_MS * 2));
    const hiddenScrapes = scrapes.length;
    assert.ok(hiddenScrapes <= 1, `at most the scrape in flight when hidden (${hiddenScrapes})`);
    await setHidden(page, false);
    await new Promise((r) => setTimeout(r, SCRAPE_MS + 500));
    assert.ok(scrapes.length > hiddenScrapes, "scraping resumes when shown");
    // Leaving the page stops it for good.
    await page.click("#nav a[data-page=topics]");
    await new Promise((r) => setTimeout(r, 300));
    const left = scrapes.length;
    await new Promise((r) => setTimeout(r, SCRAPE_MS * 2));
    assert.equal(scrapes.length, left, "no scrape after leaving the Health page");
    assert.deepEqual(errors, []);
    await page.close();
  });
});
