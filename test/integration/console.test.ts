import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import chromium from "@sparticuz/chromium";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, waitFor, type TestGateway } from "../support/gateway.js";
import { startTcpProxy } from "../support/tcp-proxy.js";

const KEY = "console-key";
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };

describe("web console at /console in headless Chromium", () => {
  let gw: TestGateway;
  let backend: OrderBackend;
  let browser: Browser;
  let shots: string;
  /** Console errors and uncaught page errors, per page, with the page's URL. */
  const problems = new Map<Page, string[]>();

  const newPage = async (): Promise<Page> => {
    const page = await browser.newPage();
    const list: string[] = [];
    problems.set(page, list);
    page.on("console", (m) => {
      if (m.type() === "error") list.push(`console.error: ${m.text()} (${m.location().url ?? ""})`);
    });
    page.on("pageerror", (e) => list.push(`uncaught: ${(e as Error).message}`));
    page.on("requestfailed", (r) => {
      // A stream the page closed itself (leaving a page) is not a failure the user sees.
      if (r.failure()?.errorText !== "net::ERR_ABORTED") list.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
    });
    await page.setViewport(DESKTOP);
    return page;
  };
  const signIn = async (page: Page, key = KEY, origin = gw.http): Promise<void> => {
    await page.goto(`${origin}/console`);
    await page.waitForSelector("input[name=secret]");
    await page.type("input[name=secret]", key);
    await page.keyboard.press("Enter");
  };
  const text = (page: Page, selector: string): Promise<string> => page.$eval(selector, (el) => (el as any).innerText);
  /** Wait until the element's text matches; fails with the text it last had. */
  const waitText = async (page: Page, selector: string, re: RegExp, timeout = 8000): Promise<string> => {
    try {
      await page.waitForFunction((s: string, src: string, flags: string) => new RegExp(src, flags).test(((globalThis as any).document.querySelector(s) as any)?.innerText ?? ""), { timeout }, selector, re.source, re.flags);
    } catch (e) {
      const got = await page.$eval(selector, (el) => (el as any).innerText).catch(() => "(no such element)");
      throw new Error(`${selector} never matched ${re}: ${got.slice(0, 500)}`, { cause: e });
    }
    return text(page, selector);
  };
  /** Screenshots at desktop and phone width, full page, under the test's temporary folder. */
  const screenshot = async (page: Page, name: string): Promise<void> => {
    await page.screenshot({ path: join(shots, `${name}-1280.png`), fullPage: true });
    await page.setViewport(PHONE);
    await page.screenshot({ path: join(shots, `${name}-390.png`), fullPage: true });
    await page.setViewport(DESKTOP);
  };
  /** No console error, uncaught exception or failed request on this page; then close it. */
  const done = async (page: Page, expected: RegExp[] = []): Promise<void> => {
    const left = problems.get(page)!.filter((p) => !expected.some((re) => re.test(p)));
    await page.close();
    assert.deepEqual(left, [], "the page logged errors");
  };
  /** Publish one JSON CloudEvent through the REST API, as another client would. */
  const publish = async (topic: string, id: string, data: unknown): Promise<void> => {
    const r = await fetch(`${gw.http}/v1/pubsub/${topic}`, {
      method: "POST",
      headers: { "x-api-key": KEY, "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", id, source: "urn:test:other-client", type: "test.event", data }),
    });
    assert.equal(r.status, 200, await r.text());
  };
  /** The ids of the events a feed shows, oldest first. */
  const feedIds = (page: Page): Promise<string[]> =>
    page.$$eval(".feed li.event pre", (pres) => pres.map((p) => JSON.parse((p as any).innerText).id as string).reverse());
  /** Horizontal overflow at phone width: the page must not scroll sideways. */
  const fitsPhone = async (page: Page): Promise<void> => {
    await page.setViewport(PHONE);
    const over = await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).document.documentElement.clientWidth);
    await page.setViewport(DESKTOP);
    assert.ok(over <= 1, `the page is ${over}px wider than a 390px phone screen`);
  };

  before(async () => {
    shots = await mkdtemp(join(tmpdir(), "console-shots-"));
    backend = await startOrderBackend();
    gw = await startTestGateway({
      apiKeys: [KEY],
      tokenSecret: "console-test-secret-0123456789",
      services: [
        { name: "orders", grpc: { host: "127.0.0.1", port: backend.port } },
        { name: "carts", state: { storeName: "carts-store", keys: [] } },
      ],
    });
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true });
    process.stderr.write(`console screenshots: ${shots}\n`);
  });
  after(async () => {
    await browser?.close();
    await gw?.close();
    backend?.close();
  });

  it("serves the console files without a key, while every data route still needs one", async () => {
    const redirect = await fetch(`${gw.http}/console`, { redirect: "manual" });
    assert.equal(redirect.status, 308);
    assert.equal(redirect.headers.get("location"), "/console/");
    const index = await fetch(`${gw.http}/console/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get("content-type")!, /^text\/html/);
    assert.match(index.headers.get("content-security-policy")!, /default-src 'self'/);
    assert.match(await index.text(), /<script type="module" src="app.js">/);
    const js = await fetch(`${gw.http}/console/app.js`);
    assert.match(js.headers.get("content-type")!, /^text\/javascript/);
    assert.equal((await fetch(`${gw.http}/console/..%2Fpackage.json`)).status, 404);
    assert.equal((await fetch(`${gw.http}/console/nope.js`)).status, 404);
    assert.equal((await fetch(`${gw.http}/v1/gateway/list-services`)).status, 401);
  });

  it("refuses sign-in with a wrong key and stays on the sign-in form", async () => {
    const page = await newPage();
    await signIn(page, "wrong-key");
    const msg = await waitText(page, ".signin .status", /refused this key/);
    assert.match(msg, /UNAUTHENTICATED/);
    assert.equal(await page.$("#nav:not([hidden])"), null, "no page navigation without a key");
    assert.equal(await page.evaluate(() => (globalThis as any).sessionStorage.length), 0, "the refused key is not kept");
    await screenshot(page, "signin-refused");
    // The browser itself reports the 401 response of the check; that is the refusal, not a page error.
    await done(page, [/status of 401/]);
  });

  it("signs in, browses a backend's methods and calls one: the reply, the schema skeleton and the curl command show", async () => {
    const page = await newPage();
    await signIn(page);
    await page.waitForSelector("button[data-service=orders]");
    assert.equal(await page.evaluate(() => (globalThis as any).sessionStorage.getItem("platform-gateway.console.key")), KEY);
    // Keyboard: the skip link comes before the header; Enter on it moves focus to the page title and stays on the page.
    await page.focus(".top h1 a");
    await page.keyboard.down("Shift");
    await page.keyboard.press("Tab");
    await page.keyboard.up("Shift");
    assert.equal(await page.evaluate(() => (globalThis as any).document.activeElement.className), "skip");
    await page.keyboard.press("Enter");
    assert.equal(await page.evaluate(() => (globalThis as any).document.activeElement.id), "title-services");
    assert.equal(await page.evaluate(() => (globalThis as any).location.hash), "#services");
    await page.click("button[data-service=orders]");
    await page.waitForSelector("button[data-method='ops.v1.Admin/Ping']");
    // The method list shows kinds (WatchOrders streams).
    assert.match(await text(page, ".methods"), /WatchOrders\s*server streaming/);
    // Keyboard: focus the method button and press Enter.
    await page.focus("button[data-method='ops.v1.Admin/Ping']");
    await page.keyboard.press("Enter");
    await page.waitForSelector("textarea[name=request]");
    assert.deepEqual(JSON.parse(await page.$eval("textarea[name=request]", (t) => (t as any).value)), { text: "" }, "skeleton from the input schema");
    assert.match(await text(page, ".schemas"), /count\s+int64/);
    await page.$eval("textarea[name=request]", (t) => ((t as any).value = ""));
    await page.type("textarea[name=request]", '{"text": "hello from the console"}');
    assert.match(await text(page, "pre.cmd"), /curl -sS -X POST '.*\/v1\/gateway\/invoke'.*"requestData":\{"text":"hello from the console"\}/s);
    assert.doesNotMatch(await text(page, ".detail"), new RegExp(KEY), "the key is never printed in the commands");
    // Ctrl+Enter calls.
    await page.focus("textarea[name=request]");
    await page.keyboard.down("Control");
    await page.keyboard.press("Enter");
    await page.keyboard.up("Control");
    const reply = await waitText(page, "pre.reply", /hello from the console/);
    assert.deepEqual(JSON.parse(reply), { text: "hello from the console", count: "1" });
    assert.match(await text(page, ".call .status"), /^OK in \d+ ms/);
    // An in-band error is shown as such.
    await page.$eval("textarea[name=request]", (t) => ((t as any).value = '{"nope": 1}'));
    await page.click(".call button[type=submit]");
    assert.match(await waitText(page, ".call .status", /INVALID_ARGUMENT/), /nope/);
    const grpcurl = await page.$$eval("pre.cmd", (p) => (p[1] as any).innerText as string);
    assert.match(grpcurl, /grpcurl -plaintext .*-d '\{"nope":1\}'.* ops\.v1\.Admin\/Ping$/s);

    // A server-streaming method: messages show as they arrive, and Stop cancels the backend call.
    await page.click("button[data-method='shop.v1.OrderService/WatchOrders']");
    await page.waitForSelector(".call button[type=submit]:not([disabled])");
    assert.match(await text(page, ".call button[type=submit]"), /Call and stream/);
    await page.$eval("textarea[name=request]", (t) => ((t as any).value = '{"orderId": "forever"}'));
    await page.click(".call button[type=submit]");
    await waitText(page, "pre.reply", /"orderId": "f3"/);
    assert.match(await text(page, ".call .status"), /^Streaming… \d+ messages/);
    await page.click(".call button.secondary");
    await waitText(page, ".call .status", /^Stopped\.$/);
    await waitFor(() => backend.cancelled.includes("forever"), "the backend stream cancelled", 15_000);
    await page.$eval("textarea[name=request]", (t) => ((t as any).value = "{}"));
    await page.click(".call button[type=submit]");
    await waitText(page, ".call .status", /^OK: 3 messages$/);
    assert.deepEqual((await text(page, "pre.reply")).match(/"orderId": "w\d"/g), ['"orderId": "w1"', '"orderId": "w2"', '"orderId": "w3"']);
    assert.match(await text(page, "pre.cmd"), /\/v1\/gateway\/invoke-stream/);
    await screenshot(page, "services");
    await fitsPhone(page);
    await done(page);
  });

  it("tails a topic and shows an event another client publishes, then publishes from the form (source checked like the gateway)", async () => {
    const page = await newPage();
    await signIn(page);
    await page.waitForSelector("#nav a[data-page=topics]", { visible: true });
    await page.click("#nav a[data-page=topics]");
    await page.waitForSelector("input[name=tail-topics]");
    await page.type("input[name=tail-topics]", "console.orders");
    await page.keyboard.press("Enter");
    await waitText(page, ".feed .conn", /^live$/);
    const r = await fetch(`${gw.http}/v1/pubsub/console.orders`, {
      method: "POST",
      headers: { "x-api-key": KEY, "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", id: "from-node-1", source: "urn:test:other-client", type: "order.created", data: { orderId: 42 } }),
    });
    assert.equal(r.status, 200);
    const feed = await waitText(page, ".feed .events", /from-node-1/);
    assert.match(feed, /"orderId": 42/, "the CloudEvent is pretty-printed");
    assert.match(feed, /order\.created/);

    // Publish form: a relative source is refused before anything is sent, with the gateway's message.
    await page.type("input[name=topic]", "console.orders");
    await page.$eval("input[name=source]", (i) => ((i as any).value = ""));
    await page.type("input[name=source]", "a/b");
    await page.click("form[aria-labelledby=pub-title] button[type=submit]");
    assert.match(await waitText(page, "form[aria-labelledby=pub-title] .status", /absolute URI/), /cloudevent\.source 'a\/b' is not an absolute URI/);
    await page.$eval("input[name=source]", (i) => ((i as any).value = "urn:console:test"));
    await page.$eval("input[name=id]", (i) => ((i as any).value = "from-console-1"));
    await page.click("form[aria-labelledby=pub-title] button[type=submit]");
    await waitText(page, "form[aria-labelledby=pub-title] .status", /Published to console\.orders/);
    await waitText(page, ".feed .events", /from-console-1/);
    assert.match(await text(page, ".feed .count"), /2 events/);
    await screenshot(page, "topics");
    await fitsPhone(page);
    await done(page);
  });

  it("saves and reads a state key with its etag, and the change notification arrives", async () => {
    const page = await newPage();
    await signIn(page);
    await page.waitForSelector("#nav a[data-page=state]", { visible: true });
    await page.click("#nav a[data-page=state]");
    await page.waitForSelector("input[name=service]");
    await page.type("input[name=service]", "carts");
    await page.type("input[name=key]", "cart/7");
    await page.click("button[name=watch]");
    await waitText(page, ".feed .conn", /^live$/);
    await page.type("textarea[name=value]", '{"items": 3}');
    await page.click("input[name=publish_change]");
    await page.click("button[name=save]");
    await waitText(page, "form[aria-labelledby=kv-title] .status", /Saved cart\/7/);
    const etag = await page.$eval("input[name=etag]", (i) => (i as any).value);
    assert.notEqual(etag, "");
    await waitText(page, ".feed .events", /state-saved[\s\S]*"key": "cart\/7"/);
    // The REST API sees what the console saved.
    const stored = (await (await fetch(`${gw.http}/v1/state/carts/cart/7`, { headers: { "x-api-key": KEY } })).json()) as { value: unknown; etag: string };
    assert.equal(stored.value, '{"items": 3}');
    assert.equal(stored.etag, etag);
    // Read it back in a clean form.
    await page.$eval("textarea[name=value]", (t) => ((t as any).value = ""));
    await page.$eval("input[name=etag]", (i) => ((i as any).value = ""));
    await page.click("button[name=get]");
    await waitText(page, "form[aria-labelledby=kv-title] .status", /Read cart\/7/);
    assert.equal(await page.$eval("textarea[name=value]", (t) => (t as any).value), '{"items": 3}');
    assert.equal(await page.$eval("input[name=etag]", (i) => (i as any).value), etag);
    // A query lists it.
    await page.click("form[aria-labelledby=query-title] button[type=submit]");
    assert.match(await waitText(page, ".results", /cart\/7/), /"items": 3/);
    await screenshot(page, "state");
    await fitsPhone(page);
    await done(page);
  });

  it("schedules a trigger, lists it with its next fire time, and deletes it", async () => {
    const page = await newPage();
    await signIn(page);
    await page.waitForSelector("#nav a[data-page=triggers]", { visible: true });
    await page.click("#nav a[data-page=triggers]");
    await page.waitForSelector("input[name=name]");
    await page.type("input[name=name]", "console-nightly");
    await page.type("input[name=target_topic]", "console.jobs");
    await page.type("input[name=schedule]", "@every 1h");
    await page.keyboard.press("Enter");
    await waitText(page, "form[aria-labelledby=sched-title] .status", /Scheduled console-nightly/);
    const row = await waitText(page, "tr[data-trigger=console-nightly]", /console\.jobs/);
    assert.match(row, /@every 1h/);
    assert.match(row, /in (\d+ s|\d+ min)/, "next fire time shown");
    const listed = (await (await fetch(`${gw.http}/v1/trigger`, { headers: { "x-api-key": KEY } })).json()) as { triggers: Array<{ name: string }> };
    assert.deepEqual(listed.triggers.map((t) => t.name), ["console-nightly"]);
    // A bad schedule is reported in-band, naming the field.
    await page.$eval("input[name=name]", (i) => ((i as any).value = "console-bad"));
    await page.$eval("input[name=schedule]", (i) => ((i as any).value = "*/5 * * * *"));
    await page.click("form[aria-labelledby=sched-title] button[type=submit]");
    assert.match(await waitText(page, "form[aria-labelledby=sched-title] .status", /INVALID_ARGUMENT/), /schedule/);
    await screenshot(page, "triggers");
    await fitsPhone(page);
    // From the keyboard: the 5 s refresh keeps the focus on the button.
    await page.focus("button[aria-label='Delete trigger console-nightly']");
    await page.keyboard.press("Enter");
    await waitText(page, "#trigger-list-status", /Deleted console-nightly/);
    await page.waitForFunction(() => !(globalThis as any).document.querySelector("tr[data-trigger=console-nightly]"), { timeout: 5000 });
    const after = (await (await fetch(`${gw.http}/v1/trigger`, { headers: { "x-api-key": KEY } })).json()) as { triggers: unknown[] };
    assert.deepEqual(after.triggers, []);
    // The gateway answers the bad schedule with HTTP 400; the browser reports that response itself.
    await done(page, [/status of 400 .*\/v1\/trigger\/console-bad/]);
  });

  it("calls client- and bidi-streaming methods over the WebSocket: replies as they arrive, send more, End, Stop cancels", async () => {
    const page = await newPage();
    await signIn(page);
    await page.waitForSelector("button[data-service=orders]");
    await page.click("button[data-service=orders]");
    await page.waitForSelector("button[data-method='shop.v1.OrderService/UploadOrders']");
    assert.match(await text(page, ".methods"), /UploadOrders\s*client streaming/);
    assert.match(await text(page, ".methods"), /SyncOrders\s*bidi streaming/);

    // Client-streaming: several messages, one per line, prefilled with the schema skeleton; Ctrl+Enter sends them all.
    await page.focus("button[data-method='shop.v1.OrderService/UploadOrders']");
    await page.keyboard.press("Enter");
    await page.waitForSelector("textarea[name=requests]");
    const prefilled = (await page.$eval("textarea[name=requests]", (t) => (t as any).value as string)).split("\n");
    assert.equal(prefilled.length, 2, "two skeleton lines hint at several messages");
    assert.equal(JSON.parse(prefilled[0]!).order_id, "", "each line is the input schema's skeleton");
    assert.equal(JSON.parse(prefilled[0]!).big_signed, "0");
    await page.$eval("textarea[name=requests]", (t) => ((t as any).value = ""));
    await page.type("textarea[name=requests]", '{"orderId": "u1"}\n{"orderId": "u2"}\n\n{"orderId": "u3"}');
    const cmds = await page.$$eval("pre.cmd", (p) => p.map((e) => (e as any).innerText as string));
    assert.match(cmds[0]!, /websocat -n -H "x-api-key: \$GATEWAY_API_KEY" 'ws:\/\/127\.0\.0\.1:\d+\/v1\/gateway\/invoke-ws'$/);
    assert.match(cmds[0]!, /'\{"op":"start","service":"orders","method":"shop\.v1\.OrderService\/UploadOrders"\}' \\\n {2}'\{"op":"send","requestData":\{"orderId":"u1"\}\}'.*'\{"op":"send","requestData":\{"orderId":"u3"\}\}' \\\n {2}'\{"op":"end"\}'/s);
    assert.match(cmds[1]!, /-d '\{"orderId":"u1"\}\n\{"orderId":"u2"\}\n\{"orderId":"u3"\}' .* shop\.v1\.OrderService\/UploadOrders$/s);
    assert.doesNotMatch(await text(page, ".detail"), new RegExp(KEY), "the key is never printed in the commands");
    await page.focus("textarea[name=requests]");
    await page.keyboard.down("Control");
    await page.keyboard.press("Enter");
    await page.keyboard.up("Control");
    await waitText(page, ".call .status", /^OK: 1 message$/);
    const upload = await text(page, "pre.reply");
    assert.deepEqual(JSON.parse(upload.replace(/^\/\/ message 1\n/, "")), { orders: [{ orderId: "u1" }, { orderId: "u2" }, { orderId: "u3" }] });
    // Bad input is refused in the page, naming the line.
    await page.$eval("textarea[name=requests]", (t) => ((t as any).value = '{"orderId": "ok"}\n[1]'));
    await page.click(".call button[type=submit]");
    assert.match(await waitText(page, ".call .status", /not valid/), /line 2 must be a JSON object/);

    // Bidi, kept open: each echo shows as it arrives, more messages go on the same call, Stop cancels it mid-stream.
    await page.click("button[data-method='shop.v1.OrderService/SyncOrders']");
    await waitText(page, ".detail h3", /SyncOrders/);
    await page.waitForSelector("textarea[name=requests]");
    await page.$eval("textarea[name=requests]", (t) => ((t as any).value = '{"orderId": "b1"}\n{"orderId": "b2"}'));
    await page.click("input[name=keep-open]");
    await page.click(".call button[type=submit]");
    await waitText(page, "pre.reply", /"orderId": "echo:b2"/);
    assert.match(await text(page, ".call .status"), /^Streaming… 2 messages$/);
    assert.equal(await text(page, ".call button[type=submit]"), "Send");
    await page.$eval("textarea[name=requests]", (t) => ((t as any).value = '{"orderId": "b3"}'));
    await page.click(".call button[type=submit]");
    await waitText(page, "pre.reply", /"orderId": "echo:b3"/);
    assert.deepEqual((await text(page, "pre.reply")).match(/echo:b\d/g), ["echo:b1", "echo:b2", "echo:b3"]);
    await screenshot(page, "services-bidi");
    // The form itself, close up, at both widths (the full page is mostly the long schema tables).
    for (const [vp, w] of [[DESKTOP, 1280], [PHONE, 390]] as const) {
      await page.setViewport(vp);
      await (await page.$("form.call"))!.screenshot({ path: join(shots, `services-bidi-form-${w}.png`) });
    }
    await page.setViewport(DESKTOP);
    const cancelledBefore = backend.cancelled.filter((c) => c === "sync").length;
    await page.click(".call button[data-action=stop]");
    await waitText(page, ".call .status", /^CANCELLED: .*\(after 3 messages\)$/);
    await waitFor(() => backend.cancelled.filter((c) => c === "sync").length === cancelledBefore + 1, "the backend bidi call cancelled", 10_000);
    assert.equal(await page.$eval(".call button[data-action=stop]", (b) => (b as any).hidden), true, "Stop hides once the call is over");

    // Bidi ended by the user: End requests half-closes, the backend ends, the status is OK.
    await page.$eval("textarea[name=requests]", (t) => ((t as any).value = '{"orderId": "b4"}'));
    await page.click(".call button[type=submit]");
    await waitText(page, "pre.reply", /"orderId": "echo:b4"/);
    await page.click(".call button[data-action=end]");
    await waitText(page, ".call .status", /^OK: 1 message$/);
    await fitsPhone(page);
    await done(page);
  });

  it("shows health entries and live figures parsed from /metrics", async () => {
    const r = await fetch(`${gw.http}/v1/gateway/invoke`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ service: "orders", method: "Ping", requestData: { text: "for metrics" } }) });
    assert.equal(((await r.json()) as { success: boolean }).success, true);
    const page = await newPage();
    await signIn(page);
    await page.waitForSelector("#nav a[data-page=health]", { visible: true });
    await page.click("#nav a[data-page=health]");
    await waitText(page, ".overall", /Healthy|Degraded/);
    assert.match(await text(page, "table"), /sidecar/);
    // Ping was invoked: p50 is a number, and the rates appear after the second scrape.
    assert.match(await waitText(page, "[data-figure=p50] dd", /\d/), /ms|s$/);
    await waitText(page, "[data-figure=invokes] dd", /^\d/, 6000);
    assert.match(await text(page, "[data-figure=sse] dd"), /^\d+$/);
    await screenshot(page, "health");
    await fitsPhone(page);
    await done(page);
  });

  it("resumes a tail across a dropped connection with nothing lost or duplicated", async () => {
    const proxy = await startTcpProxy(gw.gateway.httpPort);
    const page = await newPage();
    try {
      const origin = `http://127.0.0.1:${proxy.port}`;
      await signIn(page, KEY, origin);
      await page.waitForSelector("#nav a[data-page=topics]", { visible: true });
      await page.click("#nav a[data-page=topics]");
      await page.waitForSelector("input[name=tail-topics]");
      await page.type("input[name=tail-topics]", "console.resume");
      await page.keyboard.press("Enter");
      await waitText(page, ".feed .conn", /^live$/);
      for (let n = 1; n <= 3; n++) await publish("console.resume", `r${n}`, { n });
      await waitText(page, ".feed .count", /^3 events$/);
      proxy.dropAll();
      await waitText(page, ".feed .conn", /^reconnecting$/);
      // Published while the page is cut off: the reconnect (Last-Event-ID) must replay them.
      for (let n = 4; n <= 6; n++) await publish("console.resume", `r${n}`, { n });
      await waitText(page, ".feed .conn", /^live$/, 10_000);
      for (let n = 7; n <= 8; n++) await publish("console.resume", `r${n}`, { n });
      await waitText(page, ".feed .count", /^8 events$/, 10_000);
      assert.deepEqual(await feedIds(page), ["r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"]);
    } finally {
      proxy.close();
    }
    // The cut itself is reported by the browser as a failed stream request: that is the event under test.
    await done(page, [/(request failed: |Failed to load resource: net::ERR_).*\/v1\/pubsub\/events/]);
  });

  it("signs in with a browser token: tails its topic, while keyed pages and publishing say they need a key", async () => {
    const r = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ topics: ["console.tok"], ttl_seconds: 600 }) });
    const { token } = (await r.json()) as { token: string };
    const page = await newPage();
    await page.goto(`${gw.http}/console/`);
    await page.waitForSelector("select[name=kind]");
    await page.select("select[name=kind]", "token");
    await page.type("input[name=secret]", token);
    await page.keyboard.press("Enter");
    await page.waitForSelector("input[name=tail-topics]");
    assert.equal(await page.$eval("input[name=tail-topics]", (i) => (i as any).value), "console.tok", "the token's topic is prefilled");
    assert.match(await text(page, "#who-text"), /Token for console\.tok/);
    assert.equal(await page.$eval("form[aria-labelledby=pub-title] button[type=submit]", (b) => (b as any).disabled), true);
    await page.click("form[aria-labelledby=tail-title] button[type=submit]");
    await waitText(page, ".feed .conn", /^live$/);
    await publish("console.tok", "tok-1", { ok: true });
    await waitText(page, ".feed .events", /tok-1/);
    // A topic outside the token is refused by the console before any request.
    await page.$eval("input[name=tail-topics]", (i) => ((i as any).value = "other"));
    await page.click("form[aria-labelledby=tail-title] button[type=submit]");
    assert.match(await waitText(page, ".feed .status", /does not allow topic 'other'/), /allows console\.tok/);
    await page.click("#nav a[data-page=state]");
    await waitText(page, ".page-state", /needs an API key/);
    await done(page);
  });
});
