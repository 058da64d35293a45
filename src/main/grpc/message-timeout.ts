import * as grpc from "@grpc/grpc-js";
import type { CounterMetric } from "../metrics.js";

/**
 * A server interceptor that bounds how long a unary (or server-streaming) call may wait for its request message.
 *
 * grpc-js runs a unary handler only once the whole request message has arrived, and sets no timer of its own: a
 * client that sends HEADERS and then no DATA (or half a message) holds the stream, its buffers and a
 * concurrent-stream slot for as long as the connection lives. This ends such a call with DEADLINE_EXCEEDED after
 * `timeoutMs`, which also closes the HTTP/2 stream. Client-streaming methods are left alone: their messages arrive
 * over the life of the call.
 */
export function messageTimeoutInterceptor(timeoutMs: number, requests: CounterMetric<"method" | "code">): grpc.ServerInterceptor {
  return (method, call) => {
    if (method.requestStream) return new grpc.ServerInterceptingCall(call);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const clear = (): void => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    };
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        timer = setTimeout(() => {
          timer = undefined;
          requests.inc({ method: method.path.slice(1), code: "DEADLINE_EXCEEDED" });
          call.sendStatus({
            code: grpc.status.DEADLINE_EXCEEDED,
            details: `the request message did not arrive within ${timeoutMs} ms of the call's headers (--grpc-message-timeout)`,
          });
        }, timeoutMs);
        timer.unref();
        next({
          onReceiveMessage(message, nextMessage) {
            clear();
            nextMessage(message);
          },
          onCancel: clear,
        });
      },
      sendStatus(status, nextStatus) {
        clear();
        nextStatus(status);
      },
    });
  };
}
