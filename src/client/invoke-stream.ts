import type * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { GatewayClientError, GatewayInvocationError, invalidArgument, toClientError } from "./errors.js";
import type { InvokeStreamRequest } from "../gen/gateway/platform/InvokeStreamRequest.js";
import type { InvokeStreamResponse__Output } from "../gen/gateway/platform/InvokeStreamResponse.js";
import type { Transport } from "./transport.js";

/** Options of `invokeStream()`. */
export interface InvokeStreamOptions {
  /** Cancels the call (the iterator then throws CANCELLED). */
  signal?: AbortSignal;
  /** Deadline of the whole stream, ms. Default none (streams may be long-lived). */
  timeoutMs?: number;
  /** Responses buffered before the gateway is asked to wait (grpc-js pauses the stream, HTTP/2 pushes back). Default 16. */
  highWaterMark?: number;
}

/**
 * A streamed invocation (`platform.Gateway/InvokeStream`), for every method kind. Iterate it for the backend's
 * responses (parsed JSON), in order; the iteration ends after the last one on success and throws
 * GatewayInvocationError (with the status the gateway reported) on failure. For client- and bidi-streaming methods,
 * `write()` more requests (await it: it resolves when the message was handed to HTTP/2, so a slow gateway slows
 * the writer) and `end()` when done. Breaking out of the loop or `cancel()` cancels the backend call.
 */
export class InvokeStream<T = unknown> implements AsyncIterable<T> {
  private readonly queue: T[] = [];
  private outcome: { error?: GatewayClientError } | undefined;
  private wake: (() => void) | undefined;
  private readonly highWater: number;
  private ended = false;

  /** @internal created by GatewayClient.invokeStream */
  constructor(
    private readonly call: grpc.ClientDuplexStream<InvokeStreamRequest, InvokeStreamResponse__Output>,
    readonly service: string,
    readonly method: string,
    first: string,
    options: InvokeStreamOptions,
  ) {
    this.highWater = Math.max(1, options.highWaterMark ?? 16);
    call.on("data", (r: InvokeStreamResponse__Output) => {
      if (r.status) {
        this.finish(r.status.success ? {} : { error: new GatewayInvocationError(service, method, r.status.status, r.status.message) });
        return;
      }
      this.queue.push(JSON.parse(r.response_data ?? "null") as T);
      if (this.queue.length >= this.highWater) call.pause();
      this.notify();
    });
    call.on("error", (e: grpc.ServiceError) => this.finish({ error: toClientError(e) }));
    call.on("end", () => this.finish(this.outcome ?? { error: new GatewayClientError(Code.UNAVAILABLE, "the stream ended without a status") }));
    const { signal } = options;
    if (signal) {
      if (signal.aborted) queueMicrotask(() => this.cancel());
      else signal.addEventListener("abort", () => this.cancel(), { once: true });
    }
    call.write({ service, method, request_data: first });
  }

  private finish(o: { error?: GatewayClientError }): void {
    this.outcome ??= o;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Send one more request message (client- and bidi-streaming methods). */
  write(payload: object | string): Promise<void> {
    if (this.ended) return Promise.reject(invalidArgument("write", "called after end()"));
    const text = typeof payload === "string" ? payload : JSON.stringify(payload);
    return new Promise((resolve) => this.call.write({ request_data: text }, () => resolve()));
  }

  /** No more requests. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.call.end();
  }

  /** Cancel the call; iteration throws CANCELLED unless the stream already finished. */
  cancel(): void {
    this.call.cancel();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for (;;) {
        if (this.queue.length > 0) {
          const v = this.queue.shift()!;
          if (this.queue.length < this.highWater / 2) this.call.resume();
          yield v;
          continue;
        }
        if (this.outcome) {
          if (this.outcome.error) throw this.outcome.error;
          return;
        }
        await new Promise<void>((r) => (this.wake = r));
      }
    } finally {
      if (!this.outcome) this.cancel();
    }
  }
}

/** Start a streamed invocation on the transport. */
export function startClientInvokeStream<T>(t: Transport, service: string, method: string, payload: object | string | undefined, options: InvokeStreamOptions): InvokeStream<T> {
  const first = payload === undefined ? "" : typeof payload === "string" ? payload : JSON.stringify(payload);
  return new InvokeStream<T>(t.duplex("platform.Gateway", "InvokeStream", options.timeoutMs), service, method, first, options);
}
