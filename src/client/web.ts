import WebSocket from "ws";
import { Code, codeFromName } from "../shared/code.js";
import { FATAL_SUBSCRIBE_CODES, GatewayClientError, invalidArgument } from "./errors.js";
import { backoffDelay, resolveReconnectOptions, timeoutMsOption, type ReconnectOptions } from "./options.js";

/** One event as the web transports deliver it. */
export interface WebEventMessage {
  topic: string;
  /** The event's position: pass it as `since` to resume after it. */
  id: string;
  /** The event in the CloudEvents JSON format. */
  cloudevent: Record<string, unknown>;
}

/** Options of `subscribeWeb()`. */
export interface WebSubscribeOptions {
  /** The gateway's REST (uWS) base URL, e.g. "http://127.0.0.1:8080". */
  url: string;
  /** "websocket" (`/v1/pubsub/ws`) or "sse" (`/v1/pubsub/events`). */
  transport: "websocket" | "sse";
  topics: string[];
  /** Sent as x-api-key. */
  apiKey?: string;
  /** A browser token from `POST /v1/pubsub/tokens` (sent as `?token=`). */
  token?: string;
  /** Resume after this position (an event id, or a `position` from an earlier subscription). */
  since?: string;
  /** Reconnect policy after a drop (resuming from the last position). Default: as for gRPC subscriptions. */
  reconnect?: ReconnectOptions;
  /**
   * Longest wait for a connection to be answered (the WebSocket upgrade, the SSE response headers), ms; past it the
   * attempt is dropped and retried with backoff. Default 10000.
   */
  handshakeTimeoutMs?: number;
  /**
   * Longest an open connection may stay silent, ms: with nothing received for this long (no event, no WebSocket ping,
   * no SSE heartbeat) it is taken for dead (a half-open connection), dropped and reconnected. Default 130000 for
   * WebSocket (the gateway pings a socket it has heard nothing from for about 104 s) and 30000 for SSE (a heartbeat
   * every 8 s). Keep it above those periods.
   */
  livenessTimeoutMs?: number;
  /** Each event, in order, never twice across reconnects while `recovered` stays true. */
  onEvent(event: WebEventMessage): void;
  /** After each (re)connect that asked to resume: false means events may have been missed, reconcile from state. */
  onRecovery?(recovered: boolean): void;
}

/** A running web subscription: reconnects with backoff and resumes from its last position until closed or refused. */
export interface WebSubscription {
  /** The last position seen (event id or subscribe position). */
  readonly position: string | undefined;
  /** Resolves when the subscription stops for good: `close()` (null) or a refusal / end the client cannot retry. */
  readonly ended: Promise<GatewayClientError | null>;
  close(): void;
}

/** Reasons the gateway ends a stream that a reconnect would not fix. */
const FINAL_REASONS = new Set(["token-expired"]);

/** Default bound on the WebSocket upgrade / the SSE response headers, ms. */
export const DEFAULT_WEB_HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * Default silence after which an open WebSocket is taken for dead, ms. The gateway's uWS pings a socket it has read
 * nothing from for its idleTimeout (120 s, src/web/ws.ts) less uWS's 16 s margin, about 104 s (uWS timers tick every
 * 4 s), and closes it 16 s later: 130 s leaves room for a late ping without ever dropping a live socket.
 */
export const DEFAULT_WS_LIVENESS_TIMEOUT_MS = 130_000;
/** Default silence after which an SSE stream is taken for dead, ms: the gateway writes a heartbeat every 8 s (src/web/sse.ts). */
export const DEFAULT_SSE_LIVENESS_TIMEOUT_MS = 30_000;

/** One connection attempt of a web subscription. */
interface Connection {
  /** Report the end of this connection: the first call reconnects (or stops, with `final`), later ones do nothing. */
  end(final?: GatewayClientError, why?: GatewayClientError): void;
  /** This connection's timers (handshake, liveness), cleared when it ends. */
  readonly timers: Set<NodeJS.Timeout>;
  readonly ended: boolean;
}

