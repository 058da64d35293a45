// Topics: live tails over Server-Sent Events (resumed across reconnects by Last-Event-ID) and a publish form.
import { api, session, tail } from "./api.js";
import { sourceProblem } from "./cloudevent.js";
import { field, h, pretty, statusLine, submitOnCtrlEnter } from "./dom.js";

/** Events kept on screen per tail; older ones are dropped from the page. */
const MAX_SHOWN = 200;

/** An event list with a connection indicator, fed by tail(). Shared with the State page's change feed. */
export function eventFeed(topics, { title, filter } = {}) {
  const state = h("span", { class: "conn" }, "connecting");
  const note = h("p", { class: "status", role: "status" });
  const list = h("ol", { class: "events", "aria-live": "polite", reversed: true });
  let count = 0;
  const closeButton = h("button", { type: "button", class: "small secondary" }, "Stop");
  const el = h("div", { class: "feed card" }, h("div", { class: "feed-head" }, h("h3", {}, title ?? topics.join(", ")), state, h("span", { class: "count" }, ""), closeButton), note, list);
  const t = tail(topics, {
    onState(s, detail) {
      state.textContent = s;
      state.className = `conn conn-${s}`;
      if (detail) {
        note.className = `status ${s === "closed" ? "error" : "info"}`;
        note.textContent = detail;
      } else if (s === "live") {
        note.className = "status";
        note.textContent = "";
      }
    },
    onRecovery(recovered) {
      note.className = `status ${recovered ? "ok" : "info"}`;
      note.textContent = recovered ? "Resumed: nothing was missed." : "Could not resume from the last position (too old or the gateway restarted): events in between may be missing.";
    },
    onEvent(ev) {
      if (filter && !filter(ev)) return;
      count++;
      el.querySelector(".count").textContent = `${count} event${count === 1 ? "" : "s"}`;
      const ce = ev.cloudevent ?? {};
      const item = h(
        "li",
        { class: "event" },
        h("div", { class: "event-head" }, h("strong", {}, ev.topic), " ", h("code", {}, ce.type ?? ""), " ", h("span", { class: "muted" }, ce.source ?? ""), " ", h("span", { class: "muted small" }, ce.time ?? new Date().toISOString())),
        h("pre", { tabindex: "0" }, pretty(ce)),
      );
      list.prepend(item);
      while (list.children.length > MAX_SHOWN) list.lastElementChild.remove();
    },
  });
  closeButton.addEventListener("click", () => {
    t.close();
    el.remove();
  });
  return { el, close: () => t.close() };
}

function splitTopics(text) {
  return [...new Set(text.split(/[\s,]+/).filter(Boolean))];
}

/** Mount the Topics page. */
export function mount(root) {
  const s = session.get();
  const feeds = new Set();
  const feedsEl = h("div", { class: "feeds" });

  const tailTopics = h("input", { type: "text", name: "tail-topics", placeholder: "orders, audit", autocomplete: "off", required: true, value: s?.kind === "token" ? s.topics.filter((t) => !t.endsWith("*")).join(", ") : "" });
  const tailStatus = statusLine();
  const tailForm = h("form", { class: "card", "aria-labelledby": "tail-title" }, h("h3", { id: "tail-title" }, "Tail topics"), field("Topics (comma separated)", tailTopics), h("button", { type: "submit" }, "Tail"), tailStatus.el);
  tailForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const topics = splitTopics(tailTopics.value);
    if (topics.length === 0) return tailStatus.set("error", "Name at least one topic.");
    tailStatus.clear();
    const f = eventFeed(topics);
    feeds.add(f);
    feedsEl.prepend(f.el);
  });

  const topic = h("input", { type: "text", name: "topic", autocomplete: "off", required: true });
  const source = h("input", { type: "text", name: "source", value: "urn:platform-gateway:console", autocomplete: "off" });
  const type = h("input", { type: "text", name: "type", value: "console.test", autocomplete: "off" });
  const id = h("input", { type: "text", name: "id", placeholder: "(a fresh UUID)", autocomplete: "off" });
  const data = submitOnCtrlEnter(h("textarea", { rows: 5, name: "data", class: "code", spellcheck: "false" }));
  data.value = pretty({ hello: "world" });
  const pubStatus = statusLine();
  const canPublish = s?.kind === "key";
  const pubForm = h(
    "form",
    { class: "card", "aria-labelledby": "pub-title", novalidate: true },
    h("h3", { id: "pub-title" }, "Publish an event"),
    canPublish ? null : h("p", { class: "status info" }, "Publishing needs an API key (POST /v1/pubsub/{topic})."),
    h("div", { class: "row" }, field("Topic", topic), field("Source (absolute URI)", source), field("Type", type), field("Id", id)),
    field("Data (JSON; Ctrl+Enter publishes)", data),
    h("button", { type: "submit", disabled: !canPublish }, "Publish"),
    pubStatus.el,
  );
  const checkSource = () => {
    const p = sourceProblem(source.value);
    source.setCustomValidity(p);
    source.setAttribute("aria-invalid", String(p !== ""));
    return p;
  };
  source.addEventListener("input", checkSource);
  pubForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (topic.value.trim() === "") return pubStatus.set("error", "topic must not be empty"), topic.focus();
    const problem = checkSource();
    if (problem) return pubStatus.set("error", problem), source.focus();
    if (type.value.trim() === "") return pubStatus.set("error", "cloudevent.type must not be empty"), type.focus();
    let payload;
    try {
      payload = JSON.parse(data.value || "null");
    } catch (err) {
      return pubStatus.set("error", `data is not valid JSON: ${err.message}`), data.focus();
    }
    const event = { specversion: "1.0", source: source.value, type: type.value.trim(), datacontenttype: "application/json", data: payload };
    if (id.value.trim()) event.id = id.value.trim();
    pubStatus.set("info", "Publishing…");
    try {
      const r = await api(`/v1/pubsub/${encodeURIComponent(topic.value.trim())}`, { method: "POST", body: event, contentType: "application/cloudevents+json" });
      if (r.status?.success) pubStatus.set("ok", `Published to ${topic.value.trim()}.`);
      else pubStatus.set("error", `${r.status?.status}: ${r.status?.message}`);
    } catch (err) {
      pubStatus.set("error", err.message);
    }
  });

  root.append(h("h2", { id: "title-topics" }, "Topics"), h("div", { class: "cols even" }, tailForm, pubForm), feedsEl);
  return {
    unmount() {
      for (const f of feeds) f.close();
    },
  };
}
