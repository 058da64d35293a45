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
  /** Send one request message; resolves once grpc-js has handed it to HTTP/2 (so a slow backend slows the sender). */
  write(bytes: Buffer): Promise<void>;
  /** Half-close: no more requests. */
  end(): void;
  /** Cancel the call; the listener still gets one status (CANCELLED unless the call had already ended). */
  cancel(message: string): void;
}

/**
 * Open a call of any kind on the backend's channel pool. grpc-js `Call` delivers one message per `startRead()`, and
 * its HTTP/2 stream is paused while no read is pending, so not calling `read()` pushes back on the backend through
 * HTTP/2 flow control: nothing is buffered here beyond the one message handed to `onMessage`.
 * `deadline` is epoch ms or Infinity.
 */
export function openStreamCall(backend: Backend, path: string, metadata: grpc.Metadata, deadline: number, listener: StreamCallListener): StreamCall {
  const call = backend.pool.next().getChannel().createCall(path, deadline, undefined, null, undefined);
  let done = false;
  call.start(metadata, {
    onReceiveMetadata: (md) => listener.onHeaders?.(md),
    onReceiveMessage: (message: Buffer) => listener.onMessage(message),
    onReceiveStatus: (status) => {
      if (done) return;
      done = true;
      listener.onStatus(status.code as number as Code, status.details, status.metadata);
    },
  });
  return {
    read: () => call.startRead(),
    write: (bytes) =>
      new Promise<void>((resolve) => {
        if (done) return resolve();
        call.sendMessageWithContext({ callback: () => resolve() }, bytes);
      }),
    end: () => call.halfClose(),
    cancel: (message) => call.cancelWithStatus(grpc.status.CANCELLED, message),
  };
}
