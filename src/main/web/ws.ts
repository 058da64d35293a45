import type uws from "uWebSockets.js";
import type { EndReason } from "../../broker/index.js";
import { Code, codeFromName } from "../../shared/code.js";
import { cloudEventFromJson } from "../../shared/cloudevent-json.js";
import { GatewayError, invalidArgument } from "../../shared/gateway-error.js";
import type { PubsubOps } from "../ops/pubsub.js";
import { allows, authenticate, checkTopics, TOKEN_PROTOCOL_PREFIX, WS_PROTOCOL, type Grant } from "./access.js";
import { subscribeError, type TopicFanout, type WebEvent } from "./hub.js";
import { requestHeaders } from "../rest/router.js";
import { refuse, type WebDeps } from "./web-deps.js";

/** WebSocket close codes the gateway sends (4000-4999 is the private range). */
export const CLOSE = { slow: 4008, tokenExpired: 4001, upstreamFailed: 4002, shutdown: 1001 } as const;

/** Topics one WebSocket may hold at once. */
export const MAX_WS_TOPICS = 256;
/** Requests (subscribe, publish) one WebSocket may have in flight; past it: RESOURCE_EXHAUSTED. */
export const MAX_WS_INFLIGHT = 32;
/** How long a socket closed with a close frame may take to read it before it is dropped. */
const END_GRACE_MS = 2000;

interface WsData {
  grant: Grant;
  /** Live topics (subscribed in uWS and holding a hub reference). Arrays, not Sets: most sockets hold one or two
   * topics, and per-socket memory is what an idle subscriber costs (docs/web-pubsub.md). */
  topics: string[];
  /** Topics being acquired. */
  pending: string[];
  inflight: number;
  closed: boolean;
  ending: boolean;
  timer: NodeJS.Timeout | null;
}

type Ws = uws.WebSocket<WsData>;

/** The WebSocket front: `GET /v1/pubsub/ws` on the uWS app, and its fan-out outlet (native `app.publish`). */
export interface WsFront {
  fanout: TopicFanout;
  /** Open sockets. */
  readonly size: number;
  /** End every socket with 1001 "shutdown". */
  closeAll(): void;
}

