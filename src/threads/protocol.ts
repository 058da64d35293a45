/** What the main thread and a uWS worker thread say to each other besides bridge calls (bridge.ts). */
import type { GatewayOptions } from "../config/options.js";
import type { Route } from "../http/router.js";
import type { WorkerSlots } from "../workers/worker-slots.js";
import type { PositionScheme } from "../web/positions.js";
import type { ThreadWarmup } from "./warmup.js";

/**
 * Messages of the event stream posted to one thread and not yet acknowledged past which the main thread stops posting
 * to it and ends its subscribers `slow` (they reconnect and resume from history): the port's queue must stay bounded.
 */
export const MAX_THREAD_BACKLOG = 16_384;

/**
 * The main hub's sequence as a thread reads it, in shared memory (thread-upstream.ts says why a resume stays exact).
 * `seq[0]`: the last sequence number issued whose event has been posted to every thread holding its topic (the main
 * thread writes it after those posts, and after answering an acquire). `posted[0]`: messages of the event stream (events
 * and ends) posted to this thread, as an Int32 that wraps (the thread compares it with its own count).
 */
export interface EventClock {
  seq: BigInt64Array;
  posted: Int32Array;
}

/** A bridge call not answered within this long fails DEADLINE_EXCEEDED, ms. */
export const BRIDGE_TIMEOUT_MS = 30_000;
/** Bridge calls one side may have waiting at once; past it RESOURCE_EXHAUSTED. */
export const BRIDGE_MAX_PENDING = 10_000;

/** A main-thread route as a worker thread routes it (the handler stays on the main thread). */
export interface RouteSpec {
  method: Route["method"];
  path: string;
  auth: boolean;
}

/** `workerData` of a uWS worker thread. */
export interface ThreadData {
  /** 1-based, for logs and metrics. */
  index: number;
  /** The gateway options, without what cannot cross (logDestination), with the HTTP port and token secret fixed. */
  options: GatewayOptions;
  /** How the main web hub writes positions (positions are the main hub's). */
  positions: PositionScheme;
  /** Every main-thread route; those the thread does not serve itself it forwards. */
  routes: RouteSpec[];
  /**
   * One Int32 over a SharedArrayBuffer: the thread stores 1 (and notifies) once it has no uWS socket left open. The
   * main thread's `exit` handler waits on it (Atomics.wait) after posting `exit`, since it cannot wait for events.
   */
  closedFlag: Int32Array;
  /** The process's conversion-pool worker slots (shared memory): this thread's converter shares the bound with every other. */
  conversionSlots: WorkerSlots;
  /** The main hub's sequence word (one for every thread) and this thread's posted count. */
  clock: EventClock;
  /** Invokes to warm up with before listening (warmup.ts): at the gateway's start with `--warmup-calls`, never on a restart. */
  warmup?: ThreadWarmup;
}

/** A forwarded REST request: the route it matched on the thread (auth and the shutdown gate already passed there). */
export interface RouteWire {
  method: Route["method"];
  /** The route pattern. */
  path: string;
  /** The request path. */
  url: string;
  params: Record<string, string>;
  query: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** A forwarded request's reply: the body as the main thread's front serialized it. */
export interface ReplyWire {
  status: number;
  raw: string | Uint8Array;
  contentType: string | undefined;
  headers: Record<string, string> | undefined;
}

/** Messages outside the bridge. Thread to main: ready, failed, log, ack. Main to thread: ev, end, schema, crash, exit. */
/**
 * Messages outside the bridge. Thread to main: ready, failed, log, ack. Main to thread: ev, end (the event stream: only
 * of topics the thread holds), crash, exit.
 */
export type ThreadMessage =
  | { t: "ready"; port: number; routes: string[] }
  | { t: "failed"; code: number; message: string }
  | { t: "log"; line: string }
  /**
   * Messages of the event stream (ev, end) the thread has handled so far, sent once per loop turn that handled any:
   * the main thread bounds the backlog with it.
   */
  | { t: "ack"; n: number }
  | { t: "ev"; e: unknown }
  | { t: "end"; topic: string; reason: unknown }
  /** A backend's schema changed on the main thread (its reflection): the thread takes it (a ReflectionResult). */
  | { t: "schema"; service: string; schema: unknown }
  | { t: "crash" }
  /**
   * The process is exiting now (the main thread is in its `exit` handler): close every uWS socket at once, then set
   * `closedFlag`. Node aborts the whole process when a thread's loop is closed with uWS sockets still open.
   */
  | { t: "exit" };
