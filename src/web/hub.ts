import { randomBytes } from "node:crypto";
import { notLive, subscribeFailure, subscribeFailureKind, TopicHistory, type Broker, type EndReason, type FanoutHandle } from "../broker/index.js";
import { cloudEventToJson } from "../shared/cloudevent-json.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import { Code } from "../shared/code.js";
import { GatewayError, invalidArgument } from "../shared/gateway-error.js";
import type { Logger } from "../observe/logger.js";

/**
 * One event as the web transports see it, built once per event per topic: its position and the CloudEvents JSON text.
 * The frames of each transport are built on first use and then shared by every subscriber (and by replays).
 */
export class WebEvent {
  private ws: string | undefined;
  private sseUtf8: Buffer | undefined;
  constructor(
    readonly topic: string,
    readonly seq: number,
    readonly position: string,
    /** `{"specversion":...}`: the CloudEvents JSON format of the event, serialized once. */
    readonly cloudevent: string,
  ) {}

  /** The WebSocket text frame `{"op":"event","topic","id","cloudevent"}`. */
  get wsFrame(): string {
    return (this.ws ??= `{"op":"event","topic":${JSON.stringify(this.topic)},"id":"${this.position}","cloudevent":${this.cloudevent}}`);
  }

  /**
   * The SSE message, `id: <position>` and one `data:` line `{"topic","cloudevent"}` (JSON text has no raw newline), as
   * UTF-8 bytes encoded once: uWS would otherwise convert a string on every write. Only the bytes are kept (history
   * holds events for their whole age).
   */
  get sseBytes(): Buffer {
    return (this.sseUtf8 ??= Buffer.from(`id: ${this.position}\ndata: {"topic":${JSON.stringify(this.topic)},"cloudevent":${this.cloudevent}}\n\n`, "utf8"));
  }
}

/**
 * A transport's outlet for one process (today: the uWS WebSocket publisher and the SSE writer; with several uWS
 * worker threads, one per thread). The hub calls `deliver` once per event per topic, and the outlet does its own
 * per-subscriber delivery (uWS native topic publish for WebSockets).
 */
export interface TopicFanout {
  /** Deliver one event to this outlet's subscribers of its topic; returns how many deliveries that made. */
  deliver(event: WebEvent): number;
  /** The topic ended for good (its upstream failed, or shutdown): end this outlet's subscribers of it. */
  endTopic(topic: string, reason: EndReason): void;
}

/** A topic the hub follows: one broker attachment, its history, and how many web subscribers hold it. */
interface WebTopic extends RefTopic {
  readonly name: string;
  refs: number;
  history: TopicHistory<WebEvent>;
  handle: FanoutHandle | null;
  opening: Promise<void>;
  linger: NodeJS.Timeout | null;
  state: "opening" | "open" | "dead";
}

/** What acquireTopics needs of a hub's topic: its reference count, its opening and its state. */
export interface RefTopic {
  readonly name: string;
  refs: number;
  opening: Promise<void>;
  state: "opening" | "open" | "dead";
}

/** How one hub keeps its topics, for acquireTopics. */
export interface TopicTable<T extends RefTopic> {
  /** Whether the hub is closing (then nothing is acquired). */
  closed(): boolean;
  /** The hub's topics by name (a dead one is opened again). */
  readonly topics: ReadonlyMap<string, T>;
  /** Open a topic the hub does not hold (may throw, e.g. past the topic bound). */
  open(name: string): T;
  /** A reference was taken (the main hub stops a topic's linger here). */
  taken?(t: T): void;
  /** Hand back one reference taken by this acquire. */
  release(t: T): void;
}

/**
 * The one acquire of the main web hub and of a worker thread's hub: take one reference on each topic (opening those
 * not held), wait for every opening, then re-check what the wait may have changed (closing, the subscriber gone, an
 * upstream that broke). On any failure every reference taken here is handed back and the error thrown.
 */
export async function acquireTopics<T extends RefTopic>(names: readonly string[], table: TopicTable<T>, signal?: AbortSignal): Promise<void> {
  if (table.closed()) throw subscribeFailure("closed", "the gateway is shutting down");
  const held: T[] = [];
  const rollback = (): void => {
    for (const t of held) table.release(t);
  };
  for (const name of names) {
    let t = table.topics.get(name);
    if (!t || t.state === "dead") {
      try {
        t = table.open(name);
      } catch (e) {
        rollback();
        throw e;
      }
    }
    t.refs++;
    table.taken?.(t);
    held.push(t);
  }
  try {
    await Promise.all(held.map((t) => t.opening));
  } catch (e) {
    rollback();
    throw e;
  }
  const why = notLive(table.closed() ? "the gateway is shutting down" : undefined, signal, held.find((t) => t.state !== "open")?.name);
  if (why) {
    rollback();
    throw why;
  }
}

/**
 * A resume from `since` over a hub's topics (the one resume of the main hub and a worker thread's hub): the events
 * after it, in sequence order, and whether they are exactly what was missed (same epoch, every topic held and its
 * history still covering the position). Old history is evicted first, reporting size changes to `historyChanged`.
 */
