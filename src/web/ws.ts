import type uws from "uWebSockets.js";
import type { EndReason } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { cloudEventFromJson } from "../shared/cloudevent-json.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import { statusError } from "../shared/status.js";
import { callDeadlines, type Expiring } from "../shared/deadline-queue.js";
import { MAX_SUBSCRIPTION_TOPICS, type PubsubOps } from "../ops/pubsub.js";
import { allows, authenticate, checkTopics, parseOfferedProtocols, TOKEN_PROTOCOL_PREFIX, WS_PROTOCOL, webAdmission, type Grant } from "./access.js";
import { subscribeError, type Backfill, type Position, type TopicFanout, type WebEvent } from "./hub.js";
import { requestHeaders } from "../http/router.js";
import { overConnectionBound, refuse, uwsFrameLimit, type WebDeps } from "./web-deps.js";
import { endWith, type ServerSpanInfo } from "../observe/span.js";

/** The server span of a publish sent over a WebSocket (its route and the message's op). */
const WS_PUBLISH_SPAN: ServerSpanInfo = Object.freeze({ name: "WebSocket publish", attributes: Object.freeze({ "http.route": "/v1/pubsub/ws", "gateway.ws.op": "publish" }) });
const WS_SUBSCRIBE_SPAN: ServerSpanInfo = Object.freeze({ name: "WebSocket subscribe", attributes: Object.freeze({ "http.route": "/v1/pubsub/ws", "gateway.ws.op": "subscribe" }) });

/** WebSocket close codes the gateway sends (4000-4999 is the private range). */
export const CLOSE = { slow: 4008, tokenExpired: 4001, upstreamFailed: 4002, shutdown: 1001 } as const;

/** Topics one WebSocket may hold at once: the bound of one subscription (ops/pubsub.ts). */
export const MAX_WS_TOPICS = MAX_SUBSCRIPTION_TOPICS;
/** Requests (subscribe, publish) one WebSocket may have in flight; past it: RESOURCE_EXHAUSTED. */
export const MAX_WS_INFLIGHT = 32;
/** How long a socket closed with a close frame may take to read it before it is dropped. */
const END_GRACE_MS = 2000;
/** Longest a socket may sit past the bound before the sweep sees it, when few bytes flow and few sockets are open (see sweep). */
export const SLOW_SWEEP_MS = 200;
/**
 * The timed sweep's interval grows with the open sockets by this much per socket, so that checking them all costs
 * about one part in 300 of a core whatever their number (one check is a native call, ~0.15 us): 200 ms up to 4,000
 * sockets, 750 ms at 15,000, 3 s at 60,000.
 */
const SLOW_SWEEP_MS_PER_SOCKET = 0.05;

/** Socket states (one small integer instead of several booleans: per-socket memory is what an idle subscriber costs). */
const OPEN = 0;
const ENDING = 1;
const CLOSED = 2;

/**
 * What the gateway keeps per WebSocket, beyond uWS's own socket (docs/web-pubsub.md, "Memory per WebSocket subscriber"). It is
 * kept small on purpose: an idle subscriber costs this object, one exact-size topics array and one entry in the `open`
 * set. Topic membership for delivery is uWS's own subscription (no per-topic sets of sockets), token expiry is one
 * shared timer for all sockets (no timer per socket), and no closure is created per socket.
 */
interface WsData {
  grant: Grant;
  /** Live topics (subscribed in uWS and holding a hub reference), an exact-size array replaced on change: most
   * sockets hold one or two topics, and a pushed-to array would reserve room for 17. */
  topics: readonly string[];
  /** Subscribes in flight (at most MAX_WS_INFLIGHT); null (no array) when none. */
  pending: Subscribing[] | null;
  inflight: number;
  state: number;
  /** The subscribe the upgrade URL named, made when the socket opens; null once made, or when the URL named none. */
  start: SubscribeRequest | null;
}

/** A checked subscribe: from a `subscribe` frame, or from the upgrade URL's `topic` and `since` parameters. */
interface SubscribeRequest {
  readonly topics: string[];
  readonly since: Position | undefined;
}

