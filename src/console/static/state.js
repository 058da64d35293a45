// State: get/save/delete one key with its etag, run a query, and watch change notifications (topic state.change).
import { api, ApiError, keyPath } from "./api.js";
import { field, h, pretty, replace, statusLine, submitOnCtrlEnter } from "./dom.js";
import { eventFeed } from "./topics.js";

/** A stored value for display: pretty-printed when it is JSON text, else as it is. */
function prettyText(v) {
  if (typeof v !== "string") return pretty(v);
  try {
    return pretty(JSON.parse(v));
  } catch {
    return v;
  }
}

/** Mount the State page. */
export function mount(root) {
  const names = h("datalist", { id: "state-services" });
  const service = h("input", { type: "text", name: "service", list: "state-services", autocomplete: "off", required: true });
  const key = h("input", { type: "text", name: "key", autocomplete: "off", required: true });
  const etag = h("input", { type: "text", name: "etag", autocomplete: "off", placeholder: "(none: last write wins)" });
  const value = submitOnCtrlEnter(h("textarea", { rows: 6, name: "value", class: "code", spellcheck: "false" }));
  value.value = "";
  const publish = h("input", { type: "checkbox", name: "publish_change", id: "publish-change" });
  const status = statusLine();
  const getB = h("button", { type: "button", name: "get" }, "Get");
  const saveB = h("button", { type: "submit", name: "save" }, "Save");
  const delB = h("button", { type: "button", name: "delete", class: "danger" }, "Delete");
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "kv-title" },
    h("h3", { id: "kv-title" }, "Key"),
    h("div", { class: "row" }, field("Service", service), field("Key", key), field("ETag", etag, "Filled by Get and Save; a stale one makes Save or Delete fail.")),
    field("Value (text, e.g. JSON; Ctrl+Enter saves)", value, "Stored as the exact text you type."),
    h("div", { class: "check" }, publish, h("label", { for: "publish-change" }, "Publish a change notification (state.change)")),
    h("div", { class: "buttons" }, getB, saveB, delB),
    status.el,
    names,
  );
  const need = () => {
    if (!service.value.trim()) return status.set("error", "service must not be empty"), service.focus(), false;
    if (!key.value) return status.set("error", "key must not be empty"), key.focus(), false;
    return true;
  };
  const path = () => `/v1/state/${encodeURIComponent(service.value.trim())}/${keyPath(key.value)}`;
  const outcome = (st, what) => {
    if (st?.success) status.set("ok", what);
    else status.set("error", `${st?.status ?? "FAILED"}: ${st?.message ?? ""}`);
  };
  getB.addEventListener("click", async () => {
    if (!need()) return;
    try {
      const r = await api(path());
      value.value = r.value ?? "";
      etag.value = r.etag ?? "";
      status.set("ok", `Read ${r.key} (etag ${r.etag || "none"}).`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        etag.value = "";
        status.set("info", `${key.value} is not stored.`);
      } else status.set("error", e.message);
    }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!need()) return;
    const body = { service: service.value.trim(), key: key.value, value: value.value, publish_change: publish.checked };
    if (etag.value) body.etag = etag.value;
    try {
      const r = await api("/v1/state/save-state", { method: "POST", body });
      if (r.status?.success) etag.value = r.etag ?? "";
      outcome(r.status, `Saved ${key.value} (etag ${r.etag || "none"}).`);
    } catch (err) {
      status.set("error", err.message);
    }
  });
  delB.addEventListener("click", async () => {
    if (!need()) return;
    const q = new URLSearchParams();
    if (etag.value) q.set("etag", etag.value);
    if (publish.checked) q.set("publish_change", "true");
    try {
      const r = await api(`${path()}${q.size ? `?${q}` : ""}`, { method: "DELETE" });
      if (r.status?.success) etag.value = "";
      outcome(r.status, `Deleted ${key.value}.`);
    } catch (err) {
      status.set("error", err.message);
    }
  });

  const query = submitOnCtrlEnter(h("textarea", { rows: 4, name: "query", class: "code", spellcheck: "false" }));
  query.value = "{}";
  const limit = h("input", { type: "number", name: "limit", min: "0", value: "50" });
  const qStatus = statusLine();
  const results = h("div", { class: "results" });
  const qForm = h(
    "form",
    { class: "card", "aria-labelledby": "query-title" },
    h("h3", { id: "query-title" }, "Query"),
    field("Query (JSON DSL; {} for everything)", query, "e.g. {\"filter\": {\"EQ\": {\"status\": \"open\"}}, \"sort\": [{\"key\": \"id\"}]}"),
    h("div", { class: "row" }, field("Limit (0: none)", limit)),
    h("button", { type: "submit" }, "Run query"),
    qStatus.el,
    results,
  );
  qForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!service.value.trim()) return qStatus.set("error", "service must not be empty (above)"), service.focus();
    const q = new URLSearchParams({ query: query.value, limit: limit.value || "0" });
    try {
      const r = await api(`/v1/state/${encodeURIComponent(service.value.trim())}/query?${q}`);
      qStatus.set("ok", `${r.items.length} item${r.items.length === 1 ? "" : "s"}${r.token ? `; next page token ${r.token}` : ""}`);
      replace(
        results,
        r.items.length === 0
          ? null
          : h(
              "table",
              {},
              h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Key"), h("th", { scope: "col" }, "Value"), h("th", { scope: "col" }, "ETag"))),
              h("tbody", {}, r.items.map((it) => h("tr", {}, h("td", {}, h("code", {}, it.key)), h("td", {}, h("pre", {}, prettyText(it.value))), h("td", {}, it.etag)))),
            ),
      );
    } catch (err) {
      qStatus.set("error", err.message);
      replace(results);
    }
  });

  let feed;
  const watchB = h("button", { type: "button", name: "watch" }, "Watch changes");
  watchB.addEventListener("click", () => {
    if (feed) {
      feed.close();
      feed.el.remove();
      feed = undefined;
      watchB.textContent = "Watch changes";
      return;
    }
    const only = service.value.trim();
    feed = eventFeed(["state.change"], {
      title: `Changes on state.change${only ? ` for ${only}` : ""}`,
      filter: (ev) => {
        if (!only) return true;
        const d = ev.cloudevent?.data;
        return !d || typeof d !== "object" || d.service === only;
      },
    });
    watchB.textContent = "Stop watching";
    changes.append(feed.el);
  });
  const changes = h("div", { class: "card" }, h("h3", {}, "Change notifications"), h("p", { class: "muted" }, "Saves and deletes made with “publish change” arrive here as they happen (topic state.change)."), watchB);

  root.append(h("h2", { id: "title-state" }, "State"), h("div", { class: "cols even" }, form, qForm), changes);
  api("/v1/config/list-services")
    .then((r) => replace(names, (r.services ?? []).filter((s) => s.state).map((s) => h("option", { value: s.name }))))
    .catch(() => undefined);
  return { unmount: () => feed?.close() };
}
