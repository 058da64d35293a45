// The console's shell: sign-in, the page router (location.hash) and the header. Each page module exports
// `mount(root) -> { unmount() }`; only the shown page runs timers or streams.
import { api, ApiError, session, tokenClaims, whenUnauthenticated } from "./api.js";
import { field, h, replace, statusLine } from "./dom.js";
import * as services from "./services.js";
import * as topics from "./topics.js";
import * as state from "./state.js";
import * as triggers from "./triggers.js";
import * as health from "./health.js";
import * as openapi from "./openapi.js";

const PAGES = { services, api: openapi, topics, state, triggers, health };
/** Pages a token (no API key) can use: tokens only authorise pub/sub streams. */
const TOKEN_PAGES = new Set(["topics", "health"]);

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
let current;
let signInMessage = "";
/** True while the sign-in form checks a key: its 401 is the form's answer, not a session that ended. */
let checking = false;

function showSignIn(message = signInMessage) {
  current?.unmount?.();
  current = undefined;
  nav.hidden = true;
  who.hidden = true;
  const status = statusLine();
  if (message) status.set("error", message);
  const kind = h("select", { name: "kind" }, h("option", { value: "key" }, "API key"), h("option", { value: "token" }, "Browser token"));
  const secret = h("input", { type: "password", name: "secret", autocomplete: "off", spellcheck: "false" });
  const form = h(
    "form",
    { class: "card signin", "aria-labelledby": "signin-title" },
    h("h2", { id: "signin-title" }, "Sign in"),
    h("p", {}, "Use an API key the gateway accepts (x-api-key), or a browser token from POST /v1/pubsub/tokens (topics only). It is kept in this tab's session storage until you sign out or close the tab."),
    field("Credential", kind),
    field("Key or token", secret, "Leave the key empty when the gateway has no API keys configured."),
    h("button", { type: "submit" }, "Sign in"),
    status.el,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = secret.value.trim();
    status.set("info", "Checking…");
    if (kind.value === "token") {
      const claims = tokenClaims(value);
      if (!claims) return status.set("error", "That is not a gateway browser token (a JWT from POST /v1/pubsub/tokens).");
      if (claims.expiresAt <= Date.now()) return status.set("error", `That token expired at ${new Date(claims.expiresAt).toISOString()}.`);
      session.signInWithToken(value);
    } else {
      session.signInWithKey(value);
      checking = true;
      try {
        // Any keyed route tells whether the gateway takes this key.
        await api("/v1/gateway/list-services");
      } catch (err) {
        checking = false;
        session.signOut();
        const refused = err instanceof ApiError && err.status === 401;
        return status.set("error", refused ? "Sign-in failed: the gateway refused this key (UNAUTHENTICATED)." : `Sign-in failed: ${err.message}`);
      }
      checking = false;
    }
    signInMessage = "";
    // Setting the hash fires hashchange, which routes: routing here too would mount the page twice, and a click on the
    // first copy (a test, a quick user) would land on a node the second mount just replaced.
    if (!location.hash || location.hash === "#signin") location.hash = session.get()?.kind === "token" ? "#topics" : "#services";
    else route();
  });
  replace(main, form);
  secret.focus();
}

function route() {
  const s = session.get();
  if (!s) return showSignIn();
  let name = location.hash.replace(/^#/, "") || (s.kind === "token" ? "topics" : "services");
  if (!PAGES[name]) name = "services";
  nav.hidden = false;
  who.hidden = false;
  document.getElementById("who-text").textContent =
    s.kind === "key" ? (s.key ? "Signed in with an API key" : "Signed in (gateway without API keys)") : `Token for ${s.topics.join(", ")} until ${new Date(s.expiresAt).toLocaleTimeString()}`;
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.page === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  current?.unmount?.();
  current = undefined;
  const root = h("section", { class: `page page-${name}`, "aria-labelledby": `title-${name}` });
  replace(main, root);
  if (s.kind === "token" && !TOKEN_PAGES.has(name)) {
    root.append(h("h2", { id: `title-${name}` }, name[0].toUpperCase() + name.slice(1)), h("p", { class: "status info" }, "This page needs an API key: a browser token only authorises topic streams. Sign out and sign in with a key."));
    return;
  }
  current = PAGES[name].mount(root);
  document.title = `${name[0].toUpperCase() + name.slice(1)} · Platform Gateway console`;
  root.querySelector("h2")?.setAttribute("tabindex", "-1");
}

// The skip link moves focus without touching location.hash, which names the page.
document.querySelector(".skip").addEventListener("click", (e) => {
  e.preventDefault();
  (main.querySelector("h2") ?? main).focus();
});
document.getElementById("signout").addEventListener("click", () => {
  session.signOut();
  signInMessage = "";
  showSignIn();
});
whenUnauthenticated(() => {
  if (checking || !session.get()) return;
  session.signOut();
  showSignIn("The gateway no longer accepts this key: sign in again.");
});
window.addEventListener("hashchange", () => {
  route();
  main.querySelector("h2")?.focus();
});
route();
