// Small live time-series charts as inline SVG, drawn here (no library: the console loads nothing but its own files).
// Every text is SVG or HTML text, each chart is an image with a title and a description naming its latest values,
// and a table of the same numbers is one click away for screen readers and for copying.
import { h, replace, uid } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";
/** How much history the charts keep and show. */
export const WINDOW_MS = 5 * 60 * 1000;
/** Samples kept at most, whatever the scrape period (a bound on memory if the page is left open for days). */
const MAX_SAMPLES = 600;
const W = 320;
const H = 120;
const PAD = { left: 44, right: 8, top: 8, bottom: 18 };

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

/**
 * The last five minutes of figures: each sample is `{t, values}` (t in ms, Date.now()), a value null where there is
 * none (no rate before the second scrape, no percentile without calls); `gap(t)` marks a pause (the page was hidden),
 * so lines are not drawn across it. Older samples are dropped on every push.
 */
export class History {
  constructor(windowMs = WINDOW_MS, maxSamples = MAX_SAMPLES) {
    this.windowMs = windowMs;
    this.maxSamples = maxSamples;
    this.samples = [];
  }

  push(t, values) {
    this.samples.push({ t, values });
    this.trim(t);
  }

  gap(t) {
    if (this.samples.length > 0 && this.samples[this.samples.length - 1].values !== null) this.samples.push({ t, values: null });
  }

  trim(now) {
    const from = now - this.windowMs;
    let drop = 0;
    while (drop < this.samples.length && (this.samples[drop].t < from || this.samples.length - drop > this.maxSamples)) drop++;
    if (drop > 0) this.samples.splice(0, drop);
  }

  /** The runs of finite values of `key`, [[t, v], ...] each, split at gaps and missing values. */
  runs(key) {
    const out = [];
    let run = [];
    for (const s of this.samples) {
      const v = s.values?.[key];
      if (typeof v === "number" && Number.isFinite(v)) run.push([s.t, v]);
      else if (run.length > 0) {
        out.push(run);
        run = [];
      }
    }
    if (run.length > 0) out.push(run);
    return out;
  }

  /** The latest finite value of `key`, or NaN. */
  latest(key) {
    for (let i = this.samples.length - 1; i >= 0; i--) {
      const v = this.samples[i].values?.[key];
      if (typeof v === "number" && Number.isFinite(v)) return v;
    }
    return Number.NaN;
  }
}

/** A round upper bound for the y axis (1, 2 or 5 times a power of ten) at or above `max`. */
function niceMax(max) {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

/**
 * One chart over `history`: `series` is [{key, label}] (at most four; colours come from the stylesheet's
 * .series-<n> classes, as the CSP allows no inline style), `format` prints a value with its unit. Call `draw(now)`
 * after each sample; the table fallback is filled only while its <details> is open.
 */
export function lineChart({ name, title, series, format, history }) {
  const titleId = uid("chart-title");
  const descId = uid("chart-desc");
  const titleEl = svg("title", { id: titleId }, title);
  const descEl = svg("desc", { id: descId });
  const plot = svg("g", { class: "plot" });
  const image = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${titleId} ${descId}`, class: "chart-svg" }, titleEl, descEl, plot);
  const legend = h("ul", { class: "legend" });
  const table = h("div", { class: "table-wrap" });
  const details = h("details", {}, h("summary", {}, "Data table"), table);
  details.addEventListener("toggle", () => details.open && fillTable());
  const el = h("figure", { class: "chart", "data-chart": name }, h("figcaption", {}, h("strong", {}, title), legend), image, details);

  function fillTable() {
    const rows = history.samples.filter((s) => s.values !== null).slice().reverse();
    replace(
      table,
      h(
        "table",
        { class: "chart-table" },
        h("caption", { class: "muted small" }, `${title}, last 5 minutes, newest first`),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Time"), series.map((s) => h("th", { scope: "col" }, s.label)))),
        h(
          "tbody",
          {},
          rows.map((r) => h("tr", {}, h("td", {}, new Date(r.t).toLocaleTimeString()), series.map((s) => h("td", { "data-series": s.key }, format(r.values[s.key]))))),
        ),
      ),
    );
  }

  function draw(now) {
    const from = now - WINDOW_MS;
    const runs = series.map((s) => history.runs(s.key));
    let max = 0;
    for (const rs of runs) for (const run of rs) for (const [, v] of run) if (v > max) max = v;
    const top = niceMax(max);
    const x = (t) => PAD.left + ((t - from) / WINDOW_MS) * (W - PAD.left - PAD.right);
    const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
    const nodes = [
      svg("line", { class: "axis", x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom }),
      svg("line", { class: "grid", x1: PAD.left, y1: PAD.top, x2: W - PAD.right, y2: PAD.top }),
      svg("text", { class: "tick", x: PAD.left - 4, y: PAD.top + 4, "text-anchor": "end" }, format(top)),
      svg("text", { class: "tick", x: PAD.left - 4, y: H - PAD.bottom, "text-anchor": "end" }, format(0)),
      svg("text", { class: "tick", x: PAD.left, y: H - 4, "text-anchor": "start" }, "−5 min"),
      svg("text", { class: "tick", x: W - PAD.right, y: H - 4, "text-anchor": "end" }, "now"),
    ];
    series.forEach((s, i) => {
      for (const run of runs[i]) {
        const pts = run.filter(([t]) => t >= from).map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
        if (pts.length === 1) nodes.push(svg("circle", { class: `series-${i}`, "data-series": s.key, cx: pts[0].split(",")[0], cy: pts[0].split(",")[1], r: 2 }));
        else if (pts.length > 1) nodes.push(svg("polyline", { class: `series-${i}`, "data-series": s.key, points: pts.join(" ") }));
      }
    });
    replace(plot, nodes);
    const latest = series.map((s) => [s, history.latest(s.key)]);
    descEl.textContent = `Last 5 minutes, axis 0 to ${format(top)}. Latest: ${latest.map(([s, v]) => `${s.label} ${format(v)}`).join(", ")}.`;
    replace(
      legend,
      latest.map(([s, v], i) => h("li", { "data-series": s.key, "data-latest": Number.isFinite(v) ? String(v) : "" }, h("span", { class: `swatch series-${i}`, "aria-hidden": "true" }), series.length > 1 ? `${s.label} ${format(v)}` : `now ${format(v)}`)),
    );
    if (details.open) fillTable();
  }

  return { el, draw };
}
