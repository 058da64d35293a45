import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { startOrderBackend, type OrderBackend } from "../support/backends/order-backend.js";
import { startTestGateway, unary, type TestGateway } from "../support/gateway.js";
import { parsePromQL } from "../support/promql.js";

const DASHBOARD = new URL("../../deploy/grafana/platform-gateway.json", import.meta.url);
const KEY = "dash-key";
/** One row per facility, in this order. */
const ROWS = ["Dispatch and invoke", "State", "Pub/sub and web subscribers", "Triggers", "HTTP and gRPC fronts", "Process"];
/** Labels Prometheus adds to every scraped series. */
const TARGET_LABELS = new Set(["instance", "job"]);

interface Target {
  expr: string;
  refId: string;
  datasource?: { type: string; uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: unknown; datasource?: { uid: string } }> };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as Dashboard;

/** A query as Prometheus receives it from Grafana: the dashboard's variables and interval macros filled in. */
function expand(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, "5m").replace(/\$\{?instance\}?/g, ".*");
}

/** Every query of the dashboard: panel targets, and the metric queries of its variables (label_values(metric, label)). */
function queries(): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  for (const p of dashboard.panels) for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}" ${t.refId}`, expr: expand(t.expr) });
  for (const v of dashboard.templating.list) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : (v.query as { query: string }).query;
    const m = /^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(q);
    assert.ok(m, `variable ${v.name}: label_values(metric, label), got ${q}`);
    out.push({ where: `variable ${v.name}`, expr: m[1]! });
  }
  return out;
}

