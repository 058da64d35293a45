import { notLive, subscribeFailure, subscribeFailureKind, TopicHistory, type EndReason, type FanoutTrace } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { CloudEvent } from "../shared/cloudevent.js";
import type { ExemplarIds } from "../observe/metrics.js";
import { formatPosition, isOwnPosition, parsePosition, type Position, type PositionScheme } from "./positions.js";

export type { Position, PositionScheme } from "./positions.js";

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
    /** The event as received (main thread only), for gRPC Subscribe streams with positions. */
    readonly event?: CloudEvent,
    /**
     * When the broker received it (`preciseEpochMs`, on the main thread), where the delivery latency counts from;
     * undefined for an event fetched for a resume (a replay is no delivery of a fresh event).
     */
    readonly receivedAt?: number,
    /** The ids of its sampled fan-out span (tracing on): the delivery latency's exemplar. */
    readonly exemplar?: ExemplarIds,
  ) {}

  /** The event's identity hash when its position carries one (positions.ts: epoch positions with marks). */
  get mark(): string | undefined {
    const i = this.position.lastIndexOf("-");
    return i > 0 && this.position.indexOf("-") < i ? this.position.slice(i + 1) : undefined;
  }

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
 * A transport's outlet of one hub (the uWS WebSocket publisher and the SSE writer; on the main thread with uWS worker
 * threads, the poster of events to the threads). The hub calls `deliver` once per event per topic, and the outlet does
 * its own per-subscriber delivery (uWS native topic publish for WebSockets).
 */
export interface TopicFanout {
  /** Deliver one event to this outlet's subscribers of its topic; returns how many deliveries that made. */
  deliver(event: WebEvent): number;
  /** The topic ended for good (its upstream failed, or shutdown): end this outlet's subscribers of it. */
  endTopic(topic: string, reason: EndReason): void;
}

/**
 * Where a hub's topics come from. The hub is the same on the main thread and on each uWS worker thread; only this
 * differs: on the main thread the broker (one fanout attachment per topic, the sequence numbers issued here), on a
 * worker thread the main hub over the bridge (`web.acquire` answered with the topic's history, then the events the
 * main thread posts, `web.release`).
 */
export interface HubUpstream {
  /** How positions are written (the main hub's: a position resumes on any thread of the process, or of the cluster). */
  readonly scheme: PositionScheme;
  /**
   * Whether a topic nobody holds is kept (and recorded) for the history age, so a reconnecting subscriber resumes
   * exactly. The main hub lingers; a worker thread hands the topic back at once, since the main hub lingers for it.
   */
  readonly linger: boolean;
  /**
   * Start following `topic`: every later event reaches `sink.event` (in sequence order), and `sink.end` once the
   * topic ends for good. Resolves once events flow; rejects when the upstream refuses the topic.
   */
  follow(topic: string, sink: UpstreamSink): Promise<Following>;
  /**
   * The current position's sequence number: every event of a followed topic up to it has reached its sink, and every
   * later one will. What a subscriber that has seen no event resumes from, and the bound of an exact resume.
   */
  seq(): number;
  /**
   * Wait (bounded) until `seq()` reaches `seq`, when it may (the position was issued upstream but this side has not
   * yet seen everything up to it); undefined when there is nothing to wait for.
   */
  catchUp?(seq: number): Promise<void> | undefined;
  /**
   * Stream positions only: the events of `topic` after `since` that the runtime still holds, at most `limit`, for a
   * resume from before this hub's own history (another replica's position, or one older than the history).
   * `complete`: they are every event after `since`.
   */
  history?(topic: string, since: number, limit: number): Promise<{ complete: boolean; events: WebEvent[] }>;
}

/** Where an upstream delivers one followed topic. */
export interface UpstreamSink {
  /** One event; `trace` (tracing on, the main hub): its fan-out record, where each transport counts its deliveries. */
  event(e: WebEvent, trace?: FanoutTrace): void;
  end(reason: EndReason): void;
}

/** A followed topic, as the upstream answered it. */
export interface Following {
  /** Every event of the topic with a larger sequence number reaches the sink or is in `events`. */
  completeAfter: number;
  /** Events the upstream holds already (a worker thread gets the main hub's history), oldest first. */
  events: ReadonlyArray<{ seq: number; at: number; event: WebEvent }>;
  /** Stop following (the hub dropped the topic). */
  stop(): void;
}

