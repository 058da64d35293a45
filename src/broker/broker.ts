import type { CancelSignal } from "../shared/signals.js";
import { randomUUID } from "node:crypto";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { preciseEpochMs } from "../shared/timers.js";
import { Subscriber } from "./subscriber.js";
import type { BrokerOptions, EndReason, FanoutHandle, FanoutSink, FanoutTrace, SubscriberSink, UpstreamHandle } from "./types.js";

/**
 * Topics the broker follows at once, by default: each holds a runtime subscription (a sidecar stream on Dapr, a stream
 * read on Redis). Twice the web hub's own bound (MAX_WEB_TOPICS), whose topics come through here too, so gRPC
 * subscribers always find room beside a full web hub.
 */
export const MAX_BROKER_TOPICS = 20_000;

/** What `Broker.subscribe` resolves: the owner's handle on a live subscriber. */
export interface Subscription {
  /** The minted subscription id. */
  readonly id: string;
  /** The sink drained (e.g. the stream emitted 'drain'): resume pumping. */
  drain(): void;
  /** The owner is done (call cancelled or finished): release the subscriber and its topic references. Safe to call twice; `sink.end` is not called. */
  close(): void;
}

/** Why a subscribe failed: "upstream": the runtime refused the topic subscription; "cancelled": the owner gave up; "closed": the broker is closing. */
export type SubscribeFailureKind = "upstream" | "cancelled" | "closed";

/**
 * A subscribe failure as the gateway's one error type: `details.kind` says why and `details.topic` names the topic of
 * an upstream failure. The code: UNAVAILABLE for a closing broker, CANCELLED for an owner that gave up, and for an
 * upstream refusal the runtime's own code (UNAVAILABLE when it carries none, or only INTERNAL/UNKNOWN: to a subscriber
 * a broken runtime subscription is a condition to retry).
 */
export function subscribeFailure(kind: SubscribeFailureKind, message: string, topic?: string, cause?: unknown): GatewayError {
  let code = kind === "cancelled" ? Code.CANCELLED : Code.UNAVAILABLE;
  if (kind === "upstream" && cause !== undefined) {
    const c = GatewayError.from(cause, Code.UNAVAILABLE).code;
    if (c !== Code.INTERNAL && c !== Code.UNKNOWN) code = c;
  }
  return new GatewayError(code, message, { cause, details: topic === undefined ? { kind } : { kind, topic } });
}

/**
 * The re-check after a subscribe awaited its topics' upstreams: why it cannot go live now, or undefined when it can.
 * `closedMessage` is set when the owner (broker or web hub) closed meanwhile; `signal` is the subscriber's;
 * `deadTopic` names a topic whose upstream broke meanwhile. Closing wins over a cancel, a cancel over a dead topic.
 */
export function notLive(closedMessage: string | undefined, signal: CancelSignal | undefined, deadTopic: string | undefined): GatewayError | undefined {
  if (closedMessage !== undefined) return subscribeFailure("closed", closedMessage);
  if (signal?.aborted) return subscribeFailure("cancelled", "the subscriber went away before it was live");
  if (deadTopic !== undefined) return subscribeFailure("upstream", `the upstream subscription of topic '${deadTopic}' broke while subscribing`, deadTopic);
  return undefined;
}

/** The kind of a broker subscribe failure, or undefined for any other error. */
export function subscribeFailureKind(e: unknown): SubscribeFailureKind | undefined {
  if (!(e instanceof GatewayError)) return undefined;
  const kind = e.details?.["kind"];
  return kind === "upstream" || kind === "cancelled" || kind === "closed" ? kind : undefined;
}

/** Counts for tests, health and metrics. */
export interface BrokerStats {
  /** Topics in the table (with local subscribers, opening, or lingering). */
  topics: number;
  /** Live subscribers. */
  subscribers: number;
  /** Open upstream subscriptions. */
  upstreams: number;
}

