import type { CancelSignal } from "../shared/signals.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { HealthEntry } from "../observe/health.js";
import type { Logger } from "../observe/logger.js";
import type { Metrics } from "../observe/metrics.js";
import type { InvokeResult, InvokeWire } from "../ops/dispatch.js";
import type { PubsubOps } from "../ops/pubsub.js";
import type { DispatchFacility } from "../facilities/dispatch.js";
import { reclaimSlots, type WorkerSlots } from "../workers/worker-slots.js";
import type { GatewayOptions } from "../config/options.js";
import { freePort, type Route } from "../http/router.js";
import type { WebHub } from "../web/hub.js";
import { MAX_THREAD_BACKLOG, type ThreadMessage } from "./protocol.js";
import { createThreadEvents } from "./thread-events.js";
import { createInvokeOffload } from "./thread-invoke.js";
import { threadsHealth, threadsMetrics } from "./thread-observe.js";
import { forwardedHandlers } from "./thread-routes.js";
import { createThreadSpawner, type Slot } from "./thread-spawn.js";
import type { ThreadWarmup } from "./warmup.js";

/** What the uWS worker threads need of the main thread. */
export interface UwsThreadsDeps {
  /** Threads to start (>= 2; one thread means the main thread serves HTTP itself, with no bridge). */
  count: number;
  /** The options each thread validates again (logDestination cannot cross; the HTTP port and token secret are fixed here). */
  options: GatewayOptions;
  /** The main thread's REST routes: a thread forwards those it does not serve itself. */
  routes: readonly Route[];
  /** The main web hub: each event it fans out is posted once to every thread holding its topic. */
  hub: WebHub;
  /** Publish (a thread's WebSocket publish). */
  pubsub: PubsubOps;
  metrics: Metrics;
  logger: Logger;
  /** Where the threads' log lines are written (the main logger's destination). */
  logSink: NodeJS.WritableStream;
  /** The process's conversion-pool worker slots: every thread's converter shares the one bound. */
  conversionSlots: WorkerSlots;
  /** Backend schemas: reflected once, on the main thread; a thread asks for them and is sent each change. */
  schemas: Pick<DispatchFacility["schemas"], "get" | "onChange">;
  /** Bound on event-stream messages posted to a thread and not yet handled there. Default MAX_THREAD_BACKLOG. */
  maxBacklog?: number;
  /** Invokes each thread makes before it listens (warmup.ts); a thread restarted later starts without. */
  warmup?: ThreadWarmup;
}

/** The running uWS worker threads. */
export interface UwsThreads {
  /** The HTTP port they share. */
  readonly port: number;
  readonly count: number;
  /** Every route the threads serve, as "METHOD /path" (RestServer.routes of the first thread ready). */
  readonly routes: readonly string[];
  /** Threads serving right now. */
  running(): number;
  /** Health entries: `uws-threads` (how many serve) and `uws-thread-<n>` (each thread's web subscribers). */
  health(): Promise<Record<string, HealthEntry>>;
  /**
   * The Prometheus text (or with `openMetrics`, the OpenMetrics text with exemplars) of the main registry and every
   * thread's, summed per series (each metric's help once).
   */
  metrics(openMetrics?: boolean): Promise<string>;
  /** Graceful: every thread stops listening, ends its streams, drains within `ms`, closes its sockets and exits. */
  close(ms: number): Promise<void>;
  /**
   * Immediate: every thread closes its sockets now and exits (also when a graceful close is under way); resolves
   * once they did, bounded. The process must not exit before: Node aborts on a thread's open uWS handles.
   */
  destroy(): Promise<void>;
  /** Diagnostics and tests: make thread `index` (1-based) fail with an uncaught error. */
  crash(index: number): void;
  /**
   * Run an invocation (gRPC Invoke/InvokeJson) on the running thread with the fewest calls waiting (round robin among
   * equals); undefined when no thread is running (the main thread then runs it itself). An InvokeOffload.
   */
  invoke(wire: InvokeWire, signal: CancelSignal | undefined, timeoutMs: number): Promise<InvokeResult> | undefined;
}

