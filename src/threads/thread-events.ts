import type { EndReason } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { Logger } from "../observe/logger.js";
import type { CounterMetric } from "../observe/metrics.js";
import { subscribeError, type EventWire, type HubSnapshot, type WebHub } from "../web/hub.js";
import type { BridgeHandler } from "./bridge.js";
import type { EventClock, ThreadMessage } from "./protocol.js";

/** One thread's event stream, as long as its worker lives (a restarted thread gets a new one). */
export interface EventStream {
  /** The thread's 1-based index. */
  readonly index: number;
  /** The shared memory the thread reads (the sequence word is the same for every stream). */
  readonly clock: EventClock;
  /**
   * Topics this thread holds on the main hub (one hub reference each, whatever the number of acquires): only their
   * events are posted to it. Per topic, the ids of the thread's acquires (`web.acquire`'s `id`) the reference stands
   * for: a `web.release` undoes its own acquire only, and the reference goes back once none is left. At most one per
   * acquire call of the thread in flight or answered and not yet released (bridge-bounded).
   */
  readonly held: Map<string, Set<number>>;
  /** Messages (events and ends) posted, and handled there as of its last ack. */
  posted: number;
  acked: number;
  /** Events posted and not yet added to the posted-events metric. */
  uncounted: number;
  /** Past the backlog bound: nothing is posted and no topic taken until it has drained to half. */
  shed: boolean;
  /** False once the worker exited. */
  live: boolean;
}

/** Options of createThreadEvents. */
export interface ThreadEventsOptions {
  hub: WebHub;
  logger: Logger;
  /** Bound on messages posted to a thread and not yet handled there. */
  maxBacklog: number;
  /** `platform_web_thread_events_posted_total`, by thread. */
  posted: CounterMetric<"thread">;
}

/** The main thread's side of the threads' event streams. */
export interface ThreadEvents {
  /** A stream for a thread about to start, posting with `post` (its worker's postMessage). */
  open(index: number, post: (m: ThreadMessage) => void): EventStream;
  /** `web.acquire`, `web.release` and `web.history` of that thread's bridge. */
  handlers(s: EventStream): Record<string, BridgeHandler>;
  /** The thread acknowledged `n` messages handled. */
  ack(s: EventStream, n: number): void;
  /** The thread exited: its topics go back to the hub. */
  close(s: EventStream): void;
  /** Add the posts not yet counted to the metric (before /metrics is read). */
  flush(): void;
}

/** `web.acquire`'s payload: the topic, and the thread's id of this acquire (unique per thread, never reused). */
export interface AcquireRequest {
  topic: string;
  id: number;
}

/** `web.release`'s payload: it undoes the acquire `id` of `topic` (and nothing when that acquire holds nothing). */
export type ReleaseRequest = AcquireRequest;

/** `web.acquire`'s answer: the topic's snapshot, and where in the thread's event stream the reference was taken. */
export interface AcquireAnswer extends HubSnapshot {
  /**
   * Messages of the event stream (events and ends) posted to the thread before this acquire took its reference: an
   * `end` of the topic the thread handles as a later message than this one ended this acquire's reference too (it may
   * reach the thread before this answer does); an earlier one ended an older reference only.
   */
  posted: number;
}

/** How often the shared sequence word follows a stream clock with no events, ms. */
const CLOCK_FOLLOW_MS = 50;

/**
 * Posting web events to the uWS worker threads: the main hub's outlet "threads". Each event goes to the threads
 * holding its topic, one message each (the event's position and CloudEvents JSON serialized once, never one message
 * per subscriber); then its sequence number is stored in the shared word every thread reads for its positions
 * (thread-upstream.ts). A thread whose backlog reaches the bound is shed: its topics end `slow` there and go back to
 * the hub, and it is refused new topics until it has drained to half.
 */