/** The broker: topic table with ref counts, subscriber rings, reaper. */
export interface Broker {
  /**
   * Create a subscriber for `topics` (duplicates kept). Resolves once every topic's upstream is live and the
   * subscriber is attached (`sink.open()` has been called); rejects with a subscribeFailure() and leaves nothing
   * behind when an upstream subscribe fails, the signal aborts first, or the broker is closing.
   */
  subscribe(topics: readonly string[], sink: SubscriberSink, signal?: CancelSignal): Promise<Subscription>;
  /** End the subscriber with this id (its sink gets `end({kind: "unsubscribed"})`). False when no live subscriber has it. */
  unsubscribe(id: string): boolean;
  /**
   * Attach a fan-out outlet to one topic: it holds one reference (like one subscriber slot) and gets each event once.
   * Resolves once the topic's upstream is live; rejects with a subscribeFailure() (leaving nothing behind) like subscribe.
   */
  attachFanout(topic: string, sink: FanoutSink<unknown>, signal?: AbortSignal): Promise<FanoutHandle>;
  /** Reference count of a topic (subscriber slots holding or awaiting it), 0 when absent. */
  refs(topic: string): number;
  /** Whether this topic has an open upstream subscription. */
  hasUpstream(topic: string): boolean;
  stats(): BrokerStats;
  /** Run the stuck-subscriber sweep now (the timer runs it every sweepIntervalMs). */
  sweep(now?: number): void;
  /** Start the sweep timer. */
  start(): void;
  /** End every subscriber with `{kind: "shutdown"}`, release every upstream. Safe to call twice. */
  close(): Promise<void>;
}

type Member = Subscriber<TopicEntry>;

interface TopicEntry {
  readonly topic: string;
  /** Subscriber slots holding or awaiting this topic, duplicates counted. */
  refs: number;
  /** Live subscribers (once each). */
  readonly subs: Set<Member>;
  /** Attached fan-out outlets (each holds one reference). */
  readonly fanouts: Set<FanoutSink<unknown>>;
  /** Extra deliveries for subscribers that listed the topic more than once; null while there are none. */
  dupes: Map<Member, number> | null;
  upstream: UpstreamHandle | null;
  /** Resolves when the upstream is live; rejects when it failed. */
  opening: Promise<void>;
  state: "opening" | "open" | "dead";
  linger: NodeJS.Timeout | null;
}

/**
 * Create a broker. It is an actor in the JavaScript sense: it alone owns the topic table and the subscribers, every
 * change happens in one of its methods or in a continuation it scheduled (upstream opened, linger fired, sweep
 * tick), and every continuation re-checks the state it depends on before acting, since the world may have moved on
 * while it waited.
 *
 * Ref counting follows centrifuge's `addSubscription`/`removeSubscription`: the first subscriber of a topic opens
 * the one upstream subscription, later ones join it (even while it is still opening), a failed open rolls every
 * waiter back, and the last one to leave schedules a release after `lingerMs` that re-checks the count first.
 */
