/**
 * A bounded front queue over a piscina pool. At most `threads` tasks are handed to piscina at once, so waiting tasks
 * stay here where they can be counted (the bound: RESOURCE_EXHAUSTED past `maxQueue`) and cancelled (an aborted
 * waiting task is removed without ever reaching a worker). A task already running is not interrupted by an abort:
 * piscina would terminate the whole worker, which costs a 40-50 ms restart to save a few ms of conversion; its
 * result is dropped instead. Main-thread side; failures are GatewayErrors.
 */
import { Piscina } from "piscina";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import { errorText } from "./schema-registry.js";
import { workerEntry } from "./worker-path.js";
import type { ConvertTask, CrashTask, WorkerOptions, WorkerResult } from "./worker-protocol.js";

/** Options of ConversionPool (validated by the converter). */
export interface ConversionPoolOptions {
  /** Worker threads. */
  readonly threads: number;
  /** Tasks that may wait for a free worker. */
  readonly maxQueue: number;
  /** Compiled schemas kept per worker. Default 64. */
  readonly schemaCacheSize?: number;
  /** Honour CrashTask (tests only). Default false. */
  readonly crashHook?: boolean;
}

/** The results a convert task can resolve to (a worker-side codec failure is a result, not a rejection). */
export type ConvertResult = Exclude<WorkerResult, { kind: "missing-schema" }>;

interface Entry {
  readonly task: ConvertTask | CrashTask;
  readonly files: readonly Uint8Array[];
  readonly signal: AbortSignal | undefined;
  readonly resolve: (r: ConvertResult) => void;
  readonly reject: (e: GatewayError) => void;
  onAbort?: () => void;
}

/** Runs conversions on worker threads; see the module comment. */
export class ConversionPool {
  private piscina: Piscina | undefined;
  private readonly waiting: Entry[] = [];
  private running = 0;
  private closing: Promise<void> | undefined;
  private destroyed = false;
  private drained: (() => void) | undefined;

  constructor(private readonly options: ConversionPoolOptions) {}

  /** Tasks waiting for a worker. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Tasks on a worker now. */
  get active(): number {
    return this.running;
  }

  /**
   * Convert on a worker. `files` are the schema's descriptors, sent only if the worker lacks `task.schemaId`.
   * Rejects GatewayError RESOURCE_EXHAUSTED (queue full), CANCELLED (aborted while waiting), UNAVAILABLE (closed),
   * INTERNAL (the worker died during the task; the pool starts a new one).
   */
  run(task: ConvertTask | CrashTask, files: readonly Uint8Array[], signal?: AbortSignal): Promise<ConvertResult> {
    if (this.closing !== undefined || this.destroyed) {
      return Promise.reject(new GatewayError(Code.UNAVAILABLE, "the conversion pool is closed"));
    }
    if (signal?.aborted === true) return Promise.reject(new GatewayError(Code.CANCELLED, "the conversion was cancelled"));
    return new Promise<ConvertResult>((resolve, reject) => {
      const entry: Entry = { task, files, signal, resolve, reject };
      if (this.running < this.options.threads) {
        this.dispatch(entry);
        return;
      }
      if (this.waiting.length >= this.options.maxQueue) {
        reject(
          new GatewayError(Code.RESOURCE_EXHAUSTED,
            `the conversion queue is full (${this.options.maxQueue} waiting, ${this.options.threads} running); retry later`,
          ),
        );
        return;
      }
      if (signal !== undefined) {
        entry.onAbort = () => {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) {
            this.waiting.splice(i, 1);
            reject(new GatewayError(Code.CANCELLED, "the conversion was cancelled while queued"));
            this.checkDrained();
          }
        };
        signal.addEventListener("abort", entry.onAbort, { once: true });
      }
      this.waiting.push(entry);
    });
  }

  private pool(): Piscina {
    if (this.piscina === undefined) {
      const entry = workerEntry();
      const workerData: WorkerOptions = {
        schemaCacheSize: this.options.schemaCacheSize ?? 64,
        crashHook: this.options.crashHook === true,
      };
      // Created on first use: a gateway that never sees a large payload starts no threads.
      this.piscina = new Piscina({
        filename: entry.filename,
        ...(entry.execArgv !== undefined ? { execArgv: entry.execArgv } : {}),
        minThreads: this.options.threads,
        maxThreads: this.options.threads,
        concurrentTasksPerWorker: 1,
        idleTimeout: 60_000,
        workerData,
      });
      // A worker that dies rejects its own task; nothing else to do here but keep the error off the process.
      this.piscina.on("error", () => undefined);
    }
    return this.piscina;
  }

  private dispatch(entry: Entry): void {
    this.running++;
    if (entry.onAbort !== undefined) entry.signal?.removeEventListener("abort", entry.onAbort);
    void this.execute(entry).finally(() => {
      this.running--;
      this.pump();
    });
  }

  private async execute(entry: Entry): Promise<void> {
    try {
      const pool = this.pool();
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
    while (this.running < this.options.threads && this.waiting.length > 0) {
      this.dispatch(this.waiting.shift()!);
    }
    this.checkDrained();
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
      if (!this.destroyed) await this.piscina?.close();
    })();
    return this.closing;
  }

  /** Fail waiting tasks UNAVAILABLE, stop the workers now (running tasks fail UNAVAILABLE). Safe to call twice. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const entry of this.waiting.splice(0)) {
      if (entry.onAbort !== undefined) entry.signal?.removeEventListener("abort", entry.onAbort);
      entry.reject(new GatewayError(Code.UNAVAILABLE, "the conversion pool was destroyed"));
    }
    void this.piscina?.destroy();
    this.drained?.();
  }
}
