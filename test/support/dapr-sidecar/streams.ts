import type { Envelope } from "./events.js";

/** One stream entry (XADD): its sequence number in the stream and the stored CloudEvent. */
export interface StreamEntry {
  seq: number;
  env: Envelope;
}

/** A pending entry list (PEL) row: read by the group, not acked yet. */
interface Pending {
  seq: number;
  /** When it was last delivered or claimed (XPENDING's idle time counts from here). */
  deliveredAt: number;
}

interface Waiter {
  count: number;
  resolve(entries: StreamEntry[]): void;
}

interface Group {
  /** The group's last-delivered id: XREADGROUP `>` returns entries after it. */
  lastDelivered: number;
  pending: Map<number, Pending>;
  /** Blocked XREADGROUP calls, served first come first served (like Redis serves blocked clients). */
  waiting: Waiter[];
}

interface Stream {
  entries: StreamEntry[];
  nextSeq: number;
  groups: Map<string, Group>;
}

/**
 * The Redis Streams commands contrib `pubsub/redis` uses, over one in-process store that several test sidecars
 * share (one Redis behind every daprd of the app):
 * - `xadd`: XADD with `MAXLEN ~ maxLen` (trimmed exactly here; Redis trims whole nodes, so a little later);
 * - `createGroup`: `XGROUP CREATE <topic> <consumerID> 0 MKSTREAM`, BUSYGROUP ignored. The start id is `0`, so a
 *   NEW group first reads every entry the stream still holds;
 * - `readGroup`: `XREADGROUP GROUP <consumerID> <consumerID> COUNT n BLOCK ... STREAMS <topic> >`: each entry goes to
 *   ONE reader of the group (blocked readers are served in the order they blocked) and stays pending until acked;
 * - `ack`: XACK; `claim`: XPENDING + XCLAIM of entries idle at least `minIdleMs` (pending entries the stream no
 *   longer holds are acked, as contrib's removeMessagesThatNoLongerExistFromPending does).
 * Every group is independent: replicas whose component has the same consumerID compete for entries, a per-instance
 * consumerID gives each replica every entry.
 */
export interface SharedStreams {
  xadd(pubsub: string, topic: string, env: Envelope): number;
  createGroup(pubsub: string, topic: string, group: string): void;
  readGroup(pubsub: string, topic: string, group: string, count: number, signal: AbortSignal): Promise<StreamEntry[]>;
  ack(pubsub: string, topic: string, group: string, seq: number): void;
  claim(pubsub: string, topic: string, group: string, minIdleMs: number, count: number): StreamEntry[];
  /** Entries the stream holds (XLEN). */
  length(pubsub: string, topic: string): number;
  /** Consumer groups of the stream (XINFO GROUPS). */
  groups(pubsub: string, topic: string): string[];
  /** Pending entries of a group on the topic, over every pub/sub component (XPENDING summary). */
  pendingCount(topic: string, group: string): number;
}

export function createSharedStreams(maxLen: number): SharedStreams {
  const streams = new Map<string, Stream>();
  const keyOf = (pubsub: string, topic: string): string => `${pubsub}\u0000${topic}`;
  const streamOf = (pubsub: string, topic: string): Stream => {
    const k = keyOf(pubsub, topic);
    let s = streams.get(k);
    if (!s) streams.set(k, (s = { entries: [], nextSeq: 1, groups: new Map() }));
    return s;
  };

  /** Entries after the group's last-delivered id, up to `count`; they become pending and the id moves on. */
  const take = (s: Stream, g: Group, count: number): StreamEntry[] => {
    const out: StreamEntry[] = [];
    for (const e of s.entries) {
      if (out.length >= count) break;
      if (e.seq <= g.lastDelivered) continue;
      out.push(e);
    }
    const now = Date.now();
    for (const e of out) g.pending.set(e.seq, { seq: e.seq, deliveredAt: now });
    if (out.length > 0) g.lastDelivered = out[out.length - 1]!.seq;
    return out;
  };

  const serve = (s: Stream, g: Group): void => {
    while (g.waiting.length > 0 && s.entries.length > 0 && s.entries[s.entries.length - 1]!.seq > g.lastDelivered) {
      const w = g.waiting.shift()!;
      w.resolve(take(s, g, w.count));
    }
  };

  return {
    xadd(pubsub, topic, env) {
      const s = streamOf(pubsub, topic);
      const seq = s.nextSeq++;
      s.entries.push({ seq, env });
      if (s.entries.length > maxLen) s.entries.splice(0, s.entries.length - maxLen);
      for (const g of s.groups.values()) serve(s, g);
      return seq;
    },
    createGroup(pubsub, topic, group) {
      const s = streamOf(pubsub, topic);
      if (!s.groups.has(group)) s.groups.set(group, { lastDelivered: 0, pending: new Map(), waiting: [] });
    },
    readGroup(pubsub, topic, group, count, signal) {
      const s = streamOf(pubsub, topic);
      const g = s.groups.get(group);
      if (!g) return Promise.reject(new Error(`NOGROUP No such key '${topic}' or consumer group '${group}' in XREADGROUP with GROUP option`));
      if (signal.aborted) return Promise.resolve([]);
      const ready = take(s, g, count);
      if (ready.length > 0) return Promise.resolve(ready);
      return new Promise((resolve) => {
        const w: Waiter = {
          count,
          resolve: (entries) => {
            signal.removeEventListener("abort", onAbort);
            resolve(entries);
          },
        };
        const onAbort = (): void => {
          const i = g.waiting.indexOf(w);
          if (i >= 0) g.waiting.splice(i, 1);
          resolve([]);
        };
        signal.addEventListener("abort", onAbort, { once: true });
        g.waiting.push(w);
      });
    },
    ack(pubsub, topic, group, seq) {
      streamOf(pubsub, topic).groups.get(group)?.pending.delete(seq);
    },
    claim(pubsub, topic, group, minIdleMs, count) {
      const s = streamOf(pubsub, topic);
      const g = s.groups.get(group);
      if (!g) return [];
      const now = Date.now();
      const out: StreamEntry[] = [];
      for (const p of [...g.pending.values()].slice(0, count)) {
        if (now - p.deliveredAt < minIdleMs) continue;
        const e = s.entries.find((x) => x.seq === p.seq);
        if (!e) {
          g.pending.delete(p.seq);
          continue;
        }
        p.deliveredAt = now;
        out.push(e);
      }
      return out;
    },
    length: (pubsub, topic) => streams.get(keyOf(pubsub, topic))?.entries.length ?? 0,
    groups: (pubsub, topic) => [...(streams.get(keyOf(pubsub, topic))?.groups.keys() ?? [])],
    pendingCount: (topic, group) => [...streams.entries()].filter(([k]) => k.endsWith(`\u0000${topic}`)).reduce((n, [, st]) => n + (st.groups.get(group)?.pending.size ?? 0), 0),
  };
}
