/**
 * The entry of one uWS worker thread (`--threads` > 1): a uWS app on the gateway's HTTP port (the kernel spreads
 * connections over every thread listening on it) serving every REST route, WebSocket and SSE. Invoke runs here, with
 * this thread's own backend connections and converter (its workers within the process's one bound) and the schemas the
 * main thread reflected; pub/sub fan-out runs here for this thread's own
 * subscribers; everything single-owner (state, publish, triggers, health, metrics) is asked of the main thread over
 * the bridge. Started by uws-threads.ts; not meant to be run on its own.
 */
import { Writable } from "node:stream";
import { parentPort, workerData } from "node:worker_threads";
import type { EndReason } from "../broker/index.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { Runtime } from "../runtime/runtime.js";
import { createAuthenticator } from "../ops/auth.js";
import { consoleRoutes } from "../console/index.js";
import type { GatewayContext } from "../ops/context.js";
import { createDispatchFacility } from "../facilities/dispatch.js";
import { createLogger, type Logger } from "../observe/logger.js";
import { createMetrics } from "../observe/metrics.js";
import { createConfigOps } from "../ops/config.js";
import { invokeFromWire, type InvokeWire } from "../ops/dispatch.js";
import type { PubsubOps } from "../ops/pubsub.js";
import type { ReflectionResult } from "../backends/reflection-client.js";
import { slotsOfPool } from "../workers/worker-slots.js";
import type { Status } from "../shared/status.js";
import { loadRegistry, tracerOptions, validateGatewayOptions, type GatewayOptions } from "../config/options.js";
import { createTracer } from "../observe/tracing.js";
import { settleWithin } from "../shared/timers.js";
import { configRoutes } from "../rest/config.js";
import { isNativeUws, startRestServer, type RestReply, type RestServer, type Route, type WarmingServer } from "../http/router.js";
import { gatewayServerDeps } from "../http/server-deps.js";
import type { EventWire } from "../web/hub.js";
import { createWebPubsub } from "../web/index.js";
import { BRIDGE_MAX_PENDING, BRIDGE_TIMEOUT_MS, type RouteSpec, type RouteWire, type ThreadData, type ThreadMessage, type ReplyWire } from "./protocol.js";
import { createBridge, withTransfer } from "./bridge.js";
import { ownBuffer } from "../http/free-buffer.js";
import { threadUpstream } from "./thread-upstream.js";
import { ownWarmup, ownWarmupKey, restInvokes, warmUpThread } from "./warmup.js";
import { ClosingFlag } from "./closing-flag.js";

const data = workerData as ThreadData;
/** Bounds on flushing this thread's queued spans when it closes, ms. */
const TRACE_FLUSH_MIN_MS = 500;
const TRACE_FLUSH_MAX_MS = 2000;
const port = parentPort!;

/** This thread's uWS app once listening. Node aborts the process when a thread's loop closes with its sockets open. */
let rest: RestServer | undefined;
/** The private warm-up's uWS app while it is open (warmup.ts `warmUpThread`). */
let warmingPrivate: RestServer | undefined;
/** This thread's uWS app while it warms up on its loopback port, before it listens (warmup.ts `ownWarmup`). */
let warming: WarmingServer | undefined;
/** Set once this thread (or the process) is going away: nothing may start listening after it. */
let exiting = false;
/**
 * Close every uWS socket now (listen socket, HTTP, WebSocket, SSE; in-flight handlers see the abort) and set the
 * shared flag the main thread's `exit` handler may be waiting on. Every way out of this thread goes through here.
 */
function closeSockets(): void {
  exiting = true;
  warmingPrivate?.closeAll();
  warming?.closeAll();
  rest?.closeAll();
  Atomics.store(data.closedFlag, 0, 1);
  Atomics.notify(data.closedFlag, 0);
}

/** Log lines go to the main thread, which writes them where its own go (one stream, one order per thread). */
function threadLogger(level: GatewayOptions["logLevel"]): Logger {
  const sink = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      port.postMessage({ t: "log", line: chunk.toString() } satisfies ThreadMessage);
      cb();
    },
  });
  return createLogger(level ?? "info", sink).child({ thread: data.index });
}

/** The runtime is the main thread's alone: nothing on a worker thread may reach it. */
const NO_RUNTIME = new Proxy({} as Runtime, {
  get(_t, prop) {
    throw new GatewayError(Code.INTERNAL, `the sidecar runtime (${String(prop)}) is owned by the main thread`);
  },
});

