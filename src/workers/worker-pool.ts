/**
 * A bounded front queue over piscina workers. At most `threads` tasks are handed to workers at once, so waiting tasks
 * stay here where they can be counted (the bound: RESOURCE_EXHAUSTED past `maxQueue`) and cancelled (an aborted
 * waiting task is removed without ever reaching a worker). A task already running is not interrupted by an abort:
 * piscina would terminate the whole worker, which costs a 40-50 ms restart to save a few ms of conversion; its
 * result is dropped instead. Each worker holds one of the process's worker slots (worker-slots.ts), taken when the
 * worker starts and given back when it has exited: idle for IDLE_WORKER_MS, or idle (or beyond its pool's fair share)
 * while another pool of the process waits for a slot. Main-thread side (the main thread's or a uWS thread's);
 * failures are GatewayErrors.
 */
import { Piscina } from "piscina";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { onAbort, type CancelSignal } from "../shared/signals.js";
import { errorText } from "./schema-registry.js";
import { workerEntry } from "./worker-path.js";
import type { ConvertTask, CrashTask, WorkerOptions, WorkerResult } from "./worker-protocol.js";
import { createWorkerSlots, giveSlot, markWanting, slotFreed, slotsWanted, slotWanted, takeSlot, type WorkerSlots } from "./worker-slots.js";

/** Options of ConversionPool (validated by the converter). */
export interface ConversionPoolOptions {
  /** Most workers this pool runs at once. */
  readonly threads: number;
  /** The process's worker slots, shared with its other pools. Default: slots of this pool's own, `threads` of them. */
  readonly slots?: WorkerSlots;
  /** Tasks that may wait for a free worker. */
  readonly maxQueue: number;
  /** Compiled schemas kept per worker. Default 64. */
  readonly schemaCacheSize?: number;
  /** Honour CrashTask (tests only). Default false. */
  readonly crashHook?: boolean;
  /** An idle worker stops after this long, ms; at once when another pool of the process is waiting for a slot. Default IDLE_WORKER_MS. */
  readonly idleMs?: number;
}

/**
 * How long an idle worker is kept, ms: a burst of large payloads pays the worker start (40-50 ms, and the schema
 * sent and compiled again) once, while a thread that stopped converting gives its slots back for the others.
 */
export const IDLE_WORKER_MS = 30_000;

/** The results a convert task can resolve to (a worker-side codec failure is a result, not a rejection). */
export type ConvertResult = Exclude<WorkerResult, { kind: "missing-schema" }>;

interface Entry {
  readonly task: ConvertTask | CrashTask;
  readonly files: readonly Uint8Array[];
  readonly resolve: (r: ConvertResult) => void;
  readonly reject: (e: GatewayError) => void;
  /** Stops listening to `signal` (set while the entry waits in the queue). */
  unlisten?: () => void;
  /** Told how long the entry waited for a worker (tracing); `queuedAt` is when it arrived, performance.now(). */
  readonly report?: { queuedMs: number } | undefined;
  readonly queuedAt?: number;
}

/** One worker: a piscina of exactly one thread, so the pool can stop a single worker and give its slot back. */
interface Lane {
  readonly piscina: Piscina;
  busy: boolean;
  idleTimer: NodeJS.Timeout | undefined;
}

/** Runs conversions on worker threads; see the module comment. */
export class ConversionPool {
  private readonly lanes: Lane[] = [];
  /** Lanes stopping: their slot is given back once the worker has exited. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly waiting: Entry[] = [];
  private readonly slots: WorkerSlots;
  private running = 0;
  /** This pool counts itself in the process's `wanted` cell (tasks waiting, no slot to run them on). */
  private wanting = false;
  private watching = false;
  private closing: Promise<void> | undefined;
  private destroyed = false;
  private drained: (() => void) | undefined;

  constructor(private readonly options: ConversionPoolOptions) {
    this.slots = options.slots ?? createWorkerSlots(options.threads);
  }

  /** Tasks waiting for a worker. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Tasks on a worker now. */
  get active(): number {
    return this.running;
  }

