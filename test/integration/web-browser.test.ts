import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import chromium from "@sparticuz/chromium";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import type { CloudEvent } from "../../src/shared/cloudevent.js";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

const KEY = "browser-key";

/** The page: EventSource and WebSocket subscribers that record what they get, and reconnect like an app would. */
const PAGE = `<!doctype html><meta charset="utf-8"><title>web pub/sub</title><script>
window.state = { sse: [], sseErrors: 0, sseRecovery: [], sseEnd: [], ws: [], wsFrames: [], wsOpens: 0, wsCloses: [] };
window.startSse = (url) => {
  const es = new EventSource(url);
  window.es = es;
  es.onmessage = (m) => { const d = JSON.parse(m.data); state.sse.push({ topic: d.topic, n: d.cloudevent.data.n, id: m.lastEventId }); };
  es.addEventListener("recovery", (m) => state.sseRecovery.push(JSON.parse(m.data)));
  es.addEventListener("end", (m) => { state.sseEnd.push(JSON.parse(m.data)); es.close(); });
  es.onerror = () => { state.sseErrors++; state.sseReadyState = es.readyState; };
};
// viaUrl: the subscribe (topics, and since on a reconnect) rides in the upgrade URL instead of a first frame.
window.startWs = (url, protocols, topics, reconnect, viaUrl) => {
  let last;
  const open = () => {
    const u = new URL(url);
    if (viaUrl) { for (const t of topics) u.searchParams.append("topic", t); if (last) u.searchParams.set("since", last); }
    const ws = new WebSocket(u, protocols);
    window.ws = ws;
    ws.onopen = () => { state.wsOpens++; if (!viaUrl) ws.send(JSON.stringify(last ? { op: "subscribe", topics, since: last } : { op: "subscribe", topics })); };
    ws.onmessage = (m) => {
      const f = JSON.parse(m.data);
      state.wsFrames.push(f);
      if (f.op === "subscribed") last = last ?? f.position;
      if (f.op === "event") { last = f.id; state.ws.push({ topic: f.topic, n: f.cloudevent.data.n, id: f.id }); }
    };
    ws.onclose = (e) => { state.wsCloses.push({ code: e.code, reason: e.reason }); if (reconnect && e.code !== 4001) setTimeout(open, 200); };
  };
  open();
};
</script>`;

