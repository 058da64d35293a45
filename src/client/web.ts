import WebSocket from "ws";
import { Code, codeFromName } from "../shared/code.js";
import { GatewayClientError, invalidArgument } from "./errors.js";
import { backoffDelay, resolveReconnectOptions, type ReconnectOptions } from "./options.js";

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

/**
 * Subscribe over the gateway's WebSocket or SSE route from Node (the `ws` package; fetch streaming for SSE). The
 * subscription resumes after every drop from the last position it saw, so events arrive in order with no gap or
 * duplicate while the gateway still holds them (`onRecovery(false)` otherwise). Refusals (401, 403, 400) and token
 * expiry end it with a GatewayClientError.
 */
export function subscribeWeb(options: WebSubscribeOptions): WebSubscription {
  if (typeof options.url !== "string" || !/^https?:\/\//.test(options.url)) throw invalidArgument("url", "must be an http(s):// base URL of the gateway's REST port");
  if (options.transport !== "websocket" && options.transport !== "sse") throw invalidArgument("transport", "must be websocket or sse");
  if (!Array.isArray(options.topics) || options.topics.length === 0 || options.topics.some((t) => typeof t !== "string" || t === "")) {
    throw invalidArgument("topics", "must be a non-empty array of non-empty strings");
  }
  if (typeof options.onEvent !== "function") throw invalidArgument("onEvent", "must be a function");
  const reconnect = resolveReconnectOptions(options.reconnect);
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
  /** A connection ended: retry with backoff unless told not to. */
  const dropped = (final?: GatewayClientError): void => {
    if (stopped) return;
    if (final) return stop(final);
    if (attempt >= reconnect.maxAttempts) return stop(new GatewayClientError(Code.UNAVAILABLE, `gave up after ${attempt} reconnect attempts`));
    timer = setTimeout(connect, backoffDelay(reconnect, attempt++));
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
    const ws = new WebSocket(url, ["pubsub.v1"], { headers });
    closeCurrent = () => ws.terminate();
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => {
        ws.terminate();
        const status = res.statusCode ?? 0;
        dropped(retryable(status) ? undefined : refusal(status, body));
      });
    });
    ws.on("error", () => undefined); // 'close' follows
    ws.on("message", (data) => {
      const f = JSON.parse(data.toString()) as Record<string, unknown>;
      if (f["op"] === "event") {
        position = f["id"] as string;
        safe(() => options.onEvent({ topic: f["topic"] as string, id: f["id"] as string, cloudevent: f["cloudevent"] as Record<string, unknown> }));
      } else if (f["op"] === "subscribed") {
        attempt = 0;
        if (typeof f["recovered"] === "boolean") safe(() => options.onRecovery?.(f["recovered"] as boolean));
        position ??= f["position"] as string;
      } else if (f["op"] === "error") {
        const code = codeFromName(String(f["code"])) ?? Code.UNKNOWN;
        stop(new GatewayClientError(code, String(f["message"])));
      }
    });
    ws.on("close", (code, reason) => {
      const r = reason.toString();
      dropped(FINAL_REASONS.has(r) ? new GatewayClientError(Code.UNAUTHENTICATED, r) : code === 1009 ? new GatewayClientError(Code.RESOURCE_EXHAUSTED, r) : undefined);
    });
  }

  function connectSse(): void {
    const q = new URLSearchParams();
    for (const t of options.topics) q.append("topic", t);
    if (options.token) q.set("token", options.token);
    const ac = new AbortController();
    closeCurrent = () => ac.abort();
    void (async () => {
      const res = await fetch(`${base}/v1/pubsub/events?${q}`, { headers: { ...headers, ...(position ? { "last-event-id": position } : {}) }, signal: ac.signal });
      if (res.status !== 200) {
        const body = await res.text();
        return dropped(retryable(res.status) ? undefined : refusal(res.status, body));
      }
      const resuming = position !== undefined;
      let recoveryReported = false;
      const decoder = new TextDecoder();
      let buf = "";
      let final: GatewayClientError | undefined;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n\n")) !== -1) {
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
      dropped(final);
    })().catch(() => dropped());
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
