// The console's one way to reach the gateway: same-origin fetch with the signed-in x-api-key, and EventSource tails
// authorised by a browser token (EventSource cannot send headers).

const KEY = "platform-gateway.console.key";
const TOKEN = "platform-gateway.console.token";

/** The signed-in credential, kept in this tab's session storage only. */
export const session = {
  /** { kind: "key", key } | { kind: "token", token, topics, expiresAt } | null */
  get() {
    const key = sessionStorage.getItem(KEY);
    if (key !== null) return { kind: "key", key };
    const token = sessionStorage.getItem(TOKEN);
    if (token !== null) {
      const claims = tokenClaims(token);
      if (claims) return { kind: "token", token, ...claims };
    }
    return null;
  },
  signInWithKey(key) {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.setItem(KEY, key);
  },
  signInWithToken(token) {
    sessionStorage.removeItem(KEY);
    sessionStorage.setItem(TOKEN, token);
  },
  signOut() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(TOKEN);
  },
};

/**
 * The claims of a gateway browser token (JWT from POST /v1/pubsub/tokens), read without checking the signature (the
 * gateway checks it on every stream): { topics, publish, expiresAt } or null when it is not one.
 */
export function tokenClaims(token) {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const json = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/"));
    const p = JSON.parse(json);
    if (!Array.isArray(p.topics) || typeof p.exp !== "number") return null;
    return { topics: p.topics, publish: p.pub === true, expiresAt: p.exp * 1000 };
  } catch {
    return null;
  }
}

/** A failed call: HTTP status and the gateway's google.rpc.Status body when there is one. */
export class ApiError extends Error {
  constructor(status, body) {
    const codeName = CODE_NAMES[body?.code] ?? `HTTP ${status}`;
    super(`${codeName}: ${body?.message ?? "request failed"}`);
    this.status = status;
    this.body = body;
    this.codeName = codeName;
  }
}

/** gRPC code numbers to names (the REST error body carries the number). */
export const CODE_NAMES = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"];

/** Listeners told when the gateway refuses the credential (401), so the app can go back to sign-in. */
const onUnauthenticated = new Set();
export function whenUnauthenticated(fn) {
  onUnauthenticated.add(fn);
}

function headers(extra = {}) {
  const s = session.get();
  return s?.kind === "key" ? { "x-api-key": s.key, ...extra } : { ...extra };
}

/**
 * Call a route. `body` objects are sent as JSON. Resolves the parsed JSON (or text) reply; rejects with ApiError on a
 * non-2xx status. 30 s timeout unless `signal` is given.
 */
export async function api(path, { method = "GET", body, contentType = "application/json", signal, raw = false } = {}) {
  const init = { method, headers: headers(body !== undefined ? { "content-type": contentType } : {}), signal: signal ?? AbortSignal.timeout(30_000) };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(path, init);
  const text = await res.text();
  let parsed = text;
  if (!raw && (res.headers.get("content-type") ?? "").includes("json") && text !== "") {
    try {
      parsed = JSON.parse(text);
    } catch {
      // Leave the text: the caller shows it.
    }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, typeof parsed === "object" ? parsed : { message: String(parsed).slice(0, 300) });
    if (res.status === 401) for (const fn of onUnauthenticated) fn(err);
    throw err;
  }
  return parsed;
}

/** Percent-encode each segment of a state key, keeping its `/` separators (the route takes `{key+}`). */
export function keyPath(key) {
  return key.split("/").map(encodeURIComponent).join("/");
}

/**
 * A token for EventSource tails of `topics`: the signed-in token itself, or one issued for this key (1 h). Rejects with
 * ApiError when the gateway refuses, or Error when the signed-in token does not cover a topic.
 */
export async function streamToken(topics) {
  const s = session.get();
  if (!s) throw new Error("sign in first");
  if (s.kind === "token") {
    for (const t of topics) {
      if (!s.topics.some((p) => (p.endsWith("*") ? t.startsWith(p.slice(0, -1)) : t === p))) throw new Error(`the signed-in token does not allow topic '${t}' (it allows ${s.topics.join(", ")})`);
    }
    return s.token;
  }
  const r = await api("/v1/pubsub/tokens", { method: "POST", body: { topics, ttl_seconds: 3600 } });
  return r.token;
}

/**
 * A live tail of topics over Server-Sent Events (`GET /v1/pubsub/events`). EventSource reconnects by itself and sends
 * Last-Event-ID, so the gateway replays what was missed; when the gateway ends the stream (token expired, shutdown)
 * the tail takes a fresh token and reopens from the last position it saw. Callbacks:
 * onEvent({topic, id, cloudevent}), onState("connecting" | "live" | "reconnecting" | "closed", detail),
 * onRecovery(recovered: boolean).
 */
export function tail(topics, { onEvent, onState, onRecovery }) {
  let es;
  let lastId;
  let closed = false;
  let reopenTimer;
  const open = async () => {
    onState("connecting");
    let token;
    try {
      token = await streamToken(topics);
    } catch (e) {
      onState("closed", e.message);
      closed = true;
      return;
    }
    if (closed) return;
    const q = new URLSearchParams();
    for (const t of topics) q.append("topic", t);
    q.set("token", token);
    if (lastId) q.set("lastEventId", lastId);
    es = new EventSource(`/v1/pubsub/events?${q}`);
    es.onopen = () => onState("live");
    es.onmessage = (m) => {
      lastId = m.lastEventId || lastId;
      try {
        const d = JSON.parse(m.data);
        onEvent({ topic: d.topic, id: m.lastEventId, cloudevent: d.cloudevent });
      } catch {
        // A malformed message is skipped; the next one still arrives.
      }
    };
    es.addEventListener("recovery", (m) => {
      try {
        onRecovery(JSON.parse(m.data).recovered === true);
      } catch {
        onRecovery(false);
      }
    });
    es.addEventListener("end", (m) => {
      es.close();
      let reason = "";
      try {
        reason = JSON.parse(m.data).reason ?? "";
      } catch {
        // keep empty
      }
      if (closed) return;
      onState("reconnecting", `the gateway ended the stream${reason ? ` (${reason})` : ""}`);
      reopenTimer = setTimeout(open, 1000);
    });
    es.onerror = () => {
      if (closed) return;
      // CONNECTING: EventSource retries by itself (with Last-Event-ID). CLOSED: the gateway refused; try once more later.
      if (es.readyState === EventSource.CONNECTING) onState("reconnecting", "connection lost; resuming");
      else {
        onState("reconnecting", "the gateway refused the stream; retrying in 3 s");
        reopenTimer = setTimeout(open, 3000);
      }
    };
  };
  open();
  return {
    close() {
      closed = true;
      clearTimeout(reopenTimer);
      es?.close();
      onState("closed");
    },
  };
}