/**
 * Start `count` uWS worker threads on one HTTP port (uSockets listens with SO_REUSEPORT on Linux, so the kernel
 * spreads connections over them). The main thread keeps the broker, the web hub, state, triggers and the runtime; it
 * answers each thread's bridge calls (forwarded routes and publish: thread-routes.ts; web topic acquire/release:
 * thread-events.ts) and posts each web event once to every thread holding its topic (thread-events.ts). Spawning and
 * restarts: thread-spawn.ts; health and metrics: thread-observe.ts; invoke offload: thread-invoke.ts. Rejects with
 * UNAVAILABLE when a thread cannot start (e.g. the port is taken).
 */
export async function startUwsThreads(deps: UwsThreadsDeps): Promise<UwsThreads> {
  const { hub } = deps;
  const host = deps.options.host ?? "127.0.0.1";
  const port = deps.options.httpPort ? deps.options.httpPort : await freePort(host);
  const routes = deps.routes.map((r) => ({ method: r.method, path: r.path, auth: r.auth !== false }));
  const events = createThreadEvents({
    hub,
    logger: deps.logger,
    maxBacklog: deps.maxBacklog ?? MAX_THREAD_BACKLOG,
    posted: deps.metrics.counter("platform_web_thread_events_posted_total", "Web pub/sub events the main thread posted to each uWS worker thread (only events of topics the thread holds)", ["thread"]),
  });
  /** Routes the first thread to become ready reported (UwsThreads.routes). */
  const served: string[] = [];
  /** Handed to the threads of the first start only: the echo backend it names lives no longer. */
  let warmup = deps.warmup;
  const spawner = createThreadSpawner({
    logger: deps.logger,
    logSink: deps.logSink,
    data: (index, closedFlag, clock) => ({ index, options: { ...deps.options, httpPort: port }, positions: hub.scheme, routes, closedFlag, clock, conversionSlots: deps.conversionSlots, ...(warmup ? { warmup } : {}) }),
    events,
    handlers: {
      ...forwardedHandlers(deps.routes, deps.pubsub),
      "backend.schema": (p: { service: string; fresh: boolean; stale?: string }, signal) => deps.schemas.get(p.service, p.fresh, signal, p.stale),
    },
    // Its conversion workers ended with it: their slots are the process's again.
    onExit: (index) => reclaimSlots(deps.conversionSlots, index),
    onReady: (r) => {
      if (served.length === 0) served.push(...r);
    },
  });

  // A backend's schema changed on the main thread: every thread, a starting one too, takes it (messages keep their order
  // on a port, so one that asked for the schema meanwhile gets the reply first, then this).
  deps.schemas.onChange((service, schema) => spawner.post({ t: "schema", service, schema }));

  /** The threads that started (a restart keeps its slot). */
  const slots: Slot[] = [];
  const results = await Promise.allSettled(Array.from({ length: deps.count }, (_, i) => spawner.start(i + 1)));
  warmup = undefined;
  for (const r of results) if (r.status === "fulfilled") slots.push(r.value);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    spawner.closing();
    await Promise.all(slots.map((s) => spawner.closeSlot(s, 0)));
    spawner.releaseExitHook();
    throw GatewayError.from(failed.reason, Code.UNAVAILABLE);
  }

  const running = (): Slot[] => slots.filter((s) => s.state === "running");
  const closeAll = async (ms: number): Promise<void> => {
    spawner.closing();
    await Promise.all(slots.map((s) => spawner.closeSlot(s, ms)));
    spawner.releaseExitHook();
  };
  let closed: Promise<void> | undefined;
  return {
    invoke: createInvokeOffload(slots),
    port,
    count: deps.count,
    routes: served,
    running: () => running().length,
    health: () => threadsHealth(running(), deps.count, port),
    metrics: (openMetrics = false) => {
      events.flush();
      return threadsMetrics(deps.metrics, running(), openMetrics);
    },
    close: (ms) => (closed ??= closeAll(ms)),
    destroy: () => closeAll(0),
    crash(index) {
      slots.find((s) => s.index === index)?.worker.postMessage({ t: "crash" } satisfies ThreadMessage);
    },
  };
}
