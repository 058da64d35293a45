/**
 * Cancellation helpers shared by the gateway and its client: a listener for one abort with its disposer, a signal
 * linked to other signals and to a deadline, and a race of shared work against one caller's signal.
 *
 * Linking does not use `AbortSignal.any`: on Node 20 every signal it returns stays referenced from each input signal
 * until that input aborts (measured on v20.20: one long-lived parent and 1,000,000 calls left 1,000,000 dependants and
 * ~160 MiB of heap; nodejs/node#55351), and callers pass long-lived signals (a client's shutdown signal, a
 * subscription's). The listeners here are removed by `clear()`. The deadline is a timer cleared by `clear()` too, not
 * `AbortSignal.timeout`, whose timer lives its full term whatever happens to the work (30,000 `@every 1s` triggers held
 * 300,000 live 10 s timers that way, ~250 MiB of heap; see ops/trigger.ts).
 */

const NOOP = (): void => undefined;

/**
 * Run `fn(reason)` once when `signal` aborts, or now when it has already (a listener added to an aborted signal never
 * runs). Returns the disposer that removes the listener: call it when the work settles, so a long-lived signal does
 * not keep the work reachable. No signal: nothing to listen to.
 */
export function onAbort(signal: CancelSignal | undefined, fn: (reason: unknown) => void): () => void {
  if (signal === undefined) return NOOP;
  if (signal.aborted) {
    fn(signal.reason);
    return NOOP;
  }
  const listener: AbortListener = { handleEvent: () => fn(signal.reason) };
  signal.addEventListener("abort", listener, ONCE);
  return () => signal.removeEventListener("abort", listener);
}

const ONCE = { once: true } as const;

/** A signal for one piece of work, aborted by a parent, by its deadline or by `abort()`, until `clear()`. */
export interface LinkedSignal {
  readonly signal: AbortSignal;
  /** Abort now with `reason`, unless already aborted or cleared. */
  abort(reason?: unknown): void;
  /**
   * The work is over: drop the deadline timer and the listeners on the parents. A later parent abort, deadline or
   * `abort()` is ignored (e.g. grpc-js emits "cancelled" when a stream closes after its reply).
   */
  clear(): void;
  /** True once `clear()` ran. */
  readonly cleared: boolean;
}

/** What `linkedSignal` links to. */
export interface LinkOptions {
  /** Abort when any of these aborts, with its reason. Undefined entries are ignored. */
  parents?: ReadonlyArray<AbortSignal | undefined>;
  /** Abort this many ms from now (a timer, cleared by `clear()`). */
  timeoutMs?: number;
  /** The abort reason when the deadline passes. Default a DOMException named TimeoutError, as AbortSignal.timeout's. */
  timeoutReason?: () => unknown;
}

const NO_PARENTS: readonly AbortSignal[] = [];

/** A signal linked to parents and a deadline (see LinkOptions); with no options, one that only `abort()` aborts. */
export function linkedSignal(opts: LinkOptions = {}): LinkedSignal {
  const ac = new AbortController();
  const parents = opts.parents ? opts.parents.filter((p): p is AbortSignal => p !== undefined) : NO_PARENTS;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let cleared = false;
  let unlisten: Array<() => void> = [];
  const release = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    for (const off of unlisten) off();
    unlisten = [];
  };
  const abort = (reason?: unknown): void => {
    if (cleared || ac.signal.aborted) return;
    release();
    ac.abort(reason);
  };
  const first = parents.find((p) => p.aborted);
  if (first) ac.abort(first.reason);
  else {
    unlisten = parents.map((p) => onAbort(p, abort));
    if (opts.timeoutMs !== undefined) {
      const reason = opts.timeoutReason ?? ((): unknown => new DOMException("The operation timed out", "TimeoutError"));
      timer = setTimeout(() => abort(reason()), opts.timeoutMs);
    }
  }
  return {
    signal: ac.signal,
    abort,
    clear() {
      cleared = true;
      release();
    },
    get cleared() {
      return cleared;
    },
  };
}

