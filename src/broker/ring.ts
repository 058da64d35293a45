/**
 * A bounded FIFO ring of at most `capacity` entries (a power of two), for the events a subscriber has not yet
 * handed to its stream. Storage is allocated lazily and grows by doubling up to `capacity`, so a subscriber that
 * keeps up (the common case: events go straight to the stream) never allocates a slot array at all, and a burst
 * costs only what it uses. `clear()` gives the storage back.
 *
 * ```
 *            head (next to shift)          tail (next free slot)
 *              v                              v
 *   +-----+-----+-----+-----+-----+-----+-----+-----+
 *   |     |  e1 |  e2 |  e3 |  e4 |  e5 |     |     |   slots.length = 8 (grows 8, 16, ... capacity)
 *   +-----+-----+-----+-----+-----+-----+-----+-----+
 *   size = 5; index i of the queue is slots[(head + i) & (slots.length - 1)]
 *   full when size === capacity: push() returns false and the caller reaps the subscriber
 * ```
 */
export class Ring<T> {
  /** Largest number of entries the ring holds. */
  readonly capacity: number;
  private slots: Array<T | undefined> | null = null;
  private head = 0;
  private count = 0;

  /** @param capacity maximum entries, a power of two (default 1024, the subscriber buffer of docs/contract.md "Limits"). */
  constructor(capacity = 1024) {
    if (!Number.isInteger(capacity) || capacity < 1 || (capacity & (capacity - 1)) !== 0) {
      throw new RangeError(`ring capacity must be a power of two >= 1 (got ${capacity})`);
    }
    this.capacity = capacity;
  }

  /** Entries waiting. */
  get size(): number {
    return this.count;
  }

  /** Slots currently allocated (0 while idle): what the ring costs in memory. */
  get allocated(): number {
    return this.slots?.length ?? 0;
  }

  /** Append; false (and nothing changes) when the ring already holds `capacity` entries. */
  push(value: T): boolean {
    if (this.count === this.capacity) return false;
    let slots = this.slots;
    if (slots === null) slots = this.slots = new Array<T | undefined>(Math.min(8, this.capacity));
    else if (this.count === slots.length) slots = this.grow(slots);
    slots[(this.head + this.count) & (slots.length - 1)] = value;
    this.count++;
    return true;
  }

  /** Oldest entry without removing it, or undefined when empty. */
  peek(): T | undefined {
    return this.count === 0 ? undefined : this.slots![this.head];
  }

  /** Remove and return the oldest entry, or undefined when empty. */
  shift(): T | undefined {
    if (this.count === 0) return undefined;
    const slots = this.slots!;
    const v = slots[this.head];
    slots[this.head] = undefined;
    this.head = (this.head + 1) & (slots.length - 1);
    if (--this.count === 0) {
      // Idle again: release the storage so a subscriber that caught up is as small as a new one.
      this.slots = null;
      this.head = 0;
    }
    return v;
  }

  /** Drop every entry and the storage. */
  clear(): void {
    this.slots = null;
    this.head = 0;
    this.count = 0;
  }

  private grow(old: Array<T | undefined>): Array<T | undefined> {
    const next = new Array<T | undefined>(old.length * 2);
    for (let i = 0; i < this.count; i++) next[i] = old[(this.head + i) & (old.length - 1)];
    this.head = 0;
    this.slots = next;
    return next;
  }
}
