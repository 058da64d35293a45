/** One recorded event: its sequence number (the position's offset), when it arrived, and its payload. */
export interface HistoryEntry<T> {
  readonly seq: number;
  readonly at: number;
  readonly data: T;
}

/** Bounds of a TopicHistory. */
export interface HistoryOptions {
  /** Most events kept. 0 keeps none. */
  maxEvents: number;
  /** Oldest event kept, ms. */
  maxAgeMs: number;
}

/**
 * The bounded recent history of one topic, for resume: events in arrival order (strictly increasing `seq`), evicted
 * when more than `maxEvents` are held or when older than `maxAgeMs`. It knows from which sequence number on it is
 * complete (`completeAfter`): a resume from `since` is exact when `since >= completeAfter`, since every event with a
 * larger number is still held. Pure logic: the caller supplies the sequence numbers and the clock.
 */
export class TopicHistory<T> {
  private readonly entries: HistoryEntry<T>[] = [];
  /** Index of the first live entry in `entries` (evicted entries before it are compacted lazily). */
  private head = 0;
  /** Every event with seq > completeAfter is held (or none was recorded). */
  private complete: number;

  /** `startSeq`: the last sequence number issued before this history started recording (it holds nothing before). */
  constructor(
    private readonly options: HistoryOptions,
    startSeq: number,
  ) {
    this.complete = startSeq;
  }

  /** Events held. */
  get size(): number {
    return this.entries.length - this.head;
  }

  /** Every event with a larger sequence number than this is held. */
  get completeAfter(): number {
    return this.complete;
  }

  /** Record one event; evicts what the bounds no longer allow. */
  push(seq: number, at: number, data: T): void {
    if (this.options.maxEvents <= 0) {
      this.complete = seq;
      return;
    }
    this.entries.push({ seq, at, data });
    this.evict(at);
  }

  /** Drop entries past either bound as of `now`. */
  evict(now: number): void {
    const oldest = now - this.options.maxAgeMs;
    while (this.size > 0) {
      const e = this.entries[this.head]!;
      if (this.size <= this.options.maxEvents && e.at >= oldest) break;
      this.complete = e.seq;
      this.head++;
    }
    // Compact once the dead prefix is as long as the live part, so memory stays within twice the bound.
    if (this.head > 64 && this.head * 2 >= this.entries.length) {
      this.entries.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Whether a resume from `since` is exact: nothing after it was evicted or missed. */
  covers(since: number): boolean {
    return since >= this.complete;
  }

  /** The sequence number of the newest held entry whose data passes `test`, or undefined. */
  findSeq(test: (data: T) => boolean): number | undefined {
    for (let i = this.entries.length - 1; i >= this.head; i--) if (test(this.entries[i]!.data)) return this.entries[i]!.seq;
    return undefined;
  }

  /** Held entries with seq > since, oldest first. */
  after(since: number): HistoryEntry<T>[] {
    const out: HistoryEntry<T>[] = [];
    // Entries are sorted by seq: walk back from the end, then return in order.
    let i = this.entries.length - 1;
    while (i >= this.head && this.entries[i]!.seq > since) i--;
    for (let j = i + 1; j < this.entries.length; j++) out.push(this.entries[j]!);
    return out;
  }
}
