import type { EndReason } from "../broker/index.js";
import { WebEvent, type EventWire, type Following, type HubUpstream, type UpstreamSink } from "../web/hub.js";
import type { PositionScheme } from "../web/positions.js";
import { pollUntil } from "../shared/timers.js";
import type { Bridge } from "./bridge.js";
import type { EventClock } from "./protocol.js";
import type { AcquireAnswer, AcquireRequest, ReleaseRequest } from "./thread-events.js";

/** How long a resume on a thread waits for the thread to have seen every event up to its position, ms. */
export const CATCH_UP_MS = 2_000;
/** How often a wait for a stream position looks at the shared word again, ms. */
const STREAM_CATCH_UP_POLL_MS = 5;

/** A worker thread's upstream, fed by the thread's port: the main thread's event stream arrives here. */
export interface ThreadUpstream extends HubUpstream {
  /** One event the main thread posted (only events of topics this thread holds are). */
  event(e: EventWire): void;
  /** The main thread ended a topic this thread holds (its upstream failed, or this thread fell behind). */
  end(topic: string, reason: EndReason): void;
  /** Messages of the event stream (events and ends) handled so far: acknowledged for the main thread's backlog bound. */
  handled(): number;
}

/** Options of threadUpstream. */
export interface ThreadUpstreamOptions {
  /** How the main hub writes positions. */
  scheme: PositionScheme;
  /** `web.acquire` / `web.release` / `web.history` on the main thread. */
  bridge: Bridge;
  /** The main thread's sequence word and this thread's posted count, in shared memory. */
  clock: EventClock;
  catchUpMs?: number;
}

/**
 * One `follow` of a topic: the acquire it made on the main thread (`id`), and where its events go. `answered` once the
 * main thread's answer is handled here; an `end` of the topic that arrives before it is kept in `ended` (its place in
 * the event stream, and its reason) until the answer says whether it ended this acquire's reference or an older one.
 */
interface Follow {
  readonly id: number;
  readonly sink: UpstreamSink;
  answered: boolean;
  ended: { at: number; reason: EndReason } | null;
}

/** A resume waiting for this thread to handle the stream up to `count` (then every event up to `seq` is seen). */
interface Waiter {
  count: number;
  seq: number;
  done(): void;
}

/**
 * The upstream of a uWS worker thread's hub: the main hub over the bridge. Following a topic takes one reference
 * there (`web.acquire`, answered with the topic's history); from then on the main thread posts the topic's events to
 * this thread, after the answer on the same port, until `web.release`. The main thread posts a thread only the events
 * of topics it holds, so the thread does not learn the main hub's sequence from its own events; it reads it from
 * shared memory instead (`seq()` below), which keeps positions and resumes exact on every thread.
 *
 * Each acquire has an id of this thread's, carried by its `web.release`: the main thread holds one reference per topic
 * for all of this thread's acquires of it, and a release undoes its own acquire only. A topic that died here while its
 * acquire was on the way (and whose successor acquired the topic again meanwhile) thus releases only what it took.
 */