/** A topic the hub follows: its upstream link, its history, and how many web subscribers hold it. */
interface WebTopic {
  readonly name: string;
  refs: number;
  history: TopicHistory<WebEvent>;
  following: Following | null;
  /**
   * Events that reached the topic while it was opening (after the upstream began delivering, before its answer was
   * handled here): kept and recorded once it opens, so the history has no hole. At most the history bound; `earlyFloor`
   * is the last one let go past it.
   */
  early: WebEvent[] | null;
  earlyFloor: number;
  opening: Promise<void>;
  linger: NodeJS.Timeout | null;
  state: "opening" | "open" | "dead";
}

/** What a resume from a position gives. */
export interface Resume {
  /** True when every event after the position on these topics is replayed (nothing evicted or missed). */
  recovered: boolean;
  /** The events to replay, in order (all of them that are held, even when not recovered). */
  events: WebEvent[];
}

/** Options of createWebHub. */
export interface WebHubOptions {
  upstream: HubUpstream;
  /** Per-topic history bounds. */
  historyEvents: number;
  historyAgeMs: number;
  /** Called per event with the deliveries of each transport, and per history change. */
  onDeliver?(transport: string, n: number): void;
  onHistory?(events: number): void;
  now?: () => number;
}

/**
 * Events of some topics fetched from the runtime for one resume, beyond the hub's own histories (stream positions).
 * `completeUpTo`: every event up to this number was in the runtime when they were fetched.
 */
export type Backfill = Map<string, { complete: boolean; completeUpTo: number; events: WebEvent[] }>;

