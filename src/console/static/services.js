// Services: dialable backends, their methods and schemas, and a call form (unary through /v1/gateway/invoke,
// server-streaming through /v1/gateway/invoke-stream as NDJSON, client- and bidi-streaming through the WebSocket
// /v1/gateway/invoke-ws with the key offered as a subprotocol).
import { api, ApiError, session } from "./api.js";
import { copyButton, field, h, pretty, replace, statusLine, submitOnCtrlEnter, uid } from "./dom.js";

/** Well-known types whose proto3 JSON form is not an object. */
const WELL_KNOWN = {
  "google.protobuf.Timestamp": "1970-01-01T00:00:00Z",
  "google.protobuf.Duration": "0s",
  "google.protobuf.FieldMask": "",
  "google.protobuf.Value": null,
  "google.protobuf.ListValue": [],
  "google.protobuf.Struct": {},
  "google.protobuf.Empty": {},
  "google.protobuf.StringValue": "",
  "google.protobuf.BytesValue": "",
  "google.protobuf.BoolValue": false,
  "google.protobuf.Int64Value": "0",
  "google.protobuf.UInt64Value": "0",
  "google.protobuf.Int32Value": 0,
  "google.protobuf.UInt32Value": 0,
  "google.protobuf.FloatValue": 0,
  "google.protobuf.DoubleValue": 0,
};
const SIXTY_FOUR = new Set(["int64", "uint64", "sint64", "fixed64", "sfixed64"]);

/** The proto3 JSON zero value of one field (the schema route describes one level: nested messages start empty). */
function zero(f) {
  if (f.isRepeated) return [];
  if (f.type === "map") return {};
  if (f.type === "message") return f.typeName in WELL_KNOWN ? WELL_KNOWN[f.typeName] : {};
  if (f.type === "enum") return 0;
  if (f.type === "bool") return false;
  if (f.type === "string" || f.type === "bytes") return "";
  if (SIXTY_FOUR.has(f.type)) return "0";
  return 0;
}

/** A JSON request skeleton from an input schema: every field with its zero value, in declaration order. */
export function skeleton(schema) {
  const out = {};
  for (const f of schema.fields) out[f.name] = zero(f);
  return out;
}