/**
 * A subscribe in flight on a socket. Its topics are of three kinds: live on the socket already (nothing to do), being
 * acquired by an earlier subscribe in flight (it answers after that one, with its outcome), or its own to acquire
 * (`fresh`). The fresh topics of every subscribe in flight and the socket's live topics together stay within
 * MAX_WS_TOPICS.
 */
interface Subscribing {
  /** The requested topics, without repeats. */
  readonly want: ReadonlySet<string>;
  /** The topics it acquires itself. */
  readonly fresh: readonly string[];
  /** Topics an `unsubscribe` named while it was in flight: it does not subscribe them and leaves them out of its reply. */
  dropped: Set<string> | null;
  /** Resolves once it has gone live, rejects with its error: what a later subscribe of its fresh topics waits for. */
  readonly outcome: Promise<void>;
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
  const open = new Set<Ws>();
  const expiry = createExpiryWheel<Ws>((ws) => end(ws, CLOSE.tokenExpired, "token-expired", "token-expired"));
  /** Bytes published (per subscriber) since the last sweep, and whether a sweep is scheduled. */
  let sinceSweep = 0;
  let sweepImmediate = false;
  let sweepTimer: NodeJS.Timeout | null = null;

  const send = (ws: Ws, data: WsData, frame: object): void => {
    if (data.state !== CLOSED) ws.send(JSON.stringify(frame), false);
  };

  function end(ws: Ws, code: number, reason: string, metricReason: string): void {
    const data = ws.getUserData();
    if (data.state !== OPEN) return;
    data.state = ENDING;
    metrics.reaped.inc({ transport: "websocket", reason: metricReason });
    ws.end(code, reason);
    // end() sends a close frame a reader that stopped may never take: drop the connection after a grace.
    setTimeout(() => dropIfOpen(ws), END_GRACE_MS).unref();
  }

  function dropIfOpen(ws: Ws): void {
    if (ws.getUserData().state !== CLOSED) ws.close();
  }

  /**
   * The per-subscriber bound: a socket holding more than `boundBytes` in uWS backpressure is closed `slow`. Checking
   * every subscriber after every event would cost one native call per delivery, so the sweep runs once half a bound
   * has been published since the last one (no socket can then have grown by more than that, so none reaches uWS's
   * own hard limit of twice the bound unless one loop turn alone publishes a whole bound), and otherwise a while after
   * an event (SLOW_SWEEP_MS, longer with many sockets open), so a socket past the bound is closed within that time.
   */
  function sweep(): void {
    sweepImmediate = false;
    if (sweepTimer) clearTimeout(sweepTimer);
    sweepTimer = null;
    sinceSweep = 0;
    for (const ws of open) {
      // the buffered amount first: one native call per socket, the state only for one past the bound
      if (ws.getBufferedAmount() > boundBytes && ws.getUserData().state === OPEN) end(ws, CLOSE.slow, "slow", "slow");
    }
  }

  const fanout: TopicFanout = {
    deliver(event: WebEvent) {
      // uWS's own subscription is the membership record: no per-topic set of sockets to keep in step.
      const n = app.numSubscribers(event.topic);
      if (n === 0) return 0;
      const frame = event.wsFrame;
      app.publish(event.topic, frame, false);
      // uWS has written (or buffered) the frame on every subscribed socket: one observation for all of them.
      metrics.latency.observe("websocket", event.receivedAt, event.exemplar);
      sinceSweep += frame.length;
      if (sinceSweep * 2 >= boundBytes) {
        if (!sweepImmediate) {
          sweepImmediate = true;
          setImmediate(sweep);
        }
      } else if (!sweepTimer && !sweepImmediate) {
        sweepTimer = setTimeout(sweep, Math.max(SLOW_SWEEP_MS, open.size * SLOW_SWEEP_MS_PER_SOCKET));
        sweepTimer.unref();
      }
      return n;
    },
    endTopic(topic, reason: EndReason) {
      // Rare (an upstream failure, shutdown): a scan of the open sockets beats a per-topic index every socket pays for.
      for (const ws of [...open]) {
        const data = ws.getUserData();
        if (!data.topics.includes(topic) && !subscribing(data, topic)) continue;
        if (reason.kind === "shutdown") end(ws, CLOSE.shutdown, "shutdown", "shutdown");
        // A uWS worker thread that fell behind the main thread's event stream (docs/threads.md).
        else if (reason.kind === "slow") end(ws, CLOSE.slow, "slow", "slow");
        else end(ws, CLOSE.upstreamFailed, `upstream-failed: ${topic}`.slice(0, 120), reason.kind);
      }
    },
  };

