// Health and metrics: /health entries, live figures computed from two consecutive /metrics scrapes, and charts of
// the last five minutes of them (kept in this page only, while it is shown).
import { api } from "./api.js";
import { History, lineChart } from "./charts.js";
import { h, replace, statusLine } from "./dom.js";
import { bucketDelta, buckets, parseMetrics, quantile, sum } from "./metrics.js";

const SCRAPE_MS = 2000;

function fmtRate(v) {
  return Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : "—";
}
function fmtSeconds(s) {
  if (!Number.isFinite(s)) return "—";
  return s < 1 ? `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms` : `${s.toFixed(2)} s`;
}

/** The figures of one scrape. */
function figures(samples) {
  return {
    t: performance.now(),
    subscribers: {
      grpc: sum(samples, "platform_pubsub_subscribers"),
      websocket: sum(samples, "platform_pubsub_web_subscribers", { transport: "websocket" }),
      sse: sum(samples, "platform_pubsub_web_subscribers", { transport: "sse" }),
    },
    delivered: sum(samples, "platform_pubsub_events_delivered_total") + sum(samples, "platform_pubsub_web_deliveries_total"),
    published: sum(samples, "platform_pubsub_events_published_total"),
    invocations: sum(samples, "platform_gateway_invocations_total"),
    invokeBuckets: buckets(samples, "platform_gateway_invoke_duration_seconds"),
  };
}

const fmtCount = (v) => (Number.isFinite(v) ? String(Math.round(v)) : "—");

/** The charts of the page: one per figure, over one shared history. */
function charts(history) {
  const list = [
    lineChart({ name: "deliveries", title: "Deliveries/s", series: [{ key: "deliveries", label: "Deliveries/s" }], format: fmtRate, history }),
    lineChart({ name: "publishes", title: "Publishes/s", series: [{ key: "publishes", label: "Publishes/s" }], format: fmtRate, history }),
    lineChart({ name: "invokes", title: "Invokes/s", series: [{ key: "invokes", label: "Invokes/s" }], format: fmtRate, history }),
    lineChart({ name: "latency", title: "Invoke latency", series: [{ key: "p50", label: "p50" }, { key: "p99", label: "p99" }], format: fmtSeconds, history }),
    lineChart({
      name: "subscribers",
      title: "Subscribers by transport",
      series: [{ key: "grpc", label: "gRPC" }, { key: "websocket", label: "WebSocket" }, { key: "sse", label: "SSE" }],
      format: fmtCount,
      history,
    }),
  ];
  return { els: list.map((c) => c.el), draw: (now) => list.forEach((c) => c.draw(now)) };
}

/** Mount the Health page. */
export function mount(root) {
  const status = statusLine();
  const overall = h("p", { class: "overall" });
  const entries = h("div", { class: "table-wrap" });
  const tiles = h("dl", { class: "tiles" });
  const history = new History();
  const chart = charts(history);
  root.append(
    h("h2", { id: "title-health" }, "Health and metrics"),
    status.el,
    h("div", { class: "card" }, h("h3", {}, "Live figures"), tiles, h("p", { class: "muted small" }, `From /metrics every ${SCRAPE_MS / 1000} s. Rates and percentiles cover the last interval; with no invocation in it, the percentiles cover everything since start.`)),
    h(
      "div",
      { class: "card" },
      h("h3", {}, "Last 5 minutes"),
      h("div", { class: "charts" }, chart.els),
      h("p", { class: "muted small" }, "Each point is one interval between scrapes; percentiles only for intervals with invocations. Nothing is recorded while this page is hidden."),
    ),
    h("div", { class: "card" }, h("h3", {}, "Health"), overall, entries),
  );
  let prev;
  let stopped = false;

  const tile = (label, value, name) => h("div", { class: "tile", "data-figure": name }, h("dt", {}, label), h("dd", {}, value));

  /** Bumped by a pause: a scrape that was in flight then is dropped (its interval spans the hidden time). */
  let epoch = 0;
  const scrape = async () => {
    const mine = epoch;
    try {
      const [report, text] = await Promise.all([
        fetch("/health", { signal: AbortSignal.timeout(10_000) }).then((r) => r.json()),
        api("/metrics", { raw: true }),
      ]);
      if (stopped || mine !== epoch) return;
      const now = figures(parseMetrics(text));
      const dt = prev ? (now.t - prev.t) / 1000 : NaN;
      const window = prev ? bucketDelta(now.invokeBuckets, prev.invokeBuckets) : [];
      const windowCount = window.reduce((m, [, c]) => Math.max(m, c), 0);
      const lat = windowCount > 0 ? window : now.invokeBuckets;
      replace(
        tiles,
        tile("gRPC subscribers", String(now.subscribers.grpc), "grpc"),
        tile("WebSocket subscribers", String(now.subscribers.websocket), "websocket"),
        tile("SSE subscribers", String(now.subscribers.sse), "sse"),
        tile("Deliveries/s", prev ? fmtRate((now.delivered - prev.delivered) / dt) : "…", "deliveries"),
        tile("Publishes/s", prev ? fmtRate((now.published - prev.published) / dt) : "…", "publishes"),
        tile("Invokes/s", prev ? fmtRate((now.invocations - prev.invocations) / dt) : "…", "invokes"),
        tile("Invoke p50", fmtSeconds(quantile(0.5, lat)), "p50"),
        tile("Invoke p99", fmtSeconds(quantile(0.99, lat)), "p99"),
      );
      const rate = (a, b) => (prev ? (a - b) / dt : null);
      const wall = Date.now();
      history.push(wall, {
        deliveries: rate(now.delivered, prev?.delivered),
        publishes: rate(now.published, prev?.published),
        invokes: rate(now.invocations, prev?.invocations),
        p50: windowCount > 0 ? quantile(0.5, window) : null,
        p99: windowCount > 0 ? quantile(0.99, window) : null,
        ...now.subscribers,
      });
      chart.draw(wall);
      prev = now;
      overall.className = `overall health-${String(report.status).toLowerCase()}`;
      overall.textContent = `${report.status} (checked in ${report.totalDuration})`;
      replace(
        entries,
        h(
          "table",
          { class: "health-table" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Entry"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Description"))),
          h(
            "tbody",
            {},
            Object.entries(report.entries ?? {}).map(([name, e]) =>
              h("tr", {}, h("td", {}, h("code", {}, name)), h("td", { class: `health-${String(e.status).toLowerCase()}` }, e.status), h("td", {}, e.description ?? "")),
            ),
          ),
        ),
      );
      status.clear();
    } catch (e) {
      if (!stopped) status.set("error", `Cannot read health or metrics: ${e.message}`);
    }
  };
  // Scrape only while the page is shown: a hidden tab costs the gateway nothing, and its charts show the pause as a
  // gap (the first scrape after it starts the rates afresh rather than averaging over the hidden time).
  let timer;
  const start = () => {
    if (timer !== undefined) return;
    scrape();
    timer = setInterval(scrape, SCRAPE_MS);
  };
  const pause = () => {
    if (timer === undefined) return;
    clearInterval(timer);
    timer = undefined;
    prev = undefined;
    epoch++;
    history.gap(Date.now());
  };
  const onVisibility = () => (document.hidden ? pause() : start());
  document.addEventListener("visibilitychange", onVisibility);
  if (!document.hidden) start();
  return {
    unmount() {
      stopped = true;
      document.removeEventListener("visibilitychange", onVisibility);
      clearInterval(timer);
      timer = undefined;
    },
  };
}