  /** Workers of this pool alive or starting (each holds one of the process's slots). */
  get workers(): number {
    return this.lanes.length + this.retiring.size;
  }

  /**
   * Convert on a worker. `files` are the schema's descriptors, sent only if the worker lacks `task.schemaId`.
   * Rejects GatewayError RESOURCE_EXHAUSTED (queue full), CANCELLED (aborted while waiting), UNAVAILABLE (closed),
   * INTERNAL (the worker died during the task; the pool starts a new one).
   */
  run(task: ConvertTask | CrashTask, files: readonly Uint8Array[], signal?: CancelSignal, report?: { queuedMs: number }): Promise<ConvertResult> {
    if (this.closing !== undefined || this.destroyed) {
      return Promise.reject(new GatewayError(Code.UNAVAILABLE, "the conversion pool is closed"));
    }
    if (signal?.aborted === true) return Promise.reject(new GatewayError(Code.CANCELLED, "the conversion was cancelled"));
    return new Promise<ConvertResult>((resolve, reject) => {
      const entry: Entry = report ? { task, files, resolve, reject, report, queuedAt: performance.now() } : { task, files, resolve, reject };
      const lane = this.waiting.length === 0 ? this.freeLane() : undefined;
      if (lane) {
        this.dispatch(lane, entry);
        return;
      }
      if (this.waiting.length >= this.options.maxQueue) {
        reject(
          new GatewayError(Code.RESOURCE_EXHAUSTED,
            `the conversion queue is full (${this.options.maxQueue} waiting, ${this.running} running); retry later`,
          ),
        );
        return;
      }
      // Queued first: the signal is not aborted (checked above), so the listener only ever runs on a queued entry.
      this.waiting.push(entry);
      if (signal !== undefined) {
        entry.unlisten = onAbort(signal, () => {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) {
            this.waiting.splice(i, 1);
            reject(new GatewayError(Code.CANCELLED, "the conversion was cancelled while queued"));
            if (this.waiting.length === 0) this.unwant();
            this.checkDrained();
          }
        });
      }
      this.want();
    });
  }

  /** An idle worker, or a new one when this pool's bound and the process's slots allow. */
  private freeLane(): Lane | undefined {
    const idle = this.lanes.find((l) => !l.busy);
    if (idle) return idle;
    if (this.lanes.length >= this.options.threads || !takeSlot(this.slots)) return undefined;
    const entry = workerEntry();
    const workerData: WorkerOptions = {
      schemaCacheSize: this.options.schemaCacheSize ?? 64,
      crashHook: this.options.crashHook === true,
    };
    // Started when a task needs it, never at startup: a thread that never sees a large payload starts no worker.
    const piscina = new Piscina({
      filename: entry.filename,
      ...(entry.execArgv !== undefined ? { execArgv: entry.execArgv } : {}),
      minThreads: 1,
      maxThreads: 1,
      concurrentTasksPerWorker: 1,
      workerData,
    });
    // A worker that dies rejects its own task (piscina starts its replacement); keep the error off the process.
    piscina.on("error", () => undefined);
    const lane: Lane = { piscina, busy: false, idleTimer: undefined };
    this.lanes.push(lane);
    return lane;
  }

  /**
   * The least this pool keeps while others wait for a slot: its fair share of the process's bound, rounded up (so
   * pools at their share never hand a worker back and forth, each restart costing 40-50 ms).
   */
  private fairShare(): number {
    return Math.ceil(this.slots.bound / this.slots.shares);
  }

  private othersWant(): boolean {
    return slotsWanted(this.slots) - (this.wanting ? 1 : 0) > 0;
  }

  private dispatch(lane: Lane, entry: Entry): void {
    lane.busy = true;
    clearTimeout(lane.idleTimer);
    this.running++;
    entry.unlisten?.();
    if (entry.report) entry.report.queuedMs = performance.now() - entry.queuedAt!;
    void this.execute(lane, entry).finally(() => {
      this.running--;
      lane.busy = false;
      if (this.destroyed) return;
      if (this.othersWant() && this.lanes.length > this.fairShare()) this.retire(lane);
      this.pump();
      if (!lane.busy && this.lanes.includes(lane)) this.idle(lane);
    });
  }

  private async execute(lane: Lane, entry: Entry): Promise<void> {
    try {
      const pool = lane.piscina;
      let result = (await pool.run(entry.task)) as WorkerResult;
      if (result.kind === "missing-schema" && entry.task.kind === "convert") {
        result = (await pool.run({ ...entry.task, files: entry.files })) as WorkerResult;
      }
      if (result.kind === "missing-schema") throw new Error("the worker did not accept the schema");
      entry.resolve(result);
    } catch (e) {
      entry.reject(
        this.destroyed
          ? new GatewayError(Code.UNAVAILABLE, "the conversion pool was destroyed")
          : new GatewayError(Code.INTERNAL, `the conversion worker failed: ${errorText(e)}`),
      );
    }
  }

  private pump(): void {
    while (this.waiting.length > 0) {
      const lane = this.freeLane();
      if (!lane) break;
      this.dispatch(lane, this.waiting.shift()!);
    }
    if (this.waiting.length === 0 || this.lanes.length >= this.options.threads) this.unwant();
    this.checkDrained();
  }

  /** Tasks wait and no slot is free: count this pool as wanting, and take a slot as soon as one is given back. */
  private want(): void {
    if (this.wanting || this.lanes.length >= this.options.threads) return;
    this.wanting = true;
    markWanting(this.slots, 1);
    void (async () => {
      while (this.wanting && !this.destroyed) {
        await slotFreed(this.slots, 1_000);
        this.pump();
      }
    })();
  }

  private unwant(): void {
    if (!this.wanting) return;
    this.wanting = false;
    markWanting(this.slots, -1);
  }

  /** An idle worker stops after the idle time, or as soon as another pool of the process wants a slot. */
  private idle(lane: Lane): void {
    const idleMs = this.options.idleMs ?? IDLE_WORKER_MS;
    if (this.othersWant()) {
      this.retire(lane);
      return;
    }
    lane.idleTimer = setTimeout(() => {
      if (!lane.busy) this.retire(lane);
    }, idleMs).unref();
    if (this.watching) return;
    this.watching = true;
    void (async () => {
      while (!this.destroyed && this.lanes.some((l) => !l.busy)) {
        await slotWanted(this.slots, idleMs);
        if (this.othersWant()) for (const l of this.lanes.filter((x) => !x.busy)) this.retire(l);
      }
      this.watching = false;
    })();
  }

  /** Stop one worker; its slot goes back to the process once the worker has exited. */
  private retire(lane: Lane): void {
    const i = this.lanes.indexOf(lane);
    if (i < 0) return;
    this.lanes.splice(i, 1);
    clearTimeout(lane.idleTimer);
    const done: Promise<void> = lane.piscina
      .destroy()
      .catch(() => undefined)
      .finally(() => {
        this.retiring.delete(done);
        giveSlot(this.slots);
      });
    this.retiring.add(done);
  }

  private checkDrained(): void {
    if (this.drained !== undefined && this.running === 0 && this.waiting.length === 0) this.drained();
  }

  /** Refuse new tasks, let waiting and running ones finish, then stop the workers. Safe to call twice. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.running > 0 || this.waiting.length > 0) {
        await new Promise<void>((resolve) => {
          this.drained = resolve;
        });
      }
      this.unwant();
      for (const lane of [...this.lanes]) this.retire(lane);
      await Promise.all([...this.retiring]);
    })();
    return this.closing;
  }

  /** Fail waiting tasks UNAVAILABLE, stop the workers now (running tasks fail UNAVAILABLE). Safe to call twice. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.unwant();
    for (const entry of this.waiting.splice(0)) {
      entry.unlisten?.();
      entry.reject(new GatewayError(Code.UNAVAILABLE, "the conversion pool was destroyed"));
    }
    for (const lane of [...this.lanes]) this.retire(lane);
    this.drained?.();
  }
}