/**
 * Subscribe over the gateway's WebSocket or SSE route from Node (the `ws` package; fetch streaming for SSE). The
 * subscription resumes after every drop from the last position it saw, so events arrive in order with no gap or
 * duplicate while the gateway still holds them (`onRecovery(false)` otherwise). Refusals (401, 403, 400, an error
 * frame with one of the FATAL_SUBSCRIBE_CODES) and token expiry end it with a GatewayClientError; anything else
 * (503, 429, an UNAVAILABLE or RESOURCE_EXHAUSTED error frame, a silent connection) reconnects with backoff.
 */
export function subscribeWeb(options: WebSubscribeOptions): WebSubscription {
  if (typeof options.url !== "string" || !/^https?:\/\//.test(options.url)) throw invalidArgument("url", "must be an http(s):// base URL of the gateway's REST port");
  if (options.transport !== "websocket" && options.transport !== "sse") throw invalidArgument("transport", "must be websocket or sse");
  if (!Array.isArray(options.topics) || options.topics.length === 0 || options.topics.some((t) => typeof t !== "string" || t === "")) {
    throw invalidArgument("topics", "must be a non-empty array of non-empty strings");
  }
  if (typeof options.onEvent !== "function") throw invalidArgument("onEvent", "must be a function");
  const reconnect = resolveReconnectOptions(options.reconnect);
  const handshakeTimeoutMs = timeoutMsOption("handshakeTimeoutMs", options.handshakeTimeoutMs, DEFAULT_WEB_HANDSHAKE_TIMEOUT_MS);
  const livenessTimeoutMs = timeoutMsOption(
    "livenessTimeoutMs",
    options.livenessTimeoutMs,
    options.transport === "websocket" ? DEFAULT_WS_LIVENESS_TIMEOUT_MS : DEFAULT_SSE_LIVENESS_TIMEOUT_MS,
  );
  const base = options.url.replace(/\/$/, "");
  let position = options.since;
  let stopped = false;
  let attempt = 0;
  let closeCurrent: () => void = () => undefined;
  let timer: NodeJS.Timeout | undefined;
  let finish!: (e: GatewayClientError | null) => void;
  const ended = new Promise<GatewayClientError | null>((r) => (finish = r));
  const headers: Record<string, string> = options.apiKey ? { "x-api-key": options.apiKey } : {};

  const stop = (e: GatewayClientError | null): void => {
    if (stopped) return;
    stopped = true;
    if (timer) clearTimeout(timer);
    closeCurrent();
    finish(e);
  };
  const safe = (fn: () => void): void => {
    try {
      fn();
    } catch (e) {
      process.emitWarning(`subscribeWeb callback threw: ${(e as Error)?.message ?? String(e)}`);
    }
  };
  /**
   * A connection ended: retry with backoff unless told not to (`final`); `why` names what ended it. Called once per
   * connection (see `connection()`), so one drop is one reconnect timer.
   */
  const dropped = (final?: GatewayClientError, why?: GatewayClientError): void => {
    if (stopped) return;
    if (final) return stop(final);
    if (attempt >= reconnect.maxAttempts) {
      return stop(new GatewayClientError(why?.code ?? Code.UNAVAILABLE, `gave up after ${attempt} reconnect attempts${why ? `: ${why.rawMessage}` : ""}`));
    }
    timer = setTimeout(connect, backoffDelay(reconnect, attempt++));
  };
  /**
   * The per-connection bookkeeping: `end` reports the drop exactly once however many of the socket's events say so
   * (ws emits 'close' after an aborted handshake too), and clears the connection's timers.
   */
  const connection = (): Connection => {
    let ended = false;
    const timers = new Set<NodeJS.Timeout>();
    return {
      timers,
      get ended() {
        return ended;
      },
      end(final, why) {
        if (ended) return;
        ended = true;
        for (const t of timers) clearTimeout(t);
        timers.clear();
        dropped(final, why);
      },
    };
  };
  /**
   * Watch an open connection's silence: `seen()` on anything received; after `livenessTimeoutMs` of nothing,
   * `dead()`. One timer per connection, re-armed for the rest of the bound when it fires early (no timer reset per
   * event).
   */
  const liveness = (c: Connection, dead: () => void): (() => void) => {
    let last = performance.now();
    let t: NodeJS.Timeout;
    const check = (): void => {
      c.timers.delete(t);
      if (c.ended) return;
      const quiet = performance.now() - last;
      if (quiet >= livenessTimeoutMs) return dead();
      t = setTimeout(check, livenessTimeoutMs - quiet);
      c.timers.add(t);
    };
    t = setTimeout(check, livenessTimeoutMs);
    c.timers.add(t);
    return () => {
      last = performance.now();
    };
  };
  /** A connection refused with an HTTP status: final for a status or code a retry cannot fix, else retried. */
  const refused = (c: Connection, status: number, body: string): void => {
    const err = refusal(status, body);
    c.end(retryable(status) && !FATAL_SUBSCRIBE_CODES.has(err.code) ? undefined : err, err);
  };
  const refusal = (status: number, body: string): GatewayClientError => {
    let message = `HTTP ${status}`;
    let code = status === 401 ? Code.UNAUTHENTICATED : status === 403 ? Code.PERMISSION_DENIED : status === 400 ? Code.INVALID_ARGUMENT : Code.UNAVAILABLE;
    try {
      const j = JSON.parse(body) as { code?: number; message?: string };
      if (typeof j.message === "string") message = j.message;
      if (typeof j.code === "number") code = j.code as Code;
    } catch {
      // not JSON: keep the status
    }
    return new GatewayClientError(code, message);
  };
  const retryable = (status: number): boolean => status >= 500 || status === 429;

  function connectWs(): void {
    const url = new URL(base.replace(/^http/, "ws") + "/v1/pubsub/ws");
    if (options.token) url.searchParams.set("token", options.token);
    // The subscribe rides in the upgrade URL: the gateway subscribes as the socket opens, one round trip less on
    // every (re)connect, and a bad topic is refused with the upgrade.
    for (const t of options.topics) url.searchParams.append("topic", t);
    if (position) url.searchParams.set("since", position);
    // handshakeTimeout bounds the upgrade: past it ws aborts the attempt ('error', then 'close').
    const ws = new WebSocket(url, ["pubsub.v1"], { headers, handshakeTimeout: handshakeTimeoutMs });
    const c = connection();
    closeCurrent = () => {
      for (const t of c.timers) clearTimeout(t);
      ws.terminate();
    };
    /** End this connection for good and report it (once), whatever the socket says afterwards. */
    const end = (final?: GatewayClientError, why?: GatewayClientError): void => {
      ws.terminate();
      c.end(final, why);
    };
    let seen = (): void => undefined;
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => {
        // terminate() of a socket still connecting emits 'close' on the next tick: c.end() has then been called.
        ws.terminate();
        refused(c, res.statusCode ?? 0, body);
      });
      res.on("error", () => end());
    });
    ws.on("error", () => undefined); // 'close' follows
    ws.on("open", () => {
      seen = liveness(c, () => end(undefined, new GatewayClientError(Code.UNAVAILABLE, `nothing received for ${livenessTimeoutMs} ms`)));
    });
    // uWS pings a socket it hears nothing from; ws answers with a pong on its own.
    ws.on("ping", () => seen());
    ws.on("pong", () => seen());
    ws.on("message", (data) => {
      if (stopped || c.ended) return;
      seen();
      let f: Record<string, unknown>;
      try {
        f = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        return; // not a frame of the protocol: nothing to act on
      }
      if (f["op"] === "event") {
        position = f["id"] as string;
        safe(() => options.onEvent({ topic: f["topic"] as string, id: f["id"] as string, cloudevent: f["cloudevent"] as Record<string, unknown> }));
      } else if (f["op"] === "subscribed") {
        attempt = 0;
        const recovered = f["recovered"];
        // Not recovered: nothing before the gateway's current position comes back, so the next resume starts there
        // (keeping the old position would report recovered: false again on every later reconnect).
        if (typeof f["position"] === "string" && (position === undefined || recovered === false)) position = f["position"];
        if (typeof recovered === "boolean") safe(() => options.onRecovery?.(recovered));
      } else if (f["op"] === "error") {
        // The only request on this socket is the subscribe in the upgrade URL: it failed and the socket holds nothing.
        const err = new GatewayClientError(codeFromName(String(f["code"])) ?? Code.UNKNOWN, String(f["message"]));
        end(FATAL_SUBSCRIBE_CODES.has(err.code) ? err : undefined, err);
      }
    });
    ws.on("close", (code, reason) => {
      const r = reason.toString();
      const final = FINAL_REASONS.has(r) ? new GatewayClientError(Code.UNAUTHENTICATED, r) : code === 1009 ? new GatewayClientError(Code.RESOURCE_EXHAUSTED, r) : undefined;
      c.end(final, new GatewayClientError(Code.UNAVAILABLE, `the WebSocket closed (${code}${r ? ` ${r}` : ""})`));
    });
  }

  function connectSse(): void {
    const q = new URLSearchParams();
    for (const t of options.topics) q.append("topic", t);
    if (options.token) q.set("token", options.token);
    const ac = new AbortController();
    const c = connection();
    closeCurrent = () => {
      for (const t of c.timers) clearTimeout(t);
      ac.abort();
    };
    let why: GatewayClientError | undefined;
    /** Abort this attempt (fetch and body read reject; the catch below reports the drop once). */
    const abort = (reason: GatewayClientError): void => {
      why = reason;
      ac.abort();
    };
    const handshake = setTimeout(() => abort(new GatewayClientError(Code.UNAVAILABLE, `no response within ${handshakeTimeoutMs} ms`)), handshakeTimeoutMs);
    c.timers.add(handshake);
    void (async () => {
      const res = await fetch(`${base}/v1/pubsub/events?${q}`, { headers: { ...headers, ...(position ? { "last-event-id": position } : {}) }, signal: ac.signal });
      if (res.status !== 200) {
        const body = await res.text();
        c.timers.delete(handshake);
        clearTimeout(handshake);
        return refused(c, res.status, body);
      }
      c.timers.delete(handshake);
      clearTimeout(handshake);
      const seen = liveness(c, () => abort(new GatewayClientError(Code.UNAVAILABLE, `nothing received for ${livenessTimeoutMs} ms`)));
      const resuming = position !== undefined;
      let recoveryReported = false;
      const decoder = new TextDecoder();
      let buf = "";
      let final: GatewayClientError | undefined;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        if (stopped || c.ended) break;
        seen();
        buf += decoder.decode(chunk, { stream: true });
        let i: number;
        // stopped: close() from a callback delivers nothing more, not even the rest of this chunk.
        while (!stopped && (i = buf.indexOf("\n\n")) !== -1) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = "message";
          let id: string | undefined;
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line === "" || line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon === -1 ? line : line.slice(0, colon);
            const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") event = value;
            else if (field === "id") id = value;
            else if (field === "data") data.push(value);
          }
          if (id !== undefined) position = id;
          if (event === "recovery") {
            recoveryReported = true;
            safe(() => options.onRecovery?.(false));
          } else if (event === "end") {
            const reason = (JSON.parse(data.join("\n")) as { reason?: string }).reason ?? "";
            if (FINAL_REASONS.has(reason)) final = new GatewayClientError(Code.UNAUTHENTICATED, reason);
          } else if (data.length > 0) {
            attempt = 0;
            if (resuming && !recoveryReported) {
              recoveryReported = true;
              safe(() => options.onRecovery?.(true));
            }
            const d = JSON.parse(data.join("\n")) as { topic: string; cloudevent: Record<string, unknown> };
            safe(() => options.onEvent({ topic: d.topic, id: id ?? "", cloudevent: d.cloudevent }));
          } else if (resuming && !recoveryReported && id !== undefined) {
            // The position marker that follows a replay: the resume was exact.
            recoveryReported = true;
            attempt = 0;
            safe(() => options.onRecovery?.(true));
          }
        }
      }
      c.end(final);
    })().catch(() => c.end(undefined, why));
  }

  function connect(): void {
    if (stopped) return;
    if (options.transport === "websocket") connectWs();
    else connectSse();
  }
  connect();
  return {
    get position() {
      return position;
    },
    ended,
    close: () => stop(null),
  };
}