/** Mount `/v1/pubsub/ws` on `app`. */
export function mountWebSocket(app: uws.TemplatedApp, deps: WebDeps, ops: PubsubOps): WsFront {
  const { hub, metrics, boundBytes } = deps;
  const byTopic = new Map<string, Set<Ws>>();
  const open = new Set<Ws>();
  const dirty = new Set<string>();
  let checkScheduled = false;

  const send = (ws: Ws, data: WsData, frame: object): void => {
    if (!data.closed) ws.send(JSON.stringify(frame), false);
  };

  function end(ws: Ws, code: number, reason: string, metricReason: string): void {
    const data = ws.getUserData();
    if (data.closed || data.ending) return;
    data.ending = true;
    metrics.reaped.inc({ transport: "websocket", reason: metricReason });
    ws.end(code, reason);
    // end() sends a close frame a reader that stopped may never take: drop the connection after a grace.
    setTimeout(() => {
      if (!data.closed) ws.close();
    }, END_GRACE_MS).unref();
  }

  /**
   * The per-subscriber bound, checked once per loop turn for the topics that got events: a socket holding more than
   * `boundBytes` in uWS backpressure is closed `slow`. uWS's own hard limit (twice the bound) never drops silently
   * before this runs unless one turn alone pushes a whole bound to one socket.
   */
  function checkBackpressure(): void {
    checkScheduled = false;
    for (const topic of dirty) {
      for (const ws of byTopic.get(topic) ?? []) {
        const data = ws.getUserData();
        if (!data.closed && !data.ending && ws.getBufferedAmount() > boundBytes) end(ws, CLOSE.slow, "slow", "slow");
      }
    }
    dirty.clear();
  }

  const fanout: TopicFanout = {
    deliver(event: WebEvent) {
      const subs = byTopic.get(event.topic);
      if (!subs || subs.size === 0) return 0;
      app.publish(event.topic, event.wsFrame, false);
      dirty.add(event.topic);
      if (!checkScheduled) {
        checkScheduled = true;
        setImmediate(checkBackpressure);
      }
      return subs.size;
    },
    endTopic(topic, reason: EndReason) {
      const subs = byTopic.get(topic);
      if (!subs) return;
      for (const ws of [...subs]) {
        if (reason.kind === "shutdown") end(ws, CLOSE.shutdown, "shutdown", "shutdown");
        else end(ws, CLOSE.upstreamFailed, `upstream-failed: ${topic}`.slice(0, 120), reason.kind);
      }
    },
  };

  function live(ws: Ws, data: WsData, topic: string): void {
    ws.subscribe(topic);
    data.topics.push(topic);
    let set = byTopic.get(topic);
    if (!set) byTopic.set(topic, (set = new Set()));
    set.add(ws);
  }

  function leave(ws: Ws | null, data: WsData, topic: string): void {
    const i = data.topics.indexOf(topic);
    if (i === -1) return;
    data.topics.splice(i, 1);
    if (ws && !data.closed) ws.unsubscribe(topic);
    const set = byTopic.get(topic);
    if (set && ws) {
      set.delete(ws);
      if (set.size === 0) byTopic.delete(topic);
    }
    hub.release(topic);
  }

  async function subscribe(ws: Ws, data: WsData, msg: Record<string, unknown>, echo: object): Promise<void> {
    const topics = checkTopics("topics", msg["topics"], data.grant, MAX_WS_TOPICS);
    const sinceText = msg["since"];
    if (sinceText !== undefined && typeof sinceText !== "string") throw invalidArgument("since", "must be a position string");
    const since = sinceText === undefined ? undefined : hub.parsePosition("since", sinceText);
    const fresh = [...new Set(topics)].filter((t) => !data.topics.includes(t) && !data.pending.includes(t));
    if (data.topics.length + data.pending.length + fresh.length > MAX_WS_TOPICS) {
      throw new GatewayError(Code.RESOURCE_EXHAUSTED, `a WebSocket may hold at most ${MAX_WS_TOPICS} topics`);
    }
    data.pending.push(...fresh);
    try {
      await hub.acquire(fresh);
    } finally {
      data.pending = data.pending.filter((t) => !fresh.includes(t));
    }
    if (data.closed || data.ending) {
      for (const t of fresh) hub.release(t);
      return;
    }
    // Replay and going live happen in one synchronous block: no event can fall between them.
    ws.cork(() => {
      const resume = since ? hub.resume(fresh, since) : undefined;
      send(ws, data, { op: "subscribed", ...echo, topics, ...(resume ? { recovered: resume.recovered } : {}), position: hub.position() });
      let dropped = false;
      if (resume?.recovered) {
        for (const e of resume.events) if (ws.send(e.wsFrame, false) === 2) dropped = true;
      }
      for (const t of fresh) live(ws, data, t);
      if (dropped) end(ws, CLOSE.slow, "slow", "slow");
    });
  }

  async function publish(data: WsData, msg: Record<string, unknown>): Promise<void> {
    const topic = msg["topic"];
    if (typeof topic !== "string" || topic === "") throw invalidArgument("topic", "must not be empty");
    if (!data.grant.publish || !allows(data.grant, topic)) throw new GatewayError(Code.PERMISSION_DENIED, `the token does not allow publishing to topic '${topic.slice(0, 64)}'`);
    const ce = msg["cloudevent"];
    if (typeof ce !== "object" || ce === null || Array.isArray(ce)) throw invalidArgument("cloudevent", "is required: a CloudEvents JSON object");
    const status = await ops.publish(topic, cloudEventFromJson(ce as Record<string, unknown>, "cloudevent"));
    if (!status.success) throw new GatewayError(codeFromName(status.status) ?? Code.UNKNOWN, status.message);
  }

  async function handle(ws: Ws, data: WsData, text: string): Promise<void> {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch (e) {
      throw invalidArgument("frame", `is not valid JSON: ${(e as Error).message.slice(0, 100)}`);
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) throw invalidArgument("frame", "must be a JSON object");
    const m = msg as Record<string, unknown>;
    const id = m["id"];
    const echo = typeof id === "string" || typeof id === "number" ? { id: typeof id === "string" ? id.slice(0, 128) : id } : {};
    try {
      switch (m["op"]) {
        case "subscribe":
          return await subscribe(ws, data, m, echo);
        case "unsubscribe": {
          const topics = m["topics"];
          if (!Array.isArray(topics)) throw invalidArgument("topics", "must be an array of topic names");
          const gone = topics.filter((t): t is string => typeof t === "string" && data.topics.includes(t));
          for (const t of gone) leave(ws, data, t);
          return send(ws, data, { op: "unsubscribed", ...echo, topics: gone });
        }
        case "publish":
          await publish(data, m);
          return send(ws, data, { op: "published", ...echo });
        default:
          throw invalidArgument("op", `must be subscribe, unsubscribe or publish, got ${JSON.stringify(m["op"])?.slice(0, 64)}`);
      }
    } catch (e) {
      throw Object.assign(subscribeError(e), { echo });
    }
  }

  app.ws<WsData>("/v1/pubsub/ws", {
    // uWS drops a connection past its own limit without a close frame: it gets twice ours, so a frame over our limit
    // (up to twice it) gets a proper 1009 close from the message handler.
    maxPayloadLength: deps.maxFrameBytes * 2,
    idleTimeout: deps.idleTimeoutSeconds,
    sendPingsAutomatically: true,
    // Hard stop: the bound is enforced in checkBackpressure; uWS sheds and shuts a socket only past twice the bound.
    maxBackpressure: boundBytes * 2,
    closeOnBackpressureLimit: 1,
    upgrade(res, req, context) {
      const { headers } = requestHeaders(req);
      const key = headers["sec-websocket-key"] ?? "";
      const protocolHeader = headers["sec-websocket-protocol"] ?? "";
      const extensions = headers["sec-websocket-extensions"] ?? "";
      const origin = headers["origin"] || undefined;
      const apiKey = headers["x-api-key"] || undefined;
      const query = new URLSearchParams(req.getQuery() ?? "");
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      const offered = protocolHeader.split(",").map((p) => p.trim()).filter(Boolean);
      const tokenProtocols = offered.filter((p) => p.startsWith(TOKEN_PROTOCOL_PREFIX));
      const tokenProtocol = tokenProtocols[0];
      const tokens = [...query.getAll("token"), ...tokenProtocols.map((p) => p.slice(TOKEN_PROTOCOL_PREFIX.length))];
      // A browser that offered protocols fails the handshake unless one is selected.
      const selected = offered.includes(WS_PROTOCOL) ? WS_PROTOCOL : (tokenProtocol ?? "");
      void (async () => {
        if (deps.isClosing()) throw new GatewayError(Code.UNAVAILABLE, "the gateway is shutting down");
        if (!deps.origins.allowed(origin)) throw new GatewayError(Code.PERMISSION_DENIED, `origin ${origin!.slice(0, 100)} is not allowed (--cors-origin)`);
        const grant = await authenticate(deps, apiKey, tokens);
        if (aborted) return;
        const data: WsData = { grant, topics: [], pending: [], inflight: 0, closed: false, ending: false, timer: null };
        res.cork(() => res.upgrade(data, key, selected, extensions, context));
      })().catch((e: unknown) => {
        metrics.refused.inc({ transport: "websocket", code: GatewayError.from(e).codeName });
        if (!aborted) refuse(res, e);
      });
    },
    open(ws) {
      const data = ws.getUserData();
      open.add(ws);
      metrics.subscribers.inc({ transport: "websocket" });
      if (data.grant.expiresAt !== null) {
        data.timer = setTimeout(() => end(ws, CLOSE.tokenExpired, "token-expired", "token-expired"), Math.max(0, data.grant.expiresAt - Date.now()));
        data.timer.unref();
      }
    },
    message(ws, message, isBinary) {
      const data = ws.getUserData();
      if (data.ending) return;
      if (message.byteLength > deps.maxFrameBytes) return end(ws, 1009, `frame larger than ${deps.maxFrameBytes} bytes`, "oversize");
      if (isBinary) return send(ws, data, { op: "error", code: "INVALID_ARGUMENT", message: "frame must be a text frame holding one JSON object" });
      if (data.inflight >= MAX_WS_INFLIGHT) {
        return send(ws, data, { op: "error", code: "RESOURCE_EXHAUSTED", message: `more than ${MAX_WS_INFLIGHT} requests in flight on this socket` });
      }
      const text = Buffer.from(message).toString("utf8");
      data.inflight++;
      handle(ws, data, text)
        .catch((e: unknown) => {
          const err = GatewayError.from(e);
          if (err.code === Code.INTERNAL) deps.logger.error({ err: e }, "WebSocket request failed");
          send(ws, data, { op: "error", ...((e as { echo?: object }).echo ?? {}), code: err.codeName, message: err.rawMessage });
        })
        .finally(() => data.inflight--);
    },
    close(ws) {
      const data = ws.getUserData();
      data.closed = true;
      open.delete(ws);
      if (data.timer) clearTimeout(data.timer);
      metrics.subscribers.dec({ transport: "websocket" });
      const held = data.topics;
      data.topics = [];
      for (const t of held) {
        const set = byTopic.get(t);
        set?.delete(ws);
        if (set?.size === 0) byTopic.delete(t);
        hub.release(t);
      }
    },
  });

  return {
    fanout,
    get size() {
      return open.size;
    },
    closeAll() {
      for (const ws of [...open]) end(ws, CLOSE.shutdown, "shutdown", "shutdown");
    },
  };
}
