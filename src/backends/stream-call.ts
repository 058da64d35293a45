import * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import type { Backend } from "./backend.js";

/** What a streaming backend call reports to its owner. */
export interface StreamCallListener {
  /** One response message (raw bytes). No further message arrives until `read()` is called again. */
  onMessage(bytes: Buffer): void;
  /** The final status; called exactly once. */
  onStatus(code: Code, message: string, trailers: grpc.Metadata): void;
  /** The backend's response headers, once. */
  onHeaders?(headers: grpc.Metadata): void;
}

/** A backend call of any kind with raw request and response bytes, pulled one response at a time. */
export interface StreamCall {
  /** Ask for the next response message (flow control: the caller reads only when it can take one more). */
  read(): void;
  /**
   * Send one request message; resolves once grpc-js has handed it to HTTP/2 (so a slow backend slows the sender), or
   * once the call has ended. Writes need not wait for each other: they are sent one at a time, in call order.
   */
  write(bytes: Buffer): Promise<void>;
  /** Half-close: no more requests, after every message already written. */
  end(): void;
  /** Cancel the call; the listener still gets one status (CANCELLED unless the call had already ended). */
  cancel(message: string): void;
}

/**
 * Open a call of any kind on the backend's channel pool. grpc-js `Call` delivers one message per `startRead()`, and
 * its HTTP/2 stream is paused while no read is pending, so not calling `read()` pushes back on the backend through
 * HTTP/2 flow control: nothing is buffered here beyond the one message handed to `onMessage`.
 * `deadline` is epoch ms or Infinity.
 *
 * grpc-js takes one request message at a time: until its callback, a call still waiting for its channel keeps one
 * pending message, and a second one replaces it. So writes wait here for the previous one's callback; the callers
 * bound how many wait (a front takes the next request only once the previous one resolved, or caps them).
 */
export function openStreamCall(backend: Backend, path: string, metadata: grpc.Metadata, deadline: number, listener: StreamCallListener): StreamCall {
  const call = backend.pool.next().getChannel().createCall(path, deadline, undefined, null, undefined);
  let done = false;
  // Messages written but not yet taken by grpc-js, and whether one is with it now (its callback not yet called).
  const queued: { bytes: Buffer; sent: () => void }[] = [];
  let inFlight: (() => void) | undefined;
  let halfClose = false;
  const pump = (): void => {
    if (inFlight || done) return;
    const next = queued.shift();
    if (!next) {
      if (halfClose) {
        halfClose = false;
        call.halfClose();
      }
      return;
    }
    inFlight = next.sent;
    call.sendMessageWithContext(
      {
        callback: () => {
          inFlight = undefined;
          next.sent();
          pump();
        },
      },
      next.bytes,
    );
  };
  call.start(metadata, {
    onReceiveMetadata: (md) => listener.onHeaders?.(md),
    onReceiveMessage: (message: Buffer) => listener.onMessage(message),
    onReceiveStatus: (status) => {
      if (done) return;
      done = true;
      // Nothing more is sent: whoever waits on a write is released.
      inFlight?.();
      inFlight = undefined;
      for (const q of queued.splice(0)) q.sent();
      listener.onStatus(status.code as number as Code, status.details, status.metadata);
    },
  });
  return {
    read: () => call.startRead(),
    write: (bytes) =>
      new Promise<void>((resolve) => {
        if (done) return resolve();
        queued.push({ bytes, sent: resolve });
        pump();
      }),
    end: () => {
      halfClose = true;
      pump();
    },
    cancel: (message) => call.cancelWithStatus(grpc.status.CANCELLED, message),
  };
}