  /**
   * An `unsubscribe` frame: the socket stops getting events of each named topic it holds at once, and a subscribe in
   * flight that names one (acquiring it, or waiting for another to) leaves it out. The reply lists the named topics the
   * socket held or was subscribing, in the request's order.
   */
  function unsubscribe(ws: Ws, data: WsData, msg: Record<string, unknown>): string[] {
    const names = new Set(unsubscribeTopics(msg["topics"]));
    const gone = new Set<string>();
    for (const s of data.pending ?? []) {
      for (const t of names) {
        if (!s.want.has(t)) continue;
        (s.dropped ??= new Set()).add(t);
        gone.add(t);
      }
    }
    const left = data.topics.filter((t) => names.has(t));
    if (left.length > 0) {
      data.topics = data.topics.filter((t) => !names.has(t));
      for (const t of left) {
        if (data.state !== CLOSED) ws.unsubscribe(t);
        hub.release(t);
        gone.add(t);
      }
    }
    return [...names].filter((t) => gone.has(t));
  }

  /** A `subscribe` frame's topics and `since`, checked against the socket's grant. */
  function subscribeFrame(data: WsData, msg: Record<string, unknown>): SubscribeRequest {
    const topics = checkTopics("topics", msg["topics"], data.grant, MAX_WS_TOPICS);
    const sinceText = msg["since"];
    if (sinceText !== undefined && typeof sinceText !== "string") throw invalidArgument("since", "must be a position string");
    return { topics, since: sinceText === undefined ? undefined : hub.parsePosition("since", sinceText) };
  }

  /**
   * The subscribe an upgrade URL names (`?topic=a&topic=b&since=<position>`, the SSE route's parameter name), checked
   * before the upgrade so a bad one is refused with a 400 naming the parameter; null when the URL names no topic.
   */
  function subscribeUrl(query: URLSearchParams, grant: Grant): SubscribeRequest | null {
    const named = query.getAll("topic");
    const sinceText = query.get("since");
    if (named.length === 0) {
      if (sinceText !== null) throw invalidArgument("since", "needs at least one topic query parameter to resume: ?topic=a&since=<position>");
      return null;
    }
    const topics = checkTopics("topic", named, grant, MAX_WS_TOPICS);
    return { topics, since: sinceText === null ? undefined : hub.parsePosition("since", sinceText) };
  }