/** Quote for a POSIX shell (single quotes, embedded ' closed and escaped). */
export function shq(s) {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function kindLabel(k) {
  return { unary: "unary", server: "server streaming", client: "client streaming", bidi: "bidi streaming" }[k] ?? k;
}

function schemaTable(title, schema) {
  return h(
    "div",
    { class: "schema" },
    h("h4", {}, `${title}: `, h("code", {}, schema.schemaType === "input" ? schema.inputTypeName : schema.outputTypeName)),
    schema.fields.length === 0
      ? h("p", { class: "muted" }, "No fields.")
      : h(
          "table",
          {},
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Field"), h("th", { scope: "col" }, "Type"), h("th", { scope: "col" }, "Label"))),
          h(
            "tbody",
            {},
            schema.fields.map((f) =>
              h("tr", {}, h("td", {}, h("code", {}, f.name)), h("td", {}, f.typeName ? `${f.type} ${f.typeName}` : f.type), h("td", {}, f.isRepeated ? "repeated" : f.isOptional ? "optional" : "")),
            ),
          ),
        ),
  );
}

/** Mount the Services page. */
export function mount(root) {
  const status = statusLine();
  const list = h("ul", { class: "picklist", "aria-label": "Services" });
  const methods = h("div", { class: "methods" });
  const detail = h("div", { class: "detail" });
  let calls = new AbortController();
  root.append(
    h("h2", { id: "title-services" }, "Services"),
    status.el,
    h("div", { class: "cols" }, h("div", { class: "col-narrow" }, h("h3", {}, "Backends"), list, methods), detail),
  );

  const showMethod = async (service, m) => {
    calls.abort();
    calls = new AbortController();
    replace(detail, h("p", { class: "muted" }, `Loading ${m.fullName}…`));
    let input, output;
    try {
      const enc = `/v1/grpc/${encodeURIComponent(service)}/schema/${m.fullName.split("/").map(encodeURIComponent).join("/")}`;
      [input, output] = await Promise.all([api(`${enc}?type=input`), api(`${enc}?type=output`)]);
    } catch (e) {
      replace(detail, h("p", { class: "status error" }, `Cannot read the schema: ${e.message}`));
      return;
    }
    const streamsRequests = m.streamingType === "client" || m.streamingType === "bidi";
    if (streamsRequests) {
      mountRequestStream(detail, service, m, input, output);
      return;
    }
    const request = submitOnCtrlEnter(h("textarea", { rows: 10, spellcheck: "false", class: "code", name: "request" }));
    request.value = pretty(skeleton(input));
    const callStatus = statusLine();
    const reply = h("pre", { class: "reply", "aria-live": "polite", tabindex: "0" });
    const curl = h("pre", { class: "cmd" });
    const grpcurl = h("pre", { class: "cmd" });
    const updateCommands = () => {
      let body;
      try {
        body = JSON.parse(request.value || "{}");
      } catch {
        body = request.value;
      }
      const route = m.streamingType === "server" ? "invoke-stream" : "invoke";
      const rest = JSON.stringify({ service, method: m.fullName, requestData: body });
      curl.textContent = `curl -sS -X POST ${shq(`${location.origin}/v1/gateway/${route}`)} \\\n  -H "x-api-key: $GATEWAY_API_KEY" -H 'content-type: application/json' \\\n  -d ${shq(rest)}`;
      // The gateway's gRPC port forwards backend methods as they are (transparent proxy) and its reflection lists
      // them, so grpcurl calls the method by its own name. The browser cannot know that port: 5000 is the default.
      const rpc = typeof body === "string" ? body : JSON.stringify(body);
      grpcurl.textContent = `grpcurl -plaintext -H "x-api-key: $GATEWAY_API_KEY" \\\n  -d ${shq(rpc)} \\\n  ${location.hostname}:\${GATEWAY_GRPC_PORT:-5000} ${m.fullName}`;
    };
    request.addEventListener("input", updateCommands);
    updateCommands();
    const submit = h("button", { type: "submit" }, m.streamingType === "server" ? "Call and stream" : "Call");
    const cancel = h("button", { type: "button", class: "secondary", hidden: true }, "Stop");
    const form = h(
      "form",
      { class: "call", "aria-label": `Call ${m.fullName}` },
      field("Request (JSON; Ctrl+Enter calls)", request),
      h("div", { class: "buttons" }, submit, cancel),
      callStatus.el,
      h("h4", {}, "Reply"),
      reply,
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      updateCommands();
      let requestData;
      try {
        requestData = JSON.parse(request.value || "{}");
      } catch (err) {
        return callStatus.set("error", `The request is not valid JSON: ${err.message}`);
      }
      calls.abort();
      calls = new AbortController();
      const signal = calls.signal;
      reply.textContent = "";
      reply.classList.remove("error");
      callStatus.set("info", "Calling…");
      const started = performance.now();
      if (m.streamingType === "server") {
        cancel.hidden = false;
        cancel.onclick = () => calls.abort();
        try {
          await callStream(service, m.fullName, requestData, signal, reply, callStatus);
        } catch (err) {
          callStatus.set("error", signal.aborted ? "Stopped." : `The call failed: ${err.message}`);
        } finally {
          cancel.hidden = true;
        }
        return;
      }
      try {
        const r = await api("/v1/gateway/invoke", { method: "POST", body: { service, method: m.fullName, requestData }, signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]) });
        const ms = Math.round(performance.now() - started);
        if (r.success) {
          callStatus.set("ok", `OK in ${ms} ms`);
          reply.textContent = pretty(r.responseData);
        } else {
          callStatus.set("error", `${r.status}: ${r.message}`);
          reply.classList.add("error");
          reply.textContent = pretty({ success: r.success, status: r.status, message: r.message });
        }
      } catch (err) {
        if (!signal.aborted) callStatus.set("error", `The call failed: ${err.message}`);
      }
    });
    replace(
      detail,
      h("h3", {}, h("code", {}, m.fullName), " ", h("span", { class: `badge kind-${m.streamingType}` }, kindLabel(m.streamingType))),
      h("div", { class: "schemas" }, schemaTable("Input", input), schemaTable("Output", output)),
      form,
      h("h4", {}, "Same call with curl ", copyButton(curl)),
      curl,
      h("h4", {}, "Same call with grpcurl ", copyButton(grpcurl)),
      grpcurl,
    );
  };

  const showService = async (service, button) => {
    for (const b of list.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
    replace(methods, h("p", { class: "muted" }, "Loading methods…"));
    replace(detail);
    try {
      const ms = await api(`/v1/grpc/${encodeURIComponent(service)}/methods`);
      replace(
        methods,
        h("h3", {}, "Methods of ", h("code", {}, service)),
        h(
          "ul",
          { class: "picklist", "aria-label": `Methods of ${service}` },
          ms.map((m) => {
            // A name two services share is shown with its service (the call uses the full name either way).
            const shared = ms.filter((o) => o.name === m.name).length > 1;
            const label = shared ? `${m.fullName.split("/")[0].split(".").pop()}.${m.name}` : m.name;
            const b = h("button", { type: "button", class: "pick", "data-method": m.fullName, title: m.fullName }, h("span", {}, label), h("span", { class: `badge kind-${m.streamingType}` }, kindLabel(m.streamingType)));
            b.addEventListener("click", () => {
              for (const o of methods.querySelectorAll("button")) o.setAttribute("aria-pressed", String(o === b));
              showMethod(service, m);
            });
            return h("li", {}, b);
          }),
        ),
      );
    } catch (e) {
      replace(methods, h("p", { class: "status error" }, `Cannot list the methods of ${service}: ${e.message}`));
    }
  };

  (async () => {
    try {
      const { services } = await api("/v1/gateway/list-services");
      if (services.length === 0) return status.set("info", "No dialable backends are registered (see the services configuration file).");
      replace(
        list,
        services.map((s) => {
          const b = h("button", { type: "button", class: "pick", "data-service": s, "aria-pressed": "false" }, s);
          b.addEventListener("click", () => showService(s, b));
          return h("li", {}, b);
        }),
      );
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) status.set("error", `Cannot list the services: ${e.message}`);
    }
  })();
  return { unmount: () => calls.abort() };

  /**
   * The form of a client- or bidi-streaming method: request messages one JSON object per line, sent over one
   * WebSocket invocation; replies show as they arrive; End half-closes, Stop cancels, the final status closes it.
   */
  function mountRequestStream(detail, service, m, input, output) {
    const requests = submitOnCtrlEnter(h("textarea", { rows: 6, spellcheck: "false", class: "code", name: "requests" }));
    const line = JSON.stringify(skeleton(input));
    requests.value = `${line}\n${line}`;
    const keepOpen = h("input", { type: "checkbox", name: "keep-open", id: uid("keep") });
    const callStatus = statusLine();
    const reply = h("pre", { class: "reply", "aria-live": "polite", tabindex: "0" });
    const wsCmd = h("pre", { class: "cmd" });
    const grpcurl = h("pre", { class: "cmd" });
    const submit = h("button", { type: "submit" }, "Start and send");
    const endButton = h("button", { type: "button", class: "secondary", "data-action": "end", hidden: true }, "End requests");
    const stop = h("button", { type: "button", class: "secondary", "data-action": "stop", hidden: true }, "Stop");
    /** The open invocation: { send(frame), ended } or null. */
    let live = null;

    const messages = () => {
      const out = [];
      const lines = requests.value.split("\n");
      for (let i = 0; i < lines.length; i++) {
        const text = lines[i].trim();
        if (!text) continue;
        let v;
        try {
          v = JSON.parse(text);
        } catch (err) {
          throw new Error(`line ${i + 1} is not valid JSON: ${err.message}`);
        }
        if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error(`line ${i + 1} must be a JSON object`);
        out.push(v);
      }
      if (out.length > MAX_STREAM_MESSAGES) throw new Error(`at most ${MAX_STREAM_MESSAGES} messages per send (got ${out.length})`);
      return out;
    };
    const updateCommands = () => {
      let list;
      try {
        list = messages();
      } catch {
        list = [];
      }
      const frames = [{ op: "start", service, method: m.fullName }, ...list.map((requestData) => ({ op: "send", requestData })), { op: "end" }].map((f) => shq(JSON.stringify(f)));
      const wsUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/gateway/invoke-ws`;
      // curl cannot stream requests: websocat sends one text frame per line; -n waits for the gateway's close.
      wsCmd.textContent = `printf '%s\\n' \\\n  ${frames.join(" \\\n  ")} \\\n| websocat -n -H "x-api-key: $GATEWAY_API_KEY" ${shq(wsUrl)}`;
      const rpc = list.map((o) => JSON.stringify(o)).join("\n");
      grpcurl.textContent = `grpcurl -plaintext -H "x-api-key: $GATEWAY_API_KEY" \\\n  -d ${shq(rpc)} \\\n  ${location.hostname}:\${GATEWAY_GRPC_PORT:-5000} ${m.fullName}`;
    };
    requests.addEventListener("input", updateCommands);
    updateCommands();

    const showOpen = (open) => {
      submit.textContent = open ? "Send" : "Start and send";
      stop.hidden = !open;
      endButton.hidden = !open || live?.ended === true;
    };
    const form = h(
      "form",
      { class: "call", "aria-label": `Call ${m.fullName}` },
      field("Request messages (one JSON object per line; Ctrl+Enter sends)", requests),
      h("div", { class: "check" }, keepOpen, h("label", { for: keepOpen.id }, "Keep the request stream open after sending (send more, then End requests)")),
      h("div", { class: "buttons" }, submit, endButton, stop),
      callStatus.el,
      h("h4", {}, "Replies"),
      reply,
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      updateCommands();
      let list;
      try {
        list = messages();
      } catch (err) {
        return callStatus.set("error", `The request messages are not valid: ${err.message}`);
      }
      const finish = !keepOpen.checked;
      if (live) {
        if (live.ended) return callStatus.set("error", "The request stream is ended: wait for the replies or Stop.");
        for (const requestData of list) live.send({ op: "send", requestData });
        if (finish) live.end();
        showOpen(true);
        return;
      }
      reply.textContent = "";
      reply.classList.remove("error");
      calls.abort();
      calls = new AbortController();
      live = openInvocation(service, m.fullName, calls.signal, {
        onOpen() {
          for (const requestData of list) live.send({ op: "send", requestData });
          if (finish) live.end();
          showOpen(true);
        },
        onResult(n, result) {
          reply.append(`// message ${n}\n${pretty(result)}\n`);
          callStatus.set("info", `Streaming… ${n} message${n === 1 ? "" : "s"}`);
        },
        onStatus(st, n) {
          const after = `${n} message${n === 1 ? "" : "s"}`;
          if (st.success) callStatus.set("ok", `OK: ${after}`);
          else {
            callStatus.set("error", `${st.status}: ${st.message} (after ${after})`);
            reply.classList.add("error");
          }
        },
        onClose(problem) {
          if (problem) callStatus.set("error", problem);
          live = null;
          showOpen(false);
        },
      });
      callStatus.set("info", "Connecting…");
    });
    endButton.addEventListener("click", () => {
      live?.end();
      showOpen(Boolean(live));
    });
    stop.addEventListener("click", () => live?.send({ op: "cancel" }));
    replace(
      detail,
      h("h3", {}, h("code", {}, m.fullName), " ", h("span", { class: `badge kind-${m.streamingType}` }, kindLabel(m.streamingType))),
      h("div", { class: "schemas" }, schemaTable("Input", input), schemaTable("Output", output)),
      form,
      h("h4", {}, "Same call with websocat (curl cannot stream requests) ", copyButton(wsCmd)),
      wsCmd,
      h("h4", {}, "Same call with grpcurl ", copyButton(grpcurl)),
      grpcurl,
    );
  }
}

