import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import type { EndReason } from "../broker/index.js";
import type { CloudEvent } from "../shared/cloudevent.js";
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
import { createRestRequest, freePort, type Route } from "../http/router.js";
import { STREAM_THRESHOLD_BYTES } from "../http/reply-writer.js";
import { subscribeError, type EventWire, type WebHub } from "../web/hub.js";
import { createBridge, withTransfer, type Bridge } from "./bridge.js";
import { ownBuffer } from "../http/free-buffer.js";
import { BRIDGE_MAX_PENDING, MAX_THREAD_BACKLOG, BRIDGE_TIMEOUT_MS, type ReplyWire, type RouteWire, type ThreadData, type ThreadMessage } from "./protocol.js";

/** How long one thread may take to start (load the code, read the config, listen), ms. */
const STARTUP_TIMEOUT_MS = 60_000;
/** Past the shutdown bound, how long a thread still gets to exit before it is left behind (unref'd), ms. */
const EXIT_GRACE_MS = 2_000;
/** A thread that crashes is restarted after this delay, doubled per crash in the last minute, up to the maximum, ms. */
const RESTART_DELAY_MS = 100;
const RESTART_DELAY_MAX_MS = 5_000;
/**
 * How long the process's `exit` handler waits, in all, for the threads still running to close their uWS sockets, ms.
 * A thread answers within one turn of its loop; only a thread stuck in synchronous code takes it all.
 */
const EXIT_CLOSE_MS = 1_000;

/** What the uWS worker threads need of the main thread. */
export interface UwsThreadsDeps {
  /** Threads to start (>= 2; one thread means the main thread serves HTTP itself, with no bridge). */
  count: number;
  /** The options each thread validates again (logDestination cannot cross; the HTTP port and token secret are fixed here). */
  options: GatewayOptions;
  /** The main thread's REST routes: a thread forwards those it does not serve itself. */
  routes: readonly Route[];
  /** The main web hub: every event it fans out reaches every thread once. */
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
  /** Bound on events posted to a thread and not yet handled there. Default MAX_THREAD_BACKLOG. */
  maxBacklog?: number;
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
  /** The Prometheus text of the main registry and every thread's, summed per series (each metric's help once). */
  metrics(): Promise<string>;
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
  invoke(wire: InvokeWire, signal: AbortSignal | undefined, timeoutMs: number): Promise<InvokeResult> | undefined;
}

interface Slot {
  readonly index: number;
  worker: Worker;
  bridge: Bridge;
  /** Topics this thread holds on the main hub (one reference each). */
  held: Set<string>;
  state: "starting" | "running" | "closing" | "exited";
  exited: Promise<void>;
  /** The current worker's ThreadData.closedFlag: 1 once it has no uWS socket open. */
  closedFlag: Int32Array;
  /** Events posted to the current worker, and handled there as of its last ack. */
  posted: number;
  acked: number;
  /** Past the backlog bound: no events are posted until it has drained to half. */
  shed: boolean;
  crashes: number[];
}

/**
 * The worker entry: uws-thread.js next to this module in dist/; from the sources (tests, tsx), uws-thread.ts behind a
 * one-line bootstrap that registers tsx's loader on the thread first (Node 20 does not apply `--import` to a worker).
 */
function threadEntry(): { filename: string; tsxApi: string | undefined } {
  const here = import.meta.url;
  if (!here.endsWith(".ts")) return { filename: fileURLToPath(new URL("./uws-thread.js", here)), tsxApi: undefined };
  return { filename: fileURLToPath(new URL("./uws-thread.ts", here)), tsxApi: import.meta.resolve("tsx/esm/api") };
}