export function resumeTopics(
  topics: ReadonlyMap<string, { readonly state: RefTopic["state"]; readonly history: TopicHistory<WebEvent> }>,
  names: readonly string[],
  since: Position,
  at: { epoch: string; seq: number; now: number },
  historyChanged: (before: number, after: number) => void,
): Resume {
  const events: WebEvent[] = [];
  let recovered = since.epoch === at.epoch && since.seq <= at.seq;
  for (const name of new Set(names)) {
    const t = topics.get(name);
    if (!t || t.state !== "open") {
      recovered = false;
      continue;
    }
    const before = t.history.size;
    t.history.evict(at.now);
    historyChanged(before, t.history.size);
    if (since.epoch !== at.epoch) continue;
    if (!t.history.covers(since.seq)) recovered = false;
    for (const e of t.history.after(since.seq)) events.push(e.data);
  }
  events.sort((a, b) => a.seq - b.seq);
  return { recovered, events };
}

/** Where a resume starts: this process's epoch and a sequence number. */
export interface Position {
  epoch: string;
  seq: number;
}

/** What a resume from a position gives. */
export interface Resume {
  /** True when every event after the position on these topics is replayed (same epoch, nothing evicted or missed). */
  recovered: boolean;
  /** The events to replay, in order (all of them that are held, even when not recovered). */
  events: WebEvent[];
}

/** Options of createWebHub. */
export interface WebHubOptions {
  broker: Broker;
  logger: Logger;
  /** Per-topic history bounds. */
  historyEvents: number;
  historyAgeMs: number;
  /** Called per event with the deliveries of each transport, and per history change. */
  onDeliver?(transport: string, n: number): void;
  onHistory?(events: number): void;
  now?: () => number;
}

/** The web pub/sub hub: per-topic broker attachments shared by every WebSocket and SSE subscriber, histories, positions. */
export interface WebHub {
  /** This process's epoch: positions from another process never resume exactly. */
  readonly epoch: string;
  /** The current position (the last sequence number issued), for a subscriber that has seen no event yet. */
  position(): string;
  /** Parse a position; INVALID_ARGUMENT naming `field` when it is not one. */
  parsePosition(field: string, text: string): Position;
  /** Register a transport outlet under a name (the metrics label). */
  addFanout(transport: string, fanout: TopicFanout): void;
  /** Take a reference on each topic; resolves once all are live (rolls back and rejects otherwise). */
  acquire(topics: readonly string[], signal?: AbortSignal): Promise<void>;
  /** Give one reference back; the topic lingers for the history age so a reconnecting subscriber loses nothing. */
  release(topic: string): void;
  /** Replay for `topics` after `since` (call synchronously right before going live, with the topics acquired). */
  resume(topics: readonly string[], since: Position): Resume;
  /**
   * What a uWS worker thread needs to start following a topic it just acquired here: the current sequence number and
   * the topic's resume history (from which sequence number on it is complete, and the events it holds).
   */
  snapshot(topic: string): HubSnapshot;
  /** Counts for health. */
  stats(): { topics: number; history: number };
  /** Drop every topic (the broker ends the attachments itself on close). */
  close(): void;
}

/**
 * A broker subscribe failure as the web fronts report it: the broker's code for an upstream refusal or a closing
 * broker, UNAVAILABLE (not CANCELLED) for a subscribe the subscriber gave up on, as gRPC Subscribe maps it.
 */
export function subscribeError(e: unknown): GatewayError {
  if (subscribeFailureKind(e) === "cancelled") return new GatewayError(Code.UNAVAILABLE, (e as GatewayError).rawMessage, { cause: e });
  return GatewayError.from(e);
}

/** One event as it crosses to a uWS worker thread: plain values, the CloudEvents JSON text serialized once. */
export interface EventWire {
  topic: string;
  seq: number;
  position: string;
  cloudevent: string;
}

/** WebHub.snapshot's answer. */
export interface HubSnapshot {
  /** The last sequence number issued. */
  seq: number;
  /** Every event of the topic with a larger sequence number than this is in `events`. */
  completeAfter: number;
  /** Held events, oldest first, with when they arrived. */
  events: Array<EventWire & { at: number }>;
}

/** Parse a position (`<epoch>-<offset>`); INVALID_ARGUMENT naming `field` when it is not one. */
export function parsePosition(field: string, text: string): Position {
  const m = POSITION.exec(text);
  if (!m) throw invalidArgument(field, `'${text.slice(0, 64)}' is not a position (expected <epoch>-<offset> as sent in an event id)`);
  return { epoch: m[1]!, seq: Number(m[2]) };
}

/** Topics the hub follows at once (live or lingering); past it a lingering one is dropped, else RESOURCE_EXHAUSTED. */
export const MAX_WEB_TOPICS = 10_000;

const POSITION = /^([0-9a-f]{12})-(\d{1,15})$/;

