import { Ring } from "./ring.js";
import type { SinkOutlet, SubscriberSink } from "./types.js";

/**
 * One subscriber: its sink, the ring of events it has not yet handed to the sink, and the bookkeeping the sweep
 * needs. Owned by the broker; the fast path (`offer` while writable with nothing pending) touches no ring at all.
 */
export class Subscriber<L = unknown> {
  /**
   * Writable, nothing queued and no pump running: `offer` hands the bytes straight to the sink. One field, so a
   * delivery on the fast path reads this object and the sink and nothing else (not the ring): with thousands of
   * subscribers, each object a delivery touches is a likely cache miss. It, `written` and `sink` come first, in one
   * cache line (declaration order is V8's field order).
   */
  private direct = true;
  /** Messages handed to the sink so far: the sweep's measure of progress. */
  written = 0;
  /**
   * The sink's outlet (`SubscriberSink.outlet`, set by `open`): the fast path writes to it, not through the sink, so a
   * delivery reads this object and the stream, one object fewer. Undefined when the sink has none, and from a refused
   * outlet write until the subscriber has caught up (the sink's `write` carries on meanwhile).
   */
  private out: SinkOutlet | undefined = undefined;
  readonly sink: SubscriberSink;
  /** Subscription id (sent to the client as x-subscription-id). */
  readonly id: string;
  /** Topics as requested, duplicates kept (a topic listed twice delivers twice). */
  readonly topics: readonly string[];
  /** "pending" until every upstream is live, "live" while attached, "ended" after. */
  state: "pending" | "live" | "ended" = "pending";
  /** False after the sink said "buffering" and until it drains. */
  private writable = true;
  private pumping = false;
  private readonly ring: Ring<Uint8Array>;
  /** `written` when the sweep first saw this subscriber blocked, or -1. */
  sweepMark = -1;
  /** When the sweep first saw it blocked (epoch ms). -0: a double field from the start (FrameWriter.ackSince says why). */
  sweepMarkAt = -0;
  /** The broker's topic entries this subscriber holds a reference on, one per requested topic. */
  links: L[] = [];

  constructor(id: string, topics: readonly string[], sink: SubscriberSink, capacity: number) {
    this.id = id;
    this.topics = topics;
    this.sink = sink;
    this.ring = new Ring<Uint8Array>(capacity);
  }

  /** Events waiting in the ring. */
  get pending(): number {
    return this.ring.size;
  }

  /** Whether the sink is blocked (wrote false and has not drained). */
  get blocked(): boolean {
    return !this.writable;
  }

  /** Slots allocated by the ring (0 when idle). */
  get ringSlots(): number {
    return this.ring.allocated;
  }

  /**
   * Give one encoded event to the subscriber: straight to the sink when it is writable and nothing is queued,
   * else into the ring. False when the ring is full: the caller reaps the subscriber as slow.
   */
  offer(bytes: Uint8Array): boolean {
    if (this.direct) {
      this.written++;
      const out = this.out;
      if (out === undefined) {
        if (!this.sink.write(bytes)) this.writable = this.direct = false;
      } else if (!out.write(bytes)) this.outletRefused();
      return true;
    }
    return this.ring.push(bytes);
  }

  /**
   * Going live: the sink opens with the subscription id, and its outlet (if any) is taken for the fast path. Both
   * happen before the first event.
   */
  open(): void {
    this.sink.open(this.id);
    this.takeOutlet();
  }

  /** The sink's outlet, when it has one and the `blocked` that a refused outlet write needs. */
  private takeOutlet(): void {
    this.out = this.sink.blocked === undefined ? undefined : this.sink.outlet?.();
  }

  /** The outlet refused a write: the sink waits for the drain (`blocked`), and `drain` takes the outlet again. */
  private outletRefused(): void {
    this.writable = this.direct = false;
    this.out = undefined;
    // takeOutlet() set an outlet only for a sink with `blocked`.
    this.sink.blocked!();
  }

  /** The sink drained: pump the ring into it while it accepts more. */
  drain(): void {
    if (this.state === "ended") return;
    this.writable = true;
    if (this.pumping) return;
    this.pumping = true;
    this.direct = false;
    try {
      while (this.writable && this.ring.size > 0 && !this.isEnded()) {
        const bytes = this.ring.shift()!;
        this.written++;
        this.writable = this.sink.write(bytes);
      }
    } finally {
      this.pumping = false;
      this.direct = this.writable && this.ring.size === 0;
      // Caught up: back to the outlet.
      if (this.direct && this.state === "live") this.takeOutlet();
    }
  }

  /** A separate read, so the compiler does not narrow `state` across the sink's re-entrant calls. */
  private isEnded(): boolean {
    return this.state === "ended";
  }

  /** Drop whatever is queued. */
  discard(): void {
    this.ring.clear();
    this.direct = this.writable && !this.pumping;
  }
}