/** The web pub/sub hub: per-topic upstream links shared by every WebSocket and SSE subscriber, histories, positions. */
export interface WebHub {
  /** How positions are written; with `epoch`, positions from another process resume only by event marks. */
  readonly scheme: PositionScheme;
  /** The current position, for a subscriber that has seen no event yet (a resume from it is exact on any thread). */
  position(): string;
  /** The current position's number. */
  seq(): number;
  /**
   * Stream positions: the runtime's events of `topic` after `since` (at most the history bound), for a uWS worker
   * thread's resume; undefined when positions are the process's own.
   */
  history(topic: string, since: number): Promise<{ complete: boolean; events: WebEvent[] }> | undefined;
  /** Parse a position; INVALID_ARGUMENT naming `field` when it is not one. */
  parsePosition(field: string, text: string): Position;
  /** Register a transport outlet under a name (the metrics label). */
  addFanout(transport: string, fanout: TopicFanout): void;
  /**
   * Take a reference on each topic; resolves once all are live (rolls back and rejects otherwise). With `since` (a
   * resume follows), also waits, bounded, until this hub has seen every event up to it (HubUpstream.catchUp), and on
   * stream positions fetches from the runtime what the histories no longer hold (pass it to `resume`).
   */
  acquire(topics: readonly string[], signal?: AbortSignal, since?: Position): Promise<Backfill | undefined>;
  /** Give one reference back; on the main thread the topic lingers for the history age so a reconnect loses nothing. */
  release(topic: string): void;
  /** Replay for `topics` after `since` (call synchronously right before going live, with the topics acquired). */
  resume(topics: readonly string[], since: Position, backfill?: Backfill): Resume;
  /**
   * What a uWS worker thread needs to start following a topic it just acquired here: the current sequence number and
   * the topic's resume history (from which sequence number on it is complete, and the events it holds).
   */
  snapshot(topic: string): HubSnapshot;
  /** Counts for health. */
  stats(): { topics: number; history: number };
  /** Drop every topic (hands every upstream link back). */
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
  /** WebEvent.receivedAt and WebEvent.exemplar, on a live event (not on the history of a snapshot). */
  receivedAt?: number;
  exemplar?: ExemplarIds;
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

/** Topics the hub follows at once (live or lingering); past it a lingering one is dropped, else RESOURCE_EXHAUSTED. */
export const MAX_WEB_TOPICS = 10_000;

/**
 * Create a hub over `upstream`. Subscribers hold references on topics; the first reference follows the topic
 * upstream, the last one given back lingers (main thread) or drops it at once (worker thread). Each event is pushed to
 * the topic's history and handed once to every transport outlet, which does its own per-subscriber delivery.
 */
export function createWebHub(options: WebHubOptions): WebHub {
  const { upstream } = options;
  const { scheme } = upstream;
  const now = options.now ?? Date.now;
  const bounds = { maxEvents: options.historyEvents, maxAgeMs: options.historyAgeMs };
  let historyTotal = 0;
  const topics = new Map<string, WebTopic>();
  const fanouts: Array<{ transport: string; fanout: TopicFanout }> = [];
  let closed = false;

  const historyChanged = (before: number, after: number): void => {
    if (before === after) return;
    historyTotal += after - before;
    options.onHistory?.(historyTotal);
  };

  function onEvent(t: WebTopic, event: WebEvent, trace: FanoutTrace | undefined): void {
    if (t.state !== "open") {
      if (t.state === "opening") {
        const early = (t.early ??= []);
        early.push(event);
        if (early.length > options.historyEvents) t.earlyFloor = early.shift()!.seq;
      }
      return;
    }
    const before = t.history.size;
    t.history.push(event.seq, now(), event);
    historyChanged(before, t.history.size);
    for (const { transport, fanout } of fanouts) {
      const n = fanout.deliver(event);
      if (n > 0) options.onDeliver?.(transport, n);
      trace?.count(transport, n);
    }
  }

  function drop(t: WebTopic): void {
    if (t.state === "dead") return;
    t.state = "dead";
    if (topics.get(t.name) === t) topics.delete(t.name);
    if (t.linger) clearTimeout(t.linger);
    t.linger = null;
    historyChanged(t.history.size, 0);
    t.following?.stop();
    t.following = null;
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
      history: new TopicHistory<WebEvent>(bounds, upstream.seq()),
      following: null,
      early: null,
      earlyFloor: 0,
      opening: Promise.resolve(),
      linger: null,
      state: "opening",
    };
    topics.set(name, t);
    t.opening = upstream
      .follow(name, {
        event: (e, trace) => onEvent(t, e, trace),
        end: (reason) => {
          // Ended upstream: nothing to hand back there.
          t.following = null;
          drop(t);
          for (const f of fanouts) f.fanout.endTopic(name, reason);
        },
      })
      .then(
        (following) => {
          if (t.state === "dead") return following.stop();
          t.following = following;
          t.state = "open";
          // Recording starts now, with what the upstream held already and what came meanwhile (the same event may be
          // in both on a worker thread that gave the topic back and took it again): a resume from before cannot be exact.
          let last = Math.max(following.completeAfter, t.earlyFloor);
          t.history = new TopicHistory<WebEvent>(bounds, last);
          for (const e of following.events) {
            if (e.seq <= last) continue;
            t.history.push(e.seq, e.at, e.event);
            last = e.seq;
          }
          const at = now();
          for (const e of t.early ?? []) {
            if (e.seq <= last) continue;
            t.history.push(e.seq, at, e);
            last = e.seq;
          }
          t.early = null;
          historyChanged(0, t.history.size);
          if (t.refs === 0) idle(t);
        },
        (err: unknown) => {
          drop(t);
          throw err;
        },
      );
    t.opening.catch(() => undefined);
    return t;
  }

  /** Nobody holds the topic: linger for the history age (main thread), or hand it back now. */
  function idle(t: WebTopic): void {
    if (t.linger || t.state === "dead") return;
    if (!upstream.linger) return drop(t);
    t.linger = setTimeout(() => {
      t.linger = null;
      if (t.refs === 0) drop(t);
    }, options.historyAgeMs);
    t.linger.unref();
  }

  function release(t: WebTopic): void {
    if (topics.get(t.name) !== t) return;
    t.refs--;
    if (t.refs <= 0) {
      t.refs = 0;
      // Still opening: the upstream's answer finds no reference and hands the topic back then.
      if (t.state === "open") idle(t);
    }
  }

  /**
   * Take one reference on each topic (opening those not held), wait for every opening, then re-check what the wait
   * may have changed (closing, the subscriber gone, an upstream that broke). On any failure every reference taken
   * here is handed back and the error thrown.
   */
  async function acquire(names: readonly string[], signal?: AbortSignal, since?: Position): Promise<Backfill | undefined> {
    if (closed) throw subscribeFailure("closed", "the gateway is shutting down");
    const held: WebTopic[] = [];
    const rollback = (): void => {
      for (const t of held) release(t);
    };
    for (const name of names) {
      let t = topics.get(name);
      if (!t || t.state === "dead") {
        try {
          t = open(name);
        } catch (e) {
          rollback();
          throw e;
        }
      }
      t.refs++;
      if (t.linger) {
        clearTimeout(t.linger);
        t.linger = null;
      }
      held.push(t);
    }
    let backfill: Backfill | undefined;
    try {
      await Promise.all(held.map((t) => t.opening));
      if (since && isOwnPosition(scheme, since)) {
        await upstream.catchUp?.(since.seq);
        backfill = await fetchBackfill(held, since.seq);
      }
    } catch (e) {
      rollback();
      throw e;
    }
    const why = notLive(closed ? "the gateway is shutting down" : undefined, signal, held.find((t) => t.state !== "open")?.name);
    if (why) {
      rollback();
      throw why;
    }
    return backfill;
  }

