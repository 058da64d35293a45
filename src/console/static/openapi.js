// API: the operations of the gateway's OpenAPI document (GET /v1/openapi.json: the backends' google.api.http routes)
// grouped by tag, each with its parameters, request body skeleton and responses, a try-it form that sends the request
// with the signed-in key and shows status, headers and body, and the same request as a curl command.
import { api, ApiError, session } from "./api.js";
import { copyButton, field, h, pretty, replace, statusLine, submitOnCtrlEnter } from "./dom.js";
import { shq } from "./services.js";

/** Operation keys of an OpenAPI path item. */
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/** Skeleton depth: a recursive message stops here (its $ref is already being filled further up). */
const MAX_DEPTH = 6;

/** The schema `$ref` points at in the document (`#/components/schemas/Name`), or the schema itself. */
function resolve(schema, doc) {
  const ref = schema?.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/components/schemas/")) return schema ?? {};
  return doc.components?.schemas?.[ref.slice("#/components/schemas/".length)] ?? {};
}

/**
 * A JSON example of a schema with proto3 JSON zero values: every property, enums by their first name, 64-bit integers
 * as "0", date-times and durations in their string forms; recursion ends in `{}`.
 */
export function skeletonOf(schema, doc, seen = []) {
  const ref = schema?.$ref;
  if (ref) {
    if (seen.includes(ref) || seen.length >= MAX_DEPTH) return {};
    return skeletonOf(resolve(schema, doc), doc, [...seen, ref]);
  }
  if (!schema || typeof schema !== "object") return null;
  if (Array.isArray(schema.enum)) return schema.enum[0] ?? null;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "object": {
      const out = {};
      for (const [k, v] of Object.entries(schema.properties ?? {})) out[k] = skeletonOf(v, doc, seen);
      return out;
    }
    case "array":
      return [];
    case "boolean":
      return false;
    case "integer":
    case "number":
      return 0;
    case "null":
      return null;
    case "string":
      if (schema.format === "date-time") return "1970-01-01T00:00:00Z";
      if (schema.format === "int64" || schema.format === "uint64") return "0";
      if (typeof schema.pattern === "string" && schema.pattern.endsWith("s$")) return "0s";
      return "";
    default:
      return null;
  }
}

/**
 * The request URL of an operation: path parameters percent-encoded (a multi-segment one, `x-multi-segment`, keeps
 * its `/`), query parameters from non-empty values (an array parameter takes comma-separated values, one `name=v`
 * each). Throws naming a missing required path parameter.
 */
export function buildUrl(path, parameters, values) {
  const byName = new Map(parameters.map((p) => [`${p.in}:${p.name}`, p]));
  const url = path.replace(/\{([^}]+)\}/g, (_, name) => {
    const p = byName.get(`path:${name}`);
    const v = values[`path:${name}`] ?? "";
    if (v === "") throw new Error(`path parameter ${name} is required`);
    return p?.["x-multi-segment"] ? v.split("/").map(encodeURIComponent).join("/") : encodeURIComponent(v);
  });
  const q = new URLSearchParams();
  for (const p of parameters) {
    if (p.in !== "query") continue;
    const v = values[`query:${p.name}`] ?? "";
    if (v === "") continue;
    if (p.schema?.type === "array") for (const item of v.split(",")) q.append(p.name, item.trim());
    else q.append(p.name, v);
  }
  const qs = q.toString();
  return qs ? `${url}?${qs}` : url;
}

/** Every operation of the document: [{ method, path, op, custom }] in document order, custom verbs last. */
export function operationsOf(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const m of METHODS) if (item[m]) out.push({ method: m.toUpperCase(), path, op: item[m], custom: false });
  }
  for (const c of doc["x-custom-operations"] ?? []) out.push({ method: c.method, path: c.path, op: c.operation, custom: true });
  return out;
}

/** A schema's short name for a table: its $ref name, its type and format. */
function typeLabel(schema, doc) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : schema.type ?? "any";
  if (type === "array") return `array of ${typeLabel(schema.items, doc)}`;
  return schema.format ? `${type} (${schema.format})` : type;
}