  /**
   * Subscribe: acquire the topics the socket neither holds nor is acquiring, wait for the subscribes in flight that are
   * acquiring the others, then (all of it succeeded) reply, replay and go live. Any failure, its own or of a subscribe
   * it waited for, is its answer and leaves the socket as it was. With `since`, every topic must be new to the socket:
   * a resume replays what the socket missed, and a topic it holds or is subscribing missed nothing on it.
   */
  async function subscribe(ws: Ws, data: WsData, { topics, since }: SubscribeRequest, echo: object): Promise<void> {
    // The topics earlier subscribes in flight are acquiring (and no unsubscribe dropped since), and how many in all.
    const acquiring = new Map<string, Subscribing>();
    let inFlight = 0;
    for (const s of data.pending ?? []) {
      inFlight += s.fresh.length;
      for (const t of s.fresh) if (!s.dropped?.has(t)) acquiring.set(t, s);
    }
    const live = new Set(data.topics);
    if (since) {
      for (let i = 0; i < topics.length; i++) {
        const t = topics[i]!;
        if (live.has(t) || acquiring.has(t)) {
          throw invalidArgument(`topics[${i}]`, `'${t.slice(0, 64)}' is subscribed on this socket already: since resumes only topics the socket does not hold (unsubscribe it first)`);
        }
      }
    }
    const want = new Set(topics);
    const fresh: string[] = [];
    const waits = new Map<Subscribing, string[]>();
    for (const t of want) {
      if (live.has(t)) continue;
      const owner = acquiring.get(t);
      if (!owner) fresh.push(t);
      else if (waits.has(owner)) waits.get(owner)!.push(t);
      else waits.set(owner, [t]);
    }
    if (data.topics.length + inFlight + fresh.length > MAX_WS_TOPICS) {
      throw new GatewayError(Code.RESOURCE_EXHAUSTED, `a WebSocket may hold at most ${MAX_WS_TOPICS} topics`);
    }
    let settle!: { resolve(): void; reject(e: unknown): void };
    const outcome = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    outcome.catch(() => undefined);
    const me: Subscribing = { want, fresh, dropped: null, outcome };
    (data.pending ??= []).push(me);
    let results: PromiseSettledResult<Backfill | undefined | void>[];
    try {
      // A WebSocket message has no headers: a subscribe's span starts a trace of its own.
      const span = deps.traceSubscribe?.({ traceparent: undefined, tracestate: undefined, server: WS_SUBSCRIBE_SPAN }, fresh.length);
      const acquired = hub.acquire(fresh, undefined, since);
      results = await Promise.allSettled([
        span ? endWith(span, acquired) : acquired,
        // An earlier subscribe's failure is this one's too, unless an unsubscribe dropped every topic it waited for.
        ...[...waits].map(([owner, names]) =>
          owner.outcome.catch((e: unknown) => {
            if (names.some((t) => !me.dropped?.has(t))) throw e;
          }),
        ),
      ]);
    } finally {
      const rest = data.pending.filter((s) => s !== me);
      data.pending = rest.length > 0 ? rest : null;
    }
    const own = results[0]!;
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed || data.state !== OPEN) {
      if (own.status === "fulfilled") for (const t of fresh) hub.release(t);
      const why: unknown = failed ? failed.reason : new GatewayError(Code.UNAVAILABLE, "the WebSocket closed");
      settle.reject(why);
      if (failed) throw why;
      return;
    }
    const backfill = own.status === "fulfilled" ? (own.value as Backfill | undefined) : undefined;
    const dropped = me.dropped;
    // Replay and going live happen in one synchronous block: no event can fall between them.
    ws.cork(() => {
      const joined = dropped ? fresh.filter((t) => !dropped.has(t)) : fresh;
      if (dropped) for (const t of fresh) if (dropped.has(t)) hub.release(t);
      const named = dropped ? topics.filter((t) => !dropped.has(t)) : topics;
      // `since` (every topic fresh): the resume covers the topics it subscribes; none left, nothing to claim.
      const resume = since && joined.length > 0 ? hub.resume(joined, since, backfill) : undefined;
      send(ws, data, { op: "subscribed", ...echo, topics: named, ...(resume ? { recovered: resume.recovered } : {}), position: hub.position() });
      let slow = false;
      if (resume?.recovered) {
        for (const e of resume.events) if (ws.send(e.wsFrame, false) === 2) slow = true;
      }
      for (const t of joined) ws.subscribe(t);
      // concat makes an exact-size array (`fresh` came from push, which reserves room as it grows).
      data.topics = data.topics.concat(joined);
      if (slow) end(ws, CLOSE.slow, "slow", "slow");
    });
    settle.resolve();
  }

  async function publish(data: WsData, msg: Record<string, unknown>): Promise<void> {
    const topic = msg["topic"];
    if (typeof topic !== "string" || topic === "") throw invalidArgument("topic", "must not be empty");
    if (!data.grant.publish || !allows(data.grant, topic)) throw new GatewayError(Code.PERMISSION_DENIED, `the token does not allow publishing to topic '${topic.slice(0, 64)}'`);
    const ce = msg["cloudevent"];
    if (typeof ce !== "object" || ce === null || Array.isArray(ce)) throw invalidArgument("cloudevent", "is required: a CloudEvents JSON object");
    // A WebSocket message has no headers: its publish starts a trace (the event's own traceparent, if any, is linked).
    const trace = ops.tracing ? { traceparent: undefined, tracestate: undefined, server: WS_PUBLISH_SPAN } : undefined;
    const status = await ops.publish(topic, cloudEventFromJson(ce as Record<string, unknown>, "cloudevent"), undefined, trace);
    const failed = statusError(status);
    if (failed) throw failed;
  }

  /**
   * Count one request in flight on the socket until `work` settles; its failure is answered with an error frame (a
   * subscribe cancelled under it as UNAVAILABLE, as on every web front).
   */
  function run(ws: Ws, data: WsData, work: Promise<void>): void {
    data.inflight++;
    work
      .catch((e: unknown) => {
        const err = subscribeError(e);
        if (err.code === Code.INTERNAL) deps.logger.error({ err: e }, "WebSocket request failed");
        send(ws, data, { op: "error", ...((e as { echo?: object }).echo ?? {}), code: err.codeName, message: err.rawMessage });
      })
      .finally(() => data.inflight--);
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
          return await subscribe(ws, data, subscribeFrame(data, m), echo);
        case "unsubscribe":
          return send(ws, data, { op: "unsubscribed", ...echo, topics: unsubscribe(ws, data, m) });
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
    // uWS drops a connection past its own limit without a close frame: it gets more than ours (uwsFrameLimit), so a
    // frame over our limit gets a proper 1009 close from the message handler.
    maxPayloadLength: uwsFrameLimit(deps.maxFrameBytes),
    idleTimeout: deps.idleTimeoutSeconds,
    sendPingsAutomatically: true,
    // Hard stop: the bound is enforced by sweep; uWS sheds and shuts a socket only past twice the bound.
    maxBackpressure: boundBytes * 2,
    closeOnBackpressureLimit: 1,
    upgrade(res, req, context) {
      const { headers } = requestHeaders(req);
      const key = headers["sec-websocket-key"] ?? "";
      const extensions = headers["sec-websocket-extensions"] ?? "";
      const origin = headers["origin"] || undefined;
      const apiKey = headers["x-api-key"] || undefined;
      const { credentials, selected } = parseOfferedProtocols(headers["sec-websocket-protocol"] ?? "", WS_PROTOCOL, TOKEN_PROTOCOL_PREFIX);
      const query = new URLSearchParams(req.getQuery() ?? "");
      const tokens = [...query.getAll("token"), ...credentials].filter((t) => t !== "");
      const refused = (e: unknown): void => {
        metrics.refused.inc({ transport: "websocket", code: GatewayError.from(e).codeName });
        refuse(res, e);
      };
      let grant: Grant;
      let start: SubscribeRequest | null;
      try {
        const refusal = webAdmission(deps.isClosing(), deps.origins, origin, headers["host"]);
        if (refusal) throw refusal;
        grant = authenticate(deps, apiKey, tokens);
        start = subscribeUrl(query, grant);
      } catch (e) {
        return refused(e);
      }
      const full = overConnectionBound(deps, "websocket");
      if (full) return refused(full);
      // x-api-key and tokens are both checked synchronously (HMAC): the upgrade happens here, inside uWS's upgrade
      // handler, with no abort handler or per-connection closure. Never move it after an await: uWS 20.30's
      // res.cork() around a later upgrade can drop the new socket right after open (docs/web-pubsub.md, "Browser
      // tokens").
      res.upgrade(newData(grant, start), key, selected, extensions, context);
    },
    open(ws) {
      const data = ws.getUserData();
      open.add(ws);
      deps.connections.open++;
      metrics.subscribers.inc({ transport: "websocket" });
      if (data.grant.expiresAt !== null) expiry.add(ws, data.grant.expiresAt);
      const start = data.start;
      if (start === null) return;
      // The subscribe the URL named, answered like a frame's (`subscribed`, the replay, then live): no round trip.
      data.start = null;
      run(ws, data, subscribe(ws, data, start, {}));
    },
    message(ws, message, isBinary) {
      const data = ws.getUserData();
      if (data.state !== OPEN) return;
      if (message.byteLength > deps.maxFrameBytes) return end(ws, 1009, `frame larger than ${deps.maxFrameBytes} bytes`, "oversize");
      if (isBinary) return send(ws, data, { op: "error", code: "INVALID_ARGUMENT", message: "frame must be a text frame holding one JSON object" });
      if (data.inflight >= MAX_WS_INFLIGHT) {
        return send(ws, data, { op: "error", code: "RESOURCE_EXHAUSTED", message: `more than ${MAX_WS_INFLIGHT} requests in flight on this socket` });
      }
      const text = Buffer.from(message).toString("utf8");
      run(ws, data, handle(ws, data, text));
    },
    close(ws) {
      const data = ws.getUserData();
      data.state = CLOSED;
      open.delete(ws);
      deps.connections.open--;
      if (data.grant.expiresAt !== null) expiry.remove(ws, data.grant.expiresAt);
      metrics.subscribers.dec({ transport: "websocket" });
      const held = data.topics;
      data.topics = NO_TOPICS;
      for (const t of held) hub.release(t);
    },
  });

  return {
    fanout,
    get size() {
      return open.size;
    },
    closeAll() {
      expiry.clear();
      if (sweepTimer) clearTimeout(sweepTimer);
      sweepTimer = null;
      for (const ws of [...open]) end(ws, CLOSE.shutdown, "shutdown", "shutdown");
    },
  };
}