  /**
   * Stream positions: what the runtime still holds of the topics whose history here starts after `since` (a position
   * from another replica, from before this replica followed the topic, or older than the history). At most the
   * history bound per topic: a subscriber further behind resumes `recovered: false`, as from an evicted history.
   */
  async function fetchBackfill(held: readonly WebTopic[], since: number): Promise<Backfill | undefined> {
    const fetch = upstream.history;
    if (!fetch) return undefined;
    const behind = [...new Set(held)].filter((t) => t.state === "open" && !t.history.covers(since));
    if (behind.length === 0) return undefined;
    // Every event up to here was in the runtime before the fetches start: the hub's own history holds what came later.
    const completeUpTo = upstream.seq();
    const got = await Promise.all(behind.map((t) => fetch(t.name, since, options.historyEvents)));
    return new Map(behind.map((t, i) => [t.name, { ...got[i]!, completeUpTo }]));
  }

  /** The topic's history, evicted to now (the caller reads it next). */
  function freshHistory(t: WebTopic): TopicHistory<WebEvent> {
    const before = t.history.size;
    t.history.evict(now());
    historyChanged(before, t.history.size);
    return t.history;
  }

  /**
   * The events after `since` on `names`, in sequence order, and whether they are exactly what was missed: a position
   * of this scheme that this hub has seen everything up to (a later one would have events still on their way here
   * replayed and then delivered again), every topic held and its history still covering the position, or the part it
   * no longer covers fetched whole from the runtime (`backfill`, stream positions).
   */
  function resume(names: readonly string[], since: Position, backfill?: Backfill): Resume {
    if (!isOwnPosition(scheme, since)) return resumeByMark(names, since);
    const events: WebEvent[] = [];
    let recovered = since.seq <= upstream.seq();
    for (const name of new Set(names)) {
      const t = topics.get(name);
      if (!t || t.state !== "open") {
        recovered = false;
        continue;
      }
      const history = freshHistory(t);
      if (!history.covers(since.seq)) {
        const fetched = backfill?.get(name);
        // The runtime's events fill the gap up to where this history starts, if they reach that far.
        if (fetched?.complete && history.completeAfter <= fetched.completeUpTo) {
          for (const e of fetched.events) if (e.seq > since.seq && e.seq <= history.completeAfter) events.push(e);
        } else recovered = false;
      }
      for (const e of history.after(since.seq)) events.push(e.data);
    }
    events.sort((a, b) => a.seq - b.seq);
    return { recovered, events };
  }

  /**
   * A position from another process (epoch positions): exact only for one topic whose event the position names (its
   * mark) this hub still holds, which means it has followed the topic since then; the events after that one follow.
   */
  function resumeByMark(names: readonly string[], since: Position): Resume {
    const unique = [...new Set(names)];
    const t = unique.length === 1 ? topics.get(unique[0]!) : undefined;
    if (since.mark === undefined || !t || t.state !== "open") return { recovered: false, events: [] };
    const history = freshHistory(t);
    const seq = history.findSeq((e) => e.mark === since.mark);
    if (seq === undefined) return { recovered: false, events: [] };
    return { recovered: true, events: history.after(seq).map((e) => e.data) };
  }

  return {
    scheme,
    position: () => formatPosition(scheme, upstream.seq()),
    seq: () => upstream.seq(),
    history: (topic, since) => upstream.history?.(topic, since, options.historyEvents),
    parsePosition: (field, text) => parsePosition(scheme, field, text),
    addFanout(transport, fanout) {
      fanouts.push({ transport, fanout });
    },
    acquire,
    release(name) {
      const t = topics.get(name);
      if (t) release(t);
    },
    resume,
    snapshot(name) {
      const seq = upstream.seq();
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
