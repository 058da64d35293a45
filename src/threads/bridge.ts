import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { clampTimerMs, MAX_TIMER_MS } from "../shared/timers.js";
import { onAbort, type CancelSignal } from "../shared/signals.js";
import { statusOf, type Status } from "../shared/status.js";

/** What a bridge needs of a MessagePort, a Worker or a worker's parentPort. */
export interface BridgePort {
  postMessage(message: unknown, transfer?: readonly ArrayBuffer[]): void;
}

/** A handler of one request op on the answering side; `signal` aborts when the caller gives up (its client left). */
export type BridgeHandler = (payload: any, signal: AbortSignal) => Promise<unknown>;

/** Options of createBridge. */
export interface BridgeOptions {
  /** A call not answered within this long fails DEADLINE_EXCEEDED (and the other side is told to abort it), ms. */
  timeoutMs: number;
  /** Calls this side may have waiting at once; past it a call fails RESOURCE_EXHAUSTED at once. */
  maxPending: number;
  /** Names the other side in error messages, e.g. "the main thread". */
  peer: string;
}

/**
 * Request/reply between the main thread and one uWS worker thread over a MessagePort, both ways. A call is bounded
 * (maxPending) and timed out (timeoutMs); an error crosses as the shared GatewayError code and message (nothing else
 * of it: no stack, no cause), so a front on either thread answers it exactly as it would an in-process error.
 */
export interface Bridge {
  /**
   * Ask the other side to run `op`; `signal` aborting cancels it there too. `timeoutMs` replaces the bridge's
   * timeout for this call (e.g. an invoke's own deadline plus a grace); it is capped at what a timer can hold.
   */
  call<T>(op: string, payload: unknown, signal?: CancelSignal, timeoutMs?: number): Promise<T>;
  /** Feed one message from the port; false when it is not a bridge message (the caller handles it). */
  receive(message: unknown): boolean;
  /** Calls waiting for an answer. */
  readonly pending: number;
  /** Fail every waiting call with UNAVAILABLE `why` and refuse new ones (the other side is gone). Safe twice. */
  close(why: string): void;
}

/** ArrayBuffers a payload or reply hands over to the other side (withTransfer), by the value that carries them. */
const transfers = new WeakMap<object, ArrayBuffer[]>();

/**
 * `value` as a bridge payload or handler result whose `buffers` move to the other side instead of being copied: a
 * structured clone copies an ArrayBuffer into the message and out again on the other side, so a 30 MiB reply cost
 * 60 MiB more in flight (and in the allocator's arenas afterwards); transferred, it costs nothing and the sender's
 * views of it become empty. Only for buffers nothing on this side uses again.
 */
export function withTransfer<T extends object>(value: T, buffers: ArrayBuffer[]): T {
  if (buffers.length > 0) transfers.set(value, buffers);
  return value;
}

/** Bridge wire messages: `q` request, `r` reply, `x` abort. */
type Wire =
  | { b: "q"; id: number; op: string; p: unknown }
  | { b: "r"; id: number; ok: true; v: unknown }
  | ({ b: "r"; id: number; ok: false } & Status)
  | { b: "x"; id: number };

interface Waiting {
  resolve(v: unknown): void;
  reject(e: GatewayError): void;
  timer: NodeJS.Timeout;
  unlisten?: () => void;
}

/** Create one side of a bridge over `port`, answering the ops in `handlers`. */
export function createBridge(port: BridgePort, handlers: Record<string, BridgeHandler>, options: BridgeOptions): Bridge {
  let nextId = 1;
  const waiting = new Map<number, Waiting>();
  /** Requests from the other side being served here, so an abort from there reaches the handler. */
  const serving = new Map<number, AbortController>();
  let closedWhy: string | undefined;

  const post = (m: Wire, carried?: unknown): void => {
    try {
      const transfer = typeof carried === "object" && carried !== null ? transfers.get(carried) : undefined;
      port.postMessage(m, transfer);
    } catch {
      // The port closed under us: the waiting side times out or is closed by its owner.
    }
  };

  const settle = (id: number): Waiting | undefined => {
    const w = waiting.get(id);
    if (!w) return undefined;
    waiting.delete(id);
    clearTimeout(w.timer);
    w.unlisten?.();
    return w;
  };

  function serve(m: { id: number; op: string; p: unknown }): void {
    const handler = handlers[m.op];
    if (!handler) return post({ b: "r", id: m.id, ok: false, code: Code.UNIMPLEMENTED, message: `no bridge op ${String(m.op).slice(0, 64)}` });
    const ac = new AbortController();
    serving.set(m.id, ac);
    let run: Promise<unknown>;
    try {
      run = handler(m.p, ac.signal);
    } catch (e) {
      run = Promise.reject(e);
    }
    run.then(
      (v) => {
        serving.delete(m.id);
        post({ b: "r", id: m.id, ok: true, v }, v);
      },
      (e: unknown) => {
        serving.delete(m.id);
        post({ b: "r", id: m.id, ok: false, ...statusOf(e) });
      },
    );
  }

  return {
    call<T>(op: string, payload: unknown, signal?: CancelSignal, timeoutMs = options.timeoutMs): Promise<T> {
      if (closedWhy !== undefined) return Promise.reject(new GatewayError(Code.UNAVAILABLE, closedWhy));
      if (signal?.aborted) return Promise.reject(GatewayError.from(signal.reason, Code.CANCELLED));
      if (waiting.size >= options.maxPending) {
        return Promise.reject(new GatewayError(Code.RESOURCE_EXHAUSTED, `${options.maxPending} calls to ${options.peer} are waiting already`));
      }
      const id = nextId++;
      // Past 2^31-1 ms Node fires a timer at once; a negative or NaN bound means "answer now or fail".
      const ms = clampTimerMs(Number.isFinite(timeoutMs) ? timeoutMs : MAX_TIMER_MS);
      return new Promise<T>((resolve, reject) => {
        const w: Waiting = {
          resolve: resolve as (v: unknown) => void,
          reject,
          timer: setTimeout(() => {
            settle(id);
            post({ b: "x", id });
            reject(new GatewayError(Code.DEADLINE_EXCEEDED, `${options.peer} did not answer ${op} within ${ms} ms`));
          }, ms),
        };
        if (signal) {
          w.unlisten = onAbort(signal, (reason) => {
            if (!settle(id)) return;
            post({ b: "x", id });
            reject(GatewayError.from(reason, Code.CANCELLED));
          });
        }
        waiting.set(id, w);
        post({ b: "q", id, op, p: payload }, payload);
      });
    },
    receive(message) {
      if (typeof message !== "object" || message === null || !("b" in message)) return false;
      const m = message as Wire;
      if (m.b === "q") serve(m);
      else if (m.b === "x") serving.get(m.id)?.abort(new GatewayError(Code.CANCELLED, "the caller gave up"));
      else if (m.b === "r") {
        const w = settle(m.id);
        if (w) {
          if (m.ok) w.resolve(m.v);
          else w.reject(new GatewayError(m.code, m.message));
        }
      } else return false;
      return true;
    },
    get pending() {
      return waiting.size;
    },
    close(why) {
      if (closedWhy !== undefined) return;
      closedWhy = why;
      for (const id of [...waiting.keys()]) settle(id)?.reject(new GatewayError(Code.UNAVAILABLE, why));
      for (const ac of serving.values()) ac.abort(new GatewayError(Code.UNAVAILABLE, why));
      serving.clear();
    },
  };
}
