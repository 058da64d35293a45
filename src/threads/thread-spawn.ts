import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { backoffDelay, type BackoffPolicy } from "../shared/backoff.js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { Logger } from "../observe/logger.js";
import { createBridge, type Bridge, type BridgeHandler } from "./bridge.js";
import type { EventStream, ThreadEvents } from "./thread-events.js";
import { BRIDGE_MAX_PENDING, BRIDGE_TIMEOUT_MS, type EventClock, type ThreadData, type ThreadMessage } from "./protocol.js";

/** How long one thread may take to start (load the code, read the config, listen), ms. */
const STARTUP_TIMEOUT_MS = 60_000;
/** Past the shutdown bound, how long a thread still gets to exit before it is left behind (unref'd), ms. */
const EXIT_GRACE_MS = 2_000;
/** A thread that crashes is restarted after 100 ms, doubled per crash in the last minute, up to 5 s. */
const RESTART_BACKOFF: BackoffPolicy = { initialDelayMs: 100, maxDelayMs: 5_000, multiplier: 2, jitter: 0 };
/**
 * How long the process's `exit` handler waits, in all, for the threads still running to close their uWS sockets, ms.
 * A thread answers within one turn of its loop; only a thread stuck in synchronous code takes it all.
 */
const EXIT_CLOSE_MS = 1_000;

/** One thread index: the current worker, its bridge and event stream (both new per worker), its crash record. */
export interface Slot {
  readonly index: number;
  worker: Worker;
  bridge: Bridge;
  stream: EventStream;
  state: "starting" | "running" | "closing" | "exited";
  exited: Promise<void>;
  /** The current worker's ThreadData.closedFlag: 1 once it has no uWS socket open. */
  closedFlag: Int32Array;
  crashes: number[];
}

/** Options of createThreadSpawner. */
export interface ThreadSpawnerOptions {
  logger: Logger;
  /** Where the threads' log lines are written. */
  logSink: NodeJS.WritableStream;
  /** The workerData of thread `index`. */
  data(index: number, closedFlag: Int32Array, clock: EventClock): ThreadData;
  events: ThreadEvents;
  /** What the main thread answers on every thread's bridge besides the event stream's acquire/release. */
  handlers: Record<string, BridgeHandler>;
  /** The routes the first thread to become ready reported. */
  onReady(routes: readonly string[]): void;
  /** Thread `index` exited (crashed, or closed). */
  onExit?(index: number): void;
}

/** Starting, restarting and stopping the threads. */
export interface ThreadSpawner {
  /** Start thread `index`; rejects with UNAVAILABLE when it cannot start. */
  start(index: number): Promise<Slot>;
  /** Gracefully close one thread, waiting up to `ms` plus a grace for it to exit (then it is left behind). */
  closeSlot(s: Slot, ms: number): Promise<void>;
  /** The gateway is closing: no thread is started again, a thread starting now closes once it listens. */
  closing(): void;
  /** Drop the process `exit` hook once every thread made has exited. */
  releaseExitHook(): void;  /** Post a message to every thread not exited, a starting one too. */
  post(message: ThreadMessage): void;
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

/**
 * Spawning the uWS worker threads: each gets a bridge (the main thread's handlers plus its event stream's), its log
 * lines are written to the main sink, and a thread that exits unexpectedly is logged and started again with a growing
 * delay while it keeps crashing. The process `exit` hook makes every thread still alive close its sockets first.
 */
export function createThreadSpawner(options: ThreadSpawnerOptions): ThreadSpawner {
  const { logger, events } = options;
  let closing = false;
  /** Every slot made, the ones still starting included. */
  const made: Slot[] = [];

  function spawn(slot: Slot | undefined, index: number): Promise<Slot> {
    const entry = threadEntry();
    const closedFlag = new Int32Array(new SharedArrayBuffer(4));
    let worker: Worker | undefined;
    const stream = events.open(index, (m) => worker!.postMessage(m));
    const workerData = options.data(index, closedFlag, stream.clock);
    worker = entry.tsxApi
      ? new Worker(`import(${JSON.stringify(entry.tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(entry.filename).href)}); })`, {
          eval: true,
          workerData,
        })
      : new Worker(entry.filename, { workerData });
    const w = worker;
    let lastError: string | undefined;
    const bridge = createBridge(w, { ...options.handlers, ...events.handlers(stream) }, { timeoutMs: BRIDGE_TIMEOUT_MS, maxPending: BRIDGE_MAX_PENDING, peer: `uWS worker thread ${index}` });
    const s: Slot = slot ?? { index, worker: w, bridge, stream, state: "starting", exited: Promise.resolve(), closedFlag, crashes: [] };
    if (!slot) made.push(s);
    s.worker = w;
    s.bridge = bridge;
    s.stream = stream;
    s.closedFlag = closedFlag;
    s.state = "starting";
    return new Promise<Slot>((resolve, reject) => {
      let started = false;
      const timer = setTimeout(() => fail(new GatewayError(Code.UNAVAILABLE, `uWS worker thread ${index} did not start within ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS);
      const fail = (e: GatewayError): void => {
        if (started) return;
        started = true;
        clearTimeout(timer);
        reject(e);
      };
      w.on("message", (m: unknown) => {
        if (bridge.receive(m)) return;
        const msg = m as ThreadMessage;
        if (msg.t === "ack") events.ack(stream, msg.n);
        else if (msg.t === "log") options.logSink.write(msg.line);
        else if (msg.t === "ready") {
          if (started) return;
          started = true;
          options.onReady(msg.routes);
          clearTimeout(timer);
          s.state = closing ? "closing" : "running";
          resolve(s);
        } else if (msg.t === "failed") fail(new GatewayError(msg.code === Code.UNAVAILABLE || msg.code === Code.INVALID_ARGUMENT ? msg.code : Code.UNAVAILABLE, `uWS worker thread ${index}: ${msg.message}`));
      });
      w.on("error", (err) => {
        lastError = err.message;
        logger.error({ thread: index, err }, "uWS worker thread error");
      });
      s.exited = new Promise<void>((done) => {
        w.once("exit", (code) => {
          const was = s.state;
          s.state = "exited";
          bridge.close(`uWS worker thread ${index} exited`);
          events.close(stream);
          options.onExit?.(index);
          fail(new GatewayError(Code.UNAVAILABLE, `uWS worker thread ${index} exited with code ${code} while starting${lastError ? `: ${lastError}` : ""}`));
          done();
          if (was === "running" && !closing && s.worker === w) restart(s, code);
        });
      });
    });
  }

  function restart(s: Slot, code: number): void {
    const now = Date.now();
    s.crashes = s.crashes.filter((t) => now - t < 60_000).concat(now);
    const delay = backoffDelay(RESTART_BACKOFF, s.crashes.length - 1);
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

  return {
    start: (index) => spawn(undefined, index),
    async closeSlot(s, ms) {
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
    },
    closing() {
      closing = true;
    },
    releaseExitHook() {
      // Once every thread has exited there is nothing left for the handler to do (a left-behind thread keeps it).
      if (made.every((s) => s.state === "exited")) process.off("exit", onProcessExit);
    },
    post(message) {
      for (const s of made) if (s.state !== "exited") s.worker.postMessage(message);
    },
  };
}