/** Whether a subscribe in flight on the socket names `topic` (and no unsubscribe dropped it since). */
function subscribing(data: WsData, topic: string): boolean {
  return data.pending?.some((s) => s.want.has(topic) && !s.dropped?.has(topic)) ?? false;
}

/**
 * An `unsubscribe` frame's `topics`, checked as a subscribe's are (checkTopics) but for the token's scope and for an
 * empty array, which unsubscribes nothing: an array of at most MAX_WS_TOPICS non-empty strings; INVALID_ARGUMENT
 * naming `topics` or `topics[i]` otherwise. The length is checked first: a frame of a million names costs nothing more.
 */
function unsubscribeTopics(topics: unknown): string[] {
  if (!Array.isArray(topics)) throw invalidArgument("topics", "must be an array of topic names");
  if (topics.length > MAX_WS_TOPICS) throw invalidArgument("topics", `must hold at most ${MAX_WS_TOPICS} topics, got ${topics.length}`);
  for (let i = 0; i < topics.length; i++) {
    const t: unknown = topics[i];
    if (typeof t !== "string" || t === "") throw invalidArgument(`topics[${i}]`, "must be a non-empty string");
  }
  return topics as string[];
}

/** The topics of a socket that holds none: one shared empty array. */
const NO_TOPICS: readonly string[] = Object.freeze([]);