function paramTable(parameters, doc) {
  if (parameters.length === 0) return h("p", { class: "muted" }, "No parameters.");
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "params" },
      h("thead", {}, h("tr", {}, ["Name", "In", "Type", "Description"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        parameters.map((p) =>
          h("tr", {}, h("td", {}, h("code", {}, p.name), p.required ? " *" : ""), h("td", {}, p.in), h("td", {}, typeLabel(p.schema, doc)), h("td", { class: "desc" }, p.description ?? "")),
        ),
      ),
    ),
  );
}

function responseList(op, doc) {
  return h(
    "ul",
    { class: "responses" },
    Object.entries(op.responses ?? {}).map(([status, r]) => {
      const [type, media] = Object.entries(r.content ?? {})[0] ?? [];
      return h("li", {}, h("code", {}, status), " ", r.description ?? "", type ? h("span", { class: "muted" }, ` (${type}: ${typeLabel(media?.schema, doc)})`) : "");
    }),
  );
}

/** Mount the API page. */
export function mount(root) {
  const status = statusLine();
  const list = h("div", { class: "ops" });
  const detail = h("div", { class: "detail" });
  let calls = new AbortController();
  root.append(h("h2", { id: "title-api" }, "API"), status.el, h("div", { class: "cols" }, h("div", { class: "col-narrow" }, list), detail));

  const showOperation = (doc, entry) => {
    calls.abort();
    calls = new AbortController();
    const { method, path, op } = entry;
    const parameters = op.parameters ?? [];
    const bodySchema = op.requestBody?.content?.["application/json"]?.schema;
    const inputs = new Map();
    const inputFor = (p) => {
      const control = h("input", { type: "text", name: `${p.in}:${p.name}`, spellcheck: "false", autocomplete: "off", required: p.required === true });
      inputs.set(`${p.in}:${p.name}`, control);
      const hint = p.schema?.type === "array" ? "Comma-separated values." : p["x-multi-segment"] ? "May contain /." : undefined;
      return field(`${p.name}${p.required ? " (required)" : ""}`, control, hint);
    };
    const body = bodySchema ? submitOnCtrlEnter(h("textarea", { rows: 8, spellcheck: "false", class: "code", name: "body" })) : undefined;
    if (body) body.value = pretty(skeletonOf(bodySchema, doc));
    const callStatus = statusLine();
    const replyHead = h("pre", { class: "reply headers", tabindex: "0" });
    const reply = h("pre", { class: "reply", "aria-live": "polite", tabindex: "0" });
    const curl = h("pre", { class: "cmd" });
    const values = () => Object.fromEntries([...inputs].map(([k, el]) => [k, el.value.trim()]));
    const updateCurl = () => {
      let url;
      try {
        url = buildUrl(path, parameters, values());
      } catch {
        url = path; // the template until every path parameter is filled in
      }
      const data = body ? ` \\\n  -H 'content-type: application/json' -d ${shq(body.value)}` : "";
      curl.textContent = `curl -sS -i -X ${method} ${shq(location.origin + url)} \\\n  -H "x-api-key: $GATEWAY_API_KEY"${data}`;
    };
    const submit = h("button", { type: "submit" }, "Send");
    const form = h(
      "form",
      { class: "try", "aria-label": `Try ${method} ${path}`, novalidate: true },
      h("h4", {}, "Try it"),
      parameters.filter((p) => p.in === "path").map(inputFor),
      parameters.some((p) => p.in === "query") ? h("details", {}, h("summary", {}, "Query parameters"), parameters.filter((p) => p.in === "query").map(inputFor)) : null,
      body ? field("Body (JSON; Ctrl+Enter sends)", body) : null,
      h("div", { class: "buttons" }, submit),
      callStatus.el,
      replyHead,
      reply,
    );
    form.addEventListener("input", updateCurl);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      updateCurl();
      let url;
      try {
        url = buildUrl(path, parameters, values());
      } catch (err) {
        return callStatus.set("error", `Cannot send: ${err.message}.`);
      }
      if (body) {
        try {
          JSON.parse(body.value);
        } catch (err) {
          return callStatus.set("error", `The body is not valid JSON: ${err.message}`);
        }
      }
      calls.abort();
      calls = new AbortController();
      const s = session.get();
      const headers = { ...(s?.kind === "key" ? { "x-api-key": s.key } : {}), ...(body ? { "content-type": "application/json" } : {}) };
      replyHead.textContent = "";
      reply.textContent = "";
      reply.classList.remove("error");
      callStatus.set("info", `${method} ${url}…`);
      const started = performance.now();
      try {
        const res = await fetch(url, { method, headers, body: body?.value, signal: AbortSignal.any([calls.signal, AbortSignal.timeout(60_000)]) });
        const text = await res.text();
        const ms = Math.round(performance.now() - started);
        callStatus.set(res.ok ? "ok" : "error", `HTTP ${res.status} ${res.statusText} in ${ms} ms`);
        replyHead.textContent = [...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n");
        let shown = text;
        try {
          shown = (res.headers.get("content-type") ?? "").includes("ndjson") ? text : pretty(JSON.parse(text));
        } catch {
          // Not JSON: shown as it came.
        }
        reply.textContent = shown;
        if (!res.ok) reply.classList.add("error");
      } catch (err) {
        if (!calls.signal.aborted) callStatus.set("error", `The request failed: ${err.message}`);
      }
    });
    updateCurl();
    replace(
      detail,
      h("h3", { class: "op-title" }, h("span", { class: `badge verb verb-${method.toLowerCase()}` }, method), " ", h("code", {}, path)),
      op.summary ? h("p", { class: "summary" }, op.summary) : null,
      // The description repeats the summary as its first paragraph (both come from the proto comment).
      op.description ? h("p", { class: "desc" }, op.summary && op.description.startsWith(op.summary) ? op.description.slice(op.summary.length).trim() : op.description) : null,
      entry.custom ? h("p", { class: "status info" }, `${method} is not an OpenAPI operation method: the document lists this route under x-custom-operations.`) : null,
      h("h4", {}, "Parameters"),
      paramTable(parameters, doc),
      bodySchema ? [h("h4", {}, "Request body ", h("span", { class: "muted" }, typeLabel(bodySchema, doc))), h("pre", { class: "skeleton" }, pretty(skeletonOf(bodySchema, doc)))] : null,
      h("h4", {}, "Responses"),
      responseList(op, doc),
      form,
      h("h4", {}, "Same request with curl ", copyButton(curl)),
      curl,
    );
  };

  (async () => {
    let doc;
    try {
      doc = await api("/v1/openapi.json", { signal: calls.signal });
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) status.set("error", `Cannot read /v1/openapi.json: ${e.message}`);
      return;
    }
    const down = doc["x-unavailable"] ?? [];
    if (down.length > 0) status.set("info", `Not in the document (schema not loaded): ${down.map((d) => `${d.service} (${d.message})`).join("; ")}`);
    const ops = operationsOf(doc);
    if (ops.length === 0) {
      list.append(h("p", { class: "muted" }, "No backend method has an HTTP route (google.api.http annotations)."));
      return;
    }
    const tags = (doc.tags ?? []).map((t) => t.name);
    for (const e of ops) for (const t of e.op.tags ?? []) if (!tags.includes(t)) tags.push(t);
    const untagged = ops.filter((e) => (e.op.tags ?? []).length === 0);
    const group = (title, entries) =>
      h(
        "section",
        { class: "tag" },
        h("h3", {}, title),
        h(
          "ul",
          { class: "picklist", "aria-label": `Operations of ${title}` },
          entries.map((e) => {
            const b = h(
              "button",
              { type: "button", class: "pick op", "data-operation": e.op.operationId, "aria-pressed": "false", title: `${e.method} ${e.path}` },
              h("span", { class: "op-line" }, h("span", { class: `badge verb verb-${e.method.toLowerCase()}` }, e.method), " ", h("code", {}, e.path)),
              e.op.summary ? h("span", { class: "op-summary" }, e.op.summary) : null,
            );
            b.addEventListener("click", () => {
              for (const o of list.querySelectorAll("button.op")) o.setAttribute("aria-pressed", String(o === b));
              showOperation(doc, e);
            });
            return h("li", {}, b);
          }),
        ),
      );
    replace(
      list,
      tags.map((t) => group(t, ops.filter((e) => (e.op.tags ?? []).includes(t)))),
      untagged.length > 0 ? group("Other", untagged) : null,
    );
  })();
  return { unmount: () => calls.abort() };
}
