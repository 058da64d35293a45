import { TopicHistory, type EndReason } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { acquireTopics, MAX_WEB_TOPICS, resumeTopics, parsePosition, WebEvent, type EventWire, type HubSnapshot, type RefTopic, type TopicFanout, type WebHub } from "../web/hub.js";
import type { Bridge } from "./bridge.js";

/** A topic this thread follows: its subscribers' references and a mirror of the main hub's resume history. */
interface ThreadTopic extends RefTopic {
  readonly name: string;
  refs: number;
  history: TopicHistory<WebEvent>;
  opening: Promise<void>;
  state: "opening" | "open" | "dead";
}

/** Options of createThreadHub. */
export interface ThreadHubOptions {
  /** The main hub's epoch: positions are the main hub's, so a resume works on any thread. */
  epoch: string;
  /** `web.acquire` / `web.release` on the main thread. */
  bridge: Bridge;
  historyEvents: number;
  historyAgeMs: number;
  onDeliver?(transport: string, n: number): void;
  now?: () => number;
}

/** The thread side of the web hub: a WebHub for this thread's WebSocket and SSE fronts, fed by the main hub. */
export interface ThreadHub extends WebHub {
  /** One event from the main hub (every thread gets every event once, in the main hub's order). */
  event(e: EventWire): void;
  /** The main hub ended a topic this thread holds. */
  end(topic: string, reason: EndReason): void;
}

/**
 * The web hub of a uWS worker thread. The main hub stays the one owner of the broker attachments, the sequence numbers
 * and the resume histories; this thread holds one reference per topic there (`web.acquire`, answered with the main
 * hub's history of the topic, which this side then keeps up to date from the events it gets) and fans each event out
 * to its own subscribers. Since the main thread posts every event it fans out to every thread, after the acquire
 * reply on the same port, a subscriber that goes live right after its acquire resolved misses nothing and gets
 * nothing twice, exactly as on the main hub. A position is the main hub's, so a client resumes on any thread.
 */
export function createThreadHub(options: ThreadHubOptions): ThreadHub {
  const { bridge, epoch } = options;
  const now = options.now ?? Date.now;
  const bounds = { maxEvents: options.historyEvents, maxAgeMs: options.historyAgeMs };
  /** The largest sequence number this thread has seen: the main hub's current one, as of the last message. */
  let seq = 0;
  let historyTotal = 0;
  const topics = new Map<string, ThreadTopic>();
  const fanouts: Array<{ transport: string; fanout: TopicFanout }> = [];
  let closed = false;

  const count = (before: number, after: number): void => {
    historyTotal += after - before;
  };

  function drop(t: ThreadTopic, tellMain: boolean): void {
    if (t.state === "dead") return;
    const wasOpen = t.state === "open";
    t.state = "dead";
    if (topics.get(t.name) === t) topics.delete(t.name);
    count(t.history.size, 0);
    if (tellMain && wasOpen) bridge.call("web.release", { topic: t.name }).catch(() => undefined);
  }

  function open(name: string): ThreadTopic {
    if (topics.size >= MAX_WEB_TOPICS) throw new GatewayError(Code.RESOURCE_EXHAUSTED, `the gateway follows ${MAX_WEB_TOPICS} web topics already`);
    const t: ThreadTopic = { name, refs: 0, history: new TopicHistory<WebEvent>(bounds, seq), opening: Promise.resolve(), state: "opening" };
    topics.set(name, t);
    t.opening = bridge.call<HubSnapshot>("web.acquire", { topic: name }).then(
      (snap) => {
        if (snap.seq > seq) seq = snap.seq;
        if (t.state === "dead") {
          // Given up while opening (its subscribers left, or shutdown): hand the main hub's reference back.
          bridge.call("web.release", { topic: name }).catch(() => undefined);
          return;
        }
        t.history = new TopicHistory<WebEvent>(bounds, snap.completeAfter);
        for (const e of snap.events) t.history.push(e.seq, e.at, new WebEvent(name, e.seq, e.position, e.cloudevent));
        count(0, t.history.size);
        t.state = "open";
        if (t.refs === 0) drop(t, true);
      },
      (err: unknown) => {
        if (topics.get(name) === t) topics.delete(name);
        t.state = "dead";
        throw err;
      },
    );
    t.opening.catch(() => undefined);
    return t;
  }

  function releaseOne(name: string): void {
    const t = topics.get(name);
    if (!t) return;
    t.refs--;
    // No linger here: the main hub lingers (and keeps recording) for the history age, and a later acquire gets its
    // history again.
    if (t.refs <= 0 && t.state === "open") drop(t, true);
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
          release: (t) => {
            if (topics.get(t.name) !== t) return;
            t.refs--;
            if (t.refs > 0) return;
            if (t.state === "open") drop(t, true);
            else {
              // Still opening: the acquire reply hands the main hub's reference back when it comes.
              t.state = "dead";
              topics.delete(t.name);
            }
          },
        },
        signal,
      );
    },
    release: releaseOne,
    resume: (names, since) => resumeTopics(topics, names, since, { epoch, seq, now: now() }, count),
    snapshot() {
      // Only the main hub answers snapshots.
      return { seq, completeAfter: seq, events: [] };
    },
    stats: () => ({ topics: topics.size, history: historyTotal }),
    close() {
      closed = true;
      for (const t of [...topics.values()]) drop(t, false);
    },
    event(e) {
      if (e.seq > seq) seq = e.seq;
      const t = topics.get(e.topic);
      if (!t || t.state !== "open") return;
      const event = new WebEvent(e.topic, e.seq, e.position, e.cloudevent);
      const before = t.history.size;
      t.history.push(e.seq, now(), event);
      count(before, t.history.size);
      for (const { transport, fanout } of fanouts) {
        const n = fanout.deliver(event);
        if (n > 0) options.onDeliver?.(transport, n);
      }
    },
    end(topic, reason) {
      const t = topics.get(topic);
      if (t) drop(t, false);
      for (const f of fanouts) f.fanout.endTopic(topic, reason);
    },
  };
}