/** Request messages one Send may carry: the gateway ends a call with more than 64 unsent requests. */
const MAX_STREAM_MESSAGES = 64;

/** base64url (no padding) of a string's UTF-8 bytes: how the key travels as a WebSocket subprotocol value. */
function base64url(s) {
  let bin = "";
  for (const b of new TextEncoder().encode(s)) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * One invocation over `WebSocket /v1/gateway/invoke-ws`. Browsers cannot set x-api-key on a WebSocket, so the key is
 * offered as the subprotocol `key.<base64url>` next to `invoke.v1` (which the gateway selects). Returns
 * { send(frame), end(), ended }; aborting `signal` closes the socket, which cancels the backend call.
 */
function openInvocation(service, method, signal, { onOpen, onResult, onStatus, onClose }) {
  const s = session.get();
  const protocols = ["invoke.v1"];
  if (s?.kind === "key") protocols.push(`key.${base64url(s.key)}`);
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/gateway/invoke-ws`, protocols);
  let n = 0;
  let status = null;
  const live = {
    ended: false,
    send(frame) {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
    },
    end() {
      if (live.ended) return;
      live.ended = true;
      live.send({ op: "end" });
    },
  };
  signal.addEventListener("abort", () => ws.close(1000), { once: true });
  ws.onopen = () => {
    ws.send(JSON.stringify({ op: "start", service, method }));
    onOpen();
  };
  ws.onmessage = (e) => {
    let frame;
    try {
      frame = JSON.parse(e.data);
    } catch {
      return;
    }
    if (frame.op === "result") onResult(++n, frame.result);
    else if (frame.op === "status") {
      status = frame.status;
      onStatus(status, n);
    }
  };
  ws.onclose = (e) => {
    // Without a status the gateway refused the upgrade (bad key, origin) or the connection dropped.
    const problem = status || signal.aborted ? null : e.code === 1006 && n === 0 ? "The gateway refused the WebSocket (sign in again with a valid key) or cannot be reached." : `The connection closed without a status (code ${e.code}).`;
    onClose(problem);
  };
  return live;
}

/**
 * A server-streaming call: `POST /v1/gateway/invoke-stream` answers NDJSON, one `{"result": {...}}` line per message
 * and a final `{"status": {...}}`. Each message is shown as it arrives.
 */
async function callStream(service, method, requestData, signal, reply, callStatus) {
  const headers = { "content-type": "application/json", accept: "application/x-ndjson" };
  const s = session.get();
  if (s?.kind === "key") headers["x-api-key"] = s.key;
  const res = await fetch("/v1/gateway/invoke-stream", { method: "POST", headers, body: JSON.stringify({ service, method, requestData }), signal });
  if (res.status === 404) {
    await res.body?.cancel();
    throw new Error("this gateway has no POST /v1/gateway/invoke-stream route (streaming invoke is not available)");
  }
  if (!res.ok || !res.body) {
    const text = await res.text();
    throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let n = 0;
  callStatus.set("info", "Streaming…");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.result !== undefined) {
        n++;
        reply.append(`// message ${n}\n${pretty(msg.result)}\n`);
        callStatus.set("info", `Streaming… ${n} message${n === 1 ? "" : "s"}`);
      } else if (msg.status) {
        const st = msg.status;
        if (st.success) callStatus.set("ok", `OK: ${n} message${n === 1 ? "" : "s"}`);
        else {
          callStatus.set("error", `${st.status}: ${st.message} (after ${n} message${n === 1 ? "" : "s"})`);
          reply.classList.add("error");
        }
      }
    }
  }
}
