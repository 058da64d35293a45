import WebSocket from "ws";
import { waitFor } from "./gateway.js";

/** A Node `ws` client of /v1/pubsub/ws that records every frame. */
export interface WsTestClient {
  ws: WebSocket;
  frames: any[];
  /** Event frames only. */
  events(): any[];
  close?: { code: number; reason: string };
  /** Send one JSON frame. */
  send(frame: object): void;
  /** Resolve with the first frame (after `from`) matching `pred`. */
  next(pred: (f: any) => boolean, what: string, timeoutMs?: number): Promise<any>;
  closed(timeoutMs?: number): Promise<{ code: number; reason: string }>;
}

/**
 * Connect to the gateway's WebSocket route; rejects with the HTTP status and body on a refused upgrade. `query`:
 * more URL parameters (`topic`, `since`: a subscribe made as the socket opens).
 */
export function connectWs(
  http: string,
  opts: { key?: string; token?: string; protocols?: string[]; origin?: string; query?: Array<[string, string]> } = {},
): Promise<WsTestClient> {
  const url = new URL(http.replace(/^http/, "ws") + "/v1/pubsub/ws");
  if (opts.token) url.searchParams.set("token", opts.token);
  for (const [k, v] of opts.query ?? []) url.searchParams.append(k, v);
  const headers: Record<string, string> = {};
  if (opts.key) headers["x-api-key"] = opts.key;
  const ws = new WebSocket(url, opts.protocols ?? [], { headers, ...(opts.origin ? { origin: opts.origin } : {}) });
  const c: WsTestClient = {
    ws,
    frames: [],
    events: () => c.frames.filter((f) => f.op === "event"),
    send: (frame) => ws.send(JSON.stringify(frame)),
    async next(pred, what, timeoutMs = 5000) {
      let found: any;
      await waitFor(() => (found = c.frames.find(pred)) !== undefined, what, timeoutMs);
      return found;
    },
    closed: (timeoutMs = 5000) => waitFor(() => c.close !== undefined, "WebSocket close", timeoutMs).then(() => c.close!),
  };
  ws.on("message", (d) => c.frames.push(JSON.parse(d.toString())));
  ws.on("close", (code, reason) => (c.close = { code, reason: reason.toString() }));
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve(c));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode} ${body}`), { status: res.statusCode, body })));
    });
    ws.once("error", reject);
  });
}

/** A plain `ws` client that collects every (JSON) frame; `closed` resolves with the close code. */
export interface FrameSocket {
  ws: WebSocket;
  frames: any[];
  closed: Promise<number>;
  send(frame: object): void;
}

/** Open a WebSocket to any gateway route and collect its JSON frames; rejects when the upgrade is refused. */
export async function openFrameSocket(url: string, protocols: string[] = [], opts: WebSocket.ClientOptions = {}): Promise<FrameSocket> {
  const ws = new WebSocket(url, protocols, opts);
  const frames: any[] = [];
  ws.on("message", (d) => frames.push(JSON.parse(String(d))));
  const closed = new Promise<number>((resolve) => ws.on("close", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  return { ws, frames, closed, send: (f: object) => ws.send(JSON.stringify(f)) };
}

/** One parsed SSE message. */
export interface SseMessage {
  event: string;
  id: string | undefined;
  data: string;
}

/** A streaming fetch of /v1/pubsub/events that parses messages as they arrive. */
export interface SseTestClient {
  status: number;
  messages: SseMessage[];
  /** Data messages parsed as JSON. */
  events(): any[];
  lastId: string | undefined;
  ended: boolean;
  abort(): void;
}

/** Open an SSE stream; resolves once the response headers arrived (any status). */
export async function connectSse(http: string, query: string, headers: Record<string, string> = {}): Promise<SseTestClient> {
  const ac = new AbortController();
  const res = await fetch(`${http}/v1/pubsub/events?${query}`, { headers, signal: ac.signal });
  const c: SseTestClient = {
    status: res.status,
    messages: [],
    events: () => c.messages.filter((m) => m.event === "message" && m.data !== "").map((m) => ({ ...JSON.parse(m.data), id: m.id })),
    lastId: undefined,
    ended: false,
    abort: () => ac.abort(),
  };
  if (res.status !== 200) {
    c.messages.push({ event: "http-error", id: undefined, data: await res.text() });
    c.ended = true;
    return c;
  }
  void (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n\n")) !== -1) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const m: SseMessage = { event: "message", id: undefined, data: "" };
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const [field, ...rest] = line.split(":");
            const value = rest.join(":").replace(/^ /, "");
            if (field === "event") m.event = value;
            else if (field === "id") c.lastId = m.id = value;
            else if (field === "data") data.push(value);
          }
          m.data = data.join("\n");
          if (m.data !== "" || m.event !== "message") c.messages.push(m);
        }
      }
    } catch {
      // aborted
    }
    c.ended = true;
  })();
  return c;
}

/** A structured CloudEvent JSON for publish frames. */
export function ceJson(n: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { source: "urn:test", type: "test.event", id: `e${n}`, data: { n }, ...extra };
}