export function threadUpstream(options: ThreadUpstreamOptions): ThreadUpstream {
  const { bridge, clock } = options;
  const catchUpMs = options.catchUpMs ?? CATCH_UP_MS;
  /** The current follow of each topic (an older one of a topic that died while opening is replaced, not kept). */
  const follows = new Map<string, Follow>();
  let nextAcquire = 1;
  /**
   * Every event up to this sequence number that the main thread posted here has been handled here, and every later
   * event of a topic held will be: the current position. Raised by each event and acquire answer (the port delivers in
   * the order the main thread posted) and by the shared sequence word once the stream is handled up to it.
   */
  let seen = 0;
  let handled = 0;
  const waiters: Waiter[] = [];

  function handledOne(): void {
    handled++;
    if (waiters.length === 0) return;
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i]!;
      if ((((handled | 0) - w.count) | 0) < 0) continue;
      if (w.seq > seen) seen = w.seq;
      waiters.splice(i, 1);
      w.done();
    }
  }

  /**
   * The main thread posts an event to every thread holding its topic (counting each post in that thread's shared
   * count) and only then stores the event's sequence number in the shared word. So reading the word first and the
   * count second, a count equal to what this thread has handled means every event up to the word's number that was
   * posted here has been handled: the word is then the current position. Otherwise some are still on the port, and
   * the position stays at what this thread has seen (exact, only older); an event still in flight is never behind it.
   */
  function seq(): number {
    const word = Number(Atomics.load(clock.seq, 0));
    if (Atomics.load(clock.posted, 0) === (handled | 0) && word > seen) seen = word;
    return seen;
  }

  return {
    scheme: options.scheme,
    linger: false,
    seq,
    ...(options.scheme.kind === "stream"
      ? {
          async history(topic: string, since: number) {
            const got = await bridge.call<{ complete: boolean; events: EventWire[] }>("web.history", { topic, since });
            return { complete: got.complete, events: got.events.map((e) => new WebEvent(topic, e.seq, e.position, e.cloudevent)) };
          },
        }
      : {}),
    catchUp(target) {
      if (seq() >= target) return undefined;
      // Stream positions come from the runtime, so one may be ahead of everything the main thread has posted yet
      // (another replica issued it): look at the word again until it gets there, bounded.
      if (options.scheme.kind === "stream") return pollUntil(() => seq() >= target, catchUpMs, STREAM_CATCH_UP_POLL_MS);
      // A position past the word was not issued by the main thread (or is being posted right now): not exact.
      const word = Number(Atomics.load(clock.seq, 0));
      if (word < target) return undefined;
      const count = Atomics.load(clock.posted, 0);
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          const i = waiters.indexOf(w);
          if (i >= 0) waiters.splice(i, 1);
          resolve();
        }, catchUpMs);
        const w: Waiter = {
          count,
          seq: word,
          done: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        waiters.push(w);
      });
    },
    async follow(topic, sink) {
      // Registered before asking: an event posted right after the main thread took the reference may reach this thread
      // before the answer does (the hub keeps it for the history).
      const f: Follow = { id: nextAcquire++, sink, answered: false, ended: null };
      follows.set(topic, f);
      const release = (): void => {
        if (follows.get(topic) === f) follows.delete(topic);
        bridge.call("web.release", { topic, id: f.id } satisfies ReleaseRequest).catch(() => undefined);
      };
      let snap: AcquireAnswer;
      try {
        snap = await bridge.call<AcquireAnswer>("web.acquire", { topic, id: f.id } satisfies AcquireRequest);
      } catch (e) {
        // Released anyway: a call that timed out here may have taken its reference there (nothing when it did not).
        release();
        throw e;
      }
      f.answered = true;
      // Everything the main thread posted here before answering has been handled: its sequence number is seen.
      if (snap.seq > seen) seen = snap.seq;
      const following: Following = {
        completeAfter: snap.completeAfter,
        events: snap.events.map((e) => ({ seq: e.seq, at: e.at, event: new WebEvent(topic, e.seq, e.position, e.cloudevent) })),
        stop: release,
      };
      if (f.ended !== null && f.ended.at > snap.posted) {
        // The topic ended there after this acquire took its reference (the end overtook the answer): it ended here too.
        if (follows.get(topic) === f) follows.delete(topic);
        following.stop = () => undefined;
        sink.end(f.ended.reason);
      }
      f.ended = null;
      return following;
    },
    event(e) {
      if (e.seq > seen) seen = e.seq;
      follows.get(e.topic)?.sink.event(new WebEvent(e.topic, e.seq, e.position, e.cloudevent, undefined, e.receivedAt, e.exemplar));
      handledOne();
    },
    end(topic, reason) {
      const f = follows.get(topic);
      if (f?.answered) {
        follows.delete(topic);
        f.sink.end(reason);
      } else if (f) {
        // Still opening: this end may be of an older reference of this thread's (a topic that died here, whose successor
        // is acquiring it again) or of this acquire's own, if it overtook the answer. The answer tells which.
        f.ended = { at: handled + 1, reason };
      }
      handledOne();
    },
    handled: () => handled,
  };
}