/** Buffers back from structured clone (which gives Uint8Array), as the rest of the gateway expects bytes. */
function reviveEvent(e: CloudEvent | null | undefined): CloudEvent | null | undefined {
  if (!e || typeof e !== "object") return e;
  const buf = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  if (e.binary_data instanceof Uint8Array) e.binary_data = buf(e.binary_data);
  if (e.proto_data?.value instanceof Uint8Array) e.proto_data.value = buf(e.proto_data.value);
  for (const v of Object.values(e.attributes ?? {})) if (v?.ce_bytes instanceof Uint8Array) v.ce_bytes = buf(v.ce_bytes);
  return e;
}

/**
 * Start `count` uWS worker threads on one HTTP port (uSockets listens with SO_REUSEPORT on Linux, so the kernel
 * spreads connections over them). The main thread keeps the broker, the web hub, state, triggers and the runtime; it
 * answers each thread's bridge calls (forwarded routes, publish, web topic acquire/release) and posts every web event
 * to every thread once. A thread that exits unexpectedly is logged and started again (with a growing delay while it
 * keeps crashing). Rejects with UNAVAILABLE when a thread cannot start (e.g. the port is taken).
 */
export async function startUwsThreads(deps: UwsThreadsDeps): Promise<UwsThreads> {
  const { logger, hub } = deps;
  const host = deps.options.host ?? "127.0.0.1";
  const port = deps.options.httpPort ? deps.options.httpPort : await freePort(host);
  const byKey = new Map(deps.routes.map((r) => [`${r.method} ${r.path}`, r]));
  const data = (index: number, closedFlag: Int32Array): ThreadData => ({
    index,
    options: { ...deps.options, httpPort: port },
    epoch: hub.epoch,
    routes: deps.routes.map((r) => ({ method: r.method, path: r.path, auth: r.auth !== false })),
    closedFlag,
    conversionSlots: deps.conversionSlots,
  });
  let closing = false;
  const slots: Slot[] = [];
  /** Every slot made, the ones still starting included (slots holds only those that started). */
  const made: Slot[] = [];
  /** Routes the first thread to become ready reported (UwsThreads.routes). */
  const served: string[] = [];

  const maxBacklog = deps.maxBacklog ?? MAX_THREAD_BACKLOG;
  /** A thread too far behind: its subscribers end `slow` (they resume from history on reconnect), nothing is posted. */
  function shed(s: Slot): void {
    s.shed = true;
    logger.warn({ thread: s.index, backlog: s.posted - s.acked, topics: s.held.size }, "uWS worker thread fell behind the event stream; its web subscribers are ended slow");
    for (const topic of s.held) {
      s.worker.postMessage({ t: "end", topic, reason: { kind: "slow", capacity: maxBacklog } satisfies EndReason } satisfies ThreadMessage);
      hub.release(topic);
    }
    s.held.clear();
  }

  // Every event the main hub fans out goes to every thread once: one message per thread, never per subscriber.
  hub.addFanout("threads", {
    deliver(event) {
      const e: EventWire = { topic: event.topic, seq: event.seq, position: event.position, cloudevent: event.cloudevent };
      const msg: ThreadMessage = { t: "ev", e };
      for (const s of slots) {
        if (s.state !== "running" && s.state !== "closing") continue;
        const backlog = s.posted - s.acked;
        if (s.shed) continue;
        if (backlog >= maxBacklog) {
          shed(s);
          continue;
        }
        s.worker.postMessage(msg);
        s.posted++;
      }
      return 0;
    },
    endTopic(topic, reason: EndReason) {
      for (const s of slots) if (s.held.delete(topic)) s.worker.postMessage({ t: "end", topic, reason } satisfies ThreadMessage);
    },
  });

  function serveRoute(wire: RouteWire, signal: AbortSignal): Promise<ReplyWire> {
    const route = byKey.get(`${wire.method} ${wire.path}`);
    if (!route) throw new GatewayError(Code.NOT_FOUND, `no main-thread route ${wire.method} ${wire.path}`);
    const body = Buffer.from(wire.body.buffer, wire.body.byteOffset, wire.body.byteLength);
    const req = createRestRequest(wire.method, wire.url, wire.params, new URLSearchParams(wire.query), wire.headers, body, signal);
    return route.handler(req).then((reply) => {
      if (reply.stream) throw new GatewayError(Code.INTERNAL, `route ${wire.path} streams its reply and cannot be forwarded from a worker thread`);
      // A large body crosses as bytes the thread takes over (bridge.ts withTransfer), never as a copy: a state page of
      // --max-reply-bytes was copied twice on its way, and with clients slow to read, those copies piled up.
      let raw = reply.raw ?? JSON.stringify(reply.body ?? null);
      if (typeof raw === "string" && raw.length > STREAM_THRESHOLD_BYTES) raw = Buffer.from(raw);
      const owned = typeof raw !== "string" && raw.byteLength > STREAM_THRESHOLD_BYTES ? ownBuffer(raw) : undefined;
      const out: ReplyWire = { status: reply.status ?? 200, raw, contentType: reply.contentType, headers: reply.headers };
      return owned ? withTransfer(out, [owned]) : out;
    });
  }

  function spawn(slot: Slot | undefined, index: number): Promise<Slot> {
    const entry = threadEntry();
    const closedFlag = new Int32Array(new SharedArrayBuffer(4));
    const workerData = data(index, closedFlag);
    const worker = entry.tsxApi
      ? new Worker(`import(${JSON.stringify(entry.tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(entry.filename).href)}); })`, {
          eval: true,
          workerData,
        })
      : new Worker(entry.filename, { workerData });
    let lastError: string | undefined;
    const s: Slot = slot ?? { index, worker, bridge: undefined as unknown as Bridge, held: new Set(), state: "starting", exited: Promise.resolve(), closedFlag, crashes: [], posted: 0, acked: 0, shed: false };
    if (!slot) made.push(s);
    s.worker = worker;
    s.closedFlag = closedFlag;
    s.state = "starting";
    s.held = new Set();
    s.posted = s.acked = 0;
    s.shed = false;
    const held = s.held;
    s.bridge = createBridge(
      worker,
      {
        route: serveRoute,
        "pubsub.publish": (p: { topic: string; event: CloudEvent }, signal) => deps.pubsub.publish(p.topic, reviveEvent(p.event), signal),
        "web.acquire": async (p: { topic: string }) => {
          try {
            await hub.acquire([p.topic]);
          } catch (e) {
            throw subscribeError(e);
          }
          if (s.shed) {
            // No events go to this thread until it has caught up: a topic taken now would miss some.
            hub.release(p.topic);
            throw new GatewayError(Code.UNAVAILABLE, "this gateway thread is behind the event stream; subscribe again shortly");
          }
          // The thread is gone, or holds the topic already (it asks once per topic): give the reference back.
          if (s.worker !== worker || s.state === "exited" || held.has(p.topic)) {
            hub.release(p.topic);
            if (s.worker !== worker || s.state === "exited") throw new GatewayError(Code.UNAVAILABLE, "the worker thread is gone");
          }
          held.add(p.topic);
          // Synchronously after the reference is taken: every later event of the topic follows this reply on the port.
          return hub.snapshot(p.topic);
        },
        "web.release": async (p: { topic: string }) => {
          if (held.delete(p.topic)) hub.release(p.topic);
        },
        "backend.schema": (p: { service: string; fresh: boolean }, signal) => deps.schemas.get(p.service, p.fresh, signal),
      },
      { timeoutMs: BRIDGE_TIMEOUT_MS, maxPending: BRIDGE_MAX_PENDING, peer: `uWS worker thread ${index}` },
    );
    const bridge = s.bridge;
    return new Promise<Slot>((resolve, reject) => {
      let started = false;
      const timer = setTimeout(() => fail(new GatewayError(Code.UNAVAILABLE, `uWS worker thread ${index} did not start within ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS);
      const fail = (e: GatewayError): void => {
        if (started) return;
        started = true;
        clearTimeout(timer);
        reject(e);
      };
      worker.on("message", (m: unknown) => {
        if (bridge.receive(m)) return;
        const msg = m as ThreadMessage;
        if (msg.t === "ack") {
          if (s.worker !== worker) return;
          s.acked = msg.n;
          if (s.shed && s.posted - s.acked <= maxBacklog / 2) s.shed = false;
        } else if (msg.t === "log") deps.logSink.write(msg.line);
        else if (msg.t === "ready") {
          if (started) return;
          started = true;
          if (served.length === 0) served.push(...msg.routes);
          clearTimeout(timer);
          s.state = closing ? "closing" : "running";
          resolve(s);
        } else if (msg.t === "failed") fail(new GatewayError(msg.code === Code.UNAVAILABLE || msg.code === Code.INVALID_ARGUMENT ? msg.code : Code.UNAVAILABLE, `uWS worker thread ${index}: ${msg.message}`));
      });
      worker.on("error", (err) => {
        lastError = err.message;
        logger.error({ thread: index, err }, "uWS worker thread error");
      });
      s.exited = new Promise<void>((done) => {
        worker.once("exit", (code) => {
          const was = s.state;
          s.state = "exited";
          bridge.close(`uWS worker thread ${index} exited`);
          // Its conversion workers ended with it: their slots are the process's again.
          reclaimSlots(deps.conversionSlots, index);
          for (const t of held) hub.release(t);
          held.clear();
          fail(new GatewayError(Code.UNAVAILABLE, `uWS worker thread ${index} exited with code ${code} while starting${lastError ? `: ${lastError}` : ""}`));
          done();
          if (was === "running" && !closing && s.worker === worker) restart(s, code);
        });
      });
    });
  }

  function restart(s: Slot, code: number): void {
    const now = Date.now();
    s.crashes = s.crashes.filter((t) => now - t < 60_000).concat(now);
    const delay = Math.min(RESTART_DELAY_MS * 2 ** (s.crashes.length - 1), RESTART_DELAY_MAX_MS);
    logger.error({ thread: s.index, exitCode: code, restartInMs: delay }, "uWS worker thread exited unexpectedly; starting it again");
    setTimeout(() => {
      if (closing) return;
      spawn(s, s.index).then(
        () => logger.info({ thread: s.index }, "uWS worker thread started again"),
        (e: unknown) => {
          logger.error({ thread: s.index, err: GatewayError.from(e).rawMessage }, "uWS worker thread could not start again");
          if (!closing && s.state === "exited") restart(s, -1);
        },
      );
    }, delay).unref();
  }

  /**
   * The process is exiting (process.exit anywhere: right after destroy(), a second signal, a fatal error, or the loop
   * ran dry with a thread left behind): Node stops the threads next, and aborts if one still has uWS sockets open.
   * An `exit` handler cannot wait for events, so it asks each thread still alive to close its sockets at once and
   * waits on the thread's shared flag (Atomics.wait: the thread runs on its own loop meanwhile), bounded.
   */
  const onProcessExit = (): void => {
    const open = made.filter((s) => s.state !== "exited" && Atomics.load(s.closedFlag, 0) === 0);
    for (const s of open) s.worker.postMessage({ t: "exit" } satisfies ThreadMessage);
    const until = Date.now() + EXIT_CLOSE_MS;
    for (const s of open) {
      if (Atomics.wait(s.closedFlag, 0, 0, Math.max(0, until - Date.now())) === "timed-out") {
        logger.error({ thread: s.index }, `uWS worker thread did not close its sockets within ${EXIT_CLOSE_MS} ms of the process exiting`);
      }
    }
  };
  process.on("exit", onProcessExit);
  /** Once every thread has exited there is nothing left for the handler to do (a left-behind thread keeps it). */
  const releaseExitHook = (): void => {
    if (made.every((s) => s.state === "exited")) process.off("exit", onProcessExit);
  };

  // A backend's schema changed on the main thread: every thread, a starting one too, takes it (messages keep their order
  // on a port, so one that asked for the schema meanwhile gets the reply first, then this).
  deps.schemas.onChange((service, schema) => {
    for (const s of made) if (s.state !== "exited") s.worker.postMessage({ t: "schema", service, schema } satisfies ThreadMessage);
  });

  const starting = Array.from({ length: deps.count }, (_, i) => spawn(undefined, i + 1));
  const results = await Promise.allSettled(starting);
  for (const r of results) if (r.status === "fulfilled") slots.push(r.value);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    closing = true;
    await Promise.all(slots.map((s) => closeSlot(s, 0)));
    releaseExitHook();
    throw GatewayError.from(failed.reason, Code.UNAVAILABLE);
  }

  async function closeSlot(s: Slot, ms: number): Promise<void> {
    if (s.state === "exited") return;
    s.state = "closing";
    s.bridge.call("close", { ms }).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([s.exited.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), ms + EXIT_GRACE_MS)))]);
    clearTimeout(timer);
    if (late) {
      // terminate() would abort the whole process (uWS sockets open on the thread's loop): leave it behind instead;
      // the process's exit handler still asks it to close its sockets before Node stops it.
      logger.error({ thread: s.index }, "uWS worker thread did not exit within the shutdown bound; leaving it behind");
      s.worker.unref();
    }
  }

  let closed: Promise<void> | undefined;
  let turn = 0;
  return {
    invoke(wire, signal, timeoutMs) {
      let best: Slot | undefined;
      const n = slots.length;
      if (n === 0) return undefined;
      turn = (turn + 1) % n;
      for (let i = 0; i < n; i++) {
        const s = slots[(turn + i) % n]!;
        if (s.state === "running" && (!best || s.bridge.pending < best.bridge.pending)) best = s;
      }
      return best?.bridge.call<InvokeResult>("dispatch.invoke", wire, signal, timeoutMs);
    },
    port,
    count: deps.count,
    routes: served,
    running: () => slots.filter((s) => s.state === "running").length,
    async health() {
      const up = slots.filter((s) => s.state === "running");
      const entries: Record<string, HealthEntry> = {
        "uws-threads": {
          status: up.length === deps.count ? "Healthy" : up.length > 0 ? "Degraded" : "Unhealthy",
          description: `${up.length} of ${deps.count} uWS worker threads serving HTTP on port ${port}`,
        },
      };
      await Promise.all(
        up.map(async (s) => {
          const d = await s.bridge.call<string>("stats", {}).catch((e: unknown) => `no answer: ${GatewayError.from(e).rawMessage}`);
          entries[`uws-thread-${s.index}`] = { status: "Healthy", description: d };
        }),
      );
      return entries;
    },
    async metrics() {
      const main = await deps.metrics.registry.getMetricsAsJSON();
      const threads = await Promise.all(
        slots.filter((s) => s.state === "running").map((s) => s.bridge.call<MetricObjectWithValues<MetricValue<string>>[]>("metrics", {}).catch(() => undefined)),
      );
      const agg = AggregatorRegistry.aggregate([main, ...threads.filter((t) => t !== undefined)] as never);
      let text = await agg.metrics();
      // Series the aggregator leaves out (e.g. process_start_time_seconds, 'omit' for a cluster) are the main thread's own.
      for (const m of main) if (!agg.getSingleMetric(m.name)) text += await deps.metrics.registry.getSingleMetricAsString(m.name) + "\n";
      return text;
    },
    close(ms) {
      return (closed ??= (async () => {
        closing = true;
        await Promise.all(slots.map((s) => closeSlot(s, ms)));
        releaseExitHook();
      })());
    },
    async destroy() {
      closing = true;
      await Promise.all(slots.map((s) => closeSlot(s, 0)));
      releaseExitHook();
    },
    crash(index) {
      slots.find((s) => s.index === index)?.worker.postMessage({ t: "crash" } satisfies ThreadMessage);
    },
  };
}