async function main(): Promise<void> {
  const logger = threadLogger(data.options.logLevel);
  // A thread that dies with uWS sockets open takes the process down (Node aborts on the open handles): close them
  // first, then exit non-zero so the main thread logs it and starts a new thread.
  const die = (what: string, err: unknown): void => {
    logger.fatal({ err }, `uWS worker thread failed (${what}); closing its connections and exiting`);
    closeSockets();
    setImmediate(() => process.exit(1));
  };
  process.on("uncaughtException", (err) => die("uncaught exception", err));
  process.on("unhandledRejection", (err) => die("unhandled rejection", err));

  if (!isNativeUws()) {
    logger.error({}, "uWebSockets.js native binary did not load: REST runs on the slow JS fallback; do not benchmark this process");
  }
  const opts = validateGatewayOptions(data.options);
  // Until the handler below is on, every message is kept for it (it takes them in order before any later one); an
  // `exit` is acted on at once (a warm-up's socket may be open).
  const early: unknown[] = [];
  const onEarly = (m: unknown): void => {
    if ((m as ThreadMessage).t === "exit") closeSockets();
    early.push(m);
  };
  port.on("message", onEarly);
  // The first half of the warm-up, through two private facilities, before this thread makes any closure of its own:
  // V8's feedback then names the closures' shared code, which holds for this thread's own (as after the main thread's
  // two private gateways). The second half goes through this thread's own server (`warmUp` below).
  if (data.warmup && !exiting) {
    const t0 = performance.now();
    try {
      const calls = await warmUpThread(data.warmup, opts, { slots: slotsOfPool(data.conversionSlots, data.index), logger: threadLogger("error"), runtime: NO_RUNTIME, track: (s) => (warmingPrivate = s) });
      logger.info({ calls, ms: Math.round(performance.now() - t0) }, "thread warmed up");
    } catch (e) {
      logger.warn({ err: GatewayError.from(e).rawMessage }, "thread warm-up failed: starting cold");
    }
  }
  const services = await loadRegistry(opts);
  // No process metrics (the main thread reports the process once) and no OTLP export (the main thread's exporter is
  // the process's); this registry is read by the main thread's /metrics.
  const metrics = createMetrics({ processMetrics: false, otlpEndpoint: "" });
  // Spans of the invocations this thread runs go out through its own exporter: handing every span to the main thread
  // would add a bridge message per span and a second queue, where a thread's batch exporter needs neither.
  const tracer = createTracer({ ...tracerOptions(opts), resource: { "gateway.thread": data.index }, logger });
  const flag = new ClosingFlag();
  const ctx: GatewayContext = { options: opts, services, runtime: NO_RUNTIME, logger, metrics, tracer, isClosing: flag.isClosing };
  const auth = createAuthenticator(opts.apiKeys);

  let onClose: ((ms: number) => Promise<void>) | undefined;
  /** A `close` that came while this thread was still starting (a restart racing the gateway's close): when to stop by. */
  let closeBy: number | undefined;
  let web: ReturnType<typeof createWebPubsub>;
  const bridge = createBridge(
    port,
    {
      metrics: async () => metrics.registry.getMetricsAsJSON(),
      stats: async () => web.health()["web-pubsub"]?.description ?? "",
      close: async (p: { ms: number }) => {
        if (onClose) return onClose(p.ms);
        closeBy = Math.min(closeBy ?? Infinity, Date.now() + p.ms);
      },
      // gRPC Invoke/InvokeJson from the main thread: the same op as REST invoke here, on this thread's channels.
      "dispatch.invoke": (p: InvokeWire, signal) => dispatch.ops.invoke(invokeFromWire(p, signal)),
    },
    { timeoutMs: BRIDGE_TIMEOUT_MS, maxPending: BRIDGE_MAX_PENDING, peer: "the main thread" },
  );

  const pubsubOps: PubsubOps = {
    // The trace context crosses with the event: the main thread opens the publish spans under it.
    tracing: tracer.on,
    publish: (topic, event, signal, trace) => bridge.call<Status>("pubsub.publish", trace ? { topic, event, trace } : { topic, event }, signal),
    unsubscribe: () => {
      throw new GatewayError(Code.INTERNAL, "unsubscribe is served by the main thread");
    },
  };
  // The same hub as on the main thread, its topics followed on the main hub over the bridge.
  const upstream = threadUpstream({ scheme: data.positions, bridge, clock: data.clock });
  web = createWebPubsub(ctx, upstream, pubsubOps, auth);
  // One conversion bound for the process; backend schemas from the main thread's reflection (and its pushes below).
  const dispatch = createDispatchFacility(ctx, {
    slots: slotsOfPool(data.conversionSlots, data.index),
    schemaSource: (service, fresh, signal, stale) => bridge.call<ReflectionResult>("backend.schema", { service, fresh, ...(stale !== undefined ? { stale } : {}) }, signal),
    ownGrpcPort: () => opts.grpcPort,
  });
  const local: Route[] = [...configRoutes(createConfigOps(services)), ...(dispatch.routes ?? []), ...web.routes, ...consoleRoutes()];
  const localKeys = new Set(local.map((r) => `${r.method} ${r.path}`));
  const bridged = data.routes.filter((r) => !localKeys.has(`${r.method} ${r.path}`)).map((spec): Route => bridgedRoute(spec));

  function bridgedRoute(spec: RouteSpec): Route {
    return {
      method: spec.method,
      path: spec.path,
      auth: spec.auth,
      handler: async (req): Promise<RestReply> => {
        const wire: RouteWire = { method: spec.method, path: spec.path, url: req.path, params: req.params, query: req.query.toString(), headers: req.headers, body: req.body };
        // The request body is this request's own (router.ts copies it out of uWS): hand it over rather than copy it.
        const owned = ownBuffer(req.body);
        const r = await bridge.call<ReplyWire>("route", owned ? withTransfer(wire, [owned]) : wire, req.signal);
        // The body arrived in a message of its own (moved or copied): this reply owns it.
        return { status: r.status, raw: r.raw, rawOwned: true, contentType: r.contentType, headers: r.headers };
      },
    };
  }

  let ackScheduled = false;
  const onMessage = (m: unknown): void => {
    if (bridge.receive(m)) return;
    const msg = m as ThreadMessage;
    if (msg.t === "ev" || msg.t === "end") {
      if (msg.t === "ev") upstream.event(msg.e as EventWire);
      else upstream.end(msg.topic, msg.reason as EndReason);
      if (!ackScheduled) {
        // One ack per loop turn, after the burst of events the port delivered in it.
        ackScheduled = true;
        setImmediate(() => {
          ackScheduled = false;
          port.postMessage({ t: "ack", n: upstream.handled() } satisfies ThreadMessage);
        });
      }
    }
    else if (msg.t === "schema") dispatch.schemas.adopt(msg.service, msg.schema as ReflectionResult);
    else if (msg.t === "exit") {
      // The main thread is in its `exit` handler, blocked until we are closed: no drain, no reply, just close.
      closeSockets();
      try {
        dispatch.destroy?.();
      } catch {
        // The process is exiting: the backend connections go with it.
      }
    }
    else if (msg.t === "crash") {
      // Diagnostics: an uncaught error on this thread, to exercise the crash path end to end.
      setTimeout(() => {
        throw new Error("crash requested by the main thread");
      });
    }
  };
  port.off("message", onEarly);
  port.on("message", onMessage);
  for (const m of early.splice(0)) onMessage(m);

  // Checked right before the server is made (it listens synchronously, or after its warm-up, whose end checks again):
  // once the process is exiting, a thread still starting must not open a socket the exit would find.
  if (exiting) throw new GatewayError(Code.UNAVAILABLE, "the process is exiting");
  dispatch.transcoding.reserve([...local, ...bridged]);
  const warmup = data.warmup;
  /** REST invokes of the echo backend through this very app on its loopback port, before it listens on the gateway's. */
  const warmUp = async (w: WarmingServer): Promise<void> => {
    const t0 = performance.now();
    warming = w;
    try {
      await ownWarmup({ dispatch, metrics, tracer }, warmup!.echoPort, () => restInvokes(w.port, ownWarmupKey(opts.apiKeys), warmup!.calls));
      logger.info({ calls: warmup!.calls, ms: Math.round(performance.now() - t0) }, "thread warmed up through its own port");
    } catch (e) {
      logger.warn({ err: GatewayError.from(e).rawMessage }, "thread warm-up through its own port failed: starting cold");
    } finally {
      warming = undefined;
      // An exit that came as the warm-up ended: the app closes here and does not listen.
      if (exiting) w.closeAll();
    }
  };
  rest = await startRestServer(opts.host, opts.httpPort, [...local, ...bridged], {
    ...gatewayServerDeps(opts, { auth, logger, metrics, isClosing: flag.isClosing, appHooks: [...(dispatch.appHooks ?? []), (app) => web.mount(app)], dynamic: dispatch.transcoding.routes }),
    ...(warmup && !opts.tls ? { beforeListen: warmUp } : {}),
  });
  await dispatch.start?.();

  let closed: Promise<void> | undefined;
  /** When the drain gives up; a later close with a shorter bound (the process is exiting) brings it forward. */
  let deadline = Infinity;
  onClose = (ms) => {
    deadline = Math.min(deadline, Date.now() + ms);
    return (closed ??= (async () => {
      flag.closing = true;
      rest!.stopListening();
      web.close();
      let drained = false;
      void (dispatch.close?.() ?? Promise.resolve()).finally(() => (drained = true));
      while ((!drained || rest!.inflight > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      rest!.closeInflight();
      dispatch.destroy?.();
      closeSockets();
      // Queued spans are flushed, bounded: the main thread waits a little past the drain bound for this thread to exit.
      await settleWithin(tracer.close(), Math.min(Math.max(deadline - Date.now(), TRACE_FLUSH_MIN_MS), TRACE_FLUSH_MAX_MS));
      bridge.close("the worker thread is shutting down");
      // Exit once the reply to `close` is out: nothing of uWS is left open, and channels or timers must not hold us.
      setImmediate(() => process.exit(0));
    })());
  };

  port.postMessage({ t: "ready", port: rest.port, routes: [...rest.routes] } satisfies ThreadMessage);
  if (exiting) closeSockets();
  else if (closeBy !== undefined) void onClose(Math.max(0, closeBy - Date.now()));
}

main().catch((e: unknown) => {
  // Startup failed after listening (e.g. in dispatch.start): the socket must be closed before the thread exits.
  closeSockets();
  const err = GatewayError.from(e);
  port.postMessage({ t: "failed", code: err.code, message: err.rawMessage } satisfies ThreadMessage);
  setImmediate(() => process.exit(1));
});

