/**
 * An indexed binary min-heap of names by due time: O(log n) insert, update, remove by name, O(1) peek. The embedded
 * scheduler keeps one timer for the root only, so it costs one timer whatever the number of jobs.
 *
 *   heap[0] = earliest            parent(i) = (i - 1) >> 1
 *     /           \               children  = 2i + 1, 2i + 2
 *   heap[1]      heap[2]          index: name -> position in heap, kept in step on every swap
 */
export class DueQueue {
  readonly #heap: Array<{ name: string; at: number }> = [];
  readonly #index = new Map<string, number>();

  get size(): number {
    return this.#heap.length;
  }

  /** The earliest entry, or undefined when empty. */
  peek(): { name: string; at: number } | undefined {
    return this.#heap[0];
  }

  /** Insert `name` due at `at`, or move it there when already queued. A NaN would break the heap order: refused. */
  set(name: string, at: number): void {
    if (Number.isNaN(at)) throw new RangeError(`due time of ${name} is NaN`);
    const i = this.#index.get(name);
    if (i === undefined) {
      this.#heap.push({ name, at });
      this.#index.set(name, this.#heap.length - 1);
      this.#up(this.#heap.length - 1);
      return;
    }
    const old = this.#heap[i]!.at;
    this.#heap[i]!.at = at;
    if (at < old) this.#up(i);
    else this.#down(i);
  }

  /** Remove `name`; false when it was not queued. */
  delete(name: string): boolean {
    const i = this.#index.get(name);
    if (i === undefined) return false;
    const last = this.#heap.pop()!;
    this.#index.delete(name);
    if (i < this.#heap.length) {
      this.#heap[i] = last;
      this.#index.set(last.name, i);
      this.#up(i);
      this.#down(i);
    }
    return true;
  }

  clear(): void {
    this.#heap.length = 0;
    this.#index.clear();
  }

  #swap(a: number, b: number): void {
    const h = this.#heap;
    [h[a], h[b]] = [h[b]!, h[a]!];
    this.#index.set(h[a]!.name, a);
    this.#index.set(h[b]!.name, b);
  }

  #up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.#heap[p]!.at <= this.#heap[i]!.at) return;
      this.#swap(i, p);
      i = p;
    }
  }

  #down(i: number): void {
    const n = this.#heap.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.#heap[l]!.at < this.#heap[m]!.at) m = l;
      if (r < n && this.#heap[r]!.at < this.#heap[m]!.at) m = r;
      if (m === i) return;
      this.#swap(i, m);
      i = m;
    }
  }
}