/** Create the hub. */
export function createWebHub(options: WebHubOptions): WebHub {
  const { broker } = options;
  const now = options.now ?? Date.now;
  const epoch = randomBytes(6).toString("hex");
  let seq = 0;
  let historyTotal = 0;
  const topics = new Map<string, WebTopic>();
  const fanouts: Array<{ transport: string; fanout: TopicFanout }> = [];
  let closed = false;

  const historyChanged = (before: number, after: number): void => {
    if (before === after) return;
    historyTotal += after - before;
    options.onHistory?.(historyTotal);
  };

  function onEvent(t: WebTopic, ce: CloudEvent): void {
    if (t.state !== "open") return;
    let json: string;
    try {
      json = JSON.stringify(cloudEventToJson(ce));
    } catch (err) {
      options.logger.error({ topic: t.name, err }, "pub/sub event could not be serialized as JSON and was dropped");
      return;
    }
    const s = ++seq;
    const event = new WebEvent(t.name, s, `${epoch}-${s}`, json);
    const before = t.history.size;
    t.history.push(s, now(), event);
    historyChanged(before, t.history.size);
    for (const { transport, fanout } of fanouts) {
      const n = fanout.deliver(event);
      if (n > 0) options.onDeliver?.(transport, n);
    }
  }

  function drop(t: WebTopic): void {
    if (t.state === "dead") return;
    t.state = "dead";
    if (topics.get(t.name) === t) topics.delete(t.name);
    if (t.linger) clearTimeout(t.linger);
    t.linger = null;
    historyChanged(t.history.size, 0);
    // The hub's own linger (the history age) was the topic's retention: the broker does not linger again.
    t.handle?.close({ linger: false });
    t.handle = null;
  }

  function open(name: string): WebTopic {
    if (topics.size >= MAX_WEB_TOPICS) {
      // Make room by dropping the oldest topic nobody holds (it only lingers for resume).
      let victim: WebTopic | undefined;
      for (const x of topics.values()) {
        if (x.refs === 0) {
          victim = x;
          break;
        }
      }
      if (!victim) throw new GatewayError(Code.RESOURCE_EXHAUSTED, `the gateway follows ${MAX_WEB_TOPICS} web topics already`);
      drop(victim);
    }
    const t: WebTopic = {
      name,
      refs: 0,
      history: new TopicHistory<WebEvent>({ maxEvents: options.historyEvents, maxAgeMs: options.historyAgeMs }, seq),
      handle: null,
      opening: Promise.resolve(),
      linger: null,
      state: "opening",
    };
    topics.set(name, t);
    t.opening = broker
      .attachFanout(name, {
        event: (_topic, ce) => onEvent(t, ce as CloudEvent),
        end: (reason) => {
          t.handle = null;
          drop(t);
          for (const f of fanouts) f.fanout.endTopic(name, reason);
        },
      })
      .then(
        (handle) => {
          if (t.state === "dead") return handle.close();
          t.handle = handle;
          t.state = "open";
          // Recording starts now: a resume from before this point cannot be exact.
          t.history = new TopicHistory<WebEvent>({ maxEvents: options.historyEvents, maxAgeMs: options.historyAgeMs }, seq);
          if (t.refs === 0) lingerThenDrop(t);
        },
        (err: unknown) => {
          drop(t);
          throw err;
        },
      );
    t.opening.catch(() => undefined);
    return t;
  }

  function lingerThenDrop(t: WebTopic): void {
    if (t.linger || t.state === "dead") return;
    t.linger = setTimeout(() => {
      t.linger = null;
      if (t.refs === 0) drop(t);
    }, options.historyAgeMs);
    t.linger.unref();
  }

  function releaseOne(name: string): void {
    const t = topics.get(name);
    if (!t) return;
    t.refs--;
    if (t.refs <= 0) {
      t.refs = 0;
      if (t.state === "open") lingerThenDrop(t);
    }
  }

  return {
    epoch,
    position: () => `${epoch}-${seq}`,
    parsePosition,
    addFanout(transport, fanout) {
      fanouts.push({ transport, fanout });
    },
    acquire(names, signal) {
      return acquireTopics(
        names,
        {
          closed: () => closed,
          topics,
          open,
          taken: (t) => {
            if (t.linger) {
              clearTimeout(t.linger);
              t.linger = null;
            }
          },
          release: (t) => {
            if (topics.get(t.name) === t) releaseOne(t.name);
          },
        },
        signal,
      );
    },
    release: releaseOne,
    resume: (names, since) => resumeTopics(topics, names, since, { epoch, seq, now: now() }, historyChanged),
    snapshot(name) {
      const t = topics.get(name);
      if (!t || t.state !== "open") return { seq, completeAfter: seq, events: [] };
      const before = t.history.size;
      t.history.evict(now());
      historyChanged(before, t.history.size);
      return {
        seq,
        completeAfter: t.history.completeAfter,
        events: t.history.after(t.history.completeAfter).map((e) => ({ topic: name, seq: e.seq, at: e.at, position: e.data.position, cloudevent: e.data.cloudevent })),
      };
    },
    stats: () => ({ topics: topics.size, history: historyTotal }),
    close() {
      closed = true;
      for (const t of [...topics.values()]) drop(t);
    },
  };
}