function servePage(): Promise<{ server: Server; origin: string }> {
  const server = createHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(PAGE);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

function event(n: number): CloudEvent {
  return { id: `e${n}`, source: "urn:b", spec_version: "1.0", type: "t", attributes: { datacontenttype: { ce_string: "application/json" } }, text_data: JSON.stringify({ n }), data: "text_data" } as CloudEvent;
}

describe("web pub/sub in a real browser (headless Chromium)", () => {
  let gw: TestGateway;
  let browser: Browser;
  let allowed: { server: Server; origin: string };
  let other: { server: Server; origin: string };
  let proxy: TcpProxy;
  let page: Page;

  const token = async (body: object): Promise<string> => {
    const r = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify(body) });
    return ((await r.json()) as { token: string }).token;
  };
  const state = (p: Page = page): Promise<any> => p.evaluate(() => (globalThis as any).state);
  const until = async (pred: (s: any) => boolean, what: string, p: Page = page, timeoutMs = 8000): Promise<any> => {
    let s: any;
    const end = Date.now() + timeoutMs;
    while (!pred((s = await state(p)))) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(s).slice(0, 600)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return s;
  };
  const publish = async (topic: string, from: number, to: number): Promise<void> => {
    for (let n = from; n <= to; n++) await gw.gateway.context.runtime.pubsub.publish(topic, event(n));
  };

  before(async () => {
    allowed = await servePage();
    other = await servePage();
    gw = await startTestGateway({ apiKeys: [KEY], corsOrigins: [allowed.origin], tokenSecret: "browser-test-secret-0123456789" });
    proxy = await startTcpProxy(gw.gateway.httpPort);
    // @sparticuz/chromium's default args include --disable-web-security, which turns CORS and Origin off: drop it.
    const args = chromium.args.filter((a) => a !== "--disable-web-security");
    browser = await puppeteer.launch({ executablePath: await chromium.executablePath(), args, headless: true });
  });
  after(async () => {
    await browser?.close();
    proxy?.close();
    allowed?.server.close();
    other?.server.close();
    await gw?.close();
  });

  it("EventSource and WebSocket: events in order; after the server drops the connection the page resumes with nothing lost or duplicated", async () => {
    page = await browser.newPage();
    await page.goto(allowed.origin + "/");
    const t = await token({ topics: ["a"], ttl_seconds: 120 });
    const base = `127.0.0.1:${proxy.port}`;
    await page.evaluate((u: string) => (globalThis as any).startSse(u), `http://${base}/v1/pubsub/events?topic=a&token=${t}`);
    await page.evaluate((u: string, p: string[]) => (globalThis as any).startWs(u, p, ["a"], true), `ws://${base}/v1/pubsub/ws`, ["pubsub.v1", `token.${t}`]);
    await until((s) => s.wsFrames.some((f: any) => f.op === "subscribed"), "WebSocket subscribed");
    // The SSE stream is live once its first message (the position) arrived.
    await page.waitForFunction(() => (globalThis as any).es.readyState === 1, { timeout: 8000 });
    await new Promise((r) => setTimeout(r, 100));
    await publish("a", 1, 10);
    await until((s) => s.sse.length === 10 && s.ws.length === 10, "10 events on both");

    proxy.dropAll();
    await publish("a", 11, 20);
    await until((s) => s.wsOpens >= 2 && s.sseErrors >= 1, "both noticed the drop and reconnected");
    await publish("a", 21, 30);
    const s = await until((x) => x.sse.length >= 30 && x.ws.length >= 30, "30 events on both");
    const expected = Array.from({ length: 30 }, (_, i) => i + 1);
    assert.deepEqual(s.sse.map((e: any) => e.n), expected, "SSE: nothing lost or duplicated");
    assert.deepEqual(s.ws.map((e: any) => e.n), expected, "WebSocket: nothing lost or duplicated");
    const resumed = s.wsFrames.filter((f: any) => f.op === "subscribed");
    assert.equal(resumed.at(-1).recovered, true);
    assert.deepEqual(s.sseRecovery, [], "SSE resumed exactly (no recovery message)");
    await page.evaluate(() => {
      (globalThis as any).es.close();
      (globalThis as any).ws.onclose = null;
      (globalThis as any).ws.close();
    });
    await page.close();
  });

  it("WebSocket with its subscribe in the upgrade URL: events in order, and after a drop it resumes by URL with nothing lost or duplicated", async () => {
    page = await browser.newPage();
    await page.goto(allowed.origin + "/");
    const t = await token({ topics: ["u"], ttl_seconds: 120 });
    const base = `127.0.0.1:${proxy.port}`;
    await page.evaluate((u: string, p: string[]) => (globalThis as any).startWs(u, p, ["u"], true, true), `ws://${base}/v1/pubsub/ws`, ["pubsub.v1", `token.${t}`]);
    await until((s) => s.wsFrames.some((f: any) => f.op === "subscribed"), "subscribed with no frame sent");
    await publish("u", 1, 10);
    await until((s) => s.ws.length === 10, "10 events");
    proxy.dropAll();
    await publish("u", 11, 20);
    await until((s) => s.wsOpens >= 2, "reconnected");
    await publish("u", 21, 25);
    const s = await until((x) => x.ws.length >= 25, "25 events");
    assert.deepEqual(s.ws.map((e: any) => e.n), Array.from({ length: 25 }, (_, i) => i + 1), "nothing lost or duplicated");
    const replies = s.wsFrames.filter((f: any) => f.op === "subscribed");
    assert.equal(replies.length, s.wsOpens, "one subscribed reply per connection");
    assert.equal(replies.at(-1).recovered, true, "the URL's since resumed exactly");
    assert.equal(s.wsFrames.filter((f: any) => f.op === "error").length, 0);
    await page.evaluate(() => {
      (globalThis as any).ws.onclose = null;
      (globalThis as any).ws.close();
    });
    await page.close();
  });

  it("a token for topic a cannot read b; an expired token is refused", async () => {
    page = await browser.newPage();
    await page.goto(allowed.origin + "/");
    const t = await token({ topics: ["a"], ttl_seconds: 120 });
    const direct = `127.0.0.1:${gw.gateway.httpPort}`;
    await page.evaluate((u: string) => (globalThis as any).startSse(u), `http://${direct}/v1/pubsub/events?topic=b&token=${t}`);
    const s1 = await until((s) => s.sseErrors >= 1 && s.sseReadyState === 2, "EventSource for b refused (closed)");
    assert.equal(s1.sse.length, 0);
    await page.evaluate((u: string) => (globalThis as any).startWs(u, ["pubsub.v1"], ["b"], false), `ws://${direct}/v1/pubsub/ws?token=${t}`);
    const s2 = await until((s) => s.wsFrames.some((f: any) => f.op === "error"), "WebSocket subscribe to b refused");
    assert.equal(s2.wsFrames.find((f: any) => f.op === "error").code, "PERMISSION_DENIED");
    await publish("b", 1, 3);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await state()).ws.length, 0, "nothing of b arrived");
    await page.close();

    page = await browser.newPage();
    await page.goto(allowed.origin + "/");
    const issued = await fetch(`${gw.http}/v1/pubsub/tokens`, { method: "POST", headers: { "x-api-key": KEY }, body: JSON.stringify({ topics: ["a"], ttl_seconds: 1 }) });
    const { token: short, expires_at } = (await issued.json()) as { token: string; expires_at: string };
    // A token lives at least ttl_seconds and less than a second more (exp is whole seconds, rounded up): wait it out.
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(expires_at) - Date.now()) + 100));
    await page.evaluate((u: string) => (globalThis as any).startSse(u), `http://${direct}/v1/pubsub/events?topic=a&token=${short}`);
    await page.evaluate((u: string) => (globalThis as any).startWs(u, ["pubsub.v1"], ["a"], false), `ws://${direct}/v1/pubsub/ws?token=${short}`);
    const s3 = await until((s) => s.sseReadyState === 2 && s.wsCloses.length === 1, "expired token refused on both");
    assert.equal(s3.wsOpens, 0, "the WebSocket never opened");
    assert.equal(s3.sse.length, 0);
    await page.close();
  });

  it("a disallowed origin is refused on EventSource and WebSocket", async () => {
    page = await browser.newPage();
    await page.goto(other.origin + "/");
    const direct = `127.0.0.1:${gw.gateway.httpPort}`;
    const before = (await (await fetch(`${gw.http}/metrics`)).text()).match(/platform_pubsub_web_refused_total\{transport="websocket",code="PERMISSION_DENIED"\} (\d+)/)?.[1] ?? "0";
    const t = await token({ topics: ["a"], ttl_seconds: 120 });
    await page.evaluate((u: string) => (globalThis as any).startSse(u), `http://${direct}/v1/pubsub/events?topic=a&token=${t}`);
    await page.evaluate((u: string) => (globalThis as any).startWs(u, ["pubsub.v1"], ["a"], false), `ws://${direct}/v1/pubsub/ws?token=${t}`);
    const s = await until((x) => x.sseReadyState === 2 && x.wsCloses.length === 1, "both refused");
    assert.equal(s.wsOpens, 0);
    const afterCount = (await (await fetch(`${gw.http}/metrics`)).text()).match(/platform_pubsub_web_refused_total\{transport="websocket",code="PERMISSION_DENIED"\} (\d+)/)?.[1];
    assert.equal(Number(afterCount), Number(before) + 1, "refused for its origin");
    await page.close();
  });
});