/** A signal aborted after `ms` (with `reason()`) or when `parent` aborts, whichever is first; `clear()` once the work settles. */
export function deadlineSignal(ms: number, reason?: () => unknown, parent?: AbortSignal): LinkedSignal {
  return linkedSignal({ parents: [parent], timeoutMs: ms, ...(reason ? { timeoutReason: reason } : {}) });
}

/**
 * Race `p` against one caller's `signal` without cancelling the work behind `p` (it may be shared by other callers):
 * rejects with `toError(signal.reason)` when the signal aborts first, else settles as `p` does. The listener is removed
 * either way.
 */
export function abortable<T>(p: Promise<T>, signal: CancelSignal | undefined, toError: (reason: unknown) => unknown): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) {
    // The work goes on without this caller: its failure must not surface as an unhandled rejection.
    p.catch(() => undefined);
    return Promise.reject(toError(signal.reason));
  }
  return new Promise<T>((resolve, reject) => {
    const off = onAbort(signal, (reason) => reject(toError(reason)));
    p.then(
      (v) => {
        off();
        resolve(v);
      },
      (e: unknown) => {
        off();
        reject(e);
      },
    );
  });
}

/** An abort listener as an object (`handleEvent`), the form EventTarget takes without a closure. */
export interface AbortListener {
  handleEvent(event: Event): void;
}

/**
 * What a backend call listens to for its caller's cancellation: the part of AbortSignal it uses (an AbortSignal is
 * one). The listener is an object with `handleEvent`, added once and removed when the call settles.
 */
export interface CancelSignal {
  readonly aborted: boolean;
  /** Why, once aborted (an AbortSignal's `reason`). */
  readonly reason?: unknown;
  addEventListener(type: "abort", listener: AbortListener, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: AbortListener): void;
}

/**
 * A CancelSignal that is not an EventTarget: a gRPC call's cancellation as the invoke path and the transparent proxy
 * listen to it (the backend call, the conversion pool's queue, a schema fetch). An AbortController and its signal
 * cost about 3 us of CPU per call besides their garbage, and each listener two more calls into EventTarget: measured
 * on the proxy at c=64, a quarter of its CPU per call. This is a flag and a short list.
 */
export class Cancellation implements CancelSignal {
  aborted = false;
  reason: unknown;
  private listeners: AbortListener[] = [];

  addEventListener(_type: "abort", listener: AbortListener): void {
    if (this.aborted || this.listeners.includes(listener)) return;
    // Most have one listener for as long as they live (an idle subscriber's call): an exact-size array for it, where
    // a push onto an empty one grows it to 17 slots.
    if (this.listeners.length === 0) this.listeners = [listener];
    else this.listeners.push(listener);
  }

  removeEventListener(_type: "abort", listener: AbortListener): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  /** Mark it aborted and tell each listener once (as `{ once: true }` listeners of an AbortSignal are told). */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const l of listeners) l.handleEvent(ABORT_EVENT);
  }
}

const ABORT_EVENT = new Event("abort");

/**
 * One piece of work's cancellation, an AbortSignal made only if something asks for `signal` (a REST request's:
 * most handlers pass `cancellation` on, or nothing). Aborting before a signal exists makes it aborted from the start.
 */
export class LazyAbort {
  private ac: AbortController | undefined;
  private light: Cancellation | undefined;
  private why: unknown;
  private done = false;

  get aborted(): boolean {
    return this.done;
  }

  get signal(): AbortSignal {
    if (!this.ac) {
      this.ac = new AbortController();
      if (this.done) this.ac.abort(this.why);
    }
    return this.ac.signal;
  }

  get cancellation(): CancelSignal {
    if (this.ac) return this.ac.signal;
    if (!this.light) {
      this.light = new Cancellation();
      if (this.done) this.light.abort(this.why);
    }
    return this.light;
  }

  abort(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.why = reason;
    this.light?.abort(reason);
    this.ac?.abort(reason);
  }
}
