/**
 * The process's bound on conversion-pool workers (`--conversion-workers`), shared by every conversion pool of the
 * process: the main thread's and one per uWS worker thread. Two Int32 cells over a SharedArrayBuffer (handed to each
 * uWS thread in its workerData): the worker slots held now, and how many pools are waiting for one, plus the same two
 * per pool, so that what a thread held when it died is given back by the main thread (`reclaimSlots`). A pool takes
 * a slot before it starts a worker and gives it back once that worker has exited, so the workers alive in the process
 * never exceed the bound, however many threads convert. Waiting uses Atomics.waitAsync: it wakes on a change made by
 * any thread and does not keep a thread's event loop alive.
 */

/** Index of the cell holding the slots taken (workers alive or starting, process-wide). */
const HELD = 0;
/** Index of the cell counting pools that have conversions waiting and no slot to run them on. */
const WANTED = 1;

/** The shared cells and the figures every pool needs to share them. */
export interface WorkerSlots {
  /** Most conversion workers alive at once in the process. */
  readonly bound: number;
  /** Pools sharing the bound (the main thread's, plus one per uWS thread): a pool's fair share is bound / shares. */
  readonly shares: number;
  /** [held, wanted] for the process, then [held, wanted] of each pool, over a SharedArrayBuffer. */
  readonly cells: Int32Array;
  /** The pool using this view: 0 the main thread's, n uWS thread n's. */
  readonly pool: number;
}

/** Fresh slots for a process (or a converter of its own: tests, benchmarks), as pool 0 uses them. */
export function createWorkerSlots(bound: number, shares = 1): WorkerSlots {
  return { bound, shares, cells: new Int32Array(new SharedArrayBuffer((2 + 2 * shares) * Int32Array.BYTES_PER_ELEMENT)), pool: 0 };
}

/** The same slots as pool `pool` (1..shares-1: a uWS thread's index) uses them. */
export function slotsOfPool(s: WorkerSlots, pool: number): WorkerSlots {
  return { ...s, pool };
}

/** The cell of `s.pool`'s own count for a process-wide cell. */
const own = (s: WorkerSlots, cell: number): number => 2 + 2 * s.pool + cell;

/** Slots held now, process-wide (workers alive or starting). */
export function slotsHeld(s: WorkerSlots): number {
  return Atomics.load(s.cells, HELD);
}

/** Pools waiting for a slot now. */
export function slotsWanted(s: WorkerSlots): number {
  return Atomics.load(s.cells, WANTED);
}

/** Take a slot if the bound allows; false when every slot is held. */
export function takeSlot(s: WorkerSlots): boolean {
  for (;;) {
    const held = Atomics.load(s.cells, HELD);
    if (held >= s.bound) return false;
    if (Atomics.compareExchange(s.cells, HELD, held, held + 1) === held) {
      Atomics.add(s.cells, own(s, HELD), 1);
      return true;
    }
  }
}

/** Give a slot back (its worker has exited) and wake the pools waiting for one. */
export function giveSlot(s: WorkerSlots): void {
  Atomics.sub(s.cells, own(s, HELD), 1);
  Atomics.sub(s.cells, HELD, 1);
  Atomics.notify(s.cells, HELD);
}

/** Start (+1) or stop (-1) wanting a slot; a start wakes the pools that hold idle workers, so they give them back. */
export function markWanting(s: WorkerSlots, delta: 1 | -1): void {
  Atomics.add(s.cells, own(s, WANTED), delta);
  Atomics.add(s.cells, WANTED, delta);
  if (delta > 0) Atomics.notify(s.cells, WANTED);
}

/**
 * Pool `pool`'s thread has exited (its workers ended with it): give back every slot it held and drop its wants, so a
 * thread that crashed does not shrink the bound for good. Main thread only, after the thread's `exit` event.
 */
export function reclaimSlots(s: WorkerSlots, pool: number): void {
  const v = slotsOfPool(s, pool);
  Atomics.sub(s.cells, WANTED, Atomics.exchange(s.cells, own(v, WANTED), 0));
  const held = Atomics.exchange(s.cells, own(v, HELD), 0);
  if (held === 0) return;
  Atomics.sub(s.cells, HELD, held);
  Atomics.notify(s.cells, HELD);
}

/** Atomics.waitAsync (ES2024; in Node since 16), typed here as the ES2023 lib has no declaration of it. */
type WaitAsync = (a: Int32Array, i: number, v: number, timeoutMs: number) => { async: boolean; value: Promise<string> | string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** Resolve when the cell at `index` no longer holds `value` (or was notified), or after `timeoutMs`. */
function waitChange(s: WorkerSlots, index: number, value: number, timeoutMs: number): Promise<void> {
  const r = waitAsync(s.cells, index, value, timeoutMs);
  return r.async ? (r.value as Promise<string>).then(() => undefined) : Promise.resolve();
}

/** Resolve when a slot may have been given back (or after `timeoutMs`): then try takeSlot again. */
export function slotFreed(s: WorkerSlots, timeoutMs: number): Promise<void> {
  const held = Atomics.load(s.cells, HELD);
  return held < s.bound ? Promise.resolve() : waitChange(s, HELD, held, timeoutMs);
}

/** Resolve when some pool starts wanting a slot (at once if one does), or after `timeoutMs`. */
export function slotWanted(s: WorkerSlots, timeoutMs: number): Promise<void> {
  return waitChange(s, WANTED, 0, timeoutMs);
}