describe("Grafana dashboard deploy/grafana/platform-gateway.json", () => {
  it("imports anywhere: a data source variable every panel and query uses, one row per facility, ids unique, a 24-column grid", () => {
    assert.equal(dashboard.uid, "platform-gateway");
    const ds = dashboard.templating.list.find((v) => v.type === "datasource");
    assert.ok(ds, "a data source variable");
    assert.equal(ds.query, "prometheus");
    const uid = `\${${ds.name}}`;
    for (const p of dashboard.panels) {
      if (p.type === "row") continue;
      assert.equal(p.datasource?.uid, uid, `panel ${p.title}`);
      assert.ok((p.targets ?? []).length > 0, `panel ${p.title} has a query`);
      for (const t of p.targets!) assert.equal(t.datasource?.uid, uid, `panel ${p.title} ${t.refId}`);
      assert.ok(p.gridPos.x >= 0 && p.gridPos.x + p.gridPos.w <= 24, `panel ${p.title} within the grid`);
    }
    for (const v of dashboard.templating.list) if (v.type === "query") assert.equal(v.datasource?.uid, uid, `variable ${v.name}`);
    assert.deepEqual(dashboard.panels.filter((p) => p.type === "row").map((p) => p.title), ROWS);
    const ids = dashboard.panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length);
    // Every row holds panels: the next row (or the end) comes after at least one.
    const rowAt = dashboard.panels.flatMap((p, i) => (p.type === "row" ? [i] : []));
    rowAt.forEach((i, n) => assert.ok((rowAt[n + 1] ?? dashboard.panels.length) - i > 1, `row ${dashboard.panels[i]!.title} has panels`));
  });

  it("every query is valid PromQL", () => {
    const all = queries();
    assert.ok(all.length > 30, `${all.length} queries`);
    for (const q of all) assert.doesNotThrow(() => parsePromQL(q.expr), `${q.where}: ${q.expr}`);
  });

  it("the parser refuses what Prometheus refuses", () => {
    for (const bad of [
      "rate(x)", // a range function on an instant vector
      "sum(rate(x[5m])", // unbalanced
      "x{a=b}", // unquoted value
      "histogram_quantile(x, y)", // the quantile must be a scalar
      "nosuchfunc(x)",
      "x[5m]", // a range vector cannot be the result
      'x{a=~"("}', // bad regex
      "sum by (le) x",
      "x + ",
    ])
      assert.throws(() => parsePromQL(bad), Error, bad);
    const p = parsePromQL('histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route=~"/v1/.*",x!="1"}[5m] offset 1m))) / on (route) group_left b');
    assert.deepEqual(
      p.selectors.map((s) => s.name),
      ["a_bucket", "b"],
    );
    assert.deepEqual(p.groupingLabels, ["le", "route", "route"]);
  });

  describe("against a running gateway, each facility driven once", () => {
    let backend: OrderBackend;
    let gw: TestGateway;
    /** Metric names the gateway serves (histograms with their _bucket, _sum and _count series) -> label names seen. */
    const served = new Map<string, Set<string>>();
    /** Names with at least one series in the scrape. */
    const withSeries = new Set<string>();

    before(async () => {
      backend = await startOrderBackend();
      gw = await startTestGateway({
        apiKeys: [KEY],
        services: [
          { name: "orders", grpc: { host: "127.0.0.1", port: backend.port } },
          { name: "carts", state: { storeName: "carts-store", keys: [] } },
        ],
      });
      const headers = { "x-api-key": KEY, "content-type": "application/json" };
      const post = async (path: string, body: unknown, type = "application/json"): Promise<void> => {
        const r = await fetch(`${gw.http}${path}`, { method: "POST", headers: { ...headers, "content-type": type }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) });
        assert.ok(r.status < 500, `${path}: ${r.status} ${await r.text()}`);
      };
      // Dispatch (REST and gRPC), state, pub/sub with a web subscriber, triggers' API.
      await post("/v1/gateway/invoke", { service: "orders", method: "GetOrder", requestData: { orderId: "d1" } });
      const md = new (await import("@grpc/grpc-js")).Metadata();
      md.set("x-api-key", KEY);
      await unary(gw.client("platform.Gateway"), "InvokeJson", { service: "orders", method: "GetOrder", request_data: "{}" }, md);
      await post("/v1/state/carts/k1", { value: 1 });
      const sub = new AbortController();
      const sse = await fetch(`${gw.http}/v1/pubsub/events?topic=dash.t`, { headers: { "x-api-key": KEY }, signal: sub.signal });
      assert.equal(sse.status, 200);
      await post("/v1/pubsub/dash.t", { specversion: "1.0", id: "e1", source: "urn:test", type: "t", data: {} }, "application/cloudevents+json");
      await fetch(`${gw.http}/v1/trigger`, { headers, signal: AbortSignal.timeout(10_000) }).then((r) => r.text());
      const text = await (await fetch(`${gw.http}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
      sub.abort();
      for (const line of text.split("\n")) {
        const type = /^# TYPE (\S+) (\S+)$/.exec(line);
        if (type) {
          const names = type[2] === "histogram" ? ["_bucket", "_sum", "_count"].map((s) => type[1] + s) : type[2] === "summary" ? [type[1]!, `${type[1]}_sum`, `${type[1]}_count`] : [type[1]!];
          for (const n of names) if (!served.has(n)) served.set(n, new Set());
          continue;
        }
        const sample = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? /.exec(line);
        if (!sample) continue;
        withSeries.add(sample[1]!);
        const labels = served.get(sample[1]!) ?? new Set<string>();
        for (const l of (sample[2] ?? "").matchAll(/([A-Za-z_][A-Za-z0-9_]*)="/g)) labels.add(l[1]!);
        served.set(sample[1]!, labels);
      }
    });
    after(async () => {
      await gw?.close();
      backend?.close();
    });

    it("every metric a query reads is one the gateway serves", () => {
      const missing: string[] = [];
      for (const q of queries()) {
        for (const s of parsePromQL(q.expr).selectors) {
          assert.ok(s.name !== "", `${q.where}: select by metric name`);
          if (!served.has(s.name)) missing.push(`${q.where}: ${s.name}`);
        }
      }
      assert.deepEqual(missing, []);
    });

    it("every label a query matches on is one the metric has (checked for the metrics with series after the traffic)", () => {
      const wrong: string[] = [];
      let checked = 0;
      for (const q of queries()) {
        const parsed = parsePromQL(q.expr);
        for (const s of parsed.selectors) {
          const labels = served.get(s.name);
          if (!labels || !withSeries.has(s.name)) continue;
          checked++;
          for (const m of s.matchers) if (!TARGET_LABELS.has(m.label) && !labels.has(m.label)) wrong.push(`${q.where}: ${s.name} has no label ${m.label}`);
        }
        // Grouping labels must exist on some selected metric (le on the buckets).
        for (const g of parsed.groupingLabels) {
          if (TARGET_LABELS.has(g)) continue;
          const known = parsed.selectors.filter((s) => withSeries.has(s.name)).map((s) => served.get(s.name)!);
          if (known.length > 0 && !known.some((l) => l.has(g))) wrong.push(`${q.where}: no selected metric has label ${g}`);
        }
      }
      assert.ok(checked > 20, `${checked} selectors checked against live series`);
      assert.deepEqual(wrong, []);
    });

    it("the facilities the test drove have series behind their panels", () => {
      for (const name of [
        "platform_gateway_invocations_total",
        "platform_gateway_invoke_duration_seconds_bucket",
        "platform_grpc_requests_total",
        "platform_http_requests_total",
        "platform_pubsub_events_published_total",
        "platform_pubsub_web_deliveries_total",
        "platform_pubsub_delivery_latency_seconds_bucket",
        "process_cpu_seconds_total",
      ])
        assert.ok(withSeries.has(name), `${name} has series`);
    });
  });
});