/** A new socket's state. */
function newData(grant: Grant, start: SubscribeRequest | null): WsData {
  return { grant, topics: NO_TOPICS, pending: null, inflight: 0, state: OPEN, start };
}

/** Token expiry for every socket at once: sockets grouped by expiry time, one deadline-queue entry per group. */
interface ExpiryWheel<T> {
  add(item: T, at: number): void;
  remove(item: T, at: number): void;
  clear(): void;
}

/** The sockets whose tokens expire at one time: a single entry of the thread's deadline queue for all of them. */
class ExpiryGroup<T> implements Expiring {
  deadlineSlot = -1;
  readonly items = new Set<T>();
  constructor(
    readonly at: number,
    private readonly groups: Map<number, ExpiryGroup<T>>,
    private readonly expire: (item: T) => void,
  ) {}

  deadlinePassed(): void {
    // Out of the map first: an item that closes while it expires finds no group to leave.
    this.groups.delete(this.at);
    for (const item of this.items) this.expire(item);
  }
}

/**
 * No timer per socket (a Node timer is a few hundred bytes): tokens expire on whole seconds (JWT `exp`), so sockets
 * fall into few groups, each a Set (a closing socket leaves at once) and one entry of the thread's deadline queue.
 */
function createExpiryWheel<T>(expire: (item: T) => void): ExpiryWheel<T> {
  const groups = new Map<number, ExpiryGroup<T>>();
  return {
    add(item, at) {
      let group = groups.get(at);
      if (!group) {
        groups.set(at, (group = new ExpiryGroup(at, groups, expire)));
        callDeadlines.add(group, at);
      }
      group.items.add(item);
    },
    remove(item, at) {
      const group = groups.get(at);
      if (!group?.items.delete(item) || group.items.size > 0) return;
      groups.delete(at);
      callDeadlines.remove(group);
    },
    clear() {
      for (const group of groups.values()) callDeadlines.remove(group);
      groups.clear();
    },
  };
}
