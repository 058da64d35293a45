// Tiny DOM helpers: every page builds its markup with h(), never innerHTML, so nothing from the gateway or a backend
// is ever parsed as HTML.

/**
 * Create an element. `attrs` keys starting with "on" add listeners; `class`, `for`, and others become attributes;
 * boolean true sets an empty attribute, false/null/undefined omit it. Children may be strings, nodes or arrays.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** Replace every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

let ids = 0;
/** A fresh element id (labels need them). */
export function uid(prefix) {
  return `${prefix}-${++ids}`;
}

/** A labelled form field: the label above the control. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid("f");
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hint ? h("small", { class: "hint" }, hint) : null);
}

/** A status line (role=status so screen readers announce it). `kind`: "ok", "error" or "info". */
export function statusLine() {
  const el = h("p", { class: "status", role: "status" });
  return {
    el,
    set(kind, text) {
      el.className = `status ${kind}`;
      el.textContent = text;
    },
    clear() {
      el.className = "status";
      el.textContent = "";
    },
  };
}

/** JSON pretty-printed for a <pre>. */
export function pretty(v) {
  return JSON.stringify(v, null, 2);
}

/** Ctrl/Cmd+Enter in a textarea submits its form. */
export function submitOnCtrlEnter(textarea) {
  textarea.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      textarea.form?.requestSubmit();
    }
  });
  return textarea;
}

/** A "Copy" button for the text of `pre`; clipboard failures (insecure origin) select the text instead. */
export function copyButton(pre, label = "Copy") {
  const b = h("button", { type: "button", class: "small" }, label);
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(pre.textContent ?? "");
      b.textContent = "Copied";
    } catch {
      const range = document.createRange();
      range.selectNodeContents(pre);
      getSelection()?.removeAllRanges();
      getSelection()?.addRange(range);
      b.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => (b.textContent = label), 1500);
  });
  return b;
}
