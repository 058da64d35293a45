// Triggers: the scheduled triggers with their next/last fire times and counts; schedule and delete.
import { api } from "./api.js";
import { field, h, replace, statusLine } from "./dom.js";

const REFRESH_MS = 5000;

function when(t) {
  if (!t) return "—";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return t;
  const s = Math.round((d.getTime() - Date.now()) / 1000);
  const a = Math.abs(s);
  const span = a < 120 ? `${a} s` : a < 7200 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  const rel = a < 1 ? "now" : s > 0 ? `in ${span}` : `${span} ago`;
  return `${d.toLocaleString()} (${rel})`;
}

/** Mount the Triggers page. */
export function mount(root) {
  const status = statusLine();
  status.el.id = "trigger-list-status";
  const table = h("div", { class: "table-wrap" });
  const name = h("input", { type: "text", name: "name", autocomplete: "off", required: true });
  const topic = h("input", { type: "text", name: "target_topic", autocomplete: "off", required: true });
  const schedule = h("input", { type: "text", name: "schedule", autocomplete: "off", placeholder: "@every 10s, 0 */5 * * * *" });
  const due = h("input", { type: "text", name: "due_time", autocomplete: "off", placeholder: "10s or 2026-01-01T00:00:00Z" });
  const repeats = h("input", { type: "number", name: "repeats", min: "0", placeholder: "0: unbounded" });
  const ttl = h("input", { type: "text", name: "ttl", autocomplete: "off", placeholder: "1h" });
  const fStatus = statusLine();
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "sched-title", novalidate: true },
    h("h3", { id: "sched-title" }, "Schedule a trigger"),
    h("div", { class: "row" }, field("Name", name), field("Target topic", topic)),
    h("div", { class: "row" }, field("Schedule", schedule, "cron (6 fields), @every, @daily…"), field("Due time", due), field("Repeats", repeats), field("TTL", ttl)),
    h("button", { type: "submit" }, "Schedule"),
    fStatus.el,
  );

  let shown = "";
  const load = async () => {
    try {
      const r = await api("/v1/trigger");
      if (!r.status?.success) return status.set("error", `${r.status?.status}: ${r.status?.message}`);
      const rows = r.triggers ?? [];
      // The refresh must not pull the focus from under a keyboard user: keep the table while nothing changed and
      // the focus is in it, and otherwise put the focus back on the same control.
      const snapshot = JSON.stringify(rows);
      const focused = table.contains(document.activeElement) ? document.activeElement.getAttribute("aria-label") : null;
      if (focused !== null && snapshot === shown) return;
      shown = snapshot;
      replace(
        table,
        rows.length === 0
          ? h("p", { class: "muted" }, "No triggers scheduled.")
          : h(
              "table",
              { class: "triggers" },
              h(
                "thead",
                {},
                h("tr", {}, ["Name", "Topic", "Schedule", "Next fire", "Last fire", "Fired", "Expires", ""].map((t) => h("th", { scope: "col" }, t))),
              ),
              h(
                "tbody",
                {},
                rows.map((t) => {
                  const del = h("button", { type: "button", class: "small danger", "aria-label": `Delete trigger ${t.name}` }, "Delete");
                  del.addEventListener("click", async () => {
                    try {
                      const d = await api(`/v1/trigger/${encodeURIComponent(t.name)}`, { method: "DELETE" });
                      if (d.status?.success) status.set("ok", `Deleted ${t.name}.`);
                      else status.set("error", `${d.status?.status}: ${d.status?.message}`);
                    } catch (e) {
                      status.set("error", e.message);
                    }
                    await load();
                  });
                  const plan = [t.schedule, t.due_time ? `due ${t.due_time}` : "", t.repeats ? `×${t.repeats}` : "", t.ttl ? `ttl ${t.ttl}` : ""].filter(Boolean).join(", ");
                  return h(
                    "tr",
                    { "data-trigger": t.name },
                    // data-label: the column name, shown beside each value when the table stacks on a phone.
                    h("td", { "data-label": "Name" }, h("code", {}, t.name)),
                    h("td", { "data-label": "Topic" }, t.target_topic),
                    h("td", { "data-label": "Schedule" }, plan),
                    h("td", { "data-label": "Next fire" }, when(t.next_fire_time)),
                    h("td", { "data-label": "Last fire" }, when(t.last_fire_time)),
                    h("td", { class: "num", "data-label": "Fired" }, String(t.times_fired ?? 0)),
                    h("td", { "data-label": "Expires" }, when(t.expires_at)),
                    h("td", {}, del),
                  );
                }),
              ),
            ),
      );
      if (focused) table.querySelector(`[aria-label="${CSS.escape(focused)}"]`)?.focus();
    } catch (e) {
      status.set("error", `Cannot list triggers: ${e.message}`);
    }
  };

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!name.value.trim()) return fStatus.set("error", "name must not be empty"), name.focus();
    if (!topic.value.trim()) return fStatus.set("error", "target_topic must not be empty"), topic.focus();
    const body = { target_topic: topic.value.trim() };
    if (schedule.value.trim()) body.schedule = schedule.value.trim();
    if (due.value.trim()) body.due_time = due.value.trim();
    if (repeats.value) body.repeats = Number(repeats.value);
    if (ttl.value.trim()) body.ttl = ttl.value.trim();
    try {
      const r = await api(`/v1/trigger/${encodeURIComponent(name.value.trim())}`, { method: "POST", body });
      if (r.status?.success) fStatus.set("ok", `Scheduled ${name.value.trim()}.`);
      else fStatus.set("error", `${r.status?.status}: ${r.status?.message}`);
    } catch (err) {
      fStatus.set("error", err.message);
    }
    await load();
  });

  const refresh = h("button", { type: "button", class: "secondary" }, "Refresh");
  refresh.addEventListener("click", load);
  root.append(h("h2", { id: "title-triggers" }, "Triggers"), form, h("div", { class: "card" }, h("div", { class: "feed-head" }, h("h3", {}, "Scheduled"), refresh), status.el, table));
  load();
  const timer = setInterval(load, REFRESH_MS);
  return { unmount: () => clearInterval(timer) };
}