export function createThreadEvents(options: ThreadEventsOptions): ThreadEvents {
  const { hub, logger, maxBacklog } = options;
  const seqWord = new BigInt64Array(new SharedArrayBuffer(8));
  Atomics.store(seqWord, 0, BigInt(hub.seq()));
  /**
   * Stream positions rise while no topic has events (the runtime's clock): the word follows them on a short timer,
   * so a thread's position stays near the runtime's (every event up to it was posted before it is read).
   */
  let clockTimer: NodeJS.Timeout | null = null;
  const followClock = (on: boolean): void => {
    if (hub.scheme.kind !== "stream" || on === (clockTimer !== null)) return;
    if (on) {
      clockTimer = setInterval(() => publishSeq(hub.seq()), CLOCK_FOLLOW_MS);
      clockTimer.unref();
    } else {
      clearInterval(clockTimer!);
      clockTimer = null;
    }
  };
  const streams = new Map<EventStream, (m: ThreadMessage) => void>();
  /** Streams holding each topic. */
  const holders = new Map<string, EventStream[]>();

  function send(s: EventStream, m: ThreadMessage): void {
    streams.get(s)!(m);
    s.posted++;
    Atomics.store(s.clock.posted, 0, s.posted | 0);
  }

  function hold(s: EventStream, topic: string, id: number): void {
    s.held.set(topic, new Set([id]));
    const list = holders.get(topic);
    if (list) list.push(s);
    else holders.set(topic, [s]);
  }

  /** The thread's reference on `topic` ends (every acquire it stands for): true when it held one. */
  function unhold(s: EventStream, topic: string): boolean {
    if (!s.held.delete(topic)) return false;
    const list = holders.get(topic)!;
    list.splice(list.indexOf(s), 1);
    if (list.length === 0) holders.delete(topic);
    return true;
  }

  /** Publish a sequence number the threads may rely on (only ever raised; only this thread writes). */
  function publishSeq(seq: number): void {
    if (seq > Number(Atomics.load(seqWord, 0))) Atomics.store(seqWord, 0, BigInt(seq));
  }

  function flushOne(s: EventStream): void {
    if (s.uncounted === 0) return;
    options.posted.inc({ thread: String(s.index) }, s.uncounted);
    s.uncounted = 0;
  }

  /** A thread too far behind: its subscribers end `slow` (they resume from history on reconnect), nothing is posted. */
  function shed(s: EventStream): void {
    s.shed = true;
    logger.warn({ thread: s.index, backlog: s.posted - s.acked, topics: s.held.size }, "uWS worker thread fell behind the event stream; its web subscribers are ended slow");
    for (const topic of [...s.held.keys()]) {
      unhold(s, topic);
      send(s, { t: "end", topic, reason: { kind: "slow", capacity: maxBacklog } satisfies EndReason });
      hub.release(topic);
    }
  }

  hub.addFanout("threads", {
    deliver(event) {
      const list = holders.get(event.topic);
      if (list) {
        // With the main thread's receipt time and exemplar: the thread's outlets record the delivery latency from there.
        const e: EventWire = { topic: event.topic, seq: event.seq, position: event.position, cloudevent: event.cloudevent, receivedAt: event.receivedAt, exemplar: event.exemplar };
        const msg: ThreadMessage = { t: "ev", e };
        let behind = false;
        for (const s of list) {
          if (s.posted - s.acked >= maxBacklog) behind = true;
          else {
            send(s, msg);
            s.uncounted++;
          }
        }
        // Shed after the loop (shedding changes the holder lists): every thread that did not get this event.
        if (behind) for (const s of [...list]) if (s.posted - s.acked >= maxBacklog) shed(s);
      }
      // After the posts: a thread that reads this number finds them counted (thread-upstream.ts).
      Atomics.store(seqWord, 0, BigInt(event.seq));
      return 0;
    },
    endTopic(topic, reason: EndReason) {
      const list = holders.get(topic);
      if (!list) return;
      for (const s of [...list]) {
        unhold(s, topic);
        send(s, { t: "end", topic, reason });
      }
    },
  });

  return {
    open(index, post) {
      const s: EventStream = {
        index,
        clock: { seq: seqWord, posted: new Int32Array(new SharedArrayBuffer(4)) },
        held: new Map(),
        posted: 0,
        acked: 0,
        uncounted: 0,
        shed: false,
        live: true,
      };
      streams.set(s, post);
      followClock(true);
      return s;
    },
    handlers(s) {
      return {
        "web.acquire": async (p: AcquireRequest, signal: AbortSignal): Promise<AcquireAnswer> => {
          try {
            // With the bridge's signal: a thread that gave up on the call (its timeout) gets no reference it never learns of.
            await hub.acquire([p.topic], signal);
          } catch (e) {
            throw subscribeError(e);
          }
          if (s.shed) {
            // No events go to this thread until it has caught up: a topic taken now would miss some.
            hub.release(p.topic);
            throw new GatewayError(Code.UNAVAILABLE, "this gateway thread is behind the event stream; subscribe again shortly");
          }
          if (!s.live) {
            hub.release(p.topic);
            throw new GatewayError(Code.UNAVAILABLE, "the worker thread is gone");
          }
          // One hub reference per thread and topic: an acquire of a topic held already (a thread topic that died while
          // opening, and its successor, both ask) joins the reference, so that releasing one leaves the other's.
          const ids = s.held.get(p.topic);
          if (ids) {
            hub.release(p.topic);
            ids.add(p.id);
          } else hold(s, p.topic, p.id);
          // Synchronously after the topic is held: every later event of it is posted after this answer's numbers.
          const snap = hub.snapshot(p.topic);
          publishSeq(snap.seq);
          return { ...snap, posted: s.posted };
        },
        "web.release": async (p: ReleaseRequest) => {
          // Only the acquire it names: a late release of a dead thread topic must not end its successor's reference.
          const ids = s.held.get(p.topic);
          if (!ids?.delete(p.id) || ids.size > 0) return;
          unhold(s, p.topic);
          hub.release(p.topic);
        },
        "web.history": async (p: { topic: string; since: number }): Promise<{ complete: boolean; events: EventWire[] }> => {
          const held = await hub.history(p.topic, p.since);
          if (!held) return { complete: false, events: [] };
          return { complete: held.complete, events: held.events.map((e) => ({ topic: e.topic, seq: e.seq, position: e.position, cloudevent: e.cloudevent })) };
        },
      };
    },
    ack(s, n) {
      s.acked = n;
      if (s.shed && s.posted - s.acked <= maxBacklog / 2) s.shed = false;
      flushOne(s);
    },
    close(s) {
      s.live = false;
      for (const topic of [...s.held.keys()]) {
        unhold(s, topic);
        hub.release(topic);
      }
      flushOne(s);
      streams.delete(s);
      if (streams.size === 0) followClock(false);
    },
    flush() {
      for (const s of streams.keys()) flushOne(s);
    },
  };
}