export function createBroker<E>(options: BrokerOptions<E>): Broker {
  const capacity = options.capacity ?? 1024;
  const lingerMs = options.lingerMs ?? 2000;
  const maxTopics = options.maxTopics ?? MAX_BROKER_TOPICS;
  const sweepIntervalMs = options.sweepIntervalMs ?? 5000;
  const newId = options.newId ?? randomUUID;
  const obs = options.observer ?? {};
  const { upstream, encode } = options;

  const table = new Map<string, TopicEntry>();
  const live = new Map<string, Member>();
  let upstreams = 0;
  let closed = false;
  let sweepTimer: NodeJS.Timeout | null = null;
  const closing: Promise<void>[] = [];

  const report = (): void => obs.counts?.(table.size, live.size, upstreams);

  function fanOut(entry: TopicEntry, event: E, seq: number | undefined): void {
    if (entry.state !== "open") return;
    // Once per event, whatever the number of outlets and subscribers: every delivery latency counts from here.
    const receivedAt = preciseEpochMs();
    const trace = options.traceFanout?.(entry.topic, event);
    for (const f of entry.fanouts) f.event(entry.topic, event, seq, trace, receivedAt);
    if (trace === undefined) {
      deliver(entry, event, receivedAt, undefined);
      return;
    }
    trace.count("grpc", deliver(entry, event, receivedAt, trace.exemplar));
    trace.end();
  }

  /** Hand one event to the topic's own subscribers (gRPC Subscribe streams); returns the deliveries made. */
  function deliver(entry: TopicEntry, event: E, receivedAt: number, exemplar: FanoutTrace["exemplar"]): number {
    if (entry.subs.size === 0) return 0;
    let bytes: Uint8Array;
    try {
      bytes = encode(entry.topic, event);
    } catch (e) {
      options.onError?.("encode", entry.topic, e);
      return 0;
    }
    let n = 0;
    // Reaping inside the loop deletes from the Set being iterated: Set iteration allows that.
    for (const sub of entry.subs) {
      n++;
      if (!sub.offer(bytes)) endSubscriber(sub, { kind: "slow", capacity });
    }
    if (entry.dupes !== null) {
      for (const [sub, extra] of entry.dupes) {
        for (let i = 0; i < extra && sub.state === "live"; i++) {
          n++;
          if (!sub.offer(bytes)) endSubscriber(sub, { kind: "slow", capacity });
        }
      }
    }
    obs.fannedOut?.(entry.topic, n, receivedAt, exemplar);
    return n;
  }

  function upstreamFailed(entry: TopicEntry, error: Error): void {
    if (entry.state === "dead") return;
    const wasOpen = entry.state === "open";
    entry.state = "dead";
    if (table.get(entry.topic) === entry) table.delete(entry.topic);
    if (entry.linger) clearTimeout(entry.linger);
    if (wasOpen) upstreams--;
    for (const sub of [...entry.subs]) endSubscriber(sub, { kind: "upstream-failed", topic: entry.topic, message: error.message });
    endFanouts(entry, { kind: "upstream-failed", topic: entry.topic, message: error.message });
    report();
  }

  function acquire(topic: string): TopicEntry {
    const entry = table.get(topic);
    if (entry) {
      entry.refs++;
      if (entry.linger) {
        clearTimeout(entry.linger);
        entry.linger = null;
      }
      return entry;
    }
    const e: TopicEntry = {
      topic,
      refs: 1,
      subs: new Set(),
      fanouts: new Set(),
      dupes: null,
      upstream: null,
      opening: Promise.resolve(),
      state: "opening",
      linger: null,
    };
    table.set(topic, e);
    e.opening = upstream
      .subscribe(
        topic,
        (event, seq) => fanOut(e, event, seq),
        (error) => upstreamFailed(e, error),
      )
      .then(
        (handle) => {
          if (e.state === "dead") {
            // Failed or dropped while opening: give the late handle back.
            void handle.close().catch((err: unknown) => options.onError?.("upstream-close", topic, err));
            return;
          }
          e.upstream = handle;
          e.state = "open";
          upstreams++;
          report();
          // Everyone who wanted it may have left while it opened.
          if (e.refs === 0) scheduleRelease(e);
        },
        (error: unknown) => {
          if (e.state !== "dead") {
            e.state = "dead";
            if (table.get(topic) === e) table.delete(topic);
            report();
          }
          throw error;
        },
      );
    // Waiters attach their own handlers; this one keeps an unobserved rejection from crashing the process.
    e.opening.catch(() => undefined);
    report();
    return e;
  }

  /** Close the topic's upstream subscription: the end of a linger no subscriber came back during. */
  function closeUpstream(entry: TopicEntry): void {
    entry.state = "dead";
    if (table.get(entry.topic) === entry) table.delete(entry.topic);
    upstreams--;
    const h = entry.upstream;
    entry.upstream = null;
    report();
    if (h) {
      const p = h.close().catch((err: unknown) => options.onError?.("upstream-close", entry.topic, err));
      closing.push(p);
      void p.finally(() => closing.splice(closing.indexOf(p), 1));
    }
  }

  /**
   * Room in the table for the topics of `names` it does not hold yet: lingering topics (no subscriber left) are
   * released, oldest first, to make it; RESOURCE_EXHAUSTED when the held ones alone fill the bound.
   */
  function makeRoom(names: readonly string[]): void {
    let missing = 0;
    for (const name of new Set(names)) if (!table.has(name)) missing++;
    if (table.size + missing <= maxTopics) return;
    for (const entry of table.values()) {
      if (table.size + missing <= maxTopics) return;
      if (entry.refs === 0 && entry.linger) {
        clearTimeout(entry.linger);
        entry.linger = null;
        closeUpstream(entry);
      }
    }
    if (table.size + missing > maxTopics) {
      throw new GatewayError(Code.RESOURCE_EXHAUSTED, `the gateway follows ${maxTopics} topics already (every one with subscribers); retry later or on another replica`);
    }
  }

  function scheduleRelease(entry: TopicEntry): void {
    if (entry.linger || entry.state === "dead") return;
    entry.linger = setTimeout(() => {
      entry.linger = null;
      // Re-check: a subscriber may have come back during the linger.
      if (entry.refs > 0 || entry.state !== "open") return;
      closeUpstream(entry);
    }, lingerMs);
    entry.linger.unref();
  }

  function release(entry: TopicEntry): void {
    if (entry.state === "dead") return;
    entry.refs--;
    if (entry.refs === 0 && entry.state === "open") scheduleRelease(entry);
  }

  function detach(sub: Member): void {
    for (const entry of sub.links) {
      const extra = entry.dupes?.get(sub);
      if (extra !== undefined) {
        if (extra > 1) entry.dupes!.set(sub, extra - 1);
        else {
          entry.dupes!.delete(sub);
          if (entry.dupes!.size === 0) entry.dupes = null;
        }
      } else entry.subs.delete(sub);
      release(entry);
    }
    sub.links = [];
  }

  function removeSubscriber(sub: Member): boolean {
    if (sub.state !== "live") return false;
    sub.state = "ended";
    live.delete(sub.id);
    detach(sub);
    sub.discard();
    report();
    return true;
  }

  function endFanouts(entry: TopicEntry, reason: EndReason): void {
    const sinks = [...entry.fanouts];
    entry.fanouts.clear();
    for (const f of sinks) f.end(reason);
  }

  function endSubscriber(sub: Member, reason: EndReason): void {
    if (!removeSubscriber(sub)) return;
    obs.ended?.(reason.kind);
    sub.sink.end(reason);
  }

  function attach(sub: Member, entries: TopicEntry[]): void {
    sub.state = "live";
    sub.links = entries;
    live.set(sub.id, sub);
    sub.open();
    for (const entry of entries) {
      if (entry.subs.has(sub)) {
        entry.dupes ??= new Map();
        entry.dupes.set(sub, (entry.dupes.get(sub) ?? 0) + 1);
      } else entry.subs.add(sub);
    }
    report();
  }

  const broker: Broker = {
    async subscribe(topics, sink, signal) {
      if (closed) throw subscribeFailure("closed", "the broker is closing");
      if (signal?.aborted) throw subscribeFailure("cancelled", "the subscriber went away before it was live");
      makeRoom(topics);
      const sub: Member = new Subscriber<TopicEntry>(newId(), [...topics], sink, capacity);
      const entries = sub.topics.map(acquire);
      const rollback = (): void => {
        for (const entry of entries) release(entry);
      };
      try {
        await Promise.all(entries.map((e) => e.opening));
      } catch (e) {
        rollback();
        const failed = entries.find((x) => x.state === "dead");
        const topic = failed?.topic ?? sub.topics[0]!;
        throw subscribeFailure("upstream", `subscribing to topic '${topic}' failed: ${(e as Error)?.message ?? String(e)}`, topic, e);
      }
      // Re-check everything the await may have changed.
      const why = notLive(closed ? "the broker is closing" : undefined, signal, entries.find((x) => x.state !== "open")?.topic);
      if (why) {
        rollback();
        throw why;
      }
      attach(sub, entries);
      return {
        id: sub.id,
        drain: () => sub.drain(),
        close: () => {
          removeSubscriber(sub);
        },
      };
    },

    async attachFanout(topic, sink, signal) {
      if (closed) throw subscribeFailure("closed", "the broker is closing");
      if (signal?.aborted) throw subscribeFailure("cancelled", "the subscriber went away before it was live");
      makeRoom([topic]);
      const entry = acquire(topic);
      try {
        await entry.opening;
      } catch (e) {
        release(entry);
        throw subscribeFailure("upstream", `subscribing to topic '${topic}' failed: ${(e as Error)?.message ?? String(e)}`, topic, e);
      }
      const why = notLive(closed ? "the broker is closing" : undefined, signal, entry.state !== "open" ? topic : undefined);
      if (why) {
        release(entry);
        throw why;
      }
      entry.fanouts.add(sink);
      let attached = true;
      return {
        close: (opts) => {
          if (!attached) return;
          attached = false;
          // Already gone when the broker ended it (the entry is dead and holds no references then).
          if (!entry.fanouts.delete(sink)) return;
          if (opts?.linger !== false) return release(entry);
          // The caller kept the topic for a while already: no second linger when this was the last reference.
          entry.refs--;
          if (entry.refs > 0 || entry.state !== "open") return;
          if (entry.linger) clearTimeout(entry.linger);
          entry.linger = null;
          closeUpstream(entry);
        },
      };
    },

    unsubscribe(id) {
      const sub = live.get(id);
      if (!sub) return false;
      endSubscriber(sub, { kind: "unsubscribed" });
      return true;
    },

    refs: (topic) => table.get(topic)?.refs ?? 0,
    hasUpstream: (topic) => table.get(topic)?.state === "open",
    stats: () => ({ topics: table.size, subscribers: live.size, upstreams }),

    sweep(now = Date.now()) {
      let max = 0;
      let total = 0;
      for (const sub of [...live.values()]) {
        const pending = sub.pending;
        total += pending;
        if (pending > max) max = pending;
        if (pending === 0 || !sub.blocked) {
          sub.sweepMark = -1;
          continue;
        }
        if (sub.sweepMark === sub.written) {
          // Blocked with events waiting and not one written since the previous sweep: stuck.
          endSubscriber(sub, { kind: "stuck", pending, stalledMs: now - sub.sweepMarkAt });
          continue;
        }
        sub.sweepMark = sub.written;
        sub.sweepMarkAt = now;
      }
      obs.occupancy?.(max, total);
    },

    start() {
      if (sweepTimer || closed) return;
      sweepTimer = setInterval(() => broker.sweep(), sweepIntervalMs);
      sweepTimer.unref();
    },

    async close() {
      if (!closed) {
        closed = true;
        if (sweepTimer) clearInterval(sweepTimer);
        sweepTimer = null;
        for (const sub of [...live.values()]) endSubscriber(sub, { kind: "shutdown" });
        for (const entry of [...table.values()]) endFanouts(entry, { kind: "shutdown" });
        for (const entry of [...table.values()]) {
          if (entry.linger) clearTimeout(entry.linger);
          entry.linger = null;
          const wasOpen = entry.state === "open";
          entry.state = "dead";
          table.delete(entry.topic);
          if (wasOpen) upstreams--;
          const h = entry.upstream;
          entry.upstream = null;
          if (h) closing.push(h.close().catch((err: unknown) => options.onError?.("upstream-close", entry.topic, err)));
        }
        report();
      }
      await Promise.all([...closing]);
    },
  };
  return broker;
}
